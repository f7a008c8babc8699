-- Queues by leader and last change: the leadership cycle reads only the
-- queues it leads whose settings changed since its last read (QueuesLed
-- with Since). It serves the reads by leader alone as well.
CREATE INDEX queues_leader_updated ON queues (leader, updated_at);
DROP INDEX queues_leader;
