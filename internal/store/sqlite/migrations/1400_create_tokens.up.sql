-- API tokens: the hex SHA-256 of each token, never the token. A revoked
-- token keeps its row (revoked_at), so its name stays taken. Times are
-- INTEGER microseconds since the epoch; NULL: never.
CREATE TABLE tokens (
    name         TEXT    NOT NULL PRIMARY KEY,
    hash         TEXT    NOT NULL UNIQUE,
    scopes       TEXT    NOT NULL,
    queues       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
