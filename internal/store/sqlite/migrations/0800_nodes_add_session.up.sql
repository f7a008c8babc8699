-- has_session: the node holds an flock on its file beside the database, so
-- NodesReap deletes its row as soon as the process that held it is gone.
ALTER TABLE nodes ADD COLUMN has_session INTEGER NOT NULL DEFAULT 0;
