"""`scripts/chaos.py`: fault injection at scale, with Jepsen-style accounting.

    .venv/bin/python scripts/chaos.py --jobs 2000 --fault-rate 0.2 --seed 1

Runs the reliability harness (tests/reliability/harness.py: the real sweeper and worker
handlers on an in-process moto account, time moved with time-machine) with every fault of
docs/reliability.md at once, at `--fault-rate`:

- crashes: the sweeper dies after reading a page, after sending a page before recording it,
  and between shards; the worker dies after a claim, after executing before recording, and
  after recording before the delete; each on every 1/rate-th hit. The "process" is replaced
  by a fresh one (new components) and the system runs on;
- deliveries: every message is sent twice; that share of processed messages' deletes is lost;
- ticks: that share of minutes has its tick missed, duplicated, or followed by a stale one;
- AWS errors: that share of DynamoDB and SQS calls is refused with throttling or a 500
  (a quarter of that share again takes effect but answers 500).

Then the faults heal and the system runs on normally for four simulated minutes (longer than
every recovery path). Runs that a dying worker received ten times are in a DLQ by then (the
redrive policy's poison protection): they are counted as dead, sent back by the service of
`duetime dlq redrive` (duetime.services.dead_letters), and the system runs on for four more
minutes. It prints, for every job with a lost, duplicated or unexpected run (or every job with
--table), runs expected, started, lost, duplicated, unexpected (runs of recurring jobs count up
to the end of the window), and the totals. Exit status 1 if a run was lost or ran
unexpectedly, or if there were more duplicates than deaths in the documented window (target
executed, outcome not recorded). `--faults` picks a subset of crashes,deliveries,ticks,errors.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]

FAULTS = ("crashes", "deliveries", "ticks", "errors")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--window-seconds", type=int, default=600, help="jobs fall due within this window"
    )
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated subset")
    parser.add_argument("--table", action="store_true", help="print every job, not anomalies")
    args = parser.parse_args(argv)
    faults = {f.strip() for f in args.faults.split(",") if f.strip()}
    if unknown := faults - set(FAULTS):
        parser.error(f"unknown fault(s): {', '.join(sorted(unknown))}")
    if not 0 <= args.fault_rate < 1:
        parser.error("--fault-rate must be in [0, 1)")
    if args.jobs < 1 or args.window_seconds < 1:
        parser.error("--jobs and --window-seconds must be at least 1")

    import contextlib
    import logging
    import os
    import warnings

    from duetime.local.moto_sqs import make_sqs_fast
    from tests.reliability.harness import (
        TransientErrors,
        open_cluster,
        submit_mix,
        sweeper_crash_points,
        worker_crash_points,
    )

    # The functions log every run and print their metrics; the table is this script's output.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    quiet = contextlib.redirect_stdout(open(os.devnull, "w"))  # noqa: SIM115
    make_sqs_fast()  # moto's SQS scans the whole queue per message otherwise (duetime.local)
    rate = args.fault_rate
    every = max(2, round(1 / rate)) if rate else 0
    rng = random.Random(args.seed)
    started = time.monotonic()
    options = {}
    if "deliveries" in faults and rate:
        options = {"duplicate_sends": True, "lose_deletes": rate}
    with quiet, open_cluster(**options) as cluster:
        workload = submit_mix(
            cluster, args.jobs, window_seconds=args.window_seconds, seed=args.seed
        )
        points = {}
        if "crashes" in faults and every:
            points = sweeper_crash_points(every, None) | worker_crash_points(every, None)
            for _, install in points.values():
                cluster.add(install)
        errors = TransientErrors(rate=rate, ambiguous_rate=rate / 4, seed=args.seed)
        if "errors" in faults and rate:
            cluster.add(errors.install)
        tick_faults = {"missed": 0, "duplicated": 0, "stale": 0}

        def ticks(minute: int) -> Sequence[int]:
            if "ticks" not in faults or rng.random() >= rate:
                return (0,)
            kind = rng.choice(sorted(tick_faults))
            tick_faults[kind] += 1
            return {"missed": (), "duplicated": (0, 0), "stale": (0, -60_000)}[kind]

        minutes = args.window_seconds // 60 + 1
        cluster.run(minutes, ticks=ticks)
        # Heal, as Jepsen does before its final reads: the system must then finish everything.
        for point, _ in points.values():
            point.enabled = False
        errors.enabled = False
        cluster.lose_deletes = 0.0
        cluster.recover(workload)
        # Runs whose message a dying worker received 10 times were moved to a DLQ by the
        # redrive policy (as designed: poison protection). They are dead, not lost: send them
        # back with `duetime dlq redrive` and let them run.
        dead_before = accounting_of_dead(cluster, workload)
        dlq = dlq_redrive(cluster)
        cluster.recover(workload)
        accounting = workload.account(cluster.recorder)
        dead_after = accounting_of_dead(cluster, workload)
        explained = [explain(cluster, job, ms) for job, ms in accounting.lost_runs()]

    elapsed = time.monotonic() - started
    print(accounting.table(only_anomalies=not args.table), end="")
    totals = accounting.totals
    window_deaths = errors.window_failures + sum(p.window_deaths for p, _ in points.values())
    print()
    print(
        f"jobs {totals.jobs}, runs expected {totals.expected}, started {totals.started}, "
        f"lost {totals.lost}, duplicated {totals.duplicated}, unexpected {totals.unexpected}"
    )
    print(
        f"fault rate {rate:g} ({', '.join(sorted(faults))}), seed {args.seed}; "
        f"{elapsed:.0f} s on this machine"
    )
    for point, _ in points.values():
        print(f"  crashes  {point.crashes:5d}  {point.name}")
    print(f"  restarts {cluster.restarts:5d}")
    for kind, n in tick_faults.items():
        print(f"  ticks    {n:5d}  {kind}")
    print(f"  ticks that failed (and were resumed by the next): {cluster.failed_ticks}")
    for what, n in sorted(errors.injected.items()):
        print(f"  errors   {n:5d}  {what}")
    print(f"  deaths in the duplicate window (executed, not recorded): {window_deaths}")
    print(
        f"  dead runs (in a DLQ) after the faults: {dead_before}; redriven {len(dlq.redriven)}, "
        f"skipped {len(dlq.skipped)} (already succeeded); dead at the end: {dead_after}"
    )
    for line in explained:
        print(f"  lost     {line}")
    ok = totals.lost == 0 and totals.unexpected == 0 and totals.duplicated <= window_deaths
    print("OK" if ok else "FAILED: see the rows above")
    return 0 if ok else 1


def explain(cluster: Any, job_id: str, scheduled_ms: int) -> str:
    """Where a lost run is: its run record (status, attempts, lease) and its job."""
    parts = cluster.parts
    run = parts.runs.get(job_id, scheduled_ms)
    job = next(
        (j for t in ("tenant-0", "tenant-1", "tenant-2") if (j := parts.jobs.get(t, job_id))),
        None,
    )
    where = (
        f"run {run.status} attempt {run.attempt}, lease {run.lease}, "
        f"{len(run.attempts)} attempt record(s)"
        if run
        else "no run record"
    )
    job_state = f"job {job.status} next_due {job.next_due_ms}" if job else "no job"
    return f"{job_id} @ {scheduled_ms}: {where}; {job_state}"


def accounting_of_dead(cluster: Any, workload: Any) -> int:
    """Runs of the workload whose message sits in a DLQ."""
    from duetime.domain.messages import RunMessage

    dead = 0
    for message in cluster.dead_messages():
        run = RunMessage.from_json(message["Body"])
        dead += run.job_id in workload.expected
    return dead


def dlq_redrive(cluster: Any) -> Any:
    from duetime.clock import wall_ms
    from duetime.services.dead_letters import QUEUE_KEYS
    from duetime.wiring import dead_runs

    return dead_runs(cluster.parts).redrive(QUEUE_KEYS, run_ids=None, limit=None, now_ms=wall_ms())


if __name__ == "__main__":
    raise SystemExit(main())
