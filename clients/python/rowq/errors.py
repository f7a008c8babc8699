"""Errors raised by the rowq client."""

from __future__ import annotations

from typing import Any, List

from .types import Lease


class RowqError(Exception):
    """An answer of rowq other than 200, or a request that got no answer.

    ``status`` is the HTTP status (0 when no answer came: a network error or
    a timeout), ``message`` the server's ``error`` message, which names the
    field at fault, and ``body`` the whole answer as decoded JSON (None when
    it was not JSON).
    """

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(f"rowq: {status} {message}" if status else f"rowq: {message}")
        self.status = status
        self.message = message
        self.body = body


class NotFound(RowqError):
    """A 404: no such queue, routing, job, failure log entry or schedule,
    or a category with no routing and no default queue."""


class Conflict(RowqError):
    """A 409: a lock that stayed taken, or a renew or release of a lease
    that is not held."""


class LeaseConflict(Conflict):
    """A 409 to a heartbeat or completion of an accepted job: the worker
    should stop working on it. ``reason`` is "lease_lost" (the lease ran
    out, or the job was delivered again or deleted), "completed" (this
    delivery was completed already) or "cancelled"."""

    def __init__(self, status: int, message: str, body: Any, reason: str) -> None:
        super().__init__(status, message, body)
        self.reason = reason


class LockHeld(Conflict):
    """An acquire that did not get the lock within its wait; ``holders``
    are the live holders the server named."""

    def __init__(self, status: int, message: str, body: Any, holders: List[Lease]) -> None:
        super().__init__(status, message, body)
        self.holders = holders


class LeaseLost(RowqError):
    """A lease held by ``Client.lock`` ended before the ``with`` block did.

    ``status`` is 409 when the server said the lease is not held (a renew or
    the release answered 409), 0 when no renewal got through before the
    lease would have expired by this host's clock.
    """

    def __init__(self, name: str, status: int, detail: str) -> None:
        super().__init__(status, f"lock {name!r}: lease lost: {detail}")
        self.name = name


class PermanentFailure(Exception):
    """Raised by a pull worker's handler (Client.work): the job fails for
    good, not retried; the exception's text is the failure's message. Any
    other exception fails the job too, retried by its policy."""
