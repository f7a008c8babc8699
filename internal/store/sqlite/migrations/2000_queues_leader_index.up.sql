-- Queues by leader: how many each node leads (NodesLive), and the queues
-- a node leads (QueuesLed), without a scan of every queue.
CREATE INDEX queues_leader ON queues (leader);
