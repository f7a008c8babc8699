-- Secrets the nodes share (the key of their nudges to each other).
CREATE TABLE secrets (
    name       TEXT    NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
