-- Names and node ids use the "C" collation: compared and ordered byte by
-- byte, as in the other dialects, whatever the database's locale.

CREATE TABLE queues (
    name                      text COLLATE "C" NOT NULL PRIMARY KEY,
    polling_interval          integer          NOT NULL,
    max_workers               integer          NOT NULL,
    max_dispatches_per_second double precision,
    max_burst_size            integer,
    leader                    text COLLATE "C",
    created_at                timestamptz      NOT NULL,
    updated_at                timestamptz      NOT NULL
);

CREATE INDEX queues_leader ON queues (leader);

CREATE TABLE nodes (
    id         text COLLATE "C" NOT NULL PRIMARY KEY,
    host       text             NOT NULL,
    started_at timestamptz      NOT NULL,
    expires_at timestamptz      NOT NULL
);

CREATE TABLE routings (
    job_category text COLLATE "C" NOT NULL PRIMARY KEY,
    queue_name   text COLLATE "C" NOT NULL,
    created_at   timestamptz      NOT NULL,
    updated_at   timestamptz      NOT NULL
);

-- payload is text, not jsonb: it is stored and returned byte for byte.
CREATE TABLE jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_name    text COLLATE "C" NOT NULL,
    category      text COLLATE "C" NOT NULL,
    url           text             NOT NULL,
    payload       text,
    state         text             NOT NULL CHECK (state IN ('waiting', 'grabbed')),
    created_at    timestamptz      NOT NULL,
    next_try      timestamptz      NOT NULL,
    timeout       integer          NOT NULL,
    max_retries   integer          NOT NULL,
    retry_delay   integer          NOT NULL,
    fail_count    integer          NOT NULL DEFAULT 0,
    grabbed_by    text COLLATE "C",
    grabbed_until timestamptz
);

-- The fetch walks this index: WHERE queue_name = $1 AND state = 'waiting'
-- AND next_try <= now() ORDER BY next_try, id LIMIT n, with no sort.
CREATE INDEX jobs_fetch ON jobs (queue_name, state, next_try, id);

CREATE TABLE failed_jobs (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     bigint           NOT NULL,
    queue_name text COLLATE "C" NOT NULL,
    category   text COLLATE "C" NOT NULL,
    url        text             NOT NULL,
    payload    text,
    status     text             NOT NULL,
    code       integer          NOT NULL,
    message    text             NOT NULL,
    fail_count integer          NOT NULL,
    failed_at  timestamptz      NOT NULL,
    created_at timestamptz      NOT NULL
);

CREATE INDEX failed_jobs_queue ON failed_jobs (queue_name, id);
