-- The long-lived links to a document's printable for its customer (`/p/{token}`), by the SHA-256
-- of their token (the token itself is never stored). Part of the `documents` read model.
CREATE TABLE document_public_links (
    token_sha256 text PRIMARY KEY,
    id           uuid        NOT NULL UNIQUE,
    tenant_id    uuid        NOT NULL,
    document_id  uuid        NOT NULL,
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    created_at   timestamptz NOT NULL
);
