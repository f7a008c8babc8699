/* rowq:migrate.queues_add_paused */
ALTER TABLE queues ADD COLUMN paused BOOLEAN NOT NULL DEFAULT FALSE
