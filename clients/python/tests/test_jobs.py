"""Queues, routings, jobs and the failure log, against a live rowq server."""

from __future__ import annotations

import base64
import threading
import unittest
from typing import Tuple

import rowq
from support import Answer, Delivery, Worker, client, eventually, unique


class JobsTest(unittest.TestCase):
    c: rowq.Client
    worker: Worker
    # A delivery to /slow/... waits for this; the other tests never block on it.
    slow = threading.Event()

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()

        def answer(d: Delivery) -> Answer:
            if d.path.startswith("/fail/"):
                return 200, {"status": "permanent-failure", "message": "no such user"}
            if d.path.startswith("/slow/"):
                cls.slow.wait(10)
            return 200, {"status": "success"}

        cls.worker = Worker(answer)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.slow.set()
        cls.worker.close()

    def queue_with_routing(self) -> Tuple[str, str]:
        """A new queue and a category routed to it, both removed after the test."""
        q, cat = unique("py-q"), unique("py-cat")
        self.c.put_queue(q, polling_interval=100)
        self.addCleanup(self.c.delete_queue, q)
        self.c.put_routing(cat, q)
        self.addCleanup(self.c.delete_routing, cat)
        return q, cat

    def test_queue_and_routing(self) -> None:
        c, q, cat = self.c, unique("py-q"), unique("py-cat")
        put = c.put_queue(q, polling_interval=250, max_workers=3, max_dispatches_per_second=50, max_burst_size=7)
        self.assertEqual(put, rowq.Queue(q, 250, 3, 50.0, 7, False))
        self.assertEqual(c.queue(q), put)
        self.assertIn(put, c.queues())
        self.assertTrue(c.put_queue(q, max_workers=3, paused=True).paused)
        self.assertFalse(c.resume_queue(q).paused)
        self.assertTrue(c.pause_queue(q).paused)
        self.assertTrue(c.put_queue(q, max_workers=4).paused, "a put without paused keeps the pause")
        self.assertFalse(c.resume_queue(q).paused)

        self.assertEqual(c.put_routing(cat, q), rowq.Routing(cat, q))
        self.assertEqual(c.routing(cat), rowq.Routing(cat, q))
        self.assertIn(rowq.Routing(cat, q), c.routings())

        def led() -> bool:
            try:
                return c.queue_node(q).id != ""
            except rowq.NotFound:
                return False

        eventually(self, led, f"a node leads queue {q}")

        c.enqueue(cat, self.worker.url + "/ok/" + q, run_after=3600)
        stats = c.queue_stats(q)
        self.assertEqual(stats.total_pushes, 1)
        self.assertEqual(stats.outstanding_jobs, 1)
        self.assertEqual(stats.total_workers, 4)
        self.assertEqual(c.all_queue_stats()[q].total_pushes, 1)

        self.assertEqual(c.delete_routing(cat), rowq.Routing(cat, q))
        with self.assertRaises(rowq.NotFound):
            c.routing(cat)
        self.assertEqual(c.delete_queue(q).name, q)
        with self.assertRaises(rowq.NotFound):
            c.queue(q)

    def test_enqueue_delivers_the_payload(self) -> None:
        q, cat = self.queue_with_routing()
        payload = {"to": "ada@example.com", "n": [1, 2.5, None, True], "s": "ünï"}
        job = self.c.enqueue(
            cat,
            self.worker.url + "/ok/" + q,
            payload,
            max_retries=2,
            retry_delay=1,
            timeout=5,
            priority=3,
            retry_backoff="exponential",
            retry_delay_max=10,
            retry_jitter=0.1,
        )
        self.assertGreater(job.id, 0)
        self.assertEqual(
            (job.queue_name, job.category, job.payload, job.max_retries, job.retry_delay, job.timeout),
            (q, cat, payload, 2, 1, 5),
        )
        self.assertEqual((job.priority, job.retry_backoff, job.retry_delay_max, job.retry_jitter), (3, "exponential", 10, 0.1))
        self.assertIsNone(job.existing)

        [d] = self.worker.wait_for("/ok/" + q, 1)
        self.assertEqual(d.json(), payload)
        self.assertEqual(d.headers["content-type"], "application/json")
        eventually(self, lambda: self.c.queue_stats(q).total_successes == 1, "the delivery counted as a success")

    def test_enqueue_unique_key_returns_the_pending_job(self) -> None:
        q, cat = self.queue_with_routing()
        url = self.worker.url + "/ok/" + q
        first = self.c.enqueue(cat, url, {"n": 1}, unique_key="invoice-42", run_after=3600)
        again = self.c.enqueue(cat, url, {"n": 2}, unique_key="invoice-42", run_after=3600)
        self.assertEqual((first.existing, first.unique_key), (False, "invoice-42"))
        self.assertEqual((again.existing, again.id, again.payload), (True, first.id, {"n": 1}))

    def test_enqueue_concurrency_key(self) -> None:
        q, cat = self.queue_with_routing()
        url = self.worker.url + "/ok/" + q
        job = self.c.enqueue(cat, url, {"n": 1}, concurrency_key="tenant-7", ordered=True, run_after=3600)
        self.assertEqual((job.concurrency_key, job.concurrency_limit, job.ordered), ("tenant-7", 1, True))
        got = self.c.job(q, job.id)
        self.assertEqual((got.concurrency_key, got.concurrency_limit, got.ordered), ("tenant-7", 1, True))
        [many] = self.c.enqueue_many([rowq.NewJob(cat, url, {"n": 2}, run_after=3600, concurrency_key="tenant-7", concurrency_limit=2)])
        self.assertEqual((many.concurrency_key, many.concurrency_limit, many.ordered), ("tenant-7", 2, None))
        with self.assertRaises(rowq.RowqError) as e:
            self.c.enqueue(cat, url, None, concurrency_limit=2)
        self.assertEqual(e.exception.status, 400)
        self.assertTrue(e.exception.message.startswith("concurrency_limit:"), e.exception.message)

    def test_enqueue_many_delivers_each(self) -> None:
        q, cat = self.queue_with_routing()
        url = self.worker.url + "/ok/" + q
        jobs = self.c.enqueue_many(
            [
                rowq.NewJob(cat, url, {"i": 0}, priority=5),
                {"category": cat, "url": url, "payload": {"i": 1}},
                rowq.NewJob(cat, url, "plain text"),
            ]
        )
        self.assertEqual([j.payload for j in jobs], [{"i": 0}, {"i": 1}, "plain text"])
        self.assertEqual([j.queue_name for j in jobs], [q] * 3)
        self.assertEqual(jobs[0].priority, 5)
        self.assertEqual(len({j.id for j in jobs}), 3)
        # A JSON string payload goes to the worker as its raw text.
        got = [d.json() if d.body.startswith(b"{") else d.body.decode() for d in self.worker.wait_for("/ok/" + q, 3)]
        self.assertEqual(sorted(got, key=str), sorted([{"i": 0}, {"i": 1}, "plain text"], key=str))

    def test_trace_context_reaches_the_worker(self) -> None:
        q, cat = self.queue_with_routing()
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        self.c.enqueue(cat, self.worker.url + "/traced/" + q, {"n": 1}, traceparent=parent, tracestate="rojo=1")
        self.c.enqueue_many([rowq.NewJob(cat, self.worker.url + "/traced/" + q, {"n": 2}, traceparent=parent)])
        got = sorted((d.json()["n"], d.headers.get("traceparent"), d.headers.get("tracestate")) for d in self.worker.wait_for("/traced/" + q, 2))
        self.assertEqual(got, [(1, parent, "rojo=1"), (2, parent, None)])
        deferred = self.c.enqueue(cat, self.worker.url + "/traced/" + q, traceparent=parent, tracestate="rojo=1", run_after=3600)
        job = self.c.job(q, deferred.id)
        self.assertEqual((job.traceparent, job.tracestate), (parent, "rojo=1"))
        with self.assertRaises(rowq.RowqError) as e:
            self.c.enqueue(cat, self.worker.url + "/traced/" + q, traceparent="00-not-a-trace")
        self.assertEqual(e.exception.status, 400)
        self.assertIn("traceparent", str(e.exception))

    def test_nodes(self) -> None:
        self.queue_with_routing()
        eventually(self, lambda: any(n.queues > 0 for n in self.c.nodes().nodes), "a node dispatches a queue")
        nodes = self.c.nodes()
        self.assertGreaterEqual(len(nodes.nodes), 1)
        self.assertGreaterEqual(nodes.queues, 1)
        n = nodes.nodes[0]
        self.assertNotEqual((n.id, n.host), ("", ""))
        self.assertGreater(n.expires_at, n.started_at)
        self.assertLessEqual(sum(x.queues for x in nodes.nodes), nodes.queues)

    def test_deferred_jobs_page_by_page(self) -> None:
        q, cat = self.queue_with_routing()
        url = self.worker.url + "/ok/" + q
        ids = [self.c.enqueue(cat, url, {"i": i}, run_after=3600 + i).id for i in range(3)]

        page = self.c.jobs_page(q, rowq.DEFERRED, limit=1, order="asc")
        self.assertEqual([j.id for j in page.items], ids[:1])
        self.assertIsNotNone(page.next_cursor)
        assert page.next_cursor is not None
        page2 = self.c.jobs_page(q, rowq.DEFERRED, limit=1, order="asc", cursor=page.next_cursor)
        self.assertEqual([j.id for j in page2.items], ids[1:2])
        self.assertEqual([j.id for j in self.c.jobs(q, rowq.DEFERRED, limit=1, order="asc")], ids)
        self.assertEqual([j.id for j in self.c.jobs(q, rowq.DEFERRED, limit=2)], ids[::-1])
        self.assertEqual(list(self.c.jobs(q, rowq.WAITING)), [])

        job = self.c.job(q, ids[1])
        self.assertEqual((job.id, job.status, job.payload, job.queue_name, job.category), (ids[1], "claimed", {"i": 1}, q, cat))
        self.assertGreater(job.next_try, job.created_at)
        self.assertEqual(self.c.delete_job(q, ids[1]).id, ids[1])
        with self.assertRaises(rowq.NotFound):
            self.c.job(q, ids[1])
        self.assertEqual([j.id for j in self.c.jobs(q, rowq.DEFERRED, limit=1, order="asc")], [ids[0], ids[2]])

    def test_waiting_while_paused(self) -> None:
        q, cat = self.queue_with_routing()
        self.c.pause_queue(q)
        job = self.c.enqueue(cat, self.worker.url + "/ok/" + q, {"paused": True})
        # A grab that began before the pause may hold the job a moment; the
        # node then gives it back to waiting, undelivered.
        eventually(self, lambda: [j.id for j in self.c.jobs(q, rowq.WAITING)] == [job.id], "the job waiting while paused")
        [waiting] = list(self.c.jobs(q, rowq.WAITING))
        self.assertEqual((waiting.id, waiting.status), (job.id, "claimed"))
        self.assertEqual(self.worker.received("/ok/" + q), [], "delivered while paused")
        self.c.resume_queue(q)
        [d] = self.worker.wait_for("/ok/" + q, 1)
        self.assertEqual(d.json(), {"paused": True})

    def test_grabbed_while_delivering(self) -> None:
        q, cat = self.queue_with_routing()
        job = self.c.enqueue(cat, self.worker.url + "/slow/" + q, {"slow": 1})
        self.worker.wait_for("/slow/" + q, 1)
        [grabbed] = list(self.c.jobs(q, rowq.GRABBED))
        self.assertEqual((grabbed.id, grabbed.status), (job.id, "grabbed"))
        self.assertTrue(grabbed.grabbed_by)
        self.assertIsNotNone(grabbed.grabbed_until)
        self.slow.set()

        def gone() -> bool:
            try:
                self.c.job(q, job.id)
                return False
            except rowq.NotFound:
                return True

        eventually(self, gone, "the delivered job is removed")

    def test_failure_log(self) -> None:
        q, cat = self.queue_with_routing()
        url = self.worker.url + "/fail/" + q
        jobs = [self.c.enqueue(cat, url, {"user": i}) for i in range(2)]

        def failed(n: int) -> None:
            eventually(self, lambda: len(list(self.c.failed_jobs(q))) == n, f"{n} entries in the failure log")

        failed(2)
        entries = list(self.c.failed_jobs(q, limit=1, order="created"))
        self.assertEqual([e.job_id for e in entries], [j.id for j in reversed(jobs)])
        self.assertEqual(entries[0].result, rowq.FailedResult("permanent-failure", 200, "no such user"))
        self.assertEqual((entries[0].payload, entries[0].queue_name, entries[0].fail_count), ({"user": 1}, q, 1))
        self.assertEqual(self.c.failed_job(q, entries[1].id), entries[1])
        page = self.c.failed_jobs_page(q, limit=1)
        self.assertEqual(len(page.items), 1)
        self.assertIsNotNone(page.next_cursor)

        retried = self.c.retry_failed_job(q, entries[0].id)
        self.assertEqual((retried.id, retried.payload), (entries[0].job_id, {"user": 1}))
        self.worker.wait_for("/fail/" + q, 3)  # delivered again, and failed again
        failed(2)
        self.assertEqual(self.c.retry_failed_jobs(q, [e.id for e in self.c.failed_jobs(q)][:1]), 1)
        self.worker.wait_for("/fail/" + q, 4)
        failed(2)
        self.assertEqual(self.c.retry_failed_jobs(q), 2)
        self.worker.wait_for("/fail/" + q, 6)
        failed(2)

        first = next(self.c.failed_jobs(q))
        self.assertEqual(self.c.delete_failed_job(q, first.id), first)
        with self.assertRaises(rowq.NotFound):
            self.c.failed_job(q, first.id)
        self.assertEqual(self.c.delete_failed_jobs(q, [first.id]), 0)
        self.assertEqual(self.c.delete_failed_jobs(q), 1)
        self.assertEqual(list(self.c.failed_jobs(q)), [])
        eventually(self, lambda: self.c.queue_stats(q).total_permanent_failures == 6, "6 permanent failures counted")

    def test_errors_name_the_field(self) -> None:
        q, cat = self.queue_with_routing()
        with self.assertRaises(rowq.RowqError) as e:
            self.c.enqueue(cat, self.worker.url, max_retries=-1)
        self.assertEqual(e.exception.status, 400)
        self.assertTrue(e.exception.message.startswith("max_retries:"), e.exception.message)
        self.assertEqual(e.exception.body, {"error": e.exception.message})

        with self.assertRaises(rowq.RowqError) as e:
            self.c.put_queue(q, max_workers=0)
        self.assertEqual(e.exception.status, 400)
        self.assertTrue(e.exception.message.startswith("max_workers:"), e.exception.message)

        with self.assertRaises(rowq.RowqError) as e:
            self.c.enqueue_many([rowq.NewJob(cat, self.worker.url), {"category": cat}])
        self.assertEqual(e.exception.status, 400)
        self.assertTrue(e.exception.message.startswith("jobs[1].url:"), e.exception.message)

        with self.assertRaises(rowq.NotFound) as nf:
            self.c.job(unique("py-missing"), 1)
        self.assertEqual(nf.exception.status, 404)
        self.assertIn("does not exist", nf.exception.message)

        with self.assertRaises(rowq.RowqError) as e:
            rowq.Client("http://127.0.0.1:1", timeout=2).version()
        self.assertEqual(e.exception.status, 0)


