"""The client of rowq's HTTP API."""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union

from .errors import Conflict, LeaseConflict, LockHeld, NotFound, RowqError
from .lease import HeldLease
from .worker import Handler, work
from .types import (
    Batch,
    FailedJob,
    Job,
    JobLease,
    Lease,
    LeasedJob,
    Lock,
    NewJob,
    Node,
    Nodes,
    OutboxReject,
    Page,
    PushedBatch,
    PushedJob,
    Queue,
    QueueStats,
    Routing,
    Schedule,
    ScheduleRun,
    job_json,
)

DEFAULT_URL = "http://127.0.0.1:8080"

# Kinds of jobs Client.jobs lists.
WAITING = "waiting"  # due now
DEFERRED = "deferred"  # due later
GRABBED = "grabbed"  # held by a node for delivery

# Each waiting acquire request waits at most this long, well within the
# server's bound (300 s) and the usual proxy timeouts; longer waits are made
# of several requests.
MAX_WAIT_PER_REQUEST = 25.0

T = TypeVar("T")


def default_owner() -> str:
    """Names this process as a lock owner: host:pid."""
    return f"{socket.gethostname() or 'unknown-host'}:{os.getpid()}"


def _seg(s: Union[str, int]) -> str:
    """Escapes one path segment."""
    return urllib.parse.quote(str(s), safe="")


def _set(**fields: Any) -> Dict[str, Any]:
    """The fields that are not None: the server's defaults apply to the others."""
    return {k: v for k, v in fields.items() if v is not None}


