"""Locks, against a live rowq server."""

from __future__ import annotations

import threading
import time
import unittest

import rowq
from support import client, unique


class LocksTest(unittest.TestCase):
    c: rowq.Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()

    def test_acquire_renew_release(self) -> None:
        c, name = self.c, unique("py-lock")
        lease = c.acquire(name, "owner-a", 5)
        self.assertEqual((lease.name, lease.owner, lease.limit), (name, "owner-a", 1))
        self.assertGreater(lease.expires_at, lease.acquired_at)
        self.assertEqual(c.acquire(name, "owner-a", 5), lease, "acquiring again gives the same lease")

        with self.assertRaises(rowq.LockHeld) as held:
            c.acquire(name, "owner-b", 5)
        self.assertIsInstance(held.exception, rowq.Conflict)
        self.assertEqual(held.exception.status, 409)
        self.assertEqual(held.exception.holders, [lease])

        renewed = c.renew(name, "owner-a", lease.token, 10)
        self.assertEqual(renewed.token, lease.token)
        self.assertGreater(renewed.expires_at, lease.expires_at)
        self.assertEqual(c.get_lock(name), rowq.Lock(name, [renewed]))

        self.assertEqual(c.release(name, "owner-a", lease.token).token, lease.token)
        self.assertEqual(c.get_lock(name).holders, [])
        with self.assertRaises(rowq.Conflict):
            c.release(name, "owner-a", lease.token)
        with self.assertRaises(rowq.Conflict):
            c.renew(name, "owner-a", lease.token, 5)

        nxt = c.acquire(name, "owner-b", 5)
        self.assertGreater(nxt.token, lease.token, "fencing tokens only grow")
        c.release(name, "owner-b", nxt.token)

    def test_acquire_waits_for_a_release(self) -> None:
        c, name = self.c, unique("py-lock")
        first = c.acquire(name, "owner-a", 5)
        releaser = threading.Timer(0.3, c.release, (name, "owner-a", first.token))
        releaser.start()
        start = time.monotonic()
        second = c.acquire(name, "owner-b", 5, wait=5)
        self.assertGreaterEqual(time.monotonic() - start, 0.25)
        self.assertEqual(second.owner, "owner-b")
        releaser.join()
        c.release(name, "owner-b", second.token)

    def test_semaphore(self) -> None:
        c, name = self.c, unique("py-sem")
        a = c.acquire(name, "a", 5, limit=2)
        b = c.acquire(name, "b", 5, limit=2)
        with self.assertRaises(rowq.LockHeld) as held:
            c.acquire(name, "c", 5, limit=2)
        self.assertEqual(sorted(h.owner for h in held.exception.holders), ["a", "b"])
        for lease in (a, b):
            c.release(name, lease.owner, lease.token)

    def test_locks_page_by_page(self) -> None:
        c, prefix = self.c, unique("py-page")
        names = [f"{prefix}-{i}" for i in range(3)]
        for n in names:
            lease = c.acquire(n, "pager", 10)
            self.addCleanup(c.release, n, "pager", lease.token)
        page = c.locks_page(limit=1)
        self.assertEqual(len(page.items), 1)
        self.assertIsNotNone(page.next_cursor)
        listed = [lock.name for lock in c.locks(limit=1) if lock.name.startswith(prefix)]
        self.assertEqual(listed, names)

    def test_with_renews_while_held_and_releases_on_exit(self) -> None:
        c, name = self.c, unique("py-lock")
        # ttl 4 s, renewed every 1.3 s: renewals late by over 2 s on a
        # loaded machine (CI at load 29) would lose a shorter lease.
        with c.lock(name, ttl=4, wait=1) as lease:
            token, first = lease.token, lease.lease.expires_at
            with self.assertRaises(rowq.LockHeld):
                c.acquire(name, "someone-else", 1, wait=0)
            time.sleep(4.5)  # beyond the ttl: only renewals keep it
            [holder] = c.get_lock(name).holders
            self.assertEqual((holder.owner, holder.token), (lease.owner, token))
            self.assertGreater(holder.expires_at, first)
            self.assertGreater(lease.lease.expires_at, first)
            self.assertFalse(lease.lost.is_set())
        self.assertEqual(c.get_lock(name).holders, [])
        self.assertFalse(lease.lost.is_set())

    def test_with_signals_a_lost_lease(self) -> None:
        c, name = self.c, unique("py-lock")
        with self.assertRaises(rowq.LeaseLost) as lost:
            with c.lock(name, ttl=3) as lease:
                c.release(name, lease.owner, lease.token)  # as an operator clearing it would
                self.assertTrue(lease.lost.wait(6), "the next renewal notices")
        self.assertEqual(lost.exception.status, 409)
        self.assertIs(lost.exception, lease.lost_error)

    def test_with_lets_the_block_exception_through_and_releases(self) -> None:
        c, name = self.c, unique("py-lock")
        with self.assertRaises(ZeroDivisionError):
            with c.lock(name, ttl=5):
                1 / 0
        self.assertEqual(c.get_lock(name).holders, [])

    def test_with_a_lock_held_elsewhere(self) -> None:
        c, name = self.c, unique("py-lock")
        other = c.acquire(name, "elsewhere", 5)
        with self.assertRaises(rowq.LockHeld) as held:
            with c.lock(name, ttl=5, wait=0):
                self.fail("entered a lock held elsewhere")
        self.assertEqual([h.owner for h in held.exception.holders], ["elsewhere"])
        c.release(name, "elsewhere", other.token)

    def test_two_with_blocks_of_one_process_exclude_each_other(self) -> None:
        c, name = self.c, unique("py-lock")
        with c.lock(name, ttl=5):
            with self.assertRaises(rowq.LockHeld):
                with c.lock(name, ttl=5):
                    self.fail("two holders")


if __name__ == "__main__":
    unittest.main()
