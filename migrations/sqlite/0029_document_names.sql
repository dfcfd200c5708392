-- The buyers' names (documents.buyer_search) indexed by their trigrams (see the PostgreSQL
-- twin): an FTS5 table with the trigram tokenizer, whose index answers `buyer_search LIKE
-- '%part%'` for a part of three characters or more. Part of the `documents` projection (a
-- rebuild empties it with the documents); a trigger keeps it: a document's names are written
-- once, with its row, and documents are deleted only by a rebuild. The rows carry the document's
-- id (never the documents table's rowid, which VACUUM may renumber).
CREATE VIRTUAL TABLE document_names USING fts5(
    buyer_search,
    tenant_id UNINDEXED,
    document_id UNINDEXED,
    tokenize = 'trigram'
);

CREATE TRIGGER documents_named AFTER INSERT ON documents
WHEN NEW.buyer_search IS NOT NULL
BEGIN
    INSERT INTO document_names (buyer_search, tenant_id, document_id)
    VALUES (NEW.buyer_search, NEW.tenant_id, NEW.id);
END;

INSERT INTO document_names (buyer_search, tenant_id, document_id)
SELECT buyer_search, tenant_id, id FROM documents WHERE buyer_search IS NOT NULL;
