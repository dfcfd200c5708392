-- Sealed secrets, certificates and emission channels (see the PostgreSQL twin).
CREATE TABLE sealed_secrets (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    kind       TEXT NOT NULL,
    key_id     TEXT NOT NULL,
    sealed     TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX sealed_secrets_tenant_idx ON sealed_secrets (tenant_id);

CREATE TABLE certificates (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    company_id TEXT NOT NULL,
    record     TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX certificates_tenant_idx ON certificates (tenant_id, company_id);

CREATE TABLE emission_channels (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT    NOT NULL,
    company_id TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    record     TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL
);
CREATE INDEX emission_channels_tenant_idx ON emission_channels (tenant_id, company_id);
