-- The stream version of a company's last configuration change (profile, branches, points,
-- print settings, certificates, channels): intake caches a company's configuration per process
-- and reloads it only when this moves. A rebuild replays the same versions.
ALTER TABLE companies ADD COLUMN config_version BIGINT NOT NULL DEFAULT 0;
