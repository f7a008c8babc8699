"""Flows against a live rowq server: dependencies, callbacks, batches."""

from __future__ import annotations

import threading
import unittest
from typing import Tuple

import rowq
from support import Answer, Delivery, Worker, client, unique


class FlowsTest(unittest.TestCase):
    c: rowq.Client
    worker: Worker
    # A delivery to /gate/... waits for this.
    gate = threading.Event()

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()

        def answer(d: Delivery) -> Answer:
            if d.path.startswith("/gate/"):
                cls.gate.wait(10)
            if d.path.startswith("/fail/"):
                return 200, {"status": "permanent-failure", "message": "no such user"}
            return 200, {"status": "success", "message": "done", "result": {"rows": 3}}

        cls.worker = Worker(answer)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.gate.set()
        cls.worker.close()

    def queue_with_routing(self) -> Tuple[str, str]:
        q, cat = unique("py-q"), unique("py-cat")
        self.c.put_queue(q, polling_interval=100)
        self.addCleanup(self.c.delete_queue, q)
        self.c.put_routing(cat, q)
        self.addCleanup(self.c.delete_routing, cat)
        return q, cat

    def test_chain_and_callback(self) -> None:
        c, w = self.c, self.worker
        q, cat = self.queue_with_routing()
        tag = unique("chain")
        jobs = c.enqueue_many(
            [
                rowq.NewJob(cat, f"{w.url}/gate/{tag}/a"),
                rowq.NewJob(cat, f"{w.url}/{tag}/b", depends_on=[{"index": 0}]),
                rowq.NewJob(
                    cat,
                    f"{w.url}/{tag}/c",
                    depends_on=[{"index": 1}],
                    on_success=rowq.NewJob(cat, f"{w.url}/{tag}/done", payload={"note": "c done"}),
                ),
            ]
        )
        self.assertEqual([j.blocked for j in jobs], [False, True, True])
        a, b, cj = (j.id for j in jobs)
        w.wait_for(f"/gate/{tag}/a", 1)
        blocked = list(c.blocked(q))
        self.assertEqual([(j.id, j.status, j.flow.waits_for if j.flow else None) for j in blocked],
                         [(b, "blocked", [a]), (cj, "blocked", [b])])
        flow = c.job(q, cj).flow
        assert flow is not None
        self.assertEqual((flow.waits_for, flow.callbacks, flow.on_parent_failure), ([b], ["on_success"], "cancel"))
        self.gate.set()
        done = w.wait_for(f"/{tag}/done", 1)[0].json()
        self.assertEqual(
            done,
            {
                "job": {"id": cj, "queue_name": q, "category": cat, "status": "succeeded", "attempts": 1,
                        "result": {"rows": 3}, "message": "done"},
                "payload": {"note": "c done"},
            },
        )
        paths = [d.path for d in w.deliveries if d.path.startswith(f"/{tag}/") or d.path.startswith(f"/gate/{tag}/")]
        self.assertEqual(paths, [f"/gate/{tag}/a", f"/{tag}/b", f"/{tag}/c", f"/{tag}/done"])

    def test_batch(self) -> None:
        c, w = self.c, self.worker
        q, cat = self.queue_with_routing()
        tag = unique("batch")
        res = c.enqueue_batch(
            [rowq.NewJob(cat, f"{w.url}/{tag}/1"), {"category": cat, "url": f"{w.url}/fail/{tag}/2"}],
            on_success=rowq.NewJob(cat, f"{w.url}/{tag}/success"),
            on_finish={"category": cat, "url": f"{w.url}/{tag}/finish", "payload": {"note": "report"}},
            meta={"campaign": tag},
        )
        self.assertEqual(len(res.jobs), 2)
        body = w.wait_for(f"/{tag}/finish", 1)[0].json()
        self.assertEqual(body["payload"], {"note": "report"})
        b = body["batch"]
        self.assertEqual((b["id"], b["total"], b["succeeded"], b["failed"], b["cancelled"], b["meta"]),
                         (res.batch_id, 2, 1, 1, 0, {"campaign": tag}))
        batch = c.batch(res.batch_id)
        self.assertEqual((batch.total, batch.pending, batch.failed, batch.meta), (2, 0, 1, {"campaign": tag}))
        self.assertIsNotNone(batch.finished_at)
        self.assertIn(res.batch_id, [x.id for x in c.batches_page(limit=1000).items])
        self.assertFalse([d for d in w.deliveries if d.path == f"/{tag}/success"], "on_success of a batch with a failure")

    def test_refusals(self) -> None:
        c, w = self.c, self.worker
        _, cat = self.queue_with_routing()
        with self.assertRaises(rowq.RowqError) as e:
            c.enqueue(cat, w.url, depends_on=[999999999])
        self.assertEqual(e.exception.status, 422)
        self.assertEqual(e.exception.message, "depends_on[0]: job 999999999 does not exist, or finished and was forgotten")
        with self.assertRaises(rowq.RowqError) as e:
            c.enqueue_many([rowq.NewJob(cat, w.url, depends_on=[{"index": 0}])])
        self.assertEqual(e.exception.status, 400)
        self.assertTrue(e.exception.message.startswith("jobs[0].depends_on[0].index: "), e.exception.message)
        with self.assertRaises(rowq.RowqError) as e:
            c.enqueue_batch([rowq.NewJob(cat, w.url, unique_key="k")])
        self.assertEqual(e.exception.message, "jobs[0].unique_key: not in a batch: a job of a batch is always a new job")
        with self.assertRaises(rowq.NotFound):
            c.batch(999999999)


if __name__ == "__main__":
    unittest.main()
