-- Events sent by key (hardening III): an event's id is unique per name within its sender's scope
-- (the verified user who sent it; '' for a sender without a token or a server without a
-- provider), so that one user's id can neither block nor reveal another's. Each kept event's
-- size in bytes, so that the events kept per key and in all are capped without reading them.
-- SQLite cannot change a primary key in place: the table is rebuilt.
CREATE TABLE workflow_published_events_rebuilt (
    name         TEXT NOT NULL,
    scope        TEXT NOT NULL DEFAULT '',
    event_id     TEXT NOT NULL,
    event_key    TEXT NOT NULL,
    data         TEXT NOT NULL,
    bytes        INTEGER NOT NULL DEFAULT 0,
    published_at TEXT NOT NULL,
    owner        TEXT,
    woken        TEXT,       -- the ids of the executions it woke, once recorded
    PRIMARY KEY (name, scope, event_id)
);
INSERT INTO workflow_published_events_rebuilt
    (name, scope, event_id, event_key, data, bytes, published_at, owner, woken)
    SELECT name, '', event_id, event_key, data, length(data), published_at, owner, woken
    FROM workflow_published_events;
DROP TABLE workflow_published_events;
ALTER TABLE workflow_published_events_rebuilt RENAME TO workflow_published_events;
CREATE INDEX workflow_published_events_key ON workflow_published_events (name, event_key, published_at);
CREATE INDEX workflow_published_events_at ON workflow_published_events (published_at);
