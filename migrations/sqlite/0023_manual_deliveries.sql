-- The deliveries that wait for the issuer's hand (a `manual` delivery the plan recorded `pending`
-- at attempt 0), and whether one still waits: `GET /v1/documents?delivery=pending_manual` and the
-- console's list of what to deliver. Part of the `documents` read model (rebuilt with it).
CREATE TABLE document_manual_deliveries (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT    NOT NULL,
    document_id TEXT    NOT NULL,
    target      TEXT    NOT NULL,
    channel     TEXT    NOT NULL,
    pending     INTEGER NOT NULL,
    updated_at  TEXT    NOT NULL
);
CREATE INDEX document_manual_deliveries_pending_idx
    ON document_manual_deliveries (tenant_id, document_id) WHERE pending;
-- The manual deliveries recorded before this table (none was ever settled: nothing could).
INSERT OR IGNORE INTO document_manual_deliveries (id, tenant_id, document_id, target, channel, pending, updated_at)
SELECT json_extract(e.payload, '$.DeliveryRecorded.delivery_id'), d.tenant_id, d.id,
       json_extract(e.payload, '$.DeliveryRecorded.target'), json_extract(e.payload, '$.DeliveryRecorded.channel'),
       1, e.recorded_at
FROM events e JOIN documents d ON d.stream_id = e.stream_id
WHERE e.event_type = 'DeliveryRecorded'
  AND json_extract(e.payload, '$.DeliveryRecorded.status') = 'pending'
  AND json_extract(e.payload, '$.DeliveryRecorded.attempt') = 0;
