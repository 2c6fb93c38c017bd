-- Workflow executions: one row per execution, rewritten by compare-and-set on `version`.
CREATE TABLE workflow_executions (
    id              TEXT PRIMARY KEY NOT NULL,
    workflow_id     TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('idle', 'running', 'suspended', 'completed', 'error')),
    input           TEXT NOT NULL,          -- JSON
    context         TEXT NOT NULL,          -- JSON object
    user_id         TEXT,
    start_at        TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    end_at          TEXT,
    result          TEXT,                   -- JSON, set when completed
    error           TEXT,                   -- set when error
    suspension      TEXT,                   -- JSON, set when suspended
    suspend_request TEXT,                   -- JSON, a pending suspend of a running execution
    next_step       INTEGER NOT NULL,
    steps           TEXT NOT NULL,          -- JSON object: step id -> {input, output, status}
    version         INTEGER NOT NULL
);

CREATE INDEX workflow_executions_workflow ON workflow_executions (workflow_id, start_at);
CREATE INDEX workflow_executions_status ON workflow_executions (status);
