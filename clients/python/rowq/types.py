"""The request and answer bodies of rowq's API, as dataclasses.

Times are timezone-aware ``datetime`` values (UTC unless the server gave
another offset). A job's ``payload`` is the decoded JSON value, or None when
the job has none. Fields the server adds later are ignored, so an older
client keeps working against a newer server.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, FrozenSet, Generic, List, Mapping, Optional, Type, TypeVar, Union, get_type_hints

T = TypeVar("T")
D = TypeVar("D")

_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$"
)


def parse_time(s: str) -> datetime:
    """Parses an RFC 3339 time as rowq writes it (to the microsecond;
    finer digits are dropped). datetime.fromisoformat takes neither "Z"
    nor 1..9 fraction digits before Python 3.11."""
    m = _TIME.match(s)
    if m is None:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micro = int((m.group(7) or "0")[:6].ljust(6, "0"))
    tz = timezone.utc
    if m.group(9):
        offset = timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
        tz = timezone(-offset if m.group(9) == "-" else offset)
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=tz)


_nullables: Dict[type, FrozenSet[str]] = {}


def _nullable(cls: type) -> FrozenSet[str]:
    """The fields of cls that may hold None: those typed Any or Optional."""
    if cls not in _nullables:
        _nullables[cls] = frozenset(
            name
            for name, hint in get_type_hints(cls).items()
            if hint is Any or (getattr(hint, "__origin__", None) is Union and type(None) in hint.__args__)
        )
    return _nullables[cls]


def _build(cls: Type[D], d: Mapping[str, Any], **convert: Callable[[Any], Any]) -> D:
    """An answer type from its JSON object: each field from the key of its
    name, through convert[name] when one is given. A key that is absent or
    null takes the field's default; without one, None where the field may
    hold it (an absent payload). Keys the client does not know are ignored."""
    kw: Dict[str, Any] = {}
    for f in fields(cls):
        v = d.get(f.name)
        if v is not None:
            conv = convert.get(f.name)
            kw[f.name] = v if conv is None else conv(v)
        elif f.default is MISSING and f.default_factory is MISSING:
            if f.name not in _nullable(cls):
                raise ValueError(f"rowq: {cls.__name__} answer without {f.name!r}: {dict(d)!r}")
            kw[f.name] = None
    return cls(**kw)


@dataclass
class Page(Generic[T]):
    """One page of a listing; ``next_cursor`` is None on the last page."""

    items: List[T]
    next_cursor: Optional[str]


@dataclass
class NewJob:
    """A job to enqueue with ``Client.enqueue_many``. Options left None take
    the server's defaults; durations are seconds. See docs/api.md."""

    category: str
    url: Optional[str]  # None for a pull queue's job
    payload: Any = None
    run_after: Optional[int] = None
    max_retries: Optional[int] = None
    retry_delay: Optional[int] = None
    timeout: Optional[int] = None
    priority: Optional[int] = None
    unique_key: Optional[str] = None
    retry_backoff: Optional[str] = None
    retry_delay_max: Optional[int] = None
    retry_jitter: Optional[float] = None
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    concurrency_key: Optional[str] = None
    concurrency_limit: Optional[int] = None
    ordered: Optional[bool] = None
    # The job's flow (docs/lifecycle.md): callbacks (each a NewJob or a
    # dict, with no flow of its own) enqueued when it succeeds, fails for
    # good, or ends however; its parents, each {"index": n} (an earlier job
    # of the same enqueue_many or enqueue_batch) or {"id": n} (an existing
    # job); and what it does when a parent fails ("cancel", "fail", "run").
    on_success: Optional[Union[NewJob, Mapping[str, Any]]] = None
    on_failure: Optional[Union[NewJob, Mapping[str, Any]]] = None
    on_finish: Optional[Union[NewJob, Mapping[str, Any]]] = None
    depends_on: Optional[List[Mapping[str, int]]] = None
    on_parent_failure: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        """The body of POST /jobs' element: the fields that are set."""
        return {k: job_json(v) for k, v in self.__dict__.items() if v is not None}


def job_json(v: Any) -> Any:
    """A NewJob as its JSON object; any other value as it is."""
    return v.to_json() if isinstance(v, NewJob) else v


@dataclass
class PushedJob:
    """The answer to an enqueue: the job as stored. ``existing`` is set when
    the request had a ``unique_key``: True when a pending job already held
    it (the answer then describes that job)."""

    id: int
    queue_name: str
    category: str
    url: str
    payload: Any
    run_after: int
    max_retries: int
    retry_delay: int
    timeout: int
    priority: int
    retry_backoff: str
    retry_delay_max: int
    retry_jitter: float
    unique_key: Optional[str] = None
    existing: Optional[bool] = None
    concurrency_key: Optional[str] = None
    concurrency_limit: Optional[int] = None
    ordered: Optional[bool] = None
    blocked: bool = False  # stored blocked: it waits for its parents

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PushedJob:
        return _build(cls, d, retry_jitter=float)


