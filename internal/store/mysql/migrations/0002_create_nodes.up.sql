/* rowq:migrate.create_nodes */
CREATE TABLE nodes (
    id         VARCHAR(255) NOT NULL,
    host       VARCHAR(255) NOT NULL,
    started_at DATETIME(6)  NOT NULL,
    expires_at DATETIME(6)  NOT NULL,
    PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
