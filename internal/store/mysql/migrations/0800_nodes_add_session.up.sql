/* rowq:migrate.nodes_add_session */
-- has_session: the node holds a session lock (GET_LOCK on a connection of its
-- own), so NodesReap deletes its row as soon as the server frees that lock.
ALTER TABLE nodes ADD COLUMN has_session BOOLEAN NOT NULL DEFAULT FALSE
