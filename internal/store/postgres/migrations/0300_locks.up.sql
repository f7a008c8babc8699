-- One row per lock name, never deleted: last_token is the last fencing
-- token handed out for the name, so tokens keep growing across expiry,
-- release and restarts.
CREATE TABLE locks (
    name       text COLLATE "C" NOT NULL PRIMARY KEY,
    last_token bigint           NOT NULL,
    created_at timestamptz      NOT NULL
);

-- One row per holder; a row whose expires_at has passed is free and is
-- deleted by the next acquire of the name. lim is the number of
-- simultaneous holders the holder accepted (1 for a plain lock).
CREATE TABLE lock_holders (
    name        text COLLATE "C" NOT NULL,
    owner       text COLLATE "C" NOT NULL,
    token       bigint           NOT NULL,
    lim         integer          NOT NULL,
    acquired_at timestamptz      NOT NULL,
    expires_at  timestamptz      NOT NULL,
    PRIMARY KEY (name, owner)
);
