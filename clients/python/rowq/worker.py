"""A pull worker's loop: lease jobs, run a handler on each, heartbeat and complete."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, List, Optional

from .errors import LeaseConflict, PermanentFailure, RowqError
from .types import LeasedJob

if TYPE_CHECKING:
    from .client import Client

# A handler works on one leased job; see Client.work.
Handler = Callable[[LeasedJob], None]

# The server takes 4096 bytes of a completion's message (MaxLeaseMessage
# in internal/validate/validate.go); the Go client cuts at 4000 too.
MAX_MESSAGE = 4000


def cut_message(message: str) -> str:
    """message as at most MAX_MESSAGE bytes of UTF-8, cut on a character's
    boundary; a lone surrogate (from surrogateescape) becomes "?", which
    UTF-8 cannot carry."""
    return message.encode(errors="replace")[:MAX_MESSAGE].decode(errors="ignore")


def work(
    client: Client,
    queue: str,
    handler: Handler,
    *,
    concurrency: int = 1,
    lease: float = 60,
    wait: float = 5,
    stop: Optional[threading.Event] = None,
) -> None:
    """Client.work: leases as many jobs as there are free threads, at most
    100, and runs each in a thread of its own."""
    if concurrency < 1:
        raise ValueError("concurrency: must be at least 1")
    stop = stop or threading.Event()
    slots = threading.BoundedSemaphore(concurrency)
    running: List[threading.Thread] = []
    backoff = 0.0
    refused: Optional[RowqError] = None
    while not stop.is_set():
        slots.acquire()
        if stop.is_set():
            slots.release()
            break
        free = 1
        while free < min(concurrency, 100) and slots.acquire(blocking=False):
            free += 1
        try:
            jobs = client.lease(queue, max=free, wait=wait, lease=lease)
        except RowqError as e:
            for _ in range(free):
                slots.release()
            if 400 <= e.status < 500 and e.status != 429:
                # Refused for good (no such queue, a push queue, a bad
                # argument, a token without the scope): asking again will
                # not mend it. Raised once the jobs in flight are done.
                refused = e
                break
            backoff = min(max(2 * backoff, 0.1), 10.0)
            stop.wait(backoff)
            continue
        backoff = 0.0
        for _ in range(free - len(jobs)):
            slots.release()
        for job in jobs:
            t = threading.Thread(target=_run, args=(client, job, handler, lease, slots), name=f"rowq-job-{job.id}")
            t.start()
            running.append(t)
        running = [t for t in running if t.is_alive()]
    for t in running:
        t.join()
    if refused is not None:
        raise refused


def _run(client: Client, job: LeasedJob, handler: Handler, lease: float, slots: threading.BoundedSemaphore) -> None:
    """Runs handler on job with its lease renewed, then completes it."""
    done = threading.Event()
    lost = threading.Event()

    def renew() -> None:
        while not done.wait(lease / 3):
            try:
                client.heartbeat(job.id, job.lease_token, lease)
            except LeaseConflict:
                lost.set()  # cancelled, or run out: the result is not sent
                return
            except RowqError:
                pass  # the next heartbeat may get through

    beat = threading.Thread(target=renew, name=f"rowq-heartbeat-{job.id}", daemon=True)
    beat.start()
    status, message = "success", None
    try:
        handler(job)
    except PermanentFailure as e:
        status, message = "permanent-failure", str(e) or type(e).__name__
    except Exception as e:  # any failure of the handler fails the job, retried
        status, message = "failure", f"{type(e).__name__}: {e}"
    finally:
        done.set()
        beat.join()
    try:
        if not lost.is_set():
            if message is not None:
                message = cut_message(message)
            client.complete(job.id, job.lease_token, status, message=message)
    except RowqError:
        pass  # lost meanwhile (409), or the server is away: the lease runs out and the job is retried
    finally:
        slots.release()
