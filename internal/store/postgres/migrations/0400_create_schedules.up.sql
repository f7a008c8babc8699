CREATE TABLE schedules (
    name        text COLLATE "C" NOT NULL PRIMARY KEY,
    cron        text             NOT NULL,
    timezone    text             NOT NULL,
    category    text COLLATE "C" NOT NULL,
    url         text             NOT NULL,
    payload     text,
    max_retries integer          NOT NULL,
    retry_delay integer          NOT NULL,
    timeout     integer          NOT NULL,
    misfire     text             NOT NULL,
    max_catchup integer          NOT NULL,
    overlap     text             NOT NULL,
    paused      boolean          NOT NULL,
    next_run_at timestamptz      NOT NULL,
    created_at  timestamptz      NOT NULL,
    updated_at  timestamptz      NOT NULL
);

-- The loop of every node walks this index: WHERE NOT paused AND
-- next_run_at <= $1 ORDER BY next_run_at.
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE NOT paused;

-- The run history; its unique key (schedule_name, kind, tick) is the
-- exactly-once key of a tick, besides the compare-and-set on next_run_at.
CREATE TABLE schedule_runs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_name text COLLATE "C" NOT NULL,
    kind          text             NOT NULL,
    tick          timestamptz      NOT NULL,
    fired_at      timestamptz      NOT NULL,
    node          text             NOT NULL,
    job_id        bigint,
    queue_name    text COLLATE "C",
    reason        text             NOT NULL,
    UNIQUE (schedule_name, kind, tick)
);

CREATE INDEX schedule_runs_history ON schedule_runs (schedule_name, id);
