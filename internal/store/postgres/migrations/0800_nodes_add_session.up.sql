-- has_session: the node holds a session-level advisory lock, so NodesReap deletes
-- its row as soon as its backend ends.
ALTER TABLE nodes ADD COLUMN has_session boolean NOT NULL DEFAULT false;
