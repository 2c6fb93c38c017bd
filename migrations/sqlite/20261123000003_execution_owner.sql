-- The verified user who started an execution (NULL when authentication was off): in strict mode
-- only this user, or an admin, may read or act on it. Set once at insert, never rewritten.
ALTER TABLE workflow_executions ADD COLUMN owner TEXT;