@dataclass
class PushedBatch:
    """The answer to ``Client.enqueue_batch``: the jobs as stored, in the
    order given, and the batch's id."""

    batch_id: int
    jobs: List[PushedJob]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PushedBatch:
        return cls(int(d["batch_id"]), [PushedJob.from_json(j) for j in d["jobs"]])


@dataclass
class JobFlow:
    """The flow of a live job (docs/lifecycle.md): the parents it still
    waits for and the jobs that wait for it (ids, ascending), its batch,
    the policy of a blocked job, and the callbacks it has. The blocked
    listing gives ``waits_for`` only."""

    waits_for: List[int]
    dependents: List[int] = field(default_factory=list)
    batch_id: Optional[int] = None
    on_parent_failure: Optional[str] = None
    callbacks: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> JobFlow:
        return _build(cls, d)


@dataclass
class Batch:
    """A batch of jobs and its counts; ``finished_at`` is None while jobs
    are pending, ``meta`` what it was made with (None for none)."""

    id: int
    total: int
    pending: int
    succeeded: int
    failed: int
    cancelled: int
    created_at: datetime
    finished_at: Optional[datetime] = None
    meta: Any = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Batch:
        return _build(cls, d, created_at=parse_time, finished_at=parse_time)


@dataclass
class Job:
    """A stored job: ``status`` is "claimed" (waiting or deferred),
    "grabbed" (held by ``grabbed_by`` for delivery until ``grabbed_until``),
    "leased" (a worker accepted it, until ``grabbed_until``; ``progress``
    and ``message`` are what its last heartbeat told) or "blocked" (it
    waits for its parents: ``flow.waits_for``). ``flow`` is set for a job
    with callbacks, parents, dependents or a batch."""

    id: int
    queue_name: str
    category: str
    url: str
    payload: Any
    status: str
    created_at: datetime
    next_try: datetime
    timeout: int
    fail_count: int
    max_retries: int
    retry_delay: int
    grabbed_by: Optional[str] = None
    grabbed_until: Optional[datetime] = None
    progress: Optional[float] = None
    message: Optional[str] = None
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    concurrency_key: Optional[str] = None
    concurrency_limit: Optional[int] = None
    ordered: Optional[bool] = None
    flow: Optional[JobFlow] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Job:
        return _build(
            cls, d, created_at=parse_time, next_try=parse_time, grabbed_until=parse_time, flow=JobFlow.from_json
        )


@dataclass
class FailedResult:
    """Why a job failed: ``status`` "failure" or "permanent-failure", the
    worker's HTTP ``code`` (0 when no answer came) and its message."""

    status: str
    code: int
    message: str


@dataclass
class FailedJob:
    """An entry of a queue's failure log; ``id`` is the entry's own,
    ``job_id`` the job's."""

    id: int
    job_id: int
    queue_name: str
    category: str
    url: str
    payload: Any
    result: FailedResult
    fail_count: int
    failed_at: datetime
    created_at: datetime

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FailedJob:
        return _build(
            cls, d, result=lambda r: _build(FailedResult, r), failed_at=parse_time, created_at=parse_time
        )


@dataclass
class Queue:
    """A queue's settings; ``polling_interval`` is milliseconds. No
    ``max_dispatches_per_second`` means unthrottled."""

    name: str
    polling_interval: int
    max_workers: int
    max_dispatches_per_second: Optional[float] = None
    max_burst_size: Optional[int] = None
    paused: bool = False
    delivery: str = "push"  # or "pull": workers lease its jobs (Client.lease, Client.work)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Queue:
        return _build(cls, d, max_dispatches_per_second=float)


@dataclass
class QueueStats:
    """A queue's statistics (docs/api.md, "Statistics"); ``total_elapsed``
    is milliseconds."""

    total_pushes: int
    total_pops: int
    total_successes: int
    total_failures: int
    total_permanent_failures: int
    total_completes: int
    total_elapsed: int
    pushes_per_second: float
    pops_per_second: float
    outstanding_jobs: int
    total_workers: int
    idle_workers: int
    active_nodes: int
    total_cancels: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> QueueStats:
        return _build(cls, d, pushes_per_second=float, pops_per_second=float)


