-- The buyer's names (legal and trade) as the list's search compares them: lower case, with the
-- Spanish accents and ñ folded (á é í ó ú ü ñ → a e i o u u n), so that "gomez" finds "Gómez".
-- Written by the documents projection (kuatia_projections::documents::search_text); filled here
-- from each document's DocumentReceived for the documents before it (SQLite's lower() folds
-- ASCII only: the accented capitals are folded by name).
ALTER TABLE documents ADD COLUMN buyer_search TEXT;
UPDATE documents SET buyer_search = (
    SELECT NULLIF(trim(
        replace(replace(replace(replace(replace(replace(replace(
        replace(replace(replace(replace(replace(replace(replace(
        lower(trim(coalesce(json_extract(e.payload, '$.DocumentReceived.document.buyer.legal_name'), '') || ' ' ||
                   coalesce(json_extract(e.payload, '$.DocumentReceived.document.buyer.trade_name'), ''))),
        'á', 'a'), 'é', 'e'), 'í', 'i'), 'ó', 'o'), 'ú', 'u'), 'ü', 'u'), 'ñ', 'n'),
        'Á', 'a'), 'É', 'e'), 'Í', 'i'), 'Ó', 'o'), 'Ú', 'u'), 'Ü', 'u'), 'Ñ', 'n')), '')
    FROM events e
    WHERE e.stream_id = documents.stream_id AND e.stream_version = 1
);
