-- SIFEN's answers to each tenant's SIFEN channels (the catch-up projection `sifen_answers`), by
-- hour and code, with the summed time from an attempt's start to its answer (a row moves only
-- for an event past its `last_position`, so a redelivered event counts once): what the operators'
-- room shows as SIFEN's health per tenant channel. `sifen_sends` holds the documents in flight
-- on a SIFEN channel (where each is sent, when its attempt started); a document answered for
-- good leaves it.
CREATE TABLE sifen_sends (
    document_id   uuid PRIMARY KEY,
    tenant_id     uuid        NOT NULL,
    company_id    uuid        NOT NULL,
    channel_id    uuid        NOT NULL,
    submitted_at  timestamptz,
    last_position bigint      NOT NULL
);

CREATE TABLE sifen_answers (
    tenant_id  uuid        NOT NULL,
    company_id uuid        NOT NULL,
    channel_id uuid        NOT NULL,
    hour       timestamptz NOT NULL,
    code       text        NOT NULL,
    answers    bigint      NOT NULL,
    latency_ms bigint      NOT NULL,
    timed      bigint      NOT NULL,
    last_at    timestamptz NOT NULL,
    last_position bigint NOT NULL,
    PRIMARY KEY (tenant_id, channel_id, hour, code)
);
-- The room reads the last 24 hours of every tenant.
CREATE INDEX sifen_answers_hour_idx ON sifen_answers (hour);
