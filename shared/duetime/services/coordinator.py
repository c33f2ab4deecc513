"""The coordinator: once a minute, start one sweep per shard (duetime.services.sweep).

On AWS an EventBridge rule invokes the coordinator Lambda every minute, and the coordinator
starts each shard's sweep as an asynchronous invocation of the sweeper Lambda
(`InvocationType=Event`, payload `{"shard": n}`). Why asynchronous invokes, and not an SQS work
queue or a Step Functions Map (docs/scaling.md has the comparison): every sweep starts within
the same second, with no event-source ramp (a new SQS mapping starts at 5 concurrent batches);
nothing is added to the bill but one request per shard a minute ($0.20 per million); a failed
start is visible at once to the coordinator (the invoke call fails) and a sweep that fails is
simply resumed by the next tick from its watermarks, so Lambda's own retries are turned off.

The coordinator covers every shard ever used (`TimerStore.shard_count`, the setting recorded
at every tick): lowering the setting leaves the timers of the retired shards swept. Once the
sweeps are started it reads each shard's progress and reports how far the slowest lags
(`SweepLagMinutes`): the alarm on it is how a shard that keeps failing shows up, while the
other shards keep going.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from duetime.domain.timers import minute_of
from duetime.observability import Metric, count, logger
from duetime.ports import SweepLauncher, TimerStore
from duetime.services.sweep import Sweeper
from duetime.settings import Settings


@dataclass
class TickReport:
    shards: int
    launched: int
    failed: list[int] = field(default_factory=list)  # shards whose sweep did not start
    lag_minutes: int = 0  # the most any shard's cursor is behind the current minute
    lagging: list[int] = field(default_factory=list)  # shards lagging by more than a minute


class Coordinator:
    def __init__(
        self,
        timers: TimerStore,
        launcher: SweepLauncher,
        settings: Settings,
        *,
        clock: Callable[[], int],
    ) -> None:
        self._timers = timers
        self._launcher = launcher
        self._settings = settings
        self._clock = clock

    def tick(self) -> TickReport:
        # Recorded at every tick (one conditional write a minute), not only when the count read
        # is below the setting: it never is (it is at least the setting), so a count never
        # recorded let a later deployment with fewer shards stop sweeping the others (until
        # 2026-11-30; found by an outside audit).
        try:
            shards = self._timers.raise_shard_count(self._settings.timer_shards)
        except Exception:  # the sweeps go on (the retired shards' wait a tick)
            logger.exception("recording the shard count failed")
            shards = self._settings.timer_shards
        every = list(range(shards))
        # The sweeps first: the read of their progress only measures (a read failing, a
        # throttled shard item say, fails the invocation after they started; until 2026-11-30
        # it started none, found by an outside audit).
        failed = self._launcher.launch(every)
        count(Metric.SWEEP_LAUNCH_FAILURES, len(failed))
        lags = self.lags(every)
        report = TickReport(
            shards=shards,
            launched=shards - len(failed),
            failed=failed,
            lag_minutes=max(lags.values(), default=0),
            lagging=sorted(s for s, lag in lags.items() if lag > 1),
        )
        count(Metric.SWEEP_LAG_MINUTES, report.lag_minutes)
        log = logger.warning if failed or report.lagging else logger.info
        log("sweeps started", extra={"tick": report.__dict__})
        return report

    def lags(self, shards: Sequence[int]) -> dict[int, int]:
        """Per shard, how many bucket minutes up to the current one it has not finished."""
        current = minute_of(self._clock())
        states = self._timers.sweep_states(shards)
        return {
            shard: max(0, current + 1 - state.cursor_minute)
            for shard, state in states.items()
            if state.cursor_minute is not None
        }


class InProcessLauncher:
    """Sweeps the shards in this process, several at once, and waits for them: the local
    stack and the tests (where no Lambda can be invoked), and deployments without a sweeper
    function. A shard whose sweep raised counts as not started."""

    def __init__(self, sweeper: Sweeper, parallelism: int = 8) -> None:
        self._sweeper = sweeper
        self._parallelism = parallelism

    def launch(self, shards: Sequence[int]) -> list[int]:
        def sweep(shard: int) -> bool:
            try:
                self._sweeper.sweep_shard(shard)
            except Exception:
                logger.exception("shard sweep failed", extra={"shard": shard})
                return False
            return True

        with ThreadPoolExecutor(max_workers=max(1, min(self._parallelism, len(shards)))) as pool:
            started = list(pool.map(sweep, shards))
        return [s for s, ok in zip(shards, started, strict=True) if not ok]
