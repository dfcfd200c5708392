-- Read models of the foundation.

-- Inline (updated in the append transaction): one row per stream.
CREATE TABLE stream_index (
    stream_id         text PRIMARY KEY,
    tenant_id         uuid        NOT NULL,
    stream_type       text        NOT NULL,
    version           bigint      NOT NULL,
    last_event_type   text        NOT NULL,
    last_position     bigint      NOT NULL,
    first_recorded_at timestamptz NOT NULL,
    last_recorded_at  timestamptz NOT NULL
);
CREATE INDEX stream_index_tenant_idx ON stream_index (tenant_id, stream_type, last_position DESC);

-- Catch-up subscription: events per tenant, stream type and event type.
CREATE TABLE event_type_counts (
    tenant_id     uuid   NOT NULL,
    stream_type   text   NOT NULL,
    event_type    text   NOT NULL,
    events        bigint NOT NULL,
    last_position bigint NOT NULL,
    PRIMARY KEY (tenant_id, stream_type, event_type)
);
