-- Workflow versions: the version of its workflow an execution started on (declared by the host,
-- or a digest of the step graph), set once at the insert; NULL for the executions recorded before
-- versions (continued on the newest). Claims and timers take only the versions a server has.
ALTER TABLE workflow_executions ADD COLUMN workflow_version TEXT;
