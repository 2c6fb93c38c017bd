-- Tokens spent per agent, user (the memory namespace: `user:<id>` for a verified user) and UTC
-- day (`YYYY-MM-DD`): what the daily token budgets read and `GET /agents/{id}/usage` shows. One
-- row per key, added to in one statement by every replica.
CREATE TABLE agent_usage (
    agent_id  TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    day       TEXT NOT NULL,
    tokens    BIGINT NOT NULL,
    PRIMARY KEY (agent_id, user_id, day)
);
