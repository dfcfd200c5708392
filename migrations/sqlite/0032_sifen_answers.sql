-- SIFEN's answers to each tenant's SIFEN channels (the catch-up projection `sifen_answers`), by
-- hour and code, with the summed time from an attempt's start to its answer (a row moves only
-- for an event past its `last_position`, so a redelivered event counts once): what the operators'
-- room shows as SIFEN's health per tenant channel. `sifen_sends` holds the documents in flight
-- on a SIFEN channel (where each is sent, when its attempt started); a document answered for
-- good leaves it.
CREATE TABLE sifen_sends (
    document_id   TEXT PRIMARY KEY,
    tenant_id     TEXT        NOT NULL,
    company_id    TEXT        NOT NULL,
    channel_id    TEXT        NOT NULL,
    submitted_at  TEXT,
    last_position INTEGER     NOT NULL
);

CREATE TABLE sifen_answers (
    tenant_id  TEXT        NOT NULL,
    company_id TEXT        NOT NULL,
    channel_id TEXT        NOT NULL,
    hour       TEXT        NOT NULL,
    code       TEXT        NOT NULL,
    answers    INTEGER     NOT NULL,
    latency_ms INTEGER     NOT NULL,
    timed      INTEGER     NOT NULL,
    last_at    TEXT        NOT NULL,
    last_position INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, channel_id, hour, code)
);
-- The room reads the last 24 hours of every tenant.
CREATE INDEX sifen_answers_hour_idx ON sifen_answers (hour);
