-- Events sent by key (hardening III): an event's id is unique per name within its sender's scope
-- (the verified user who sent it; '' for a sender without a token or a server without a
-- provider), so that one user's id can neither block nor reveal another's. Each kept event's
-- size in bytes, so that the events kept per key and in all are capped without reading them.
ALTER TABLE workflow_published_events ADD COLUMN scope TEXT NOT NULL DEFAULT '';
ALTER TABLE workflow_published_events ADD COLUMN bytes BIGINT NOT NULL DEFAULT 0;
UPDATE workflow_published_events SET bytes = length(data::text);
ALTER TABLE workflow_published_events DROP CONSTRAINT workflow_published_events_pkey;
ALTER TABLE workflow_published_events ADD PRIMARY KEY (name, scope, event_id);
