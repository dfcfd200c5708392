-- Read model of the company streams (see the PostgreSQL twin).
CREATE TABLE companies (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT    NOT NULL,
    ruc        TEXT    NOT NULL,
    legal_name TEXT    NOT NULL,
    profile    TEXT    NOT NULL,
    stream_id  TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL,
    UNIQUE (tenant_id, ruc)
);
