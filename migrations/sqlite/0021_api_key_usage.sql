-- When each API key was last used (see the PostgreSQL twin).
CREATE TABLE api_key_usage (
    key_id       TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    last_used_at TEXT NOT NULL
);
