-- The event store, subscriptions (checkpoints) and jobs (outbox).
-- See docs/adr/0001-event-store.md for the reasons behind each choice.

CREATE TABLE events (
    -- Commit-ordered: drawn from events_global_position_seq only while holding the append
    -- advisory lock, so position N visible means every lower position is final.
    global_position bigint PRIMARY KEY,
    event_id        uuid        NOT NULL UNIQUE,
    tenant_id       uuid        NOT NULL,
    stream_type     text        NOT NULL,
    stream_id       text        NOT NULL,
    stream_version  bigint      NOT NULL CHECK (stream_version >= 1),
    event_type      text        NOT NULL,
    schema_version  integer     NOT NULL CHECK (schema_version >= 1),
    -- json, not jsonb: the exact text that was hashed is kept (jsonb rewrites -0.0 as 0.0 and
    -- refuses \u0000), so `kuatia events verify` recomputes the very same bytes.
    payload         json        NOT NULL,
    metadata        json        NOT NULL,
    -- clock_timestamp() read after the lock: non-decreasing along global_position.
    recorded_at     timestamptz NOT NULL,
    prev_hash       text,
    hash            text        NOT NULL,
    CONSTRAINT events_stream_version_key UNIQUE (stream_id, stream_version)
);

CREATE SEQUENCE events_global_position_seq AS bigint NO CYCLE OWNED BY events.global_position;
CREATE INDEX events_tenant_position_idx ON events (tenant_id, global_position);

-- Append-only, even for the table owner: UPDATE, DELETE and TRUNCATE raise.
CREATE FUNCTION events_reject_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER events_no_update_or_delete BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_reject_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_reject_change();

-- Wakes subscribers on other connections and instances (a hint: they poll as well).
CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('kuatia_events', (SELECT max(global_position)::text FROM new_rows));
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION events_notify();

CREATE TABLE subscriptions (
    name       text PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('inline', 'catch_up', 'side_effect')),
    position   bigint      NOT NULL DEFAULT 0,
    last_error text,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE jobs (
    id               uuid PRIMARY KEY,
    tenant_id        uuid        NOT NULL,
    kind             text        NOT NULL,
    idempotency_key  text        NOT NULL UNIQUE,
    payload          jsonb       NOT NULL,
    state            text        NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'dead')),
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL CHECK (max_attempts >= 1),
    next_attempt_at  timestamptz NOT NULL,
    lease_owner      text,
    lease_expires_at timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX jobs_due_idx ON jobs (next_attempt_at) WHERE state = 'pending';
CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_tenant_idx ON jobs (tenant_id);

-- The application role. The service connects as the migration owner and switches to this role
-- (KUATIA_DB_ROLE) for its work, so even a compromised or buggy service cannot rewrite history.
DO $$
BEGIN
    CREATE ROLE kuatia_app NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL; -- the role is cluster-wide: another database already created it
END
$$;

GRANT USAGE ON SCHEMA public TO kuatia_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO kuatia_app;
GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO kuatia_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO kuatia_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO kuatia_app;
REVOKE UPDATE, DELETE, TRUNCATE ON events FROM kuatia_app;
REVOKE UPDATE, DELETE, TRUNCATE ON events FROM PUBLIC;
