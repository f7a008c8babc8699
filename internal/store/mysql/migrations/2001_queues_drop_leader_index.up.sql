-- queues_leader_updated (2000) serves every read by leader.
DROP INDEX queues_leader ON queues;
