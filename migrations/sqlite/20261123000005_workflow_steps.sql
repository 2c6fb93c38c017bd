-- Step records as rows of their own, so that a checkpoint writes only the steps that changed
-- (and a heartbeat none): one row per step, and per child of andAll / andRace / andWhen.
CREATE TABLE workflow_steps (
    execution_id   TEXT NOT NULL REFERENCES workflow_executions (id) ON DELETE CASCADE,
    step_id        TEXT NOT NULL,
    parent_step_id TEXT,                    -- the composite step of a child
    status         TEXT NOT NULL CHECK (status IN ('running', 'suspended', 'completed', 'skipped', 'failed')),
    attempt        INTEGER NOT NULL,        -- how many times the step was started
    input          TEXT NOT NULL,           -- JSON
    output         TEXT,                    -- JSON, once finished
    started_at     TEXT NOT NULL,
    ended_at       TEXT,
    PRIMARY KEY (execution_id, step_id)
);

-- The records written before: each step object of the `steps` column becomes a row.
INSERT INTO workflow_steps (execution_id, step_id, status, attempt, input, output, started_at, ended_at)
SELECT e.id, s.key, json_extract(s.value, '$.status'), 1,
       s.value -> '$.input', s.value -> '$.output', e.updated_at, e.updated_at
FROM workflow_executions e, json_each(e.steps) s;

ALTER TABLE workflow_executions DROP COLUMN steps;
