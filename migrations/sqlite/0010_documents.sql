-- Documents, timeline, artifacts, idempotency keys (see the PostgreSQL twin).
CREATE TABLE documents (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT    NOT NULL,
    company_id        TEXT    NOT NULL,
    branch_id         TEXT    NOT NULL,
    issuance_point_id TEXT    NOT NULL,
    channel           TEXT    NOT NULL,
    channel_id        TEXT    NOT NULL,
    doc_type          TEXT    NOT NULL,
    external_id       TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    cdc               TEXT,
    number            TEXT,
    buyer_ruc         TEXT,
    issue_datetime    TEXT    NOT NULL,
    grand_total       TEXT    NOT NULL,
    errors            TEXT    NOT NULL,
    warnings          TEXT    NOT NULL,
    state             TEXT    NOT NULL,
    stream_id         TEXT    NOT NULL,
    version           INTEGER NOT NULL,
    created_at        TEXT    NOT NULL,
    updated_at        TEXT    NOT NULL
);
CREATE INDEX documents_list_idx ON documents (tenant_id, id DESC);
CREATE INDEX documents_company_idx ON documents (tenant_id, company_id, id DESC);
CREATE INDEX documents_status_idx ON documents (tenant_id, status, id DESC);
CREATE INDEX documents_channel_idx ON documents (tenant_id, channel, id DESC);
CREATE INDEX documents_external_idx ON documents (tenant_id, external_id, id DESC);
CREATE INDEX documents_cdc_idx ON documents (tenant_id, cdc) WHERE cdc IS NOT NULL;
CREATE INDEX documents_ruc_idx ON documents (tenant_id, buyer_ruc, id DESC) WHERE buyer_ruc IS NOT NULL;
CREATE INDEX documents_issued_idx ON documents (tenant_id, issue_datetime, id DESC);

CREATE TABLE document_timeline (
    document_id TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    tenant_id   TEXT    NOT NULL,
    position    INTEGER NOT NULL,
    event_id    TEXT    NOT NULL,
    event_type  TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    at          TEXT    NOT NULL,
    actor       TEXT,
    data        TEXT    NOT NULL,
    PRIMARY KEY (document_id, version)
);

CREATE TABLE document_artifacts (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT    NOT NULL,
    document_id  TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    content_type TEXT    NOT NULL,
    sha256       TEXT    NOT NULL,
    size         INTEGER NOT NULL,
    created_at   TEXT    NOT NULL,
    UNIQUE (document_id, kind, version)
);

CREATE TABLE idempotency_keys (
    tenant_id    TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    document_id  TEXT NOT NULL,
    response     TEXT,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_expiry_idx ON idempotency_keys (expires_at);
