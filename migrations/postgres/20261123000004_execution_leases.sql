-- Leases: which process runs a running execution, the fencing epoch bumped by every claim, and
-- when the hold expires, in milliseconds since the epoch by the database's clock (never a host's).
ALTER TABLE workflow_executions ADD COLUMN lease_node TEXT;
ALTER TABLE workflow_executions ADD COLUMN lease_epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workflow_executions ADD COLUMN lease_ttl_ms BIGINT;
ALTER TABLE workflow_executions ADD COLUMN lease_expires_at BIGINT;

-- Claims and heartbeats look at running executions only.
CREATE INDEX workflow_executions_leases ON workflow_executions (lease_expires_at) WHERE status = 'running';
CREATE INDEX workflow_executions_lease_node ON workflow_executions (lease_node) WHERE status = 'running';
