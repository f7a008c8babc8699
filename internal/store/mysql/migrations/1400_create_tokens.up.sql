/* rowq:migrate.create_tokens */
-- API tokens: the hex SHA-256 of each token, never the token. A revoked
-- token keeps its row (revoked_at), so its name stays taken. NULL times:
-- never.
CREATE TABLE tokens (
    name         VARCHAR(128)  NOT NULL,
    hash         CHAR(64)      NOT NULL,
    scopes       TEXT          NOT NULL,
    queues       TEXT          NOT NULL,
    created_at   DATETIME(6)   NOT NULL,
    expires_at   DATETIME(6)   NULL,
    last_used_at DATETIME(6)   NULL,
    revoked_at   DATETIME(6)   NULL,
    PRIMARY KEY (name),
    UNIQUE KEY tokens_hash (hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
