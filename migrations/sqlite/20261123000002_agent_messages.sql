-- Conversation memory of agents: one row per message, read back newest first up to a limit.
CREATE TABLE agent_messages (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    agent_id        TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    message         TEXT NOT NULL,          -- JSON: {role, content, ...}
    created_at      TEXT NOT NULL
);

CREATE INDEX agent_messages_conversation ON agent_messages (agent_id, user_id, conversation_id, id);
