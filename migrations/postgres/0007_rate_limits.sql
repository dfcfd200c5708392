-- Request counts per bucket and one-minute window, shared by all instances (each adds its
-- counts every second). Old windows are deleted by the service.
CREATE TABLE rate_limit_windows (
    bucket_key   text        NOT NULL,
    window_start timestamptz NOT NULL,
    tenant_id    uuid        NOT NULL,
    count        bigint      NOT NULL,
    PRIMARY KEY (bucket_key, window_start)
);
