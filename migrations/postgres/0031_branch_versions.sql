-- Branches and issuance points change (PATCH /v1/branches/{id}, /v1/issuance-points/{id}: the
-- BranchUpdated and IssuancePointUpdated events). Like companies and channels, a row keeps the
-- company stream's version of its last change and updates only apply forward, so an event
-- applied twice changes nothing. Rows written before carry 0, below any update's version.
ALTER TABLE branches ADD COLUMN version bigint NOT NULL DEFAULT 0;
ALTER TABLE branches ADD COLUMN updated_at timestamptz;
ALTER TABLE issuance_points ADD COLUMN version bigint NOT NULL DEFAULT 0;
ALTER TABLE issuance_points ADD COLUMN updated_at timestamptz;
