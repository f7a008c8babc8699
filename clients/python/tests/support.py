"""What the tests share: the server under test and a worker to deliver to.

The tests run against a live rowq server at $ROWQ_URL; without it they fail.
Every name they create has a random suffix, so they can run again, or
beside other tests, against the same server.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple

import rowq


def server_url() -> str:
    url = os.environ.get("ROWQ_URL", "")
    if not url:
        raise RuntimeError("ROWQ_URL is not set: the tests need a live rowq server (rowq serve) at that URL")
    return url


def client() -> rowq.Client:
    return rowq.Client(server_url(), timeout=10)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Delivery:
    """One request the worker received."""

    def __init__(self, path: str, headers: Dict[str, str], body: bytes) -> None:
        self.path = path
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


# An answer: (HTTP status, JSON body).
Answer = Tuple[int, Dict[str, Any]]


class Worker:
    """A rowq worker on http.server in a thread: it records every request
    and answers with what ``answer(delivery)`` returns (success by default)."""

    def __init__(self, answer: Optional[Callable[[Delivery], Answer]] = None) -> None:
        self._answer = answer or (lambda d: (200, {"status": "success"}))
        self._cond = threading.Condition()
        self.deliveries: List[Delivery] = []
        worker = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self._serve()

            def do_GET(self) -> None:
                self._serve()

            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                d = Delivery(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with worker._cond:
                    worker.deliveries.append(d)
                    worker._cond.notify_all()
                status, answer = worker._answer(d)
                out = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def received(self, path: str) -> List[Delivery]:
        """The requests the worker has received on path so far."""
        with self._cond:
            return [d for d in self.deliveries if d.path == path]

    def wait_for(self, path: str, n: int, timeout: float = 10) -> List[Delivery]:
        """Waits until the worker has received n requests on path, and returns them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [d for d in self.deliveries if d.path == path]
                if len(got) >= n:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"worker got {len(got)} requests on {path} within {timeout} s, want {n}")
                self._cond.wait(left)


def eventually(test: unittest.TestCase, check: Callable[[], bool], what: str, timeout: float = 10) -> None:
    """Fails the test unless check() turns true within timeout."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            test.fail(f"not within {timeout} s: {what}")
        time.sleep(0.05)
