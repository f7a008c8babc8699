"""Pull queues (lease, heartbeat, complete) and the pull worker loop, against a live rowq server."""

from __future__ import annotations

import threading
import time
import unittest
from typing import Dict, List

import rowq
from support import client, eventually, unique


class CutMessageTest(unittest.TestCase):
    def test_fits_the_server(self) -> None:
        for message in ["boom", "é" * 5000, "x" * 3999 + "é", "bad \udcff name" * 500]:
            cut = rowq.worker.cut_message(message)
            self.assertLessEqual(len(cut.encode()), 4096, message[:20])
            if len(message.encode(errors="replace")) <= rowq.worker.MAX_MESSAGE:
                self.assertEqual(cut, message.replace("\udcff", "?"))


class PullTest(unittest.TestCase):
    c: rowq.Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()

    def pull_queue(self, max_workers: int = 10) -> tuple[str, str]:
        c, q, cat = self.c, unique("py-pull"), unique("py-cat")
        made = c.put_queue(q, delivery="pull", max_workers=max_workers, polling_interval=100)
        self.assertEqual(made.delivery, "pull")
        self.addCleanup(c.delete_queue, q)
        c.put_routing(cat, q)
        self.addCleanup(c.delete_routing, cat)
        return q, cat

    def test_lease_heartbeat_complete(self) -> None:
        c = self.c
        q, cat = self.pull_queue()
        pushed = c.enqueue(cat, None, {"n": 1}, max_retries=2)
        jobs = c.lease(q, max=5, wait=5, lease=60)
        self.assertEqual([j.id for j in jobs], [pushed.id])
        job = jobs[0]
        self.assertEqual((job.payload, job.attempt, job.category, job.queue_name), ({"n": 1}, 1, cat, q))
        self.assertEqual(c.job(q, job.id).status, "leased")
        lease = c.heartbeat(job.id, job.lease_token, 600, progress=0.5)
        self.assertEqual(lease.id, job.id)
        c.complete(job.id, job.lease_token, "success")
        with self.assertRaises(rowq.NotFound):
            c.job(q, job.id)

        began = time.monotonic()
        self.assertEqual(c.lease(q, wait=0.5), [])
        self.assertGreaterEqual(time.monotonic() - began, 0.4)
        with self.assertRaises(rowq.RowqError) as cm:
            c.lease(q, max=101)
        self.assertEqual(cm.exception.status, 400)
        self.assertTrue(cm.exception.message.startswith("max:"), cm.exception.message)

        push_q = unique("py-push")
        c.put_queue(push_q)
        self.addCleanup(c.delete_queue, push_q)
        with self.assertRaises(rowq.Conflict) as cc:
            c.lease(push_q)
        self.assertTrue(cc.exception.message.startswith("delivery:"), cc.exception.message)

    def test_work(self) -> None:
        c = self.c
        q, cat = self.pull_queue(max_workers=3)
        ids: Dict[str, int] = {}
        for name, retries in [("a", 0), ("b", 0), ("c", 0), ("flaky", 1), ("bad", 3)]:
            ids[name] = c.enqueue(cat, None, name, max_retries=retries).id
        seen: List[tuple[int, int]] = []
        lock = threading.Lock()

        def handle(job: rowq.LeasedJob) -> None:
            with lock:
                seen.append((job.id, job.attempt))
            if job.payload == "flaky" and job.attempt == 1:
                raise ValueError("try again")
            if job.payload == "bad":
                raise rowq.PermanentFailure("bad input")

        stop = threading.Event()
        runner = threading.Thread(target=c.work, args=(q, handle), kwargs={"concurrency": 3, "wait": 1, "stop": stop})
        runner.start()
        try:

            def done() -> bool:
                s = c.queue_stats(q)
                return (s.total_successes, s.total_failures, s.total_permanent_failures) == (4, 2, 1)

            eventually(self, done, "4 successes, 2 failures (1 permanent)", timeout=30)
        finally:
            stop.set()
            runner.join(15)
        self.assertFalse(runner.is_alive(), "work did not stop")
        self.assertIn((ids["flaky"], 2), seen)
        failed = list(c.failed_jobs(q))
        self.assertEqual([(f.job_id, f.result.status, f.result.message) for f in failed], [(ids["bad"], "permanent-failure", "bad input")])

    def test_work_stops_when_refused(self) -> None:
        # A queue that does not exist, or a push queue: asking again would
        # not mend it, so work raises the server's answer instead of
        # retrying forever.
        push_q = unique("py-push")
        self.c.put_queue(push_q)
        self.addCleanup(self.c.delete_queue, push_q)
        for queue, status in [(unique("py-nosuch"), 404), (push_q, 409)]:
            with self.assertRaises(rowq.RowqError) as cm:
                self.c.work(queue, lambda job: None, wait=1)
            self.assertEqual(cm.exception.status, status)


if __name__ == "__main__":
    unittest.main()
