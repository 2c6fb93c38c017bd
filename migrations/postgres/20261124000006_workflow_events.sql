-- The durable event log: every event an execution's writes report, numbered per execution and
-- stored in the same transaction as the write, so that a client can re-attach and replay what
-- it missed. `last_event` is the number of the last one.
CREATE TABLE workflow_events (
    execution_id TEXT NOT NULL REFERENCES workflow_executions (id) ON DELETE CASCADE,
    seq          BIGINT NOT NULL,
    type         TEXT NOT NULL,
    at           TIMESTAMPTZ NOT NULL,
    data         JSON NOT NULL,       -- the event, as the engine serialises it
    PRIMARY KEY (execution_id, seq)
);

ALTER TABLE workflow_executions ADD COLUMN last_event BIGINT NOT NULL DEFAULT 0;
