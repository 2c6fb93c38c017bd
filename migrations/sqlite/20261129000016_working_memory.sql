-- Agents' working memory: one value per agent, user namespace (`user:<id>` for a verified
-- user) and conversation (`''` for a memory of the scope `user`), replaced as a whole; the
-- value is JSON (a Markdown text is a JSON string), at most 16 KiB (checked before it is
-- written); `updated_ms` is when it was last written (milliseconds since the Unix epoch).
CREATE TABLE agent_working_memory (
    agent_id        TEXT NOT NULL,
    user_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    value           TEXT NOT NULL,
    updated_ms      BIGINT NOT NULL,
    PRIMARY KEY (agent_id, user_id, conversation_id)
);
