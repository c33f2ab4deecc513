"""The engine's SQS client gives up on an SQS that accepts connections and never answers before
the sweeper function is stopped: the sweep then keeps its progress and its partition moves on
at the next sweep (docs/reliability.md "Stuck timers"). With botocore's defaults (60 s to
connect and 60 s for an answer, an attempt) the function was stopped first."""

from __future__ import annotations

import inspect

from duetime.services.sweep import Sweeper
from duetime.wiring import sqs_config
from infra.props import SchedulerProps
from tests.infra.conftest import ISSUER

BACKOFF_CAP_SECONDS = 20  # botocore's standard retry mode: at most 2**n s before attempt n + 2


def worst_call_seconds(poll_seconds: int) -> float:
    config = sqs_config(poll_seconds)
    attempts = config.retries["max_attempts"]
    per_attempt = config.connect_timeout + config.read_timeout  # a slow connect, then silence
    backoff = sum(min(2**n, BACKOFF_CAP_SECONDS) for n in range(attempts - 1))
    return float(attempts * per_attempt + backoff)


def test_a_send_to_a_silent_sqs_fails_before_the_sweeper_function_is_stopped() -> None:
    deadline_ms = inspect.signature(Sweeper).parameters["deadline_ms"].default
    # A sweep checks its deadline between groups; a group's send may start just before it.
    worst = deadline_ms / 1000 + worst_call_seconds(poll_seconds=1)
    props = SchedulerProps(jwt_issuer=ISSUER, jwt_audience=("duetime",))
    assert worst < props.sweeper_timeout_seconds, worst


def test_a_long_poll_is_not_cut_short() -> None:
    for wait in (1, 10, 20):
        assert sqs_config(wait).read_timeout > wait
