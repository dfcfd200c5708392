-- Documents: status and list (inline projection `documents`), timeline, artifacts; and the
-- Idempotency-Key table of POST /v1/documents (plain table).
CREATE TABLE documents (
    id                uuid PRIMARY KEY,
    tenant_id         uuid        NOT NULL,
    company_id        uuid        NOT NULL,
    branch_id         uuid        NOT NULL,
    issuance_point_id uuid        NOT NULL,
    channel           text        NOT NULL,
    channel_id        uuid        NOT NULL,
    doc_type          text        NOT NULL,
    external_id       text        NOT NULL,
    status            text        NOT NULL,
    cdc               text,
    number            text,
    buyer_ruc         text,
    issue_datetime    timestamptz NOT NULL,
    grand_total       text        NOT NULL,
    errors            jsonb       NOT NULL,
    warnings          jsonb       NOT NULL,
    state             jsonb       NOT NULL,
    stream_id         text        NOT NULL,
    version           bigint      NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
-- Newest first is id order (UUIDv7); every filter is (tenant, value, id).
CREATE INDEX documents_list_idx ON documents (tenant_id, id DESC);
CREATE INDEX documents_company_idx ON documents (tenant_id, company_id, id DESC);
CREATE INDEX documents_status_idx ON documents (tenant_id, status, id DESC);
CREATE INDEX documents_channel_idx ON documents (tenant_id, channel, id DESC);
CREATE INDEX documents_external_idx ON documents (tenant_id, external_id, id DESC);
CREATE INDEX documents_cdc_idx ON documents (tenant_id, cdc) WHERE cdc IS NOT NULL;
CREATE INDEX documents_ruc_idx ON documents (tenant_id, buyer_ruc, id DESC) WHERE buyer_ruc IS NOT NULL;
CREATE INDEX documents_issued_idx ON documents (tenant_id, issue_datetime, id DESC);

CREATE TABLE document_timeline (
    document_id uuid        NOT NULL,
    version     bigint      NOT NULL,
    tenant_id   uuid        NOT NULL,
    position    bigint      NOT NULL,
    event_id    uuid        NOT NULL,
    event_type  text        NOT NULL,
    status      text        NOT NULL,
    at          timestamptz NOT NULL,
    actor       text,
    data        jsonb       NOT NULL,
    PRIMARY KEY (document_id, version)
);

CREATE TABLE document_artifacts (
    id           uuid PRIMARY KEY,
    tenant_id    uuid        NOT NULL,
    document_id  uuid        NOT NULL,
    kind         text        NOT NULL,
    version      integer     NOT NULL,
    content_type text        NOT NULL,
    sha256       text        NOT NULL,
    size         bigint      NOT NULL,
    created_at   timestamptz NOT NULL,
    UNIQUE (document_id, kind, version)
);

CREATE TABLE idempotency_keys (
    tenant_id    uuid        NOT NULL,
    key          text        NOT NULL,
    request_hash text        NOT NULL,
    document_id  uuid        NOT NULL,
    response     jsonb,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_expiry_idx ON idempotency_keys (expires_at);
