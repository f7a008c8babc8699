"""Schedules, against a live rowq server."""

from __future__ import annotations

import unittest
from datetime import timedelta

import rowq
from support import Worker, client, unique


class SchedulesTest(unittest.TestCase):
    c: rowq.Client
    worker: Worker

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()
        cls.worker = Worker()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.worker.close()

    def setUp(self) -> None:
        self.q, self.cat = unique("py-q"), unique("py-cat")
        self.c.put_queue(self.q, polling_interval=100)
        self.addCleanup(self.c.delete_queue, self.q)
        self.c.put_routing(self.cat, self.q)
        self.addCleanup(self.c.delete_routing, self.cat)

    def test_put_trigger_runs_pause_resume_delete(self) -> None:
        c, prefix = self.c, unique("py-sched")
        name, url = prefix + "-a", self.worker.url + "/sched/" + prefix
        s = c.put_schedule(
            name,
            cron="30 2 * * *",
            timezone="Europe/Berlin",
            category=self.cat,
            url=url,
            payload={"kind": "daily"},
            max_retries=1,
            misfire="skip",
            overlap="skip",
        )
        self.assertEqual(
            (s.name, s.cron, s.timezone, s.category, s.url, s.payload, s.max_retries, s.misfire, s.overlap, s.paused),
            (name, "30 2 * * *", "Europe/Berlin", self.cat, url, {"kind": "daily"}, 1, "skip", "skip", False),
        )
        self.assertEqual(len(s.next_runs), 5)
        first = s.next_runs[0]
        self.assertEqual(s.next_run_at, first.utc)
        self.assertEqual(first.local, first.utc)
        self.assertEqual((first.local.hour, first.local.minute), (2, 30))
        self.assertIn(first.local.utcoffset(), (timedelta(hours=1), timedelta(hours=2)))
        self.assertEqual(c.schedule(name), s)

        run = c.trigger_schedule(name)
        self.assertEqual((run.schedule, run.kind, run.queue_name, run.skipped), (name, "trigger", self.q, False))
        self.assertIsNotNone(run.job_id)
        [d] = self.worker.wait_for("/sched/" + prefix, 1)
        self.assertEqual(d.json(), {"kind": "daily"})
        self.assertEqual(list(c.schedule_runs(name)), [run])
        second = c.trigger_schedule(name)
        page = c.schedule_runs_page(name, limit=1)
        self.assertEqual((page.items, page.next_cursor is not None), ([second], True))
        self.assertEqual(list(c.schedule_runs(name, limit=1)), [second, run])

        paused = c.pause_schedule(name)
        self.assertTrue(paused.paused)
        self.assertIsNone(paused.next_run_at)
        self.assertEqual([r.paused for r in paused.next_runs], [True] * 5)
        resumed = c.resume_schedule(name)
        self.assertFalse(resumed.paused)
        self.assertIsNotNone(resumed.next_run_at)

        other = c.put_schedule(prefix + "-b", cron="@hourly", category=self.cat, url=url)
        self.assertEqual(other.timezone, "UTC")
        listed = [x.name for x in c.schedules(limit=1) if x.name.startswith(prefix)]
        self.assertEqual(listed, [name, prefix + "-b"])
        self.assertEqual(c.delete_schedule(prefix + "-b").name, prefix + "-b")

        self.assertEqual(c.delete_schedule(name).name, name)
        with self.assertRaises(rowq.NotFound):
            c.schedule(name)

    def test_every_second_ticks(self) -> None:
        name = unique("py-tick")
        self.c.put_schedule(name, cron="@every 1s", category=self.cat, url=self.worker.url + "/tick/" + name)
        self.addCleanup(self.c.delete_schedule, name)
        self.worker.wait_for("/tick/" + name, 1, timeout=5)
        ticks = [r for r in self.c.schedule_runs(name) if r.kind == "tick"]
        self.assertTrue(ticks and ticks[-1].job_id is not None, ticks)

    def test_a_bad_cron_names_the_field(self) -> None:
        with self.assertRaises(rowq.RowqError) as e:
            self.c.put_schedule(unique("py-sched"), cron="61 * * * *", category=self.cat, url=self.worker.url)
        self.assertEqual(e.exception.status, 400)
        self.assertTrue(e.exception.message.startswith("cron:"), e.exception.message)


if __name__ == "__main__":
    unittest.main()
