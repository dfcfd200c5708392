-- Users and sessions are credentials: plain tables (issue 3 allows it), not events, so that a
-- password hash can be replaced and a session forgotten. Memberships are a read model of the
-- tenant streams (projection `access`). Users belong to no tenant: tenant_id is the nil UUID.

CREATE TABLE users (
    id            uuid PRIMARY KEY,
    tenant_id     uuid        NOT NULL,
    email         text        NOT NULL UNIQUE,
    name          text,
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL
);

-- Only the SHA-256 of a session cookie is stored.
CREATE TABLE sessions (
    id           uuid PRIMARY KEY,
    tenant_id    uuid        NOT NULL,
    user_id      uuid        NOT NULL REFERENCES users (id),
    token_sha256 text        NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz
);
CREATE INDEX sessions_user_idx ON sessions (user_id);

CREATE TABLE memberships (
    id         uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    user_id    uuid        NOT NULL,
    role       text        NOT NULL,
    created_at timestamptz NOT NULL,
    UNIQUE (tenant_id, user_id)
);
CREATE INDEX memberships_user_idx ON memberships (user_id);
