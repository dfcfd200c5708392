-- API key hashes leave the event log (issue 24): new `ApiKeyIssued` events carry the key's id and
-- prefix only, and the SHA-256 that authenticates a key lives in this credentials table, written
-- when the key is issued (like `sessions` and `invitation_tokens`). Keys issued before carry
-- their hash in their event; it is copied here once.
CREATE TABLE api_key_hashes (
    key_id     uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    key_sha256 text        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);
INSERT INTO api_key_hashes (key_id, tenant_id, key_sha256, created_at)
SELECT id, tenant_id, key_sha256, created_at FROM api_keys
ON CONFLICT DO NOTHING;
