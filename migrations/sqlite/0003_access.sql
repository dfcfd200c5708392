-- Read models of the tenant streams (see the PostgreSQL twin).

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    slug        TEXT NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    environment TEXT NOT NULL,
    stream_id   TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL,
    company_id  TEXT,
    prefix      TEXT NOT NULL,
    key_sha256  TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL,
    expires_at  TEXT,
    revoked_at  TEXT
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id);
