-- Branches and issuance points (see the PostgreSQL twin).
CREATE TABLE branches (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT    NOT NULL,
    company_id TEXT    NOT NULL,
    code       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    details    TEXT    NOT NULL,
    is_default INTEGER NOT NULL,
    created_at TEXT    NOT NULL,
    UNIQUE (company_id, code)
);
CREATE INDEX branches_tenant_idx ON branches (tenant_id, company_id);

CREATE TABLE issuance_points (
    id         TEXT PRIMARY KEY,
    tenant_id  TEXT    NOT NULL,
    company_id TEXT    NOT NULL,
    branch_id  TEXT    NOT NULL,
    code       TEXT    NOT NULL,
    name       TEXT,
    is_default INTEGER NOT NULL,
    created_at TEXT    NOT NULL,
    UNIQUE (branch_id, code)
);
CREATE INDEX issuance_points_tenant_idx ON issuance_points (tenant_id, branch_id);
