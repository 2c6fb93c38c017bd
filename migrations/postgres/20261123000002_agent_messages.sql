-- Conversation memory of agents: one row per message, read back newest first up to a limit.
CREATE TABLE agent_messages (
    id              BIGSERIAL PRIMARY KEY,
    agent_id        TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    message         JSON NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL
);

CREATE INDEX agent_messages_conversation ON agent_messages (agent_id, user_id, conversation_id, id);
