-- When each API key was last used (issue 26 item 9: `GET /v1/api-keys` shows it). A plain table,
-- not a read model: use is not an event (it would put a write in the log for every request), and
-- a rebuild of the access projection must not forget it. Written at most once a minute per key
-- per instance, so `last_used_at` is right to the minute.
CREATE TABLE api_key_usage (
    key_id       uuid PRIMARY KEY,
    tenant_id    uuid        NOT NULL,
    last_used_at timestamptz NOT NULL
);
