-- The servers alive and the workflow versions each has (`<id>@<version>` keys), announced at
-- every heartbeat (seen_at_ms by the database's clock) and forgotten at a graceful stop: an
-- execution whose version no live server has shows `waitingForVersion` in its state.
CREATE TABLE workflow_nodes (
    node_id    TEXT PRIMARY KEY NOT NULL,
    versions   TEXT NOT NULL,      -- a JSON array of workflow keys
    seen_at_ms BIGINT NOT NULL
);
