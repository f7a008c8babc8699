/* rowq:migrate.queues_add_delivery */
-- Pull queues (docs/workers.md): 'push' POSTs each job to its url, 'pull'
-- hands jobs to workers that ask for them (POST /queue/{name}/lease).
ALTER TABLE queues ADD COLUMN delivery VARCHAR(8) NOT NULL DEFAULT 'push'
