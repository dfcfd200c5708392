-- The event store, subscriptions (checkpoints) and jobs (outbox), SQLite flavour.
-- Timestamps are TEXT in one fixed format, RFC 3339 UTC with microseconds
-- ('2026-11-22T04:16:00.123000Z'), so that text order is time order.
-- UUIDs are TEXT (hyphenated, lower case). JSON is TEXT.

CREATE TABLE events (
    -- One writer at a time (BEGIN IMMEDIATE) makes AUTOINCREMENT commit-ordered, and
    -- AUTOINCREMENT never reuses a position.
    global_position INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT    NOT NULL UNIQUE,
    tenant_id       TEXT    NOT NULL,
    stream_type     TEXT    NOT NULL,
    stream_id       TEXT    NOT NULL,
    stream_version  INTEGER NOT NULL CHECK (stream_version >= 1),
    event_type      TEXT    NOT NULL,
    schema_version  INTEGER NOT NULL CHECK (schema_version >= 1),
    payload         TEXT    NOT NULL,
    metadata        TEXT    NOT NULL,
    recorded_at     TEXT    NOT NULL,
    prev_hash       TEXT,
    hash            TEXT    NOT NULL,
    CONSTRAINT events_stream_version_key UNIQUE (stream_id, stream_version)
);
CREATE INDEX events_tenant_position_idx ON events (tenant_id, global_position);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: UPDATE is not allowed');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed');
END;

CREATE TABLE subscriptions (
    name       TEXT PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind IN ('inline', 'catch_up', 'side_effect')),
    position   INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    updated_at TEXT    NOT NULL
);

CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    idempotency_key  TEXT    NOT NULL UNIQUE,
    payload          TEXT    NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'dead')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
    next_attempt_at  TEXT    NOT NULL,
    lease_owner      TEXT,
    lease_expires_at TEXT,
    last_error       TEXT,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL
);
CREATE INDEX jobs_due_idx ON jobs (state, next_attempt_at);
CREATE INDEX jobs_tenant_idx ON jobs (tenant_id);
