-- Secrets the nodes share (the key of their nudges to each other).
CREATE TABLE secrets (
    name       text COLLATE "C" NOT NULL PRIMARY KEY,
    value      text             NOT NULL,
    created_at timestamptz      NOT NULL
);
