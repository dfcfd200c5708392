-- A worker pool claims due jobs of its own kinds. The due index without the kind made every
-- claim of the pipeline's pool walk past the whole backlog of another pool's kinds (thousands of
-- pending KuDE renders under load) before finding its own: index the due jobs by kind instead.
DROP INDEX IF EXISTS jobs_due_idx;
CREATE INDEX jobs_due_by_kind_idx ON jobs (kind, next_attempt_at) WHERE state = 'pending';
