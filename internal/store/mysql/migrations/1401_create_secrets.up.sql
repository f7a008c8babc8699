/* rowq:migrate.create_secrets */
-- Secrets the nodes share (the key of their nudges to each other).
CREATE TABLE secrets (
    name       VARCHAR(128) NOT NULL,
    value      VARCHAR(255) NOT NULL,
    created_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
