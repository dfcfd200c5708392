-- Webhook endpoints (inline projection `webhooks`, from the `webhook_endpoint` streams) and
-- webhook deliveries (plain table written by the fan-out and delivery jobs; DECISIONS §7).
-- Secrets are sealed (`sealed_secrets`); rows carry their ids only.
CREATE TABLE webhook_endpoints (
    id                          uuid PRIMARY KEY,
    tenant_id                   uuid        NOT NULL,
    company_id                  uuid,
    url                         text        NOT NULL,
    description                 text,
    events                      jsonb       NOT NULL,
    active                      boolean     NOT NULL,
    deleted                     boolean     NOT NULL DEFAULT false,
    secret_id                   uuid        NOT NULL,
    previous_secret_id          uuid,
    previous_secret_expires_at  timestamptz,
    stream_id                   text        NOT NULL,
    version                     bigint      NOT NULL,
    created_at                  timestamptz NOT NULL,
    updated_at                  timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_tenant_idx ON webhook_endpoints (tenant_id, company_id);

CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    tenant_id        uuid        NOT NULL,
    endpoint_id      uuid        NOT NULL,
    event_id         text        NOT NULL,
    event_type       text        NOT NULL,
    document_id      uuid,
    seq              bigint      NOT NULL,
    body             text        NOT NULL,
    status           text        NOT NULL,
    attempts         integer     NOT NULL DEFAULT 0,
    replays          integer     NOT NULL DEFAULT 0,
    last_status_code integer,
    last_error       text,
    next_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    delivered_at     timestamptz,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at);
CREATE INDEX webhook_deliveries_order_idx ON webhook_deliveries (endpoint_id, document_id, seq);
