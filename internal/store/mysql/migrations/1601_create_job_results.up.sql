/* rowq:migrate.create_job_results */
-- The results workers reported with POST /job/{id}/complete, kept for an
-- hour so that the same completion sent again answers 200 and another
-- result for the same delivery answers 409.
CREATE TABLE job_results (
    job_id     BIGINT      NOT NULL,
    grabs      INT         NOT NULL,
    status     VARCHAR(32) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    PRIMARY KEY (job_id, grabs),
    KEY job_results_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
