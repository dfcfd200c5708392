-- Read model of the company streams (inline projection `configuration`).
CREATE TABLE companies (
    id         uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    ruc        text        NOT NULL,
    legal_name text        NOT NULL,
    profile    jsonb       NOT NULL,
    stream_id  text        NOT NULL,
    version    bigint      NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    UNIQUE (tenant_id, ruc)
);
