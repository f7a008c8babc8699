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

-- Whether the moving node waits for a notification (it found the outbox
-- empty for a while): only then does a commit that inserted into the
-- outbox notify it. A NOTIFY serializes the commits of every notifying
-- transaction on one server-wide lock (measured: 16 inserting clients went
-- from about 400 commits a second with a NOTIFY in each to thousands
-- without), so the applications' transactions pay it only while the
-- outbox is idle; under load the mover probes.
CREATE TABLE rowq_outbox_listener (
    id      smallint PRIMARY KEY CHECK (id = 1),
    waiting boolean  NOT NULL
);

INSERT INTO rowq_outbox_listener (id, waiting) VALUES (1, false);

-- Wakes the moving node (LISTEN rowq_outbox) when a transaction that
-- inserted into the outbox commits while the mover waits. A deferred
-- constraint trigger runs at the commit, so it reads the mover's state of
-- that moment, not of the insert's; PostgreSQL folds a transaction's
-- identical notifications into one. SECURITY DEFINER: an application's
-- role that may only INSERT into rowq_outbox cannot read the listener row.
CREATE FUNCTION rowq_outbox_notify() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM rowq_outbox_listener WHERE waiting) THEN
        PERFORM pg_notify('rowq_outbox', '');
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER rowq_outbox_notify AFTER INSERT ON rowq_outbox
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION rowq_outbox_notify();
