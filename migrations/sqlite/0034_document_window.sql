-- The list with a date window (issue 30; see the PostgreSQL twin): the documents issued in the
-- window are read from this index alone (status, channel, company and the id it sorts by are in
-- it). Replaces documents_issued_idx.
CREATE INDEX documents_window_idx ON documents (tenant_id, issue_datetime, id, status, channel, company_id);
DROP INDEX documents_issued_idx;
