-- API key hashes leave the event log (see the PostgreSQL twin).
CREATE TABLE api_key_hashes (
    key_id     TEXT PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    key_sha256 TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL
);
INSERT OR IGNORE INTO api_key_hashes (key_id, tenant_id, key_sha256, created_at)
SELECT id, tenant_id, key_sha256, created_at FROM api_keys;
