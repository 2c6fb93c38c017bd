-- Workflow definitions deployed through the API (PUT /definitions/workflows/{name}): one row per
-- name and version, never rewritten, so that every replica on the database runs the same
-- documents. `digest` is of the document's content (the same document as JSON or YAML has one);
-- `source` the text as deployed, `content_type` its media type; `created_ms` orders the versions of a
-- name (the newest is the one stored last).
CREATE TABLE workflow_definitions (
    name          TEXT NOT NULL,
    version       TEXT NOT NULL,
    digest        TEXT NOT NULL,
    source        TEXT NOT NULL,
    content_type  TEXT NOT NULL,
    created_ms    BIGINT NOT NULL,
    created_by    TEXT,
    PRIMARY KEY (name, version)
);
