-- Print settings per company (see the PostgreSQL twin).
CREATE TABLE print_settings (
    company_id TEXT PRIMARY KEY,
    tenant_id  TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    settings   TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    created_at TEXT    NOT NULL,
    updated_at TEXT    NOT NULL
);
