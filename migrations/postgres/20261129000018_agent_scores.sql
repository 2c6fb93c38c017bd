-- Live scores of agents' generations (issue 38, scorers): one row per run and scorer, a run's
-- second score by a scorer replacing the first. `run_id` is a durable run's execution id, or an
-- in-memory generation's own id (`gen_<uuid>`); `owner` the verified user whose generation it
-- is; `passed` is 0 or 1; `created_ms` orders an agent's scores, newest first.
CREATE TABLE agent_scores (
    agent_id    TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    owner       TEXT,
    scorer      TEXT NOT NULL,
    value       DOUBLE PRECISION NOT NULL,
    passed      BIGINT NOT NULL,
    reason      TEXT NOT NULL,
    created_ms  BIGINT NOT NULL,
    PRIMARY KEY (agent_id, run_id, scorer)
);

CREATE INDEX agent_scores_newest ON agent_scores (agent_id, created_ms);
