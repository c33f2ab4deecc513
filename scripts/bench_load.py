"""The bench's `load` scenario, through the front door: N concurrent HTTP clients posting jobs
to the local gateway (loopback only) for a bounded time, as a new user would.

Each client keeps one HTTP/1.1 connection open (reconnecting after an error), posts a
`delay_seconds` one-off, waits for the answer and posts the next. A 201 is an accepted job,
whose run the bench then accounts for (exactly once, lateness); any other status is counted
by status; a request that gets no HTTP answer at all (refused, reset, timed out, closed
mid-answer) is a connection error: that client cannot know whether its job exists.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

NOOP_TARGET = {"type": "handler", "name": "duetime.noop"}
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
REQUEST_TIMEOUT_SECONDS = 30.0


def load_body(i: int) -> dict[str, Any]:
    """The i-th job a client posts: a one-off 1 to 3 s after the server receives it. A delay
    counts from the server's own clock, so the body is valid whatever the client's clock, its
    phase in the minute, or how long the request waited in a queue."""
    return {"schedule": {"delay_seconds": 1 + i % 3}, "target": NOOP_TARGET}


def due_ms(job: dict[str, Any]) -> int:
    """The scheduled instant of an accepted one-off, from the API's answer."""
    return instant_ms(job["next_run_at"])


def instant_ms(text: str) -> int:
    """An RFC 3339 instant of the API's (`...Z`) as epoch ms."""
    return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def requested_ms(job: dict[str, Any], body: dict[str, Any]) -> int | None:
    """The instant a load body asked for: its delay counted from the job's creation, as the
    API answered it (None when the answer has no `created_at`)."""
    created = job.get("created_at")
    if created is None:
        return None
    return instant_ms(created) + int(body["schedule"]["delay_seconds"]) * 1000


@dataclass
class LoadResult:
    """What the clients saw: accepted (job id, scheduled ms), tenants per job, latencies (ms)
    of every request that got an HTTP answer, statuses and connection errors."""

    accepted: list[tuple[str, int]] = field(default_factory=list)
    # (job id, the instant its body asked for, the instant the API scheduled): the bench
    # counts a difference as an accounting error.
    requested: list[tuple[str, int, int | None]] = field(default_factory=list)
    tenant_of: dict[str, str] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    connection_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


def run_load(
    url: str, tokens: list[tuple[str, str]], seconds: float, result: LoadResult | None = None
) -> LoadResult:
    """One client per (tenant, token), all posting to `url` (loopback only) for `seconds`."""
    split = urlsplit(url)
    if split.hostname not in LOOPBACK or split.port is None:
        raise ValueError(f"the load scenario only targets a loopback gateway: {url}")
    out = result or LoadResult()
    start = threading.Barrier(len(tokens) + 1)
    deadline: list[float] = []

    def client(tenant: str, token: str) -> None:
        start.wait()
        _client(split.hostname or "127.0.0.1", split.port or 80, tenant, token, deadline[0], out)

    threads = [
        threading.Thread(target=client, args=pair, name=f"load-{k}", daemon=True)
        for k, pair in enumerate(tokens)
    ]
    for thread in threads:
        thread.start()
    began = time.monotonic()
    deadline.append(began + seconds)
    start.wait()  # every client starts at once: the burst of connections the backlog must hold
    for thread in threads:
        thread.join()
    out.seconds = round(time.monotonic() - began, 2)
    return out


def _client(
    host: str, port: int, tenant: str, token: str, deadline: float, out: LoadResult
) -> None:
    headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
    connection: http.client.HTTPConnection | None = None
    i = 0
    while time.monotonic() < deadline:
        if connection is None:
            connection = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_SECONDS)
        raw = load_body(i)
        body = json.dumps(raw).encode()
        i += 1
        sent = time.perf_counter()
        try:
            connection.request("POST", "/jobs", body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
        except (OSError, http.client.HTTPException) as exc:  # no answer: reset, refused, ...
            with out.lock:
                out.connection_errors.append(f"{type(exc).__name__}: {exc}")
            connection.close()
            connection = None
            continue
        latency = (time.perf_counter() - sent) * 1000
        with out.lock:
            out.latencies_ms.append(round(latency, 1))
            out.statuses[response.status] += 1
            if response.status == 201:
                job = json.loads(payload)
                out.accepted.append((job["id"], due_ms(job)))
                if (want := requested_ms(job, raw)) is not None:
                    out.requested.append((job["id"], want, due_ms(job)))
                out.tenant_of[job["id"]] = tenant
        if response.will_close:
            connection.close()
            connection = None
    if connection is not None:
        connection.close()


if __name__ == "__main__":
    print(
        "bench_load.py is a part of scripts/bench.py: run scripts/bench.py --only load",
        file=sys.stderr,
    )
    sys.exit(2)
