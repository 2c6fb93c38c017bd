-- Semantic recall: at most one embedding per agent message, with the message's agent, user and
-- conversation copied from it (a search reads one agent's embeddings of one user by index).
-- `seq` is the order of writing: a process keeping an index in memory catches up by it.
CREATE TABLE message_embeddings (
    seq             BIGSERIAL PRIMARY KEY,
    message_id      BIGINT NOT NULL UNIQUE REFERENCES agent_messages (id) ON DELETE CASCADE,
    agent_id        TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    embedder        TEXT NOT NULL,
    dimensions      BIGINT NOT NULL,    -- 0: the message has no text to embed
    vector          BYTEA,              -- little-endian f32 x dimensions, L2-normalised
    created_ms      BIGINT NOT NULL
);

CREATE INDEX message_embeddings_scope ON message_embeddings (agent_id, user_id, dimensions, seq);
