-- One live fiscal document per external_id (issue 26): the integrator's `external_id` of a company
-- and document type names at most one document that is not finished without effect. A claim is
-- a row here, made with INSERT … ON CONFLICT DO NOTHING at intake (one of two racing requests
-- wins) and taken over only from a document that ended validation_failed, rejected,
-- failed_terminal or invalidated. The live documents stored before this claim their ids once
-- (the newest of each, should an earlier version have issued two).
CREATE TABLE external_ids (
    tenant_id   uuid        NOT NULL,
    company_id  uuid        NOT NULL,
    doc_type    text        NOT NULL,
    external_id text        NOT NULL,
    document_id uuid        NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, company_id, doc_type, external_id)
);
INSERT INTO external_ids (tenant_id, company_id, doc_type, external_id, document_id, created_at)
SELECT DISTINCT ON (tenant_id, company_id, doc_type, external_id)
       tenant_id, company_id, doc_type, external_id, id, created_at
FROM documents
WHERE status NOT IN ('validation_failed', 'rejected', 'failed_terminal', 'invalidated')
ORDER BY tenant_id, company_id, doc_type, external_id, id DESC
ON CONFLICT DO NOTHING;
