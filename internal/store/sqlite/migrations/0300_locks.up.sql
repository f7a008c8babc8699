-- One row per lock name, never deleted: last_token is the last fencing
-- token handed out for the name, so tokens keep growing across expiry,
-- release and restarts. Times are INTEGER microseconds since the epoch.
CREATE TABLE locks (
    name       TEXT    NOT NULL PRIMARY KEY,
    last_token INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);

-- One row per holder; a row whose expires_at has passed is free and is
-- deleted by the next acquire of the name. lim is the number of
-- simultaneous holders the holder accepted (1 for a plain lock).
CREATE TABLE lock_holders (
    name        TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    token       INTEGER NOT NULL,
    lim         INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (name, owner)
);
