/* rowq:migrate.create_queues */
-- Times are DATETIME(6) in UTC (every session runs with time_zone '+00:00').
-- Names are case-sensitive: utf8mb4_bin.
CREATE TABLE queues (
    name                      VARCHAR(255) NOT NULL,
    polling_interval          INT          NOT NULL,
    max_workers               INT          NOT NULL,
    max_dispatches_per_second DOUBLE       NULL,
    max_burst_size            INT          NULL,
    leader                    VARCHAR(255) NULL,
    created_at                DATETIME(6)  NOT NULL,
    updated_at                DATETIME(6)  NOT NULL,
    PRIMARY KEY (name),
    KEY queues_leader (leader)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
