-- Read models of the foundation (see the PostgreSQL twin for their meaning).

CREATE TABLE stream_index (
    stream_id         TEXT PRIMARY KEY,
    tenant_id         TEXT    NOT NULL,
    stream_type       TEXT    NOT NULL,
    version           INTEGER NOT NULL,
    last_event_type   TEXT    NOT NULL,
    last_position     INTEGER NOT NULL,
    first_recorded_at TEXT    NOT NULL,
    last_recorded_at  TEXT    NOT NULL
);
CREATE INDEX stream_index_tenant_idx ON stream_index (tenant_id, stream_type, last_position DESC);

CREATE TABLE event_type_counts (
    tenant_id     TEXT    NOT NULL,
    stream_type   TEXT    NOT NULL,
    event_type    TEXT    NOT NULL,
    events        INTEGER NOT NULL,
    last_position INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, stream_type, event_type)
);
