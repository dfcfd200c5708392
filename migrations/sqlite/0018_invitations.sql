-- Invitations (see the PostgreSQL twin).

CREATE TABLE invitations (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    email       TEXT NOT NULL,
    role        TEXT NOT NULL,
    status      TEXT NOT NULL,
    invited_by  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    closed_at   TEXT,
    membership_id TEXT
);
CREATE INDEX invitations_tenant_idx ON invitations (tenant_id, created_at);

CREATE TABLE invitation_tokens (
    token_sha256  TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    invitation_id TEXT NOT NULL UNIQUE,
    created_at    TEXT NOT NULL
);
