/* rowq:migrate.create_lock_holders */
-- One row per holder of a lock; a row whose expires_at has passed is free
-- and is deleted by the next acquire of the name. lim is the number of
-- simultaneous holders the holder accepted (1 for a plain lock).
CREATE TABLE lock_holders (
    name        VARCHAR(255) NOT NULL,
    owner       VARCHAR(255) NOT NULL,
    token       BIGINT       NOT NULL,
    lim         INT          NOT NULL,
    acquired_at DATETIME(6)  NOT NULL,
    expires_at  DATETIME(6)  NOT NULL,
    PRIMARY KEY (name, owner)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
