-- Documents per tenant, Paraguay day of issue, company and status (see the PostgreSQL twin):
-- the console's home, GET /v1/documents/stats and the kuatia_documents gauge read these counts
-- instead of counting the documents. Triggers keep them; a count that falls to 0 is removed.
-- The day is Paraguay's (UTC−3 all year since Law 7354 of 2024, as
-- kuatia_domain::local_time::offset) of issue_datetime, stored as RFC 3339 UTC text.
CREATE TABLE document_counts (
    tenant_id  TEXT    NOT NULL,
    day        TEXT    NOT NULL,
    company_id TEXT    NOT NULL,
    status     TEXT    NOT NULL,
    n          INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, day, company_id, status)
);

CREATE TRIGGER documents_counted AFTER INSERT ON documents
BEGIN
    INSERT INTO document_counts (tenant_id, day, company_id, status, n)
    VALUES (NEW.tenant_id, date(NEW.issue_datetime, '-3 hours'), NEW.company_id, NEW.status, 1)
    ON CONFLICT (tenant_id, day, company_id, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER documents_recounted AFTER UPDATE OF status ON documents
WHEN OLD.status <> NEW.status
BEGIN
    INSERT INTO document_counts (tenant_id, day, company_id, status, n)
    VALUES (NEW.tenant_id, date(NEW.issue_datetime, '-3 hours'), NEW.company_id, NEW.status, 1)
    ON CONFLICT (tenant_id, day, company_id, status) DO UPDATE SET n = n + 1;
    UPDATE document_counts SET n = n - 1
    WHERE tenant_id = OLD.tenant_id AND day = date(OLD.issue_datetime, '-3 hours')
      AND company_id = OLD.company_id AND status = OLD.status;
    DELETE FROM document_counts
    WHERE tenant_id = OLD.tenant_id AND day = date(OLD.issue_datetime, '-3 hours')
      AND company_id = OLD.company_id AND status = OLD.status AND n = 0;
END;

INSERT INTO document_counts (tenant_id, day, company_id, status, n)
SELECT tenant_id, date(issue_datetime, '-3 hours'), company_id, status, count(*)
FROM documents GROUP BY 1, 2, 3, 4;

-- Migration 0026's index served the counts read from the documents; nothing reads it now.
DROP INDEX documents_issued_status_idx;
