-- Events into running executions (workflow operations). A suspended execution whose step waits
-- for an event by key names it in waiting_for (derived from its suspension: the JSON pair
-- [name, key]), so that an event sent by key finds its executions through an index.
ALTER TABLE workflow_executions ADD COLUMN waiting_for TEXT;
CREATE INDEX workflow_executions_waiting ON workflow_executions (waiting_for, start_at) WHERE waiting_for IS NOT NULL;

-- Events sent by key (POST /events/:name), kept for the executions that wait for them later,
-- within the retention window; an id names one event per name (sent again, it is not sent twice).
CREATE TABLE workflow_published_events (
    name         TEXT NOT NULL,
    event_id     TEXT NOT NULL,
    event_key    TEXT NOT NULL,
    data         JSON NOT NULL,
    published_at TIMESTAMPTZ NOT NULL,
    owner        TEXT,
    woken        JSON,       -- the ids of the executions it woke, once recorded
    PRIMARY KEY (name, event_id)
);
CREATE INDEX workflow_published_events_key ON workflow_published_events (name, event_key, published_at);
CREATE INDEX workflow_published_events_at ON workflow_published_events (published_at);
