-- Pull queues (docs/workers.md): 'push' POSTs each job to its url, 'pull'
-- hands jobs to workers that ask for them (POST /queue/{name}/lease).
ALTER TABLE queues ADD COLUMN delivery TEXT NOT NULL DEFAULT 'push';
