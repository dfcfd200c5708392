-- Sealed secrets (plain table, not a projection): certificate keys and chains, CSCs, channel
-- credentials, AES-256-GCM under the master key. Events refer to them by id only.
CREATE TABLE sealed_secrets (
    id         uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    kind       text        NOT NULL,
    key_id     text        NOT NULL,
    sealed     text        NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX sealed_secrets_tenant_idx ON sealed_secrets (tenant_id);

-- Certificates and emission channels (inline projection `configuration`).
CREATE TABLE certificates (
    id         uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    company_id uuid        NOT NULL,
    record     jsonb       NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX certificates_tenant_idx ON certificates (tenant_id, company_id);

CREATE TABLE emission_channels (
    id         uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    company_id uuid        NOT NULL,
    kind       text        NOT NULL,
    record     jsonb       NOT NULL,
    version    bigint      NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX emission_channels_tenant_idx ON emission_channels (tenant_id, company_id);
