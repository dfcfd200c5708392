-- Every attempt of a webhook delivery, with the receiver's answer: what the console's delivery
-- page and GET /v1/webhooks/{id}/deliveries/{delivery_id} show (webhook_deliveries keeps only the
-- last). A trigger writes it from the delivery's own update, so the row and its history are one
-- statement's work: an attempt's outcome is recorded with its history or not at all. A replay
-- starts the count again (`replay` tells the rounds apart).
CREATE TABLE webhook_delivery_attempts (
    delivery_id uuid        NOT NULL,
    tenant_id   uuid        NOT NULL,
    replay      integer     NOT NULL,
    attempt     integer     NOT NULL,
    at          timestamptz NOT NULL,
    status      text        NOT NULL,
    status_code integer,
    error       text,
    PRIMARY KEY (delivery_id, replay, attempt)
);

CREATE FUNCTION webhook_attempt_recorded() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_delivery_attempts (delivery_id, tenant_id, replay, attempt, at, status, status_code, error)
    VALUES (NEW.id, NEW.tenant_id, NEW.replays, NEW.attempts, NEW.updated_at, NEW.status, NEW.last_status_code, NEW.last_error)
    ON CONFLICT (delivery_id, replay, attempt) DO NOTHING;
    RETURN NULL;
END
$$;

-- An attempt's outcome: delivered, retrying or failed with its count (a start is `delivering`,
-- a replay `pending` with none).
CREATE TRIGGER webhook_attempt_recorded AFTER UPDATE ON webhook_deliveries
    FOR EACH ROW
    WHEN (NEW.status IN ('delivered', 'retrying', 'failed') AND NEW.attempts > 0)
    EXECUTE FUNCTION webhook_attempt_recorded();

-- The deliveries before it: their last attempt is all that is known.
INSERT INTO webhook_delivery_attempts (delivery_id, tenant_id, replay, attempt, at, status, status_code, error)
SELECT id, tenant_id, replays, attempts, updated_at, status, last_status_code, last_error
FROM webhook_deliveries WHERE status IN ('delivered', 'retrying', 'failed') AND attempts > 0;
