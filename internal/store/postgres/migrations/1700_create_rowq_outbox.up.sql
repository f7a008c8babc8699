-- The transactional outbox (docs/outbox.md): applications INSERT rows in
-- their own transactions, and the node that moves the outbox turns the
-- committed ones into jobs. Its columns are a public contract: later
-- migrations may only add nullable columns. NULL takes the default of
-- POST /job. The id is an identity column: a role granted INSERT on the
-- table needs no grant on its sequence.
CREATE TABLE rowq_outbox (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    category    text COLLATE "C" NOT NULL,
    url         text,
    payload     text,
    run_after   integer,
    max_retries integer,
    retry_delay integer,
    timeout     integer,
    priority    integer,
    unique_key  text COLLATE "C",
    created_at  timestamptz      NOT NULL DEFAULT now()
);

-- Outbox rows that are not valid jobs, as they were (outbox_id is their
-- id in rowq_outbox), and why.
CREATE TABLE rowq_outbox_rejects (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outbox_id   bigint           NOT NULL,
    category    text COLLATE "C" NOT NULL,
    url         text,
    payload     text,
    run_after   integer,
    max_retries integer,
    retry_delay integer,
    timeout     integer,
    priority    integer,
    unique_key  text COLLATE "C",
    created_at  timestamptz      NOT NULL,
    reason      text             NOT NULL,
    rejected_at timestamptz      NOT NULL
);

-- Wakes the moving node (LISTEN rowq_outbox) when a transaction that
-- inserted into the outbox commits: once per statement, and PostgreSQL
-- folds a transaction's identical notifications into one.
CREATE FUNCTION rowq_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rowq_outbox', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER rowq_outbox_notify AFTER INSERT ON rowq_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION rowq_outbox_notify();
