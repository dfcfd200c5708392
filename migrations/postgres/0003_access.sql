-- Read models of the tenant streams (inline projection `access`): tenants and their API keys.
-- Only a key's SHA-256 is stored, never the key.

CREATE TABLE tenants (
    id          uuid PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    slug        text        NOT NULL UNIQUE,
    name        text        NOT NULL,
    environment text        NOT NULL,
    stream_id   text        NOT NULL,
    created_at  timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id          uuid PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    name        text        NOT NULL,
    role        text        NOT NULL,
    company_id  uuid,
    prefix      text        NOT NULL,
    key_sha256  text        NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz,
    revoked_at  timestamptz
);
CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id);
