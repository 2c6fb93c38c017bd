-- The executions list across workflows (GET /executions: the console's executions and approvals),
-- newest first, optionally by status, paged by start and id. The status index grows into the
-- list's, so a status filter reads its page in order instead of sorting every match.
DROP INDEX IF EXISTS workflow_executions_status;
CREATE INDEX workflow_executions_all ON workflow_executions (start_at, id);
CREATE INDEX workflow_executions_all_status ON workflow_executions (status, start_at, id);
