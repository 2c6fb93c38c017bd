-- Schedules (a workflow started on a cron expression in a time zone): one row each, rewritten by
-- compare-and-set on `version`. The definition and the state (cursor, buffered tick, skips,
-- recent fires) are one JSON document; `owner` (strict mode's lists) and `due_ms` (when a
-- scheduler looks at it next, milliseconds since the epoch; null: not until it changes) are the
-- columns queries read.
CREATE TABLE schedules (
    id       TEXT PRIMARY KEY NOT NULL,
    owner    TEXT,
    due_ms   INTEGER,
    record   TEXT NOT NULL,          -- JSON
    version  INTEGER NOT NULL
);

CREATE INDEX schedules_due ON schedules (due_ms) WHERE due_ms IS NOT NULL;
CREATE INDEX schedules_owner ON schedules (owner, id);
