-- The taxpayer lookup service (issue 9, DECISIONS §10): DNIT's registry, designations and
-- registry matches, the service's API keys and its monthly request counters.
--
-- The registry is kept in two tables of the same shape, slots 0 and 1. lookup_registry names the
-- active slot; an import empties and fills the other one, then switches in one transaction, so
-- a reader sees one whole publication, old or new (docs/lookup.md). The registry is public data,
-- shared by every tenant: no tenant_id.

CREATE TABLE lookup_registry (
    id           smallint    PRIMARY KEY CHECK (id = 1),
    -- Incremented by every registry import; 0 until the first.
    generation   bigint      NOT NULL,
    active_slot  smallint    NOT NULL CHECK (active_slot IN (0, 1)),
    -- The publication date given with --published (YYYY-MM-DD).
    published    text,
    imported_at  timestamptz,
    row_count    bigint      NOT NULL,
    -- Set while an import runs (until then); a crashed import's lease expires.
    import_lease timestamptz
);
INSERT INTO lookup_registry (id, generation, active_slot, row_count) VALUES (1, 0, 0, 0);

CREATE TABLE lookup_taxpayers_0 (
    ruc     text COLLATE "C" PRIMARY KEY,
    name    text     NOT NULL,
    dv      smallint NOT NULL,
    old_ruc text     NOT NULL,
    state   text     NOT NULL
);
CREATE TABLE lookup_taxpayers_1 (LIKE lookup_taxpayers_0 INCLUDING ALL);
-- An import empties the inactive slot with TRUNCATE (a DELETE of two million rows would bloat).
GRANT TRUNCATE ON lookup_taxpayers_0, lookup_taxpayers_1 TO kuatia_app;

-- One row per finished import, with its report (counts, rejected lines with file and line).
CREATE TABLE lookup_imports (
    id            uuid        PRIMARY KEY,
    kind          text        NOT NULL CHECK (kind IN ('registry', 'mandates', 'siara')),
    generation    bigint,
    published     text,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz NOT NULL,
    rows_loaded   bigint      NOT NULL,
    rows_rejected bigint      NOT NULL,
    report        jsonb       NOT NULL
);

-- Electronic-invoicing designations (sifenMandate), replaced whole by each CSV import.
CREATE TABLE lookup_mandates (
    ruc           text PRIMARY KEY,
    mandate_group text NOT NULL,
    start_date    text NOT NULL,
    link          text NOT NULL
);

-- Synchronized registry matches (siara), replaced whole by each CSV import.
CREATE TABLE lookup_siara (
    ruc                text PRIMARY KEY,
    siara_group        text,
    category           text,
    legal_type         text,
    department         text,
    city               text,
    registry_state     text,
    last_communication text,
    synchronized_at    text,
    source_link        text
);

-- Keys of the lookup service (not tenant keys). Only the SHA-256 of a key is kept.
CREATE TABLE lookup_api_keys (
    id            uuid        PRIMARY KEY,
    name          text        NOT NULL,
    plan          text        NOT NULL,
    -- NULL: the plan's configured limit.
    monthly_limit bigint,
    prefix        text        NOT NULL,
    key_sha256    text        NOT NULL UNIQUE,
    created_at    timestamptz NOT NULL,
    revoked_at    timestamptz
);

-- Requests counted per subject (key:<id> or ip:<address>) and month (YYYY-MM in Paraguay),
-- shared by all instances (each adds its counts every second).
CREATE TABLE lookup_usage (
    subject text   NOT NULL,
    period  text   NOT NULL,
    used    bigint NOT NULL,
    PRIMARY KEY (subject, period)
);
