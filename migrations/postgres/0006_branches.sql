-- Branches and issuance points (inline projection `configuration`).
CREATE TABLE branches (
    id         uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    company_id uuid        NOT NULL,
    code       text        NOT NULL,
    name       text        NOT NULL,
    details    jsonb       NOT NULL,
    is_default boolean     NOT NULL,
    created_at timestamptz NOT NULL,
    UNIQUE (company_id, code)
);
CREATE INDEX branches_tenant_idx ON branches (tenant_id, company_id);

CREATE TABLE issuance_points (
    id         uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    company_id uuid        NOT NULL,
    branch_id  uuid        NOT NULL,
    code       text        NOT NULL,
    name       text,
    is_default boolean     NOT NULL,
    created_at timestamptz NOT NULL,
    UNIQUE (branch_id, code)
);
CREATE INDEX issuance_points_tenant_idx ON issuance_points (tenant_id, branch_id);
