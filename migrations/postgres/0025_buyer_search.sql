-- The buyer's names (legal and trade) as the list's search compares them: lower case, with the
-- Spanish accents and ñ folded (á é í ó ú ü ñ → a e i o u u n), so that "gomez" finds "Gómez".
-- Written by the documents projection (kuatia_projections::documents::search_text); filled here
-- from each document's DocumentReceived for the documents before it.
ALTER TABLE documents ADD COLUMN buyer_search text;
UPDATE documents d SET buyer_search = NULLIF(trim(
    replace(replace(replace(replace(replace(replace(replace(
    replace(replace(replace(replace(replace(replace(replace(
    lower(concat_ws(' ',
        e.payload -> 'DocumentReceived' -> 'document' -> 'buyer' ->> 'legal_name',
        e.payload -> 'DocumentReceived' -> 'document' -> 'buyer' ->> 'trade_name')),
    'á', 'a'), 'é', 'e'), 'í', 'i'), 'ó', 'o'), 'ú', 'u'), 'ü', 'u'), 'ñ', 'n'),
    'Á', 'a'), 'É', 'e'), 'Í', 'i'), 'Ó', 'o'), 'Ú', 'u'), 'Ü', 'u'), 'Ñ', 'n')), '')
FROM events e
WHERE e.stream_id = d.stream_id AND e.stream_version = 1;
