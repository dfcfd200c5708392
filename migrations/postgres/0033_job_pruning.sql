-- Succeeded jobs are pruned after a retention period (`kuatia jobs prune`, and hourly by the
-- service: KUATIA_JOB_RETENTION_DAYS, default 30): the search for the oldest of them walks this
-- partial index instead of the whole queue.
CREATE INDEX jobs_succeeded_idx ON jobs (updated_at) WHERE state = 'succeeded';
