"""Holding a lock for a ``with`` block, renewed in the background."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Optional, Type

from .errors import Conflict, LeaseLost, RowqError
from .types import Lease

if TYPE_CHECKING:
    from .client import Client


class HeldLease:
    """A lock held for a ``with`` block; made by ``Client.lock``.

    While held, ``lease`` is the current lease (its ``expires_at`` moves
    with each renewal) and ``token`` its fencing token. ``lost`` is set when
    the lease ends before the block does: a renewal answered 409 (someone
    released it, or it expired and was taken), or no renewal got through
    before it would have expired by this host's clock. The block cannot be
    interrupted, so code that must not run without the lock checks
    ``lost`` (and passes ``token`` to what the lock protects).
    """

    def __init__(self, client: Client, name: str, ttl: float, wait: float, owner: str, limit: int) -> None:
        self.name = name
        self.owner = owner
        self.ttl = ttl
        self.wait = wait
        self.limit = limit
        self.lost = threading.Event()
        self.lost_error: Optional[LeaseLost] = None
        self._client = client
        self._lease: Optional[Lease] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._valid_until = 0.0  # time.monotonic() by which the lease surely lasts

    @property
    def lease(self) -> Lease:
        """The lease as last acquired or renewed."""
        if self._lease is None:
            raise RuntimeError(f"lock {self.name!r} is not held: use it in a with statement")
        return self._lease

    @property
    def token(self) -> int:
        """The lease's fencing token."""
        return self.lease.token

    def __enter__(self) -> HeldLease:
        if self._thread is not None:
            raise RuntimeError(f"lock {self.name!r} is already held by this HeldLease")
        c = self._client
        lease = c.acquire(self.name, self.owner, self.ttl, wait=self.wait, limit=self.limit)
        # Renew once at once: the lease then lasts at least ttl from when the
        # renewal was sent, a bound by this host's clock that the acquire
        # alone does not give (it may have been granted during a wait, or
        # earlier to the same owner).
        sent = time.monotonic()
        try:
            self._lease = c.renew(self.name, self.owner, lease.token, self.ttl)
        except RowqError as e:
            try:
                c.release(self.name, self.owner, lease.token)
            except RowqError:
                pass  # it expires anyway
            if isinstance(e, Conflict):
                raise LeaseLost(self.name, e.status, e.message) from e
            raise
        self._valid_until = sent + self.ttl
        self.lost.clear()
        self.lost_error = None
        self._stop.clear()
        self._thread = threading.Thread(target=self._keep_renewed, name=f"rowq-lock-{self.name}", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        assert self._thread is not None
        self._stop.set()
        self._thread.join()
        self._thread = None
        if not self.lost.is_set():
            try:
                self._client.release(self.name, self.owner, self.token)
            except Conflict as e:
                self._lose(e.status, e.message)
            except RowqError:
                if exc is None:
                    raise
        if self.lost_error is not None and exc is None:
            raise self.lost_error

    def _lose(self, status: int, detail: str) -> None:
        self.lost_error = LeaseLost(self.name, status, detail)
        self.lost.set()

    def _keep_renewed(self) -> None:
        """Renews every third of the ttl until stopped; after a failure that
        is not a 409, tries again sooner, while the lease may still be live."""
        pause = self.ttl / 3
        while True:
            left = self._valid_until - time.monotonic()
            if self._stop.wait(max(min(pause, left), 0)):
                return
            left = self._valid_until - time.monotonic()
            if left <= 0:
                self._lose(0, f"no renewal got through within the ttl of {self.ttl} s")
                return
            sent = time.monotonic()
            try:
                self._lease = self._client.renew(self.name, self.owner, self.token, self.ttl, timeout=left)
            except Conflict as e:
                self._lose(e.status, e.message)
                return
            except Exception:  # the server or the network failed: the lease may still be live
                pause = max(self.ttl / 10, 0.05)
                continue
            self._valid_until = sent + self.ttl
            pause = self.ttl / 3
