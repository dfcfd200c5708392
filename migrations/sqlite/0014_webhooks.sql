-- Webhook endpoints and deliveries (see the PostgreSQL twin).
CREATE TABLE webhook_endpoints (
    id                          TEXT PRIMARY KEY,
    tenant_id                   TEXT    NOT NULL,
    company_id                  TEXT,
    url                         TEXT    NOT NULL,
    description                 TEXT,
    events                      TEXT    NOT NULL,
    active                      INTEGER NOT NULL,
    deleted                     INTEGER NOT NULL DEFAULT 0,
    secret_id                   TEXT    NOT NULL,
    previous_secret_id          TEXT,
    previous_secret_expires_at  TEXT,
    stream_id                   TEXT    NOT NULL,
    version                     INTEGER NOT NULL,
    created_at                  TEXT    NOT NULL,
    updated_at                  TEXT    NOT NULL
);
CREATE INDEX webhook_endpoints_tenant_idx ON webhook_endpoints (tenant_id, company_id);

CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT    NOT NULL,
    endpoint_id      TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    event_type       TEXT    NOT NULL,
    document_id      TEXT,
    seq              INTEGER NOT NULL,
    body             TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    replays          INTEGER NOT NULL DEFAULT 0,
    last_status_code INTEGER,
    last_error       TEXT,
    next_attempt_at  TEXT,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    delivered_at     TEXT,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at);
CREATE INDEX webhook_deliveries_order_idx ON webhook_deliveries (endpoint_id, document_id, seq);
