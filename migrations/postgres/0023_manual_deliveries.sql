-- The deliveries that wait for the issuer's hand (a `manual` delivery the plan recorded `pending`
-- at attempt 0), and whether one still waits: `GET /v1/documents?delivery=pending_manual` and the
-- console's list of what to deliver. Part of the `documents` read model (rebuilt with it).
CREATE TABLE document_manual_deliveries (
    id          uuid PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    document_id uuid        NOT NULL,
    target      text        NOT NULL,
    channel     text        NOT NULL,
    pending     boolean     NOT NULL,
    updated_at  timestamptz NOT NULL
);
CREATE INDEX document_manual_deliveries_pending_idx
    ON document_manual_deliveries (tenant_id, document_id) WHERE pending;
-- The manual deliveries recorded before this table (none was ever settled: nothing could).
INSERT INTO document_manual_deliveries (id, tenant_id, document_id, target, channel, pending, updated_at)
SELECT (e.payload -> 'DeliveryRecorded' ->> 'delivery_id')::uuid, d.tenant_id, d.id,
       e.payload -> 'DeliveryRecorded' ->> 'target', e.payload -> 'DeliveryRecorded' ->> 'channel',
       true, e.recorded_at
FROM events e JOIN documents d ON d.stream_id = e.stream_id
WHERE e.event_type = 'DeliveryRecorded'
  AND e.payload -> 'DeliveryRecorded' ->> 'status' = 'pending'
  AND (e.payload -> 'DeliveryRecorded' ->> 'attempt')::bigint = 0
ON CONFLICT (id) DO NOTHING;
