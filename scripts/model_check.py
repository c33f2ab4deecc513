"""`scripts/model_check.py`: the model-based test of the engine, with a longer profile.

    .venv/bin/python scripts/model_check.py --examples 200 --steps 100 --seed 1

Runs the hypothesis state machine of tests/integration/test_model_based.py (defined in
tests/integration/engine_model.py: the real job service, coordinator, sweeper and worker on the
in-memory twins, with a millisecond clock, crashes at chosen calls, interleaved sweeps,
duplicated and reordered deliveries, runs that outlive their lease) for `--examples`
sequences of up to `--steps` steps, drawn from `--seed`, and prints its figures as one JSON
object:

- examples, steps: sequences run to the end, and the steps they took;
- runs, executions: runs that started, and target calls in all;
- duplicates: executions of a run beyond its first and its retries; duplicates_explained:
  those following an execution whose outcome its worker never recorded (it died between
  executing and recording, or its lease ran out while it ran): the documented window;
- lost: runs the model required that never started (any is a failure);
- required, drains, crashes, interleavings: how much the model checked and injected;
- seconds: wall time.

When an invariant breaks, hypothesis shrinks the sequence; the error and the shortest
sequence of steps it found go to stderr (the same command reproduces it), the figures still
to stdout, and the exit status is 1. `--suite` runs the
profile of the test itself (derandomized: the very sequences `pytest` runs), with shrinking,
to get the shortest form of a failure the test reported.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "shared"), str(ROOT)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="sequences to run")
    parser.add_argument("--steps", type=int, default=100, help="at most this many steps each")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--suite", action="store_true", help="the test's own profile, shrinking a failure"
    )
    args = parser.parse_args(argv)
    if args.examples < 1 or args.steps < 1:
        parser.error("--examples and --steps must be at least 1")

    from hypothesis import HealthCheck, Phase, seed, settings
    from hypothesis.stateful import run_state_machine_as_test

    from tests.integration.engine_model import FIGURES, EngineMachine, quiet
    from tests.integration.test_model_based import BUDGET

    if args.suite:
        profile = settings(BUDGET, phases=list(Phase))
        machine = EngineMachine
        args.examples, args.steps, args.seed = BUDGET.max_examples, BUDGET.stateful_step_count, None
    else:
        profile = settings(
            max_examples=args.examples,
            stateful_step_count=args.steps,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        machine = seed(args.seed)(EngineMachine)
    started = time.monotonic()
    failure = None
    try:
        with quiet():
            run_state_machine_as_test(machine, settings=profile)
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}".splitlines()[0]
        # The error, then hypothesis's notes: the (shrunk) sequence of steps that fails.
        notes = getattr(exc, "__notes__", [])
        print(f"{type(exc).__name__}: {exc}", *notes, sep="\n", file=sys.stderr)
    figures = dataclasses.asdict(FIGURES)
    report = {
        "examples": figures.pop("examples"),
        "steps": figures.pop("steps"),
        "runs": figures.pop("runs"),
        "executions": figures.pop("executions"),
        "duplicates": figures.pop("duplicates"),
        "duplicates_explained": figures.pop("duplicates_explained"),
        "lost": figures.pop("lost"),
        **figures,
        "seed": args.seed,
        "max_steps": args.steps,
        "seconds": round(time.monotonic() - started, 1),
    }
    if failure is not None:
        report["failure"] = failure
    print(json.dumps(report))
    return 1 if failure is not None else 0


if __name__ == "__main__":
    raise SystemExit(main())
