"""Timer and stuck-timer items whose attributes hold the wrong *type* (a string where a number
belongs) or lost one, on moto: each is salvaged like an item that does not decode, and holds
back no other timer of its partition or shard.

Found by an outside audit (round 29): the decoders checked no type, so such an item got past
the salvage (`readable_timer`, `readable_stuck`) and raised later, outside the hand-over's
isolation: a chain's string `bytes` or a one-off's string `jit` failed its partition at every
sweep, for good (its other timers never sent, its shard's cursor stopped); a stuck entry's
string `due` failed the shard's retries at every sweep; and a chain timer that lost its `gen`
was read as generation 0 though its sort key named 2, and dropped silently as a stale chain."""

from __future__ import annotations

from typing import Any

import pytest

from duetime.domain.timeutil import MINUTE_MS, rfc3339_ms, to_ms
from tests.integration.conftest import START, Engine

DUE = (to_ms(START) // MINUTE_MS + 5) * MINUTE_MS  # a minute five minutes ahead


def timer_items(engine: Engine) -> list[dict[str, Any]]:
    table = engine.aws.settings.timers_table
    items = engine.aws.dynamodb.scan(TableName=table)["Items"]
    return [item for item in items if item["sk"]["S"][0].isdigit()]


def put(engine: Engine, item: dict[str, Any]) -> None:
    engine.aws.dynamodb.put_item(TableName=engine.aws.settings.timers_table, Item=item)


def job_of(item: dict[str, Any]) -> str:
    return str(item["sk"]["S"].split("#")[1])


def sweep_through(engine: Engine, minutes: int = 1) -> None:
    """Sweeps once a minute past DUE (engine.tick raises if a shard's sweep failed), then the
    workers drain the queues."""
    engine.advance_to(DUE - 30_000)
    for _ in range(minutes):
        engine.tick()
        engine.advance(60)
        engine.drain()


@pytest.mark.parametrize("corrupt", ["chain_bytes", "one_off_jit"])
def test_given_a_timer_attribute_of_the_wrong_type_then_its_partition_goes_out_all_the_same(
    engine: Engine, corrupt: str
) -> None:
    # Given one-offs and a chain due in one minute (two one-offs at least in the chain's
    # partition), one item of that partition corrupted
    chain = engine.submit(
        {"schedule": {"rate_seconds": 3600, "start_at": rfc3339_ms(DUE)}}, tenant="tenant-b"
    )
    shard = engine.parts.timers.shard_of(chain)
    one_offs: list[str] = []
    while len(one_offs) < 12 or sum(engine.parts.timers.shard_of(j) == shard for j in one_offs) < 2:
        one_offs.append(engine.submit({"schedule": {"at": rfc3339_ms(DUE + 1000 + len(one_offs))}}))
    items = timer_items(engine)
    chain_item = next(item for item in items if job_of(item) == chain)
    partition = [item for item in items if item["pk"] == chain_item["pk"]]
    if corrupt == "chain_bytes":
        put(engine, chain_item | {"bytes": {"S": "412"}})
    else:  # the partition's first one-off
        victim = min((i for i in partition if "q" in i), key=lambda i: i["sk"]["S"])
        put(engine, victim | {"jit": {"S": "250"}})

    # When its minute is swept
    sweep_through(engine)

    # Then every timer goes out, the corrupted one too (read from its sort key: its hand-over
    # reads the job), and the sweep fails no partition
    ran = {c.job_id for c in engine.recorder.calls}
    assert ran == {*one_offs, chain}
    assert engine.parts.sweeper.stuck() == []


def test_given_a_chain_timer_that_lost_its_gen_then_its_sort_key_names_the_generation(
    engine: Engine,
) -> None:
    # Given a job paused and resumed (generation 2: its timer's key ends "#2") whose timer item
    # lost its `gen` attribute
    job = engine.submit(
        {"schedule": {"rate_seconds": 600, "start_at": rfc3339_ms(DUE)}}, tenant="tenant-b"
    )
    engine.parts.service.pause("tenant-b", job)
    engine.parts.service.resume("tenant-b", job)
    item = next(i for i in timer_items(engine) if job_of(i) == job and i["sk"]["S"].endswith("#2"))
    put(engine, {k: v for k, v in item.items() if k != "gen"})

    # When its minute is swept
    sweep_through(engine)

    # Then its chain goes on (until 2026-12-01: read as generation 0 and dropped as stale)
    assert engine.recorder.runs_of(job) == [DUE]


def parked_one_off(engine: Engine) -> tuple[str, dict[str, Any]]:
    """A one-off due at DUE + 1 s whose timer is gone, and the stuck entry (due for a retry)
    that alone can send its run: (its job id, the entry's item, not yet written)."""
    job = engine.submit({"schedule": {"at": rfc3339_ms(DUE + 1000)}})
    for item in timer_items(engine):
        if job_of(item) == job:
            key = {"pk": item["pk"], "sk": item["sk"]}
            engine.aws.dynamodb.delete_item(TableName=engine.aws.settings.timers_table, Key=key)
    due, shard = DUE + 1000, engine.parts.timers.shard_of(job)
    return job, {
        "pk": {"S": f"stuck#{shard}"},
        "sk": {"S": f"r#0000000000001#{due:013d}#{job}#0"},
        "tenant": {"S": "tenant-a"},
        "job_id": {"S": job},
        "due": {"N": str(due)},
        "gen": {"N": "0"},
        "bytes": {"N": "0"},
        "q": {"S": "lambda/normal"},
        "jit": {"N": "0"},
        "stg": {"N": "0"},
        "attempts": {"N": "1"},
        "reason": {"S": "injected"},
        "first_failed": {"N": "1"},
        "last_failed": {"N": "1"},
    }


@pytest.mark.parametrize(
    "corrupt",
    [
        {"due": {"S": "1"}},  # a copy of its key's: the key names the timer
        {"attempts": {"S": "1"}},  # not in its key: the entry does not decode, and is skipped
    ],
    ids=["due", "attempts"],
)
def test_given_a_stuck_entry_attribute_of_the_wrong_type_then_the_shard_s_other_ones_are_retried(
    engine: Engine, corrupt: dict[str, Any]
) -> None:
    # Given two parked entries of one shard, both due for a retry, and the first corrupted:
    # the good one's run can be sent only by its retry (its own timer is gone)
    job, good = parked_one_off(engine)
    due = DUE + 1000
    bad_job = "01BADBADBADBADBADBADBADBAD"
    bad = good | {
        "sk": {"S": f"r#0000000000000#{DUE:013d}#{bad_job}#0"},
        "job_id": {"S": bad_job},
        "due": {"N": str(DUE)},
    }
    put(engine, good)
    put(engine, bad | corrupt)

    # When the shard is swept (until 2026-12-01 each sweep raised on the corrupted entry)
    sweep_through(engine)

    # Then the good entry is retried: its run goes out, and its entry is gone
    assert engine.recorder.runs_of(job) == [due]
    assert job not in {s.timer.job_id for s in engine.parts.sweeper.stuck()}


@pytest.mark.parametrize(
    "corrupt",
    [{"bytes": {"S": "412"}}, {"stg": {"S": "0"}}, {"jit": {"S": "0"}}, {"q": {"N": "1"}}, {}],
    ids=["bytes", "stg", "jit", "q", "control"],
)
def test_given_a_stuck_entry_with_a_bad_copy_of_its_job_then_it_is_retried_and_runs(
    engine: Engine, corrupt: dict[str, Any]
) -> None:
    # The copies of the job's settings checked for their type made such an entry undecodable:
    # dropped, never retried nor listed (a review the same day). Its retry reads the job.
    job, entry = parked_one_off(engine)
    due = DUE + 1000
    put(engine, entry | corrupt)
    assert job in {s.timer.job_id for s in engine.parts.sweeper.stuck()}  # listed

    sweep_through(engine)

    assert engine.recorder.runs_of(job) == [due]
    assert job not in {s.timer.job_id for s in engine.parts.sweeper.stuck()}
