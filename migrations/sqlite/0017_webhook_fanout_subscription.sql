-- Webhooks are fanned out by the `webhook_fanout` subscription instead of a `webhook.fanout` job per
-- event. It starts before the first event of every document whose fan-out job had not finished
-- (the jobs are removed: the subscription fans those events out, and re-recording a delivery that
-- exists is a no-op), or at the head of the stream when there is none.
INSERT INTO subscriptions (name, kind, position, updated_at)
SELECT 'webhook_fanout', 'side_effect', COALESCE(
    (SELECT min(e.global_position) - 1
       FROM jobs j
       JOIN events e ON e.stream_id = 'document:' || j.tenant_id || ':' || json_extract(j.payload, '$.document_id')
      WHERE j.kind = 'webhook.fanout' AND j.state IN ('pending', 'running')),
    (SELECT max(global_position) FROM events),
    0), strftime('%Y-%m-%dT%H:%M:%f', 'now') || '000Z'
WHERE true -- (SQLite reads an ON CONFLICT right after a bare SELECT's FROM as a join clause)
ON CONFLICT (name) DO NOTHING;

DELETE FROM jobs WHERE kind = 'webhook.fanout' AND state IN ('pending', 'running');
