"""Model-based test of the engine: a hypothesis state machine over the real services.

The machine (tests/integration/engine_model.py) submits, cancels, pauses, resumes and runs
now jobs of three tenants (every schedule kind, every catch-up mode), moves a millisecond
clock by small and large steps, ticks the coordinator, sweeps shards (also two at once,
interleaved at a chosen store call, or with a stale clock), delivers messages (in any order,
duplicated, with lost deletes, with runs that outlive their lease) and kills sweeps and
workers at a chosen call (a `Crash` BaseException). Its model is each job's occurrences,
computed independently, and its status history; the target records every execution.

After every step: no execution belongs to another tenant or carries another payload; none
starts early, or while its job is paused or cancelled; a run executes again only after a
failure with attempts left or an execution whose outcome was never recorded (the documented
duplicate window); no run record lacks its job. After every drain (faults stop, ticks and
deliveries go on) every occurrence the model is sure of has run. `scripts/model_check.py`
runs the same machine longer.
"""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.integration.engine_model import EngineMachine, quiet

# Derandomized, no example database: the same sequences every run, so never flaky. No
# shrinking here: a failure is reported at once with its whole sequence of steps;
# `scripts/model_check.py --suite` replays this very profile and shrinks it.
BUDGET = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_the_engine_keeps_its_promises_whatever_the_interleaving_and_the_faults() -> None:
    with quiet():
        run_state_machine_as_test(EngineMachine, settings=BUDGET)
