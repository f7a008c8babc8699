/* rowq:migrate.create_job_flows */
-- The flow of a job: its batch, its callbacks (store.EncodeCallback, NULL
-- for none), how many parents it still waits for, and what it does when a
-- parent fails. Deleted when the job ends (FlowForget).
CREATE TABLE job_flows (
    job_id            BIGINT     NOT NULL,
    batch_id          BIGINT     NULL,
    on_success        MEDIUMTEXT NULL,
    on_failure        MEDIUMTEXT NULL,
    on_finish         MEDIUMTEXT NULL,
    pending           INT        NOT NULL DEFAULT 0,
    on_parent_failure VARCHAR(8) NOT NULL DEFAULT 'cancel',
    PRIMARY KEY (job_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
