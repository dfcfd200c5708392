-- Request counts per bucket and window (see the PostgreSQL twin).
CREATE TABLE rate_limit_windows (
    bucket_key   TEXT    NOT NULL,
    window_start TEXT    NOT NULL,
    tenant_id    TEXT    NOT NULL,
    count        INTEGER NOT NULL,
    PRIMARY KEY (bucket_key, window_start)
);
