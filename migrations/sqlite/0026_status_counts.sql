-- The console's home and GET /v1/documents/stats count a tenant's documents per status, issued
-- since a day or in all: with the status in the issue-date index both counts read the index alone
-- (a tenant with 100 000 documents counted them from the table in about 100 ms each).
CREATE INDEX documents_issued_status_idx ON documents (tenant_id, issue_datetime, status);
