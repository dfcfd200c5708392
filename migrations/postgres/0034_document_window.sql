-- The list with a date window (issue 30): the documents issued in the window are read from this
-- index alone (the status, channel and company filters and the id it sorts by are in it), so a
-- window far back no longer walks every newer document newest first. Replaces
-- documents_issued_idx, whose (tenant_id, issue_datetime, id) it covers.
CREATE INDEX documents_window_idx ON documents (tenant_id, issue_datetime)
    INCLUDE (id, status, channel, company_id);
DROP INDEX documents_issued_idx;
