-- Cancel (a new final status and its record), the step of a failure and the failed attempts of
-- a step, durable timers (a wake-up
-- time in milliseconds since the epoch, compared with the database's clock), and the indexes of
-- the executions list (newest first, by workflow and optionally status, paged by start and id).
ALTER TABLE workflow_executions DROP CONSTRAINT workflow_executions_status_check;
ALTER TABLE workflow_executions ADD CONSTRAINT workflow_executions_status_check
    CHECK (status IN ('idle', 'running', 'suspended', 'completed', 'error', 'cancelled'));
ALTER TABLE workflow_executions ADD COLUMN cancellation JSON;
ALTER TABLE workflow_executions ADD COLUMN error_step_id TEXT;
ALTER TABLE workflow_executions ADD COLUMN wake_at BIGINT;

CREATE INDEX workflow_executions_wake ON workflow_executions (wake_at) WHERE wake_at IS NOT NULL;
DROP INDEX workflow_executions_workflow;
CREATE INDEX workflow_executions_list ON workflow_executions (workflow_id, start_at, id);
CREATE INDEX workflow_executions_list_status ON workflow_executions (workflow_id, status, start_at, id);
CREATE INDEX workflow_executions_list_owner ON workflow_executions (workflow_id, owner, start_at, id);
CREATE INDEX workflow_executions_ended ON workflow_executions (end_at) WHERE end_at IS NOT NULL;

-- The failed attempts of a step that were tried again (JSON list).
ALTER TABLE workflow_steps ADD COLUMN failures JSON NOT NULL DEFAULT '[]';
