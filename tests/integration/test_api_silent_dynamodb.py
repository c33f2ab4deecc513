"""A keyed replay and a batch retry of resumed keyed items against a DynamoDB that goes silent
after the key's mark: one call to the silent table, answered with the app's own 500 inside the
API function's 29 s (until 2026-12-01 the replay unmarked the key, a second silent call, and
the batch marked one item after another: 45-180 s at worst; an outside contract audit, round
nine). As reliability.md says ("a request makes one call to a silent table", so a silent DynamoDB is
answered with the app's own 500 inside the API function's 29 s).

Requests go through the real Lambda handler on moto. Faults are botocore `before-send` hooks on
the API's own DynamoDB client, built as the API function builds it (API_ATTEMPTS); `Budget`
charges each attempt's timeouts and botocore's backoff to a virtual clock (the project's own
worst case, a slow connect then silence: tests/infra/test_timeouts.py worst_call_seconds)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ReadTimeoutError

from duetime.entrypoints import api as api_handler
from duetime.local.lambda_runtime import FakeContext
from duetime.wiring import API_ATTEMPTS, build
from tests.integration.silent_aws import Budget, Silent
from tests.integration.test_api import HANDLER_TARGET, Api, api, http_event  # noqa: F401 - fixture

API_FUNCTION_SECONDS = 29  # the API function's timeout (reliability.md, infra api_timeout)
RECURRING = {"schedule": {"rate_seconds": 3600}, "target": HANDLER_TARGET}


def api_components(api: Api) -> Any:  # noqa: F811
    """The API function's components as deployed: its clients make API_ATTEMPTS attempts."""
    eng = api.engine
    parts = build(
        eng.aws.settings,
        eng.aws.session,
        jitter=lambda: 0.5,
        release_sleep=eng.clock.shift,
        attempts=API_ATTEMPTS,
    )
    api.monkeypatch.setattr(api_handler, "components", lambda: parts)
    api_handler.resolver.cache_clear()
    return parts


def raw_call(method: str, path: str, body: object, headers: dict[str, str] | None = None) -> dict:
    return api_handler.handler(
        http_event(
            method,
            path,
            headers={"content-type": "application/json", **(headers or {})},
            body=None if body is None else json.dumps(body),
            claims={"sub": "tenant-a"},
        ),
        FakeContext(),
    )


class SilentAfterKeyMark(Silent):
    """DynamoDB answers until it has applied the request's first mark of its Idempotency-Key
    (`mark_key`: UpdateItem `SET replayed`), then gives no answer to anything."""

    marked: bool = False
    after_write: bool = False  # only a mark made after a job write (a resumed key's own mark
    wrote: bool = False  # in `prepare` does not count)

    def __call__(self, request: Any = None, event_name: str = "", **kw: Any) -> None:
        if not self.marked:
            body = request.body.decode() if isinstance(request.body, bytes) else str(request.body)
            if '"spec"' in body:
                self.wrote = True
            if event_name.endswith("UpdateItem") and "SET replayed" in body:
                self.marked = self.wrote or not self.after_write
            return None
        return super().__call__(request=request, event_name=event_name, **kw)


class JobWritesSilent:
    """While `on`: every write of a job item gets no answer and is not applied."""

    def __init__(self, client: Any) -> None:
        self.on = True
        for op in ("PutItem", "TransactWriteItems", "BatchWriteItem"):
            client.meta.events.register_first(f"before-send.dynamodb.{op}", self)

    def __call__(self, request: Any = None, event_name: str = "", **_: Any) -> None:
        text = request.body.decode() if isinstance(request.body, bytes) else str(request.body)
        if self.on and '"spec"' in text:
            raise ReadTimeoutError(endpoint_url=request.url)


# --- a keyed replay --------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [RECURRING, {"schedule": {"delay_seconds": 3600}, "target": HANDLER_TARGET}],
    ids=["recurring", "one-off"],
)
def test_a_keyed_replay_makes_one_call_to_a_silent_dynamodb(
    api: Api,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    body: dict,
) -> None:
    """A keyed POST /jobs whose first request answered 201; the client's retry (a replay) marks
    the key (`Submission.answered`: mark_key), and DynamoDB goes silent from there. `answered`'s
    read of the job gets no answer. Until 2026-12-01 its `except Exception` then unmarked the
    key: a second call to the silent table, 30 s under the project's worst-case model, past the
    API function's 29 s (API Gateway's own 5xx instead of the documented 500). The same held
    for a resumed create and a keyed batch item replayed alone."""
    parts = api_components(api)
    Budget().install(monkeypatch)
    assert raw_call("POST", "/jobs", body, {"Idempotency-Key": "r-1"})["statusCode"] == 201
    _answered_once_inside_the_budget(
        parts, monkeypatch, lambda: raw_call("POST", "/jobs", body, {"Idempotency-Key": "r-1"})
    )


def _answered_once_inside_the_budget(
    parts: Any, monkeypatch: pytest.MonkeyPatch, request: Any, *, after_write: bool = False
) -> None:
    """`request` made while DynamoDB goes silent after the key's mark: a 500, after one call
    to the silent table, inside the API function's time."""
    budget = Budget()
    budget.install(monkeypatch)
    hook = SilentAfterKeyMark(parts.jobs._client, budget, model="connect+read")
    hook.after_write = after_write
    raw = request()
    hook.on = False
    assert hook.marked
    assert raw["statusCode"] == 500
    calls = len(budget.calls) / API_ATTEMPTS
    assert calls <= 1, (calls, budget.calls[::API_ATTEMPTS])
    assert budget.seconds < API_FUNCTION_SECONDS, budget.seconds


# --- a batch retry of resumed keyed items ---------------------------------------------


@pytest.mark.parametrize("n", [1, 3, 10])
def test_a_batch_retry_of_resumed_keyed_items_answers_inside_29_s(
    api: Api,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    n: int,
) -> None:
    """api.md (POST /jobs/batch): a batch whose DynamoDB gave no answer is retried with its
    items' idempotency_keys. Here the first batch's job writes got no answer (keys claimed and
    counted, no job); the retry resumes every item, writes and sends them, and DynamoDB goes
    silent once the first resumed item's key is marked (`answered`). Until 2026-12-01
    `BatchSubmitter._write` went on to the next resumed item after each failure, one more call
    to the silent table each, then read the first job: n + 2 calls, 45 s for 1 item, 75 s for
    3, 150 s for 10 (worst-case model). It stops at the first silent one now."""
    parts = api_components(api)
    Budget().install(monkeypatch)
    body = {"jobs": [{**RECURRING, "idempotency_key": f"b-{j}"} for j in range(n)]}
    outage = JobWritesSilent(parts.jobs._client)
    assert raw_call("POST", "/jobs/batch", body)["statusCode"] == 500
    outage.on = False
    assert api.job_items() == []
    _answered_once_inside_the_budget(
        parts, monkeypatch, lambda: raw_call("POST", "/jobs/batch", body), after_write=True
    )
