-- no-transaction
-- Queues: a new status `queued` (an execution waiting for a slot of its workflow's queue), the
-- execution's place in its queue (the queue's name, its concurrency key's value, its priority,
-- when it entered the queue, and when a dequeue started it, in milliseconds by the database's
-- clock: the rate limit's window), the queues (a row each, locked by every dequeue pass so
-- that the replicas' passes over one queue never overlap), and when each key was served last
-- (the round-robin between keys).
--
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt (see 0007).
PRAGMA foreign_keys = OFF;
BEGIN;
CREATE TABLE workflow_executions_rebuilt (
    id               TEXT PRIMARY KEY NOT NULL,
    workflow_id      TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('idle', 'queued', 'running', 'suspended', 'completed', 'error', 'cancelled')),
    input            TEXT NOT NULL,
    context          TEXT NOT NULL,
    user_id          TEXT,
    start_at         TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    end_at           TEXT,
    result           TEXT,
    error            TEXT,
    suspension       TEXT,
    suspend_request  TEXT,
    next_step        INTEGER NOT NULL,
    version          INTEGER NOT NULL,
    owner            TEXT,
    lease_node       TEXT,
    lease_epoch      INTEGER NOT NULL DEFAULT 0,
    lease_ttl_ms     INTEGER,
    lease_expires_at INTEGER,
    last_event       INTEGER NOT NULL DEFAULT 0,
    cancellation     TEXT,
    error_step_id    TEXT,
    wake_at          INTEGER,
    waiting_for      TEXT,
    workflow_version TEXT,
    queue_name       TEXT,
    queue_key        TEXT,
    queue_priority   INTEGER NOT NULL DEFAULT 0,
    queued_at        TEXT,
    dequeued_at_ms   INTEGER
);
INSERT INTO workflow_executions_rebuilt (id, workflow_id, status, input, context, user_id,
    start_at, updated_at, end_at, result, error, suspension, suspend_request, next_step, version,
    owner, lease_node, lease_epoch, lease_ttl_ms, lease_expires_at, last_event, cancellation,
    error_step_id, wake_at, waiting_for, workflow_version)
SELECT id, workflow_id, status, input, context, user_id, start_at, updated_at, end_at, result,
    error, suspension, suspend_request, next_step, version, owner, lease_node, lease_epoch,
    lease_ttl_ms, lease_expires_at, last_event, cancellation, error_step_id, wake_at,
    waiting_for, workflow_version
FROM workflow_executions;
DROP TABLE workflow_executions;
ALTER TABLE workflow_executions_rebuilt RENAME TO workflow_executions;
CREATE INDEX workflow_executions_leases ON workflow_executions (lease_expires_at) WHERE status = 'running';
CREATE INDEX workflow_executions_lease_node ON workflow_executions (lease_node) WHERE status = 'running';
CREATE INDEX workflow_executions_wake ON workflow_executions (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX workflow_executions_list ON workflow_executions (workflow_id, start_at, id);
CREATE INDEX workflow_executions_list_status ON workflow_executions (workflow_id, status, start_at, id);
CREATE INDEX workflow_executions_list_owner ON workflow_executions (workflow_id, owner, start_at, id);
CREATE INDEX workflow_executions_ended ON workflow_executions (end_at) WHERE end_at IS NOT NULL;
CREATE INDEX workflow_executions_all ON workflow_executions (start_at, id);
CREATE INDEX workflow_executions_all_status ON workflow_executions (status, start_at, id);
CREATE INDEX workflow_executions_waiting ON workflow_executions (waiting_for, start_at) WHERE waiting_for IS NOT NULL;
CREATE INDEX workflow_executions_queue ON workflow_executions (queue_name, status, queue_key) WHERE queue_name IS NOT NULL;
CREATE INDEX workflow_executions_queue_window ON workflow_executions (queue_name, dequeued_at_ms) WHERE dequeued_at_ms IS NOT NULL;
CREATE TABLE workflow_queues (
    name   TEXT PRIMARY KEY NOT NULL,
    passes INTEGER NOT NULL        -- the dequeue passes so far: the round-robin's clock
);
CREATE TABLE workflow_queue_keys (
    queue_name TEXT NOT NULL,
    queue_key  TEXT NOT NULL,
    served     INTEGER NOT NULL,   -- the pass that served the key last
    PRIMARY KEY (queue_name, queue_key)
);
COMMIT;
PRAGMA foreign_keys = ON;
