-- no-transaction
-- Cancel (a new final status and its record), the step of a failure and the failed attempts of
-- a step, durable timers (a wake-up
-- time in milliseconds since the epoch, compared with the database's clock), and the indexes of
-- the executions list (newest first, by workflow and optionally status, paged by start and id).
--
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt, in one transaction,
-- with foreign keys off so that dropping the old table does not cascade to the steps and events
-- (which refer to it by name, and so to the rebuilt one).
PRAGMA foreign_keys = OFF;
BEGIN;
CREATE TABLE workflow_executions_rebuilt (
    id               TEXT PRIMARY KEY NOT NULL,
    workflow_id      TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('idle', 'running', 'suspended', 'completed', 'error', 'cancelled')),
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
    wake_at          INTEGER
);
INSERT INTO workflow_executions_rebuilt (id, workflow_id, status, input, context, user_id,
    start_at, updated_at, end_at, result, error, suspension, suspend_request, next_step, version,
    owner, lease_node, lease_epoch, lease_ttl_ms, lease_expires_at, last_event)
SELECT id, workflow_id, status, input, context, user_id, start_at, updated_at, end_at, result,
    error, suspension, suspend_request, next_step, version, owner, lease_node, lease_epoch,
    lease_ttl_ms, lease_expires_at, last_event
FROM workflow_executions;
DROP TABLE workflow_executions;
ALTER TABLE workflow_executions_rebuilt RENAME TO workflow_executions;
CREATE INDEX workflow_executions_status ON workflow_executions (status);
CREATE INDEX workflow_executions_leases ON workflow_executions (lease_expires_at) WHERE status = 'running';
CREATE INDEX workflow_executions_lease_node ON workflow_executions (lease_node) WHERE status = 'running';
CREATE INDEX workflow_executions_wake ON workflow_executions (wake_at) WHERE wake_at IS NOT NULL;
CREATE INDEX workflow_executions_list ON workflow_executions (workflow_id, start_at, id);
CREATE INDEX workflow_executions_list_status ON workflow_executions (workflow_id, status, start_at, id);
CREATE INDEX workflow_executions_list_owner ON workflow_executions (workflow_id, owner, start_at, id);
CREATE INDEX workflow_executions_ended ON workflow_executions (end_at) WHERE end_at IS NOT NULL;
-- The failed attempts of a step that were tried again (JSON list).
ALTER TABLE workflow_steps ADD COLUMN failures TEXT NOT NULL DEFAULT '[]';
COMMIT;
PRAGMA foreign_keys = ON;
