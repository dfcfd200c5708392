-- The taxpayer lookup service (see the PostgreSQL twin for the design: two registry slots, the
-- active one named by lookup_registry).

CREATE TABLE lookup_registry (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    generation   INTEGER NOT NULL,
    active_slot  INTEGER NOT NULL CHECK (active_slot IN (0, 1)),
    published    TEXT,
    imported_at  TEXT,
    row_count    INTEGER NOT NULL,
    import_lease TEXT
);
INSERT INTO lookup_registry (id, generation, active_slot, row_count) VALUES (1, 0, 0, 0);

CREATE TABLE lookup_taxpayers_0 (
    ruc     TEXT    PRIMARY KEY,
    name    TEXT    NOT NULL,
    dv      INTEGER NOT NULL,
    old_ruc TEXT    NOT NULL,
    state   TEXT    NOT NULL
) WITHOUT ROWID;
CREATE TABLE lookup_taxpayers_1 (
    ruc     TEXT    PRIMARY KEY,
    name    TEXT    NOT NULL,
    dv      INTEGER NOT NULL,
    old_ruc TEXT    NOT NULL,
    state   TEXT    NOT NULL
) WITHOUT ROWID;

CREATE TABLE lookup_imports (
    id            TEXT    PRIMARY KEY,
    kind          TEXT    NOT NULL CHECK (kind IN ('registry', 'mandates', 'siara')),
    generation    INTEGER,
    published     TEXT,
    started_at    TEXT    NOT NULL,
    finished_at   TEXT    NOT NULL,
    rows_loaded   INTEGER NOT NULL,
    rows_rejected INTEGER NOT NULL,
    report        TEXT    NOT NULL
);

CREATE TABLE lookup_mandates (
    ruc           TEXT PRIMARY KEY,
    mandate_group TEXT NOT NULL,
    start_date    TEXT NOT NULL,
    link          TEXT NOT NULL
);

CREATE TABLE lookup_siara (
    ruc                TEXT PRIMARY KEY,
    siara_group        TEXT,
    category           TEXT,
    legal_type         TEXT,
    department         TEXT,
    city               TEXT,
    registry_state     TEXT,
    last_communication TEXT,
    synchronized_at    TEXT,
    source_link        TEXT
);

CREATE TABLE lookup_api_keys (
    id            TEXT    PRIMARY KEY,
    name          TEXT    NOT NULL,
    plan          TEXT    NOT NULL,
    monthly_limit INTEGER,
    prefix        TEXT    NOT NULL,
    key_sha256    TEXT    NOT NULL UNIQUE,
    created_at    TEXT    NOT NULL,
    revoked_at    TEXT
);

CREATE TABLE lookup_usage (
    subject TEXT    NOT NULL,
    period  TEXT    NOT NULL,
    used    INTEGER NOT NULL,
    PRIMARY KEY (subject, period)
);