@dataclass
class JobLease:
    """The lease of a job a worker accepted, as a heartbeat renewed it."""

    id: int
    lease_expires_at: datetime

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> JobLease:
        return _build(cls, d, lease_expires_at=parse_time)


@dataclass
class LeasedJob:
    """A job of a pull queue leased to this worker (Client.lease): renew its
    lease with ``heartbeat`` and end it with ``complete``, passing
    ``lease_token``. ``attempt`` is 1 for the first lease; ``payload`` is
    the decoded JSON (None when the job has none)."""

    id: int
    queue_name: str
    category: str
    attempt: int
    max_retries: int
    timeout: int
    priority: int
    created_at: datetime
    lease_token: str
    lease_expires_at: datetime
    payload: Any = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LeasedJob:
        return _build(cls, d, created_at=parse_time, lease_expires_at=parse_time)


@dataclass
class Node:
    """A rowq node: its id and host."""

    id: str
    host: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Node:
        return _build(cls, d)


@dataclass
class LiveNode:
    """A live rowq node: when it started, until when its last heartbeat
    holds (the database's times), and how many queues it dispatches."""

    id: str
    host: str
    started_at: datetime
    expires_at: datetime
    queues: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> LiveNode:
        return _build(cls, d, started_at=parse_time, expires_at=parse_time)


@dataclass
class Nodes:
    """The answer of GET /nodes: the live nodes, by id, and the number of
    queues, led or not."""

    nodes: List[LiveNode]
    queues: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Nodes:
        return _build(cls, d, nodes=lambda ns: [LiveNode.from_json(n) for n in ns])


@dataclass
class Routing:
    """A routing: jobs of ``job_category`` go to ``queue_name``."""

    job_category: str
    queue_name: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Routing:
        return _build(cls, d)


@dataclass
class Lease:
    """A lease on a lock: times are the database's; ``limit`` is how many
    holders the lock allows at once (1 for a lock, more for a semaphore).
    Pass ``token`` to what the lock protects (fencing)."""

    name: str
    owner: str
    token: int
    acquired_at: datetime
    expires_at: datetime
    limit: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Lease:
        return _build(cls, d, acquired_at=parse_time, expires_at=parse_time)


@dataclass
class Lock:
    """A lock and its live holders; none when it is free."""

    name: str
    holders: List[Lease] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Lock:
        return _build(cls, d, holders=lambda hs: [Lease.from_json(h) for h in hs])


@dataclass
class NextRun:
    """A coming fire time of a schedule, on its zone's wall clock and in
    UTC; ``paused`` when the schedule is paused (it would fire then if it
    were resumed now)."""

    local: datetime
    utc: datetime
    paused: bool = False


@dataclass
class Schedule:
    """A schedule: its cron spec, zone, job template and state.
    ``next_run_at`` is None while it is paused."""

    name: str
    cron: str
    timezone: str
    category: str
    url: str
    payload: Any
    max_retries: int
    retry_delay: int
    timeout: int
    misfire: str
    max_catchup: int
    overlap: str
    paused: bool
    next_run_at: Optional[datetime]
    created_at: datetime
    updated_at: datetime
    next_runs: List[NextRun] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Schedule:
        return _build(
            cls,
            d,
            next_run_at=parse_time,
            next_runs=lambda rs: [_build(NextRun, r, local=parse_time, utc=parse_time) for r in rs],
            created_at=parse_time,
            updated_at=parse_time,
        )


@dataclass
class ScheduleRun:
    """A run in a schedule's history: ``kind`` "tick" or "trigger"; a
    skipped run has no ``job_id`` and says why in ``reason``."""

    id: int
    schedule: str
    kind: str
    tick: datetime
    fired_at: datetime
    node: str
    job_id: Optional[int]
    queue_name: Optional[str]
    skipped: bool
    reason: Optional[str] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ScheduleRun:
        return _build(cls, d, tick=parse_time, fired_at=parse_time)


@dataclass
class OutboxReject:
    """A row of the transactional outbox that was not a valid job, as the
    application wrote it (None for a NULL column; ``payload`` is the
    column's text), and why (``reason`` names the column)."""

    id: int
    outbox_id: int
    category: str
    url: Optional[str]
    payload: Optional[str]
    run_after: Optional[int]
    max_retries: Optional[int]
    retry_delay: Optional[int]
    timeout: Optional[int]
    priority: Optional[int]
    unique_key: Optional[str]
    created_at: datetime
    reason: str
    rejected_at: datetime
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None
    concurrency_key: Optional[str] = None
    concurrency_limit: Optional[int] = None
    ordered: Optional[bool] = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> OutboxReject:
        return _build(cls, d, created_at=parse_time, rejected_at=parse_time)
