-- Print settings per company (inline projection `configuration`).
CREATE TABLE print_settings (
    company_id uuid PRIMARY KEY,
    tenant_id  uuid        NOT NULL,
    id         uuid        NOT NULL,
    settings   jsonb       NOT NULL,
    version    bigint      NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
