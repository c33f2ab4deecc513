"""Fault injection on moto with botocore event hooks, and a virtual clock for the time a request
would take on AWS against a silent service.

`Silent(client)`: every call of the client (or of the named operations) gets no answer: a
`before-send` hook, registered before moto's stubber, raises botocore's ReadTimeoutError, which
botocore's standard retry mode retries (HTTPClientError) as it does a real timeout. Each attempt
is charged its client's read timeout on `Budget` (a silent service that accepts connections),
and botocore's backoff sleeps are charged there too instead of being slept.

Written by an outside contract audit (round nine), kept for its tests
(tests/integration/test_api_silent_dynamodb.py).
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import botocore.endpoint
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError


@dataclass
class Budget:
    """Virtual seconds a request spends waiting on AWS (timeouts and botocore's backoff)."""

    seconds: float = 0.0
    backoffs: list[float] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)  # service.Operation, one per attempt

    def sleep(self, seconds: float) -> None:
        self.backoffs.append(seconds)
        self.seconds += seconds

    def install(self, monkeypatch: Any) -> None:
        monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=self.sleep))


def _op(event_name: str) -> str:
    return event_name.split(".", 1)[1] if "." in event_name else event_name


@dataclass
class Silent:
    client: Any
    budget: Budget
    ops: frozenset[str] | None = None  # None: every operation
    on: bool = True
    connect: bool = False  # a refused/unreachable endpoint instead of a silent one
    # What an attempt costs: "read" (a connection that goes silent: the read timeout) or
    # "connect+read" (a slow connect, then silence: the project's own worst case,
    # tests/infra/test_timeouts.py worst_call_seconds)
    model: str = "read"

    def __post_init__(self) -> None:
        service = self.client.meta.service_model.service_id.hyphenize()
        self.client.meta.events.register_first(f"before-send.{service}", self)

    def __call__(self, request: Any = None, event_name: str = "", **_: Any) -> None:
        op = event_name.rsplit(".", 1)[-1]
        if not self.on or (self.ops is not None and op not in self.ops):
            return None
        self.budget.calls.append(_op(event_name))
        config = self.client.meta.config
        if self.connect:
            self.budget.seconds += config.connect_timeout
            raise EndpointConnectionError(endpoint_url=getattr(request, "url", "x"))
        self.budget.seconds += config.read_timeout + (
            config.connect_timeout if self.model == "connect+read" else 0
        )
        raise ReadTimeoutError(endpoint_url=getattr(request, "url", "x"))
