"""Accepted jobs (heartbeat, complete) and cancellation, against a live rowq server."""

from __future__ import annotations

import unittest
from typing import Tuple

import rowq
from support import Answer, Delivery, Worker, client, eventually, unique


class LeasesTest(unittest.TestCase):
    c: rowq.Client
    worker: Worker

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()

        def answer(d: Delivery) -> Answer:
            return 202, {"status": "accepted", "lease": 300}

        cls.worker = Worker(answer)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.worker.close()

    def leased(self, q: str, cat: str, name: str) -> Tuple[int, str]:
        """Enqueues a job the worker accepts, and returns its id and lease token
        once the acceptance is recorded."""
        path = f"/{name}/{q}"
        pushed = self.c.enqueue(cat, self.worker.url + path)
        token = self.worker.wait_for(path, 1)[0].headers["rowq-lease-token"]
        eventually(self, lambda: self.c.job(q, pushed.id).status == "leased", f"job {pushed.id} leased")
        return pushed.id, token

    def test_heartbeat_complete_cancel(self) -> None:
        c, q, cat = self.c, unique("py-q"), unique("py-cat")
        c.put_queue(q, polling_interval=100)
        self.addCleanup(c.delete_queue, q)
        c.put_routing(cat, q)
        self.addCleanup(c.delete_routing, cat)

        id, token = self.leased(q, cat, "done")
        lease = c.heartbeat(id, token, 600, progress=0.25, message="a quarter")
        self.assertEqual(lease.id, id)
        job = c.job(q, id)
        self.assertEqual((job.status, job.progress, job.message), ("leased", 0.25, "a quarter"))
        c.complete(id, token, "success")
        c.complete(id, token, "success")  # the same completion again
        with self.assertRaises(rowq.LeaseConflict) as cm:
            c.complete(id, token, "failure", retry_after=5)
        self.assertEqual(cm.exception.reason, "completed")
        with self.assertRaises(rowq.NotFound):
            c.job(q, id)

        id, token = self.leased(q, cat, "cancel")
        self.assertEqual(c.cancel_job(q, id).status, "leased")
        with self.assertRaises(rowq.LeaseConflict) as cm:
            c.heartbeat(id, token, 60)
        self.assertEqual(cm.exception.reason, "cancelled")
        self.assertIsInstance(cm.exception, rowq.Conflict)
        with self.assertRaises(rowq.NotFound):
            c.cancel_job(q, id)
        eventually(self, lambda: c.queue_stats(q).total_cancels == 1, "the cancel counted")

    def test_heartbeat_errors_name_the_field(self) -> None:
        with self.assertRaises(rowq.RowqError) as cm:
            self.c.heartbeat(1, "1.AAAAAAAAAAAAAAAAAAAAAA", 0)
        self.assertEqual(cm.exception.status, 400)
        self.assertIn("lease", cm.exception.message)


if __name__ == "__main__":
    unittest.main()
