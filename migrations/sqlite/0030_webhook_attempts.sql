-- Every attempt of a webhook delivery, with the receiver's answer (see the PostgreSQL twin): a
-- trigger writes it from the delivery's own update.
CREATE TABLE webhook_delivery_attempts (
    delivery_id TEXT    NOT NULL,
    tenant_id   TEXT    NOT NULL,
    replay      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    at          TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    status_code INTEGER,
    error       TEXT,
    PRIMARY KEY (delivery_id, replay, attempt)
);

CREATE TRIGGER webhook_attempt_recorded AFTER UPDATE ON webhook_deliveries
WHEN NEW.status IN ('delivered', 'retrying', 'failed') AND NEW.attempts > 0
BEGIN
    INSERT INTO webhook_delivery_attempts (delivery_id, tenant_id, replay, attempt, at, status, status_code, error)
    VALUES (NEW.id, NEW.tenant_id, NEW.replays, NEW.attempts, NEW.updated_at, NEW.status, NEW.last_status_code, NEW.last_error)
    ON CONFLICT (delivery_id, replay, attempt) DO NOTHING;
END;

INSERT INTO webhook_delivery_attempts (delivery_id, tenant_id, replay, attempt, at, status, status_code, error)
SELECT id, tenant_id, replays, attempts, updated_at, status, last_status_code, last_error
FROM webhook_deliveries WHERE status IN ('delivered', 'retrying', 'failed') AND attempts > 0;
