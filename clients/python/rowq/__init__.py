"""rowq: a Python client of rowq's HTTP API (jobs, queues, routings, the
failure log, locks and schedules), on the standard library alone.

    import rowq

    client = rowq.Client("http://127.0.0.1:8080")
    client.enqueue("welcome-mail", "http://worker.internal/send", {"to": "ada@example.com"})
    with client.lock("nightly-report", ttl=30, wait=10) as lease:
        make_report(fence=lease.token)
"""

from .client import DEFAULT_URL, DEFERRED, GRABBED, WAITING, Client, default_owner
from .errors import Conflict, LeaseConflict, LeaseLost, LockHeld, NotFound, PermanentFailure, RowqError
from .lease import HeldLease
from .worker import Handler
from .types import (
    Batch,
    FailedJob,
    FailedResult,
    Job,
    JobFlow,
    JobLease,
    Lease,
    LeasedJob,
    Lock,
    NewJob,
    NextRun,
    LiveNode,
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
    parse_time,
)

__version__ = "0.1.0"

__all__ = [
    "Batch",
    "DEFAULT_URL",
    "DEFERRED",
    "GRABBED",
    "WAITING",
    "Client",
    "Conflict",
    "FailedJob",
    "FailedResult",
    "Handler",
    "HeldLease",
    "Job",
    "JobFlow",
    "JobLease",
    "Lease",
    "LeaseConflict",
    "LeasedJob",
    "LeaseLost",
    "Lock",
    "LiveNode",
    "LockHeld",
    "NewJob",
    "NextRun",
    "Node",
    "Nodes",
    "OutboxReject",
    "NotFound",
    "Page",
    "PermanentFailure",
    "PushedBatch",
    "PushedJob",
    "Queue",
    "QueueStats",
    "Routing",
    "RowqError",
    "Schedule",
    "ScheduleRun",
    "default_owner",
    "parse_time",
]