class Client:
    """Talks to one rowq server. It is safe to share between threads.

    ``token`` is sent as ``Authorization: Bearer <token>``. A URL with user
    information (``http://user:secret@host:8080``) sends it as HTTP Basic
    authentication instead, unless a token is given. ``timeout`` bounds each
    request, in seconds (a waiting lock acquire gets its wait on top).

    Every method raises a ``RowqError`` when the server answers other than
    200 (``NotFound`` for 404, ``Conflict`` for 409), with the server's
    message, which names the field at fault; and a ``RowqError`` with
    status 0 when no answer came.
    """

    def __init__(self, base_url: str = DEFAULT_URL, token: Optional[str] = None, timeout: float = 30) -> None:
        if "://" not in base_url:
            base_url = "http://" + base_url
        parts = urllib.parse.urlsplit(base_url)
        self._auth: Optional[str] = None
        if token:
            self._auth = "Bearer " + token
        elif parts.username is not None:
            userinfo = urllib.parse.unquote(parts.username) + ":" + urllib.parse.unquote(parts.password or "")
            self._auth = "Basic " + base64.b64encode(userinfo.encode()).decode("ascii")
        host = parts.netloc.rpartition("@")[2]
        self.base_url = urllib.parse.urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"rowq.Client({self.base_url!r})"

    def request(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Union[str, int]]] = None,
        body: Any = None,
        timeout: Optional[float] = None,
    ) -> Any:
        """Sends a request with ``body`` as its JSON body (none when None)
        and returns the decoded JSON answer. The methods of Client cover the
        API; this serves what they do not."""
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        req.add_header("User-Agent", "rowq-python")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout if timeout is None else timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise _error(e.code, e.read()) from None
        except (urllib.error.URLError, OSError) as e:
            reason = e.reason if isinstance(e, urllib.error.URLError) else e
            raise RowqError(0, f"{method} {path}: {reason}") from e
        try:
            return json.loads(raw)
        except ValueError as e:
            raise RowqError(0, f"{method} {path}: answer is not JSON: {raw[:200]!r}") from e

    def _follow(self, page: Page[T], fetch: Callable[[str], Page[T]]) -> Iterator[T]:
        """Yields the items of page and of the pages after it."""
        while True:
            yield from page.items
            if not page.next_cursor:
                return
            page = fetch(page.next_cursor)

    # Jobs

    def enqueue(
        self,
        category: str,
        url: Optional[str],
        payload: Any = None,
        *,
        run_after: Optional[int] = None,
        max_retries: Optional[int] = None,
        retry_delay: Optional[int] = None,
        timeout: Optional[int] = None,
        priority: Optional[int] = None,
        unique_key: Optional[str] = None,
        retry_backoff: Optional[str] = None,
        retry_delay_max: Optional[int] = None,
        retry_jitter: Optional[float] = None,
        traceparent: Optional[str] = None,
        tracestate: Optional[str] = None,
        concurrency_key: Optional[str] = None,
        concurrency_limit: Optional[int] = None,
        ordered: Optional[bool] = None,
        on_success: Optional[Union[NewJob, Mapping[str, Any]]] = None,
        on_failure: Optional[Union[NewJob, Mapping[str, Any]]] = None,
        on_finish: Optional[Union[NewJob, Mapping[str, Any]]] = None,
        depends_on: Optional[Sequence[int]] = None,
        on_parent_failure: Optional[str] = None,
    ) -> PushedJob:
        """Enqueues a job of ``category`` for the worker at ``url``
        (POST /job/{category}); the answer comes once the job is committed.
        ``payload`` is any JSON value, sent to the worker as the body. A job
        whose category routes to a pull queue needs no url (None).
        Durations are seconds; options left None take the server's defaults.
        ``traceparent`` and ``tracestate`` (W3C Trace Context) put the job in
        a trace: each delivery carries them to the worker.
        ``concurrency_key`` bounds the queue's jobs of that key in delivery
        at once to ``concurrency_limit`` (1); with ``ordered``, they go one at
        a time in enqueue order (docs/flow-control.md).
        ``on_success``, ``on_failure`` and ``on_finish`` are callbacks (a
        NewJob or a dict of POST /jobs' fields), enqueued when the job
        succeeds, fails for good, or ends however; ``depends_on`` the ids of
        existing jobs it waits for (it is stored blocked until each has
        succeeded), ``on_parent_failure`` what it does if one fails:
        "cancel" (the default), "fail" or "run" (docs/lifecycle.md)."""
        body = _set(
            url=url,
            payload=payload,
            run_after=run_after,
            max_retries=max_retries,
            retry_delay=retry_delay,
            timeout=timeout,
            priority=priority,
            unique_key=unique_key,
            retry_backoff=retry_backoff,
            retry_delay_max=retry_delay_max,
            retry_jitter=retry_jitter,
            traceparent=traceparent,
            tracestate=tracestate,
            concurrency_key=concurrency_key,
            concurrency_limit=concurrency_limit,
            ordered=ordered,
            on_success=job_json(on_success),
            on_failure=job_json(on_failure),
            on_finish=job_json(on_finish),
            depends_on=None if depends_on is None else [{"id": i} for i in depends_on],
            on_parent_failure=on_parent_failure,
        )
        return PushedJob.from_json(self.request("POST", "/job/" + _seg(category), body=body))

    def enqueue_many(self, jobs: Sequence[Union[NewJob, Mapping[str, Any]]]) -> List[PushedJob]:
        """Enqueues up to 1,000 jobs in one transaction (POST /jobs): all are
        stored or none. Each is a NewJob or a dict with POST /jobs' fields.
        The answers come in the order of jobs; a job that waits for its
        parents (depends_on) has ``blocked`` set."""
        body = {"jobs": [j.to_json() if isinstance(j, NewJob) else dict(j) for j in jobs]}
        return [PushedJob.from_json(j) for j in self.request("POST", "/jobs", body=body)["jobs"]]

    def enqueue_batch(
        self,
        jobs: Sequence[Union[NewJob, Mapping[str, Any]]],
        *,
        on_success: Optional[Union[NewJob, Mapping[str, Any]]] = None,
        on_finish: Optional[Union[NewJob, Mapping[str, Any]]] = None,
        meta: Optional[Mapping[str, Any]] = None,
    ) -> PushedBatch:
        """Enqueues up to 10,000 jobs (within the server's --max-body-bytes)
        in one transaction as a batch (POST /jobs with "batch").
        ``on_finish`` is enqueued once, when every job has ended,
        ``on_success`` once if every job succeeded; their payload carries
        the batch's counts and ``meta`` (docs/lifecycle.md)."""
        batch = _set(on_success=job_json(on_success), on_finish=job_json(on_finish), meta=meta)
        body = {"jobs": [j.to_json() if isinstance(j, NewJob) else dict(j) for j in jobs], "batch": batch}
        return PushedBatch.from_json(self.request("POST", "/jobs", body=body))

    def batch(self, id: int) -> Batch:
        """A batch and its counts (GET /batch/{id})."""
        return Batch.from_json(self.request("GET", f"/batch/{_seg(id)}"))

    def batches_page(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Page[Batch]:
        """One page of batches, the newest first (GET /batches)."""
        d = self.request("GET", "/batches", _set(limit=limit, cursor=cursor))
        return Page([Batch.from_json(b) for b in d["batches"]], d.get("next_cursor"))

    def batches(self, *, limit: Optional[int] = None) -> Iterator[Batch]:
        """The batches, newest first, every page (see jobs)."""
        return self._follow(self.batches_page(limit=limit), lambda c: self.batches_page(limit=limit, cursor=c))

    def blocked_page(self, queue: str, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Page[Job]:
        """One page of the queue's blocked jobs, lowest id first, each with
        the parents it waits for in ``flow.waits_for`` (GET /queue/{name}/blocked)."""
        d = self.request("GET", f"/queue/{_seg(queue)}/blocked", _set(limit=limit, cursor=cursor))
        return Page([Job.from_json(j) for j in d["jobs"]], d.get("next_cursor"))

    def blocked(self, queue: str, *, limit: Optional[int] = None) -> Iterator[Job]:
        """The queue's blocked jobs, every page (see jobs)."""
        first = self.blocked_page(queue, limit=limit)
        return self._follow(first, lambda c: self.blocked_page(queue, limit=limit, cursor=c))

    def jobs_page(
        self,
        queue: str,
        kind: str,
        *,
        limit: Optional[int] = None,
        order: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> Page[Job]:
        """One page of the queue's jobs of a kind (WAITING, DEFERRED or
        GRABBED): GET /queue/{name}/{kind}. ``order`` is "desc" (latest
        next_try first, the default) or "asc"."""
        d = self.request(
            "GET", f"/queue/{_seg(queue)}/{_seg(kind)}", _set(limit=limit, order=order, cursor=cursor)
        )
        return Page([Job.from_json(j) for j in d["jobs"]], d.get("next_cursor"))

    def jobs(self, queue: str, kind: str, *, limit: Optional[int] = None, order: Optional[str] = None) -> Iterator[Job]:
        """The queue's jobs of a kind, every page: fetches the first page at
        once (so a missing queue raises NotFound here), the next ones as the
        iteration reaches them. ``limit`` is the page size."""
        first = self.jobs_page(queue, kind, limit=limit, order=order)
        return self._follow(first, lambda c: self.jobs_page(queue, kind, limit=limit, order=order, cursor=c))

    def job(self, queue: str, id: int) -> Job:
        """One job of the queue (GET /queue/{name}/job/{id})."""
        return Job.from_json(self.request("GET", f"/queue/{_seg(queue)}/job/{_seg(id)}"))

    def delete_job(self, queue: str, id: int) -> Job:
        """Deletes one job of the queue, whatever its state, and returns it
        (DELETE /queue/{name}/job/{id})."""
        return Job.from_json(self.request("DELETE", f"/queue/{_seg(queue)}/job/{_seg(id)}"))

    def cancel_job(self, queue: str, id: int) -> Job:
        """Cancels one job of the queue, whatever its state, and returns it
        as it was (POST /queue/{name}/job/{id}/cancel): a delivery in flight
        is aborted, and a worker holding the job learns it at its next
        heartbeat (LeaseConflict, reason "cancelled")."""
        return Job.from_json(self.request("POST", f"/queue/{_seg(queue)}/job/{_seg(id)}/cancel"))

    # Accepted jobs: a worker that answered {"status": "accepted", "lease":
    # seconds} renews the lease and reports with the delivery's
    # Rowq-Lease-Token (docs/workers.md). A 409 raises LeaseConflict.

    def heartbeat(
        self, id: int, lease_token: str, lease: float, *, progress: Optional[float] = None, message: Optional[str] = None
    ) -> JobLease:
        """Renews the lease of an accepted job to now + ``lease`` seconds
        (POST /job/{id}/heartbeat); ``progress`` (0..1) and ``message`` show
        in the job's inspection."""
        body = _set(lease_token=lease_token, lease=lease, progress=progress, message=message)
        return JobLease.from_json(self.request("POST", f"/job/{_seg(id)}/heartbeat", body=body))

    def complete(
        self, id: int, lease_token: str, status: str, *, message: Optional[str] = None, retry_after: Optional[float] = None
    ) -> None:
        """Reports the result of an accepted job (POST /job/{id}/complete):
        "success", "failure" (retried after ``retry_after`` seconds or the
        job's backoff, while retries are left) or "permanent-failure". The
        same completion sent again succeeds again."""
        body = _set(lease_token=lease_token, status=status, message=message, retry_after=retry_after)
        self.request("POST", f"/job/{_seg(id)}/complete", body=body)

    # Pull queues: workers lease jobs (docs/workers.md#pull), then
    # heartbeat and complete them as accepted jobs.

    def lease(
        self, queue: str, *, max: Optional[int] = None, wait: Optional[float] = None, lease: Optional[float] = None
    ) -> List[LeasedJob]:
        """Leases up to ``max`` (1..100, default 1) due jobs of a pull queue
        for ``lease`` seconds each (default 60), waiting up to ``wait``
        seconds (0..30, default 0) for a first one (POST
        /queue/{name}/lease); an empty list when the wait ends first. A
        push queue raises Conflict."""
        body = _set(max=max, wait=wait, lease=lease)
        d = self.request("POST", f"/queue/{_seg(queue)}/lease", body=body, timeout=self.timeout + (wait or 0))
        return [LeasedJob.from_json(j) for j in d["jobs"]]

    def work(
        self,
        queue: str,
        handler: Handler,
        *,
        concurrency: int = 1,
        lease: float = 60,
        wait: float = 5,
        stop: Optional[threading.Event] = None,
    ) -> None:
        """Works pull queue ``queue``: leases its jobs and calls
        ``handler(job)`` for each, in up to ``concurrency`` threads, renewing
        each job's lease every ``lease``/3 seconds while its handler runs.
        A handler that returns completes its job with success; one that
        raises PermanentFailure fails it for good; any other exception fails
        it, retried by its policy. Runs until ``stop`` is set (within
        ``wait`` seconds), then waits for the handlers running and their
        completions. A lease request refused for good (a 4xx other than
        429: no such queue, a push queue, a token without the scope) ends
        it the same way, then raises that RowqError; other errors are
        retried with a backoff."""
        work(self, queue, handler, concurrency=concurrency, lease=lease, wait=wait, stop=stop)

    # The failure log

    def failed_jobs_page(
        self,
        queue: str,
        *,
        limit: Optional[int] = None,
        order: Optional[str] = None,
        cursor: Optional[str] = None,
    ) -> Page[FailedJob]:
        """One page of the queue's failure log (GET /queue/{name}/failed),
        newest first: by failure (``order`` "failed", the default) or by the
        job's creation ("created")."""
        d = self.request("GET", f"/queue/{_seg(queue)}/failed", _set(limit=limit, order=order, cursor=cursor))
        return Page([FailedJob.from_json(j) for j in d["failed_jobs"]], d.get("next_cursor"))

    def failed_jobs(self, queue: str, *, limit: Optional[int] = None, order: Optional[str] = None) -> Iterator[FailedJob]:
        """The queue's failure log, every page (see jobs)."""
        first = self.failed_jobs_page(queue, limit=limit, order=order)
        return self._follow(first, lambda c: self.failed_jobs_page(queue, limit=limit, order=order, cursor=c))

    def failed_job(self, queue: str, id: int) -> FailedJob:
        """One failure log entry, by its own id (GET /queue/{name}/failed/{id})."""
        return FailedJob.from_json(self.request("GET", f"/queue/{_seg(queue)}/failed/{_seg(id)}"))

    def delete_failed_job(self, queue: str, id: int) -> FailedJob:
        """Deletes one failure log entry and returns it (DELETE /queue/{name}/failed/{id})."""
        return FailedJob.from_json(self.request("DELETE", f"/queue/{_seg(queue)}/failed/{_seg(id)}"))

    def retry_failed_job(self, queue: str, id: int) -> PushedJob:
        """Puts one failure log entry back in its queue as a job due now,
        under its old job id and with fail_count 0, and returns the job
        (POST /queue/{name}/failed/{id}/retry)."""
        return PushedJob.from_json(self.request("POST", f"/queue/{_seg(queue)}/failed/{_seg(id)}/retry"))

    def retry_failed_jobs(self, queue: str, ids: Optional[Sequence[int]] = None) -> int:
        """Retries the failure log entries ``ids`` of the queue, or every
        entry when ids is None (POST /queue/{name}/failed/retry); returns how
        many it retried. Ids not in the log are skipped."""
        body = None if ids is None else {"ids": list(ids)}
        return int(self.request("POST", f"/queue/{_seg(queue)}/failed/retry", body=body)["retried"])

    def delete_failed_jobs(self, queue: str, ids: Optional[Sequence[int]] = None) -> int:
        """Deletes the failure log entries ``ids`` of the queue, or every
        entry when ids is None (DELETE /queue/{name}/failed); returns how
        many it deleted."""
        body = None if ids is None else {"ids": list(ids)}
        return int(self.request("DELETE", f"/queue/{_seg(queue)}/failed", body=body)["deleted"])

    # Queues and routings

    def queues(self) -> List[Queue]:
        """Every queue, by name (GET /queues)."""
        return [Queue.from_json(q) for q in self.request("GET", "/queues")]

    def queue(self, name: str) -> Queue:
        """One queue (GET /queue/{name})."""
        return Queue.from_json(self.request("GET", "/queue/" + _seg(name)))

    def put_queue(
        self,
        name: str,
        *,
        polling_interval: Optional[int] = None,
        max_workers: Optional[int] = None,
        max_dispatches_per_second: Optional[float] = None,
        max_burst_size: Optional[int] = None,
        paused: Optional[bool] = None,
        delivery: Optional[str] = None,
    ) -> Queue:
        """Creates or replaces a queue (PUT /queue/{name}). Settings left
        None take the server's defaults, except ``paused``: None keeps the
        queue's state. ``polling_interval`` is milliseconds; ``delivery`` is
        "push" (the default) or "pull"."""
        body = _set(
            polling_interval=polling_interval,
            max_workers=max_workers,
            max_dispatches_per_second=max_dispatches_per_second,
            max_burst_size=max_burst_size,
            paused=paused,
            delivery=delivery,
        )
        return Queue.from_json(self.request("PUT", "/queue/" + _seg(name), body=body))

    def delete_queue(self, name: str) -> Queue:
        """Deletes a queue and returns it (DELETE /queue/{name}). Its jobs
        stay stored and come back with the queue."""
        return Queue.from_json(self.request("DELETE", "/queue/" + _seg(name)))

    def pause_queue(self, name: str) -> Queue:
        """Pauses a queue: it accepts jobs but dispatches none (POST /queue/{name}/pause)."""
        return Queue.from_json(self.request("POST", f"/queue/{_seg(name)}/pause"))

    def resume_queue(self, name: str) -> Queue:
        """Resumes a paused queue (POST /queue/{name}/resume)."""
        return Queue.from_json(self.request("POST", f"/queue/{_seg(name)}/resume"))

    def queue_node(self, name: str) -> Node:
        """The node dispatching the queue (GET /queue/{name}/node); NotFound
        while no live node leads it."""
        return Node.from_json(self.request("GET", f"/queue/{_seg(name)}/node"))

    def queue_stats(self, name: str) -> QueueStats:
        """One queue's statistics (GET /queue/{name}/stats)."""
        return QueueStats.from_json(self.request("GET", f"/queue/{_seg(name)}/stats"))

    def all_queue_stats(self) -> Dict[str, QueueStats]:
        """Every queue's statistics, by name (GET /queues/stats)."""
        return {k: QueueStats.from_json(v) for k, v in self.request("GET", "/queues/stats").items()}

    def routings(self) -> List[Routing]:
        """Every routing, by category (GET /routings)."""
        return [Routing.from_json(r) for r in self.request("GET", "/routings")]

    def routing(self, category: str) -> Routing:
        """One routing (GET /routing/{category})."""
        return Routing.from_json(self.request("GET", "/routing/" + _seg(category)))

    def put_routing(self, category: str, queue: str) -> Routing:
        """Routes jobs of ``category`` to ``queue``, which must exist (PUT /routing/{category})."""
        return Routing.from_json(self.request("PUT", "/routing/" + _seg(category), body={"queue_name": queue}))

    def delete_routing(self, category: str) -> Routing:
        """Deletes a routing and returns it (DELETE /routing/{category})."""
        return Routing.from_json(self.request("DELETE", "/routing/" + _seg(category)))

    # Locks

    def acquire(self, name: str, owner: str, ttl: float, *, wait: float = 0, limit: int = 1) -> Lease:
        """Takes a lease on the lock ``name`` for ``owner`` (PUT /lock/{name}),
        lasting ``ttl`` seconds unless renewed, waiting up to ``wait``
        seconds if it is taken. Raises LockHeld (a Conflict) with the holders
        if it stayed taken. The same owner acquiring again while it holds
        the lock gets the same lease back, so a lost answer can be retried."""
        deadline = time.monotonic() + wait
        while True:
            w = min(max(deadline - time.monotonic(), 0.0), MAX_WAIT_PER_REQUEST)
            body = {"owner": owner, "ttl": ttl, "wait": w, "limit": limit}
            try:
                d = self.request("PUT", "/lock/" + _seg(name), body=body, timeout=max(self.timeout, w + 10))
                return Lease.from_json(d)
            except Conflict as e:
                if time.monotonic() >= deadline:
                    holders = e.body.get("holders") if isinstance(e.body, dict) else None
                    leases = [Lease.from_json(h) for h in holders or []]
                    raise LockHeld(e.status, e.message, e.body, leases) from None

    def renew(self, name: str, owner: str, token: int, ttl: float, *, timeout: Optional[float] = None) -> Lease:
        """Extends a lease to the database's now + ``ttl`` seconds
        (POST /lock/{name}/renew); Conflict if it is no longer held."""
        body = {"owner": owner, "token": token, "ttl": ttl}
        return Lease.from_json(self.request("POST", f"/lock/{_seg(name)}/renew", body=body, timeout=timeout))

    def release(self, name: str, owner: str, token: int) -> Lease:
        """Ends a lease and returns it (DELETE /lock/{name}); Conflict if it
        was not held any more."""
        return Lease.from_json(self.request("DELETE", "/lock/" + _seg(name), {"owner": owner, "token": token}))

    def get_lock(self, name: str) -> Lock:
        """A lock's live holders (GET /lock/{name}); none when it is free."""
        return Lock.from_json(self.request("GET", "/lock/" + _seg(name)))

    def locks_page(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Page[Lock]:
        """One page of the held locks, by name (GET /locks)."""
        d = self.request("GET", "/locks", _set(limit=limit, cursor=cursor))
        return Page([Lock.from_json(x) for x in d["locks"]], d.get("next_cursor"))

    def locks(self, *, limit: Optional[int] = None) -> Iterator[Lock]:
        """The held locks, by name, every page (see jobs)."""
        return self._follow(self.locks_page(limit=limit), lambda c: self.locks_page(limit=limit, cursor=c))

    def lock(
        self, name: str, ttl: float = 30, wait: float = 0, *, owner: Optional[str] = None, limit: int = 1
    ) -> HeldLease:
        """A context manager holding the lock ``name`` for the ``with`` block::

            with client.lock("nightly-report", ttl=30, wait=10) as lease:
                make_report(fence=lease.token)

        Entering acquires (LockHeld if the lock stayed taken for ``wait``
        seconds); a background thread renews the lease every third of
        ``ttl``; leaving releases it. If the lease is lost meanwhile,
        ``lease.lost`` (a threading.Event) is set, and leaving raises
        LeaseLost unless the block raised. ``owner`` defaults to
        host:pid:random, unique to this call, so two threads never share a
        lease."""
        return HeldLease(self, name, ttl, wait, owner or f"{default_owner()}:{os.urandom(4).hex()}", limit)

    # Schedules

    def put_schedule(
        self,
        name: str,
        *,
        cron: str,
        category: str,
        url: str,
        payload: Any = None,
        timezone: Optional[str] = None,
        max_retries: Optional[int] = None,
        retry_delay: Optional[int] = None,
        timeout: Optional[int] = None,
        misfire: Optional[str] = None,
        max_catchup: Optional[int] = None,
        overlap: Optional[str] = None,
        paused: Optional[bool] = None,
    ) -> Schedule:
        """Creates or replaces a schedule (PUT /schedule/{name}): each tick
        of ``cron`` on the wall clock of ``timezone`` (UTC by default)
        enqueues a job of ``category`` for ``url``. See docs/schedules.md."""
        body = _set(
            cron=cron,
            timezone=timezone,
            category=category,
            url=url,
            payload=payload,
            max_retries=max_retries,
            retry_delay=retry_delay,
            timeout=timeout,
            misfire=misfire,
            max_catchup=max_catchup,
            overlap=overlap,
            paused=paused,
        )
        return Schedule.from_json(self.request("PUT", "/schedule/" + _seg(name), body=body))

    def schedule(self, name: str) -> Schedule:
        """One schedule (GET /schedule/{name})."""
        return Schedule.from_json(self.request("GET", "/schedule/" + _seg(name)))

    def schedules_page(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Page[Schedule]:
        """One page of the schedules, by name (GET /schedules)."""
        d = self.request("GET", "/schedules", _set(limit=limit, cursor=cursor))
        return Page([Schedule.from_json(s) for s in d["schedules"]], d.get("next_cursor"))

    def schedules(self, *, limit: Optional[int] = None) -> Iterator[Schedule]:
        """The schedules, by name, every page (see jobs)."""
        return self._follow(self.schedules_page(limit=limit), lambda c: self.schedules_page(limit=limit, cursor=c))

    def delete_schedule(self, name: str) -> Schedule:
        """Removes a schedule and its run history (the jobs it enqueued stay)
        and returns it (DELETE /schedule/{name})."""
        return Schedule.from_json(self.request("DELETE", "/schedule/" + _seg(name)))

    def pause_schedule(self, name: str) -> Schedule:
        """Stops a schedule's ticks (POST /schedule/{name}/pause)."""
        return Schedule.from_json(self.request("POST", f"/schedule/{_seg(name)}/pause"))

    def resume_schedule(self, name: str) -> Schedule:
        """Resumes a paused schedule from its first tick after now; ticks
        that passed while paused are not run (POST /schedule/{name}/resume)."""
        return Schedule.from_json(self.request("POST", f"/schedule/{_seg(name)}/resume"))

    def trigger_schedule(self, name: str) -> ScheduleRun:
        """Enqueues one run now, outside the ticks (POST /schedule/{name}/trigger)."""
        return ScheduleRun.from_json(self.request("POST", f"/schedule/{_seg(name)}/trigger"))

    def schedule_runs_page(
        self, name: str, *, limit: Optional[int] = None, cursor: Optional[str] = None
    ) -> Page[ScheduleRun]:
        """One page of a schedule's run history, newest first (GET /schedule/{name}/runs)."""
        d = self.request("GET", f"/schedule/{_seg(name)}/runs", _set(limit=limit, cursor=cursor))
        return Page([ScheduleRun.from_json(r) for r in d["runs"]], d.get("next_cursor"))

    def schedule_runs(self, name: str, *, limit: Optional[int] = None) -> Iterator[ScheduleRun]:
        """A schedule's run history, newest first, every page (see jobs)."""
        first = self.schedule_runs_page(name, limit=limit)
        return self._follow(first, lambda c: self.schedule_runs_page(name, limit=limit, cursor=c))

    # The transactional outbox (applications write it with their own SQL:
    # docs/outbox.md)

    def outbox_rejects_page(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Page[OutboxReject]:
        """One page of the outbox rows that were not valid jobs, oldest first (GET /outbox/rejects)."""
        d = self.request("GET", "/outbox/rejects", _set(limit=limit, cursor=cursor))
        return Page([OutboxReject.from_json(r) for r in d["rejects"]], d.get("next_cursor"))

    def outbox_rejects(self, *, limit: Optional[int] = None) -> Iterator[OutboxReject]:
        """The outbox's rejects, oldest first, every page (see jobs)."""
        return self._follow(self.outbox_rejects_page(limit=limit), lambda c: self.outbox_rejects_page(limit=limit, cursor=c))

    # The server

    def nodes(self) -> Nodes:
        """The live nodes and how many queues each dispatches (GET /nodes)."""
        return Nodes.from_json(self.request("GET", "/nodes"))

    def version(self) -> str:
        """The server's version (GET /version)."""
        return str(self.request("GET", "/version")["version"])


def _error(status: int, raw: bytes) -> RowqError:
    """The error for a non-200 answer: its "error" message, or the body's head."""
    body: Any = None
    try:
        body = json.loads(raw)
    except ValueError:
        pass
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        message = body["error"]
    else:
        message = raw[:512].decode("utf-8", "replace").strip()
    if status == 409 and isinstance(body, dict) and isinstance(body.get("reason"), str):
        return LeaseConflict(status, message, body, body["reason"])
    cls = {404: NotFound, 409: Conflict}.get(status, RowqError)
    return cls(status, message, body)
