-- The CDC a note or remisión refers to (associated_document.cdc, resolved from document_id at
-- intake), so that intake can add up the credit notes of one invoice (SIFEN rule 2417: the
-- credit notes of an invoice, this one and those before it, do not exceed its total).
ALTER TABLE documents ADD COLUMN associated_cdc TEXT;
UPDATE documents SET associated_cdc = (
    SELECT json_extract(e.payload, '$.DocumentReceived.document.associated_document.cdc')
    FROM events e
    WHERE e.stream_id = documents.stream_id AND e.stream_version = 1
);
CREATE INDEX documents_associated_idx ON documents (tenant_id, associated_cdc) WHERE associated_cdc IS NOT NULL;
