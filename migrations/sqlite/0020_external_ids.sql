-- One live fiscal document per external_id (see the PostgreSQL twin).
CREATE TABLE external_ids (
    tenant_id   TEXT NOT NULL,
    company_id  TEXT NOT NULL,
    doc_type    TEXT NOT NULL,
    external_id TEXT NOT NULL,
    document_id TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (tenant_id, company_id, doc_type, external_id)
);
INSERT OR IGNORE INTO external_ids (tenant_id, company_id, doc_type, external_id, document_id, created_at)
SELECT tenant_id, company_id, doc_type, external_id, id, created_at
FROM documents
WHERE status NOT IN ('validation_failed', 'rejected', 'failed_terminal', 'invalidated')
ORDER BY id DESC;