class AuthTest(unittest.TestCase):
    """What the client sends to authenticate, as a server receives it."""

    worker: Worker

    @classmethod
    def setUpClass(cls) -> None:
        cls.worker = Worker(lambda d: (200, {"version": "probe"}))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.worker.close()

    def test_token_is_a_bearer(self) -> None:
        self.assertEqual(rowq.Client(self.worker.url + "/bearer", token="s3cret").version(), "probe")
        [d] = self.worker.wait_for("/bearer/version", 1)
        self.assertEqual(d.headers["authorization"], "Bearer s3cret")

    def test_url_userinfo_is_basic(self) -> None:
        url = self.worker.url.replace("http://", "http://ops:s%3Acret@") + "/basic"
        c = rowq.Client(url)
        self.assertEqual(c.base_url, self.worker.url + "/basic")
        c.version()
        [d] = self.worker.wait_for("/basic/version", 1)
        self.assertEqual(d.headers["authorization"], "Basic " + base64.b64encode(b"ops:s:cret").decode())

    def test_no_credentials_no_header(self) -> None:
        rowq.Client(self.worker.url + "/none").version()
        [d] = self.worker.wait_for("/none/version", 1)
        self.assertNotIn("authorization", d.headers)


if __name__ == "__main__":
    unittest.main()
