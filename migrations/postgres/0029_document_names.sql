-- The buyers' names (documents.buyer_search) indexed by their trigrams, so that a search of a
-- part of a name asks an index instead of reading every document's name: a name no buyer has
-- read all 100 000 names of a tenant (391 ms at p99 in the console's benchmark).
-- Part of the `documents` projection (a rebuild empties it with the documents). A trigger on
-- `documents` keeps it, as document_counts: a document's names are written once, with its row,
-- and documents are deleted only by a rebuild, which empties this table too.
-- pg_trgm ships with PostgreSQL (contrib) and is a trusted extension: the database's owner may
-- create it (docs/operations.md).
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE document_names (
    document_id  uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL,
    buyer_search text NOT NULL
);
CREATE INDEX document_names_trgm_idx ON document_names USING gin (buyer_search gin_trgm_ops);

-- One statement's rows named together (a batch of 500 documents is one insert).
CREATE FUNCTION document_names_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO document_names (document_id, tenant_id, buyer_search)
    SELECT id, tenant_id, buyer_search FROM new_rows WHERE buyer_search IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_named AFTER INSERT ON documents
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION document_names_inserted();

INSERT INTO document_names (document_id, tenant_id, buyer_search)
SELECT id, tenant_id, buyer_search FROM documents WHERE buyer_search IS NOT NULL;
