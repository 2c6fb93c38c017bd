-- Workflow executions: one row per execution, rewritten by compare-and-set on `version`.
-- JSON (not JSONB) keeps documents byte for byte as written, so both backends return the same
-- bytes for the same execution.
CREATE TABLE workflow_executions (
    id              TEXT PRIMARY KEY NOT NULL,
    workflow_id     TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('idle', 'running', 'suspended', 'completed', 'error')),
    input           JSON NOT NULL,
    context         JSON NOT NULL,
    user_id         TEXT,
    start_at        TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    end_at          TIMESTAMPTZ,
    result          JSON,
    error           TEXT,
    suspension      JSON,
    suspend_request JSON,
    next_step       INTEGER NOT NULL,
    steps           JSON NOT NULL,
    version         BIGINT NOT NULL
);

CREATE INDEX workflow_executions_workflow ON workflow_executions (workflow_id, start_at);
CREATE INDEX workflow_executions_status ON workflow_executions (status);
