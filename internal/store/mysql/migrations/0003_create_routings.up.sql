/* rowq:migrate.create_routings */
CREATE TABLE routings (
    job_category VARCHAR(255) NOT NULL,
    queue_name   VARCHAR(255) NOT NULL,
    created_at   DATETIME(6)  NOT NULL,
    updated_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (job_category)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
