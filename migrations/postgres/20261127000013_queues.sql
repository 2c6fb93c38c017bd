-- Queues: a new status `queued` (an execution waiting for a slot of its workflow's queue), the
-- execution's place in its queue (the queue's name, its concurrency key's value, its priority,
-- when it entered the queue, and when a dequeue started it, in milliseconds by the database's
-- clock: the rate limit's window), the queues (a row each, locked by every dequeue pass so
-- that the replicas' passes over one queue never overlap), and when each key was served last
-- (the round-robin between keys).
ALTER TABLE workflow_executions DROP CONSTRAINT workflow_executions_status_check;
ALTER TABLE workflow_executions ADD CONSTRAINT workflow_executions_status_check
    CHECK (status IN ('idle', 'queued', 'running', 'suspended', 'completed', 'error', 'cancelled'));
ALTER TABLE workflow_executions ADD COLUMN queue_name TEXT;
ALTER TABLE workflow_executions ADD COLUMN queue_key TEXT;
ALTER TABLE workflow_executions ADD COLUMN queue_priority BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workflow_executions ADD COLUMN queued_at TIMESTAMPTZ;
ALTER TABLE workflow_executions ADD COLUMN dequeued_at_ms BIGINT;
CREATE INDEX workflow_executions_queue ON workflow_executions (queue_name, status, queue_key) WHERE queue_name IS NOT NULL;
CREATE INDEX workflow_executions_queue_window ON workflow_executions (queue_name, dequeued_at_ms) WHERE dequeued_at_ms IS NOT NULL;
CREATE TABLE workflow_queues (
    name   TEXT PRIMARY KEY NOT NULL,
    passes BIGINT NOT NULL         -- the dequeue passes so far: the round-robin's clock
);
CREATE TABLE workflow_queue_keys (
    queue_name TEXT NOT NULL,
    queue_key  TEXT NOT NULL,
    served     BIGINT NOT NULL,    -- the pass that served the key last
    PRIMARY KEY (queue_name, queue_key)
);
