-- API tokens: the hex SHA-256 of each token, never the token. A revoked
-- token keeps its row (revoked_at), so its name stays taken. NULL times:
-- never.
CREATE TABLE tokens (
    name         text COLLATE "C" NOT NULL PRIMARY KEY,
    hash         text COLLATE "C" NOT NULL UNIQUE,
    scopes       text             NOT NULL,
    queues       text             NOT NULL,
    created_at   timestamptz      NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
