-- The long-lived links to a document's printable for its customer (`/p/{token}`), by the SHA-256
-- of their token (the token itself is never stored). Part of the `documents` read model.
CREATE TABLE document_public_links (
    token_sha256 TEXT PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    tenant_id    TEXT NOT NULL,
    document_id  TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    revoked_at   TEXT,
    created_at   TEXT NOT NULL
);
