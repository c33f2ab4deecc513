"""Python handler targets: the registry, the built-ins, and error translation."""

from __future__ import annotations

import time

import pytest

from duetime.domain.targets import HandlerTarget
from duetime.targets import (
    DEFAULT_HANDLERS,
    HandlerRegistry,
    Invocation,
    TargetError,
    TargetExecutor,
)


def invocation(payload: object = None, *, attempt: int = 1, timeout: float = 5.0) -> Invocation:
    return Invocation(
        tenant="acme",
        job_id="01JOB",
        run_id="01JOB-1700000000000",
        scheduled_ms=1_700_000_000_000,
        attempt=attempt,
        payload=payload,
        timeout_seconds=timeout,
    )


def run(name: str, inv: Invocation, registry: HandlerRegistry | None = None) -> None:
    TargetExecutor(handlers=registry).execute(HandlerTarget(name=name), inv)


def test_given_the_default_registry_then_the_builtins_are_registered() -> None:
    assert {"duetime.noop", "duetime.sleep", "duetime.fail"} <= set(DEFAULT_HANDLERS.names())


def test_given_noop_when_executed_then_it_succeeds() -> None:
    run("duetime.noop", invocation({"anything": [1, 2]}))


def test_given_sleep_within_the_timeout_when_executed_then_it_sleeps_and_succeeds() -> None:
    started = time.monotonic()

    run("duetime.sleep", invocation({"seconds": 0.05}, timeout=1.0))

    assert time.monotonic() - started >= 0.05


def test_given_sleep_longer_than_the_timeout_when_executed_then_it_times_out_at_the_timeout() -> (
    None
):
    started = time.monotonic()

    with pytest.raises(TargetError, match="timed out") as caught:
        run("duetime.sleep", invocation({"seconds": 60}, timeout=0.05))

    elapsed = time.monotonic() - started
    assert 0.05 <= elapsed < 10.0  # ended at the timeout, long before the 60 s asked for
    assert caught.value.retryable


@pytest.mark.parametrize(
    "payload", [None, {}, {"seconds": "1"}, {"seconds": -1}, {"seconds": True}]
)
def test_given_sleep_without_a_valid_duration_when_executed_then_it_fails_for_good(
    payload: object,
) -> None:
    with pytest.raises(TargetError, match="seconds") as caught:
        run("duetime.sleep", invocation(payload))

    assert not caught.value.retryable


@pytest.mark.parametrize("payload", [None, {}, "whatever"])
def test_given_fail_without_until_attempt_when_executed_then_every_attempt_fails(
    payload: object,
) -> None:
    for attempt in (1, 2, 10):
        with pytest.raises(TargetError) as caught:
            run("duetime.fail", invocation(payload, attempt=attempt))
        assert str(caught.value) == f"duetime.fail: attempt {attempt}"
        assert caught.value.retryable


def test_given_fail_until_attempt_3_when_attempts_run_then_1_and_2_fail_and_3_succeeds() -> None:
    outcomes = []
    for attempt in (1, 2, 3, 4):
        try:
            run("duetime.fail", invocation({"until_attempt": 3}, attempt=attempt))
            outcomes.append("ok")
        except TargetError as exc:
            outcomes.append(str(exc))

    assert outcomes == ["duetime.fail: attempt 1", "duetime.fail: attempt 2", "ok", "ok"]


def test_given_fail_with_an_invalid_until_attempt_when_executed_then_it_fails_for_good() -> None:
    with pytest.raises(TargetError, match="until_attempt") as caught:
        run("duetime.fail", invocation({"until_attempt": "3"}))

    assert not caught.value.retryable


def test_given_an_unknown_name_when_executed_then_a_non_retryable_error_names_it() -> None:
    with pytest.raises(TargetError, match=r"billing\.nope") as caught:
        run("billing.nope", invocation())

    assert not caught.value.retryable


def test_given_a_custom_handler_when_executed_then_it_receives_the_invocation() -> None:
    registry = HandlerRegistry()
    received: list[Invocation] = []

    @registry.handler("billing.close_day")
    def close_day(inv: Invocation) -> None:
        received.append(inv)

    inv = invocation({"day": "2026-11-21"}, attempt=2)
    run("billing.close_day", inv, registry)

    assert received == [inv]
    assert "billing.close_day" in registry
    assert "duetime.noop" not in registry  # a new registry starts empty


def test_given_a_handler_that_raises_when_executed_then_a_retryable_target_error_wraps_it() -> None:
    registry = HandlerRegistry()

    def explode(inv: Invocation) -> None:
        raise RuntimeError("ledger locked")

    registry.register("billing.explode", explode)

    with pytest.raises(TargetError) as caught:
        run("billing.explode", invocation(), registry)

    assert str(caught.value) == "ledger locked"
    assert caught.value.retryable
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_given_a_handler_raising_an_empty_exception_then_the_message_names_its_type() -> None:
    def empty(inv: Invocation) -> None:
        raise KeyError

    registry = HandlerRegistry({"billing.empty": empty})

    with pytest.raises(TargetError, match="KeyError"):
        run("billing.empty", invocation(), registry)


def test_given_a_handler_raising_target_error_then_its_retryable_flag_is_kept() -> None:
    registry = HandlerRegistry()

    @registry.handler("billing.reject")
    def reject(inv: Invocation) -> None:
        raise TargetError("account closed", retryable=False)

    with pytest.raises(TargetError, match="account closed") as caught:
        run("billing.reject", invocation(), registry)

    assert not caught.value.retryable


def test_given_a_very_long_error_message_then_it_is_truncated_to_500_characters() -> None:
    registry = HandlerRegistry()

    @registry.handler("billing.verbose")
    def verbose(inv: Invocation) -> None:
        raise ValueError("x" * 5000)

    with pytest.raises(TargetError) as caught:
        run("billing.verbose", invocation(), registry)

    assert len(str(caught.value)) == 500


def test_given_a_taken_name_when_another_function_registers_it_then_registration_fails() -> None:
    registry = HandlerRegistry()

    def first(inv: Invocation) -> None: ...

    def second(inv: Invocation) -> None: ...

    registry.register("billing.job", first)
    registry.register("billing.job", first)  # the same function again (a re-import) is fine

    with pytest.raises(ValueError, match="already registered"):
        registry.register("billing.job", second)


@pytest.mark.parametrize("name", ["", "has space", "1starts.with.digit", "x" * 200])
def test_given_a_name_no_job_could_reference_when_registered_then_it_is_rejected(
    name: str,
) -> None:
    with pytest.raises(ValueError, match="invalid handler name"):
        HandlerRegistry().register(name, lambda inv: None)
