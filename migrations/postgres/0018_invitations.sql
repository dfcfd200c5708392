-- Memberships are invitations (DECISIONS §11). `invitations` is a read model of the tenant
-- streams (projection `access`: MemberInvited, MemberAdded with an invitation, InvitationRevoked).
-- `invitation_tokens` holds credentials, like `sessions`: only the SHA-256 of the token that
-- accepts an invitation, never in an event.

CREATE TABLE invitations (
    id          uuid PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    email       text        NOT NULL,
    role        text        NOT NULL,
    status      text        NOT NULL,
    invited_by  text        NOT NULL,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    closed_at   timestamptz,
    membership_id uuid
);
CREATE INDEX invitations_tenant_idx ON invitations (tenant_id, created_at);

CREATE TABLE invitation_tokens (
    token_sha256  text PRIMARY KEY,
    tenant_id     uuid        NOT NULL,
    invitation_id uuid        NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL
);
