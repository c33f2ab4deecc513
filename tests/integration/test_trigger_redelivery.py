"""An upstream's message that comes back after its run finished (its worker died between the
trigger sends, or its delete was lost) sends its dependents' runs again: a run a pause or a
change dropped in between stays dropped, as it would have without the crash."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from duetime.domain.ids import run_id
from duetime.domain.jobs import Priority, Runtime, jitter_offset_ms, parse_job_spec
from duetime.domain.runs import RunStatus
from duetime.domain.timeutil import rfc3339_ms
from duetime.services.dependencies import TRIGGER_READS
from tests.integration.test_dependencies import T0, TENANT, Engine


class Crash(BaseException):
    """The worker's invocation died."""


def run_upstream_and_die_after_its_first_sends(engine: Engine, upstream: str) -> None:
    """The upstream runs; its worker dies after the first chunk of trigger messages went out
    (its message comes back after the visibility timeout)."""
    send = engine.queue.send
    sends = 0

    def dying(messages: Any) -> None:
        nonlocal sends
        sends += 1
        if sends == 2:
            raise Crash
        send(messages)

    engine.queue.send = dying  # type: ignore[method-assign]
    [delivery] = engine.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0)
    with contextlib.suppress(Crash):
        engine.executor.handle(delivery)
    engine.queue.send = send  # type: ignore[method-assign]


def deliver_all(engine: Engine) -> None:
    while deliveries := engine.queue.receive(Runtime.LAMBDA, Priority.NORMAL, 1, 0):
        if engine.executor.handle(deliveries[0]).disposition == "done":
            engine.queue.delete(deliveries)


def test_given_a_trigger_a_pause_dropped_when_its_upstream_s_message_returns_then_it_stays_so() -> (
    None
):
    # The redelivery sent it again under the resumed job's generation, and the run the pause
    # had dropped ran after the resume: what a pause does depended on whether a worker died.
    engine = Engine()
    upstream = engine.create({"at": rfc3339_ms(T0)})
    dependents = sorted(engine.after(upstream) for _ in range(TRIGGER_READS + 5))
    paused = dependents[0]  # of the chunk sent before the crash
    run_upstream_and_die_after_its_first_sends(engine, upstream)

    engine.service.pause(TENANT, paused)
    deliver_all(engine)  # the first chunk's runs: the paused one's is dropped
    engine.service.resume(TENANT, paused)
    engine.now += 120_000  # the upstream's message is visible again
    deliver_all(engine)

    assert engine.runs_of(paused) == []
    assert all(len(engine.runs_of(d)) == 1 for d in dependents[1:])  # none lost, none twice
    record = engine.runs.get(paused, T0)
    assert record is not None
    assert record.status == RunStatus.SKIPPED


def test_given_a_trigger_dropped_by_a_pause_and_resume_before_its_claim_then_it_stays_dropped() -> (
    None
):
    # Paused and resumed before its run was claimed: the run, of the generation before, is
    # dropped ("changed since"); the upstream's redelivery must not send it again either.
    engine = Engine()
    upstream = engine.create({"at": rfc3339_ms(T0)})
    dependents = sorted(engine.after(upstream) for _ in range(TRIGGER_READS + 5))
    changed = dependents[0]
    run_upstream_and_die_after_its_first_sends(engine, upstream)

    engine.service.pause(TENANT, changed)
    engine.service.resume(TENANT, changed)
    deliver_all(engine)
    engine.now += 120_000
    deliver_all(engine)

    assert engine.runs_of(changed) == []
    record = engine.runs.get(changed, T0)
    assert record is not None
    assert record.status == RunStatus.SKIPPED


def test_given_a_dependent_of_the_unsent_chunk_paused_and_resumed_then_it_runs_once() -> None:
    # Its trigger never went out before the crash: owed, it runs from the redelivery (the
    # record a dropped run leaves must not stand in its way).
    engine = Engine()
    upstream = engine.create({"at": rfc3339_ms(T0)})
    dependents = sorted(engine.after(upstream) for _ in range(TRIGGER_READS + 5))
    unsent = dependents[-1]
    run_upstream_and_die_after_its_first_sends(engine, upstream)

    deliver_all(engine)
    engine.service.pause(TENANT, unsent)
    engine.service.resume(TENANT, unsent)
    engine.now += 120_000
    deliver_all(engine)

    assert len(engine.runs_of(unsent)) == 1
    assert all(len(engine.runs_of(d)) == 1 for d in dependents)


def test_given_a_dependent_moved_to_another_upstream_then_it_runs_for_its_new_upstream_s_run() -> (
    None
):
    # The trigger of its old upstream, dropped by the move (a change), was recorded `skipped`
    # under <dependent>-<instant>, and the new upstream's run at the same instant was taken
    # for a copy of it: the dependent never ran for it (a lifecycle audit, round four).
    jitter = 60  # both jobs' waits past the PATCH at +2 s: found within a few draws
    for _ in range(50):
        engine = Engine()
        old = engine.create({"at": rfc3339_ms(T0)})
        body = {
            "schedule": {"at": rfc3339_ms(T0)},
            "target": {"type": "http", "url": "https://example.com/hook"},
            "jitter_seconds": jitter,
        }
        new = engine.service.create(TENANT, parse_job_spec(body)).id
        after_old = {
            "schedule": {"after": {"job_id": old}},
            "target": {"type": "http", "url": "https://example.com/hook"},
            "jitter_seconds": jitter,
        }
        moved = engine.service.create(TENANT, parse_job_spec(after_old)).id
        waits = jitter_offset_ms(moved, T0, jitter), jitter_offset_ms(new, T0, jitter)
        if waits[0] > 5_000 and waits[1] > 5_000:
            break
    else:
        pytest.fail("no draw of job ids gave both waits past the PATCH")
    engine.work()  # the old upstream's run: its trigger waits out the dependent's jitter
    engine.now = T0 + 2_000
    engine.service.update(TENANT, moved, {"schedule": {"after": {"job_id": new}}})
    while engine.now < T0 + sum(waits) + 5_000:
        engine.now += 1_000
        engine.work()

    [ran] = engine.runs_of(moved)
    assert ran.upstream_run_id == run_id(new, T0)
