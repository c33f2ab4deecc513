"""When the sweeper sends a run message (duetime.domain.messages.release_window and
duetime.services.release): visible just before its instant; an unheld send at most
LATE_SEND_MS after it (duetime.domain.messages.delay_seconds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.domain.messages import (
    LATE_SEND_MS,
    RELEASE_LEAD_MS,
    RELEASE_MARGIN_MS,
    RunMessage,
    delay_seconds,
    release_window,
)
from duetime.ports import QueueError
from duetime.services.release import ReleasedSender

T0 = 1_800_000_000_000


def visible_early_ms(due_ms: int, sent_ms: int) -> int:
    """How long before its instant a message sent at `sent_ms` becomes visible in SQS."""
    return due_ms - (sent_ms + delay_seconds(due_ms, sent_ms) * 1000)


@given(ahead=st.integers(min_value=-5_000, max_value=1_000_000))
def test_an_unheld_send_is_visible_less_than_a_second_early_and_at_most_a_little_late(
    ahead: int,
) -> None:
    delay = delay_seconds(T0 + ahead, T0)
    assert 0 <= delay <= 900  # SQS's range
    if 0 < ahead <= 900_000:
        early = visible_early_ms(T0 + ahead, T0)
        assert -LATE_SEND_MS <= early < 1000 - LATE_SEND_MS


def test_a_delay_seconds_job_sent_a_few_milliseconds_after_its_clock_read_is_not_a_second_early():
    # The API reads the clock for `delay_seconds: 5`, the send comes 12 ms later: floored,
    # the message would be visible 988 ms early and its worker would wait that long.
    assert delay_seconds(T0 + 5_000, T0 + 12) == 5
    assert visible_early_ms(T0 + 5_000, T0 + 12) == -12
    # Any larger fraction is still sent early, as before: by at most 1 s - LATE_SEND_MS.
    assert delay_seconds(T0 + 5_000, T0 + LATE_SEND_MS + 1) == 4


@given(ahead=st.integers(min_value=-5_000, max_value=900_000), at=st.floats(0, 1))
def test_a_send_within_its_window_is_visible_within_the_leads_and_never_late(
    ahead: int, at: float
) -> None:
    due = T0 + ahead
    window = release_window(due, T0)
    if window is None:  # due within the lead (or past): released at once, never later
        assert ahead < RELEASE_LEAD_MS
        return
    earliest, latest = window
    assert latest - earliest == RELEASE_LEAD_MS - RELEASE_MARGIN_MS
    assert -1000 < earliest < 1000
    assert 0 <= latest < 1000
    sent = T0 + max(0, round(earliest + at * (latest - earliest)))
    early = visible_early_ms(due, sent)
    assert RELEASE_MARGIN_MS <= early <= RELEASE_LEAD_MS


def test_a_cron_instant_reached_at_a_random_moment_is_held_to_150_ms_before_it() -> None:
    due = T0 + 60_000  # :00 of the next minute
    now = T0 + 12_345  # the sweep reaches it 47.655 s ahead: unheld, 655 ms early
    assert visible_early_ms(due, now) == 655
    assert release_window(due, now) == (505, 615)
    assert visible_early_ms(due, now + 505) == RELEASE_LEAD_MS


def test_an_open_window_or_a_due_instant_within_the_lead() -> None:
    assert release_window(T0 + 5_100, T0) == (-50, 60)  # 100 ms early now: open
    assert release_window(T0 + 5_020, T0) == (870, 980)  # 20 ms: too close, the next second's
    assert release_window(T0 + 200, T0) == (50, 160)  # sent within it: 150..40 ms early
    assert release_window(T0 + 100, T0) is None  # due within the lead: nothing to gain
    assert release_window(T0 - 3_000, T0) is None  # already due


@dataclass
class FakeTime:
    now: int = T0
    slept: list[int] = field(default_factory=list)

    def clock(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds * 1000))
        self.now += round(seconds * 1000)


@dataclass
class Sent:
    time: FakeTime
    calls: list[list[tuple[RunMessage, int, int]]] = field(default_factory=list)

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        self.calls.append([(m, d, self.time.now) for m, d in messages])


def message(due_ms: int) -> RunMessage:
    return RunMessage("tenant-a", f"job-{due_ms}", due_ms, 1, due_ms)


def test_whole_second_instants_go_out_in_one_send_at_their_release_moment() -> None:
    time = FakeTime(now=T0 + 12_345)
    sent = Sent(time)
    dues = [T0 + 60_000, T0 + 61_000, T0 + 75_000]
    ReleasedSender(sent, clock=time.clock, sleep=time.sleep).send([(message(d), 0) for d in dues])
    assert time.slept == [505]  # the last opening of one group: every window is open
    assert len(sent.calls) == 1
    for m, delay, at in sent.calls[0]:
        assert delay == delay_seconds(m.due_ms, at)  # the delay of the moment it went out
        assert visible_early_ms(m.due_ms, at) == RELEASE_LEAD_MS


def test_mixed_phases_go_out_in_one_send_per_window_each_within_the_leads() -> None:
    time = FakeTime(now=T0)
    sent = Sent(time)
    dues = [T0 + 30_000 + phase for phase in range(0, 1000, 37)]  # 28 phases over a second
    ReleasedSender(sent, clock=time.clock, sleep=time.sleep).send([(message(d), 0) for d in dues])
    assert sorted(m.due_ms for call in sent.calls for m, _, _ in call) == dues
    window = RELEASE_LEAD_MS - RELEASE_MARGIN_MS
    assert len(sent.calls) <= -(-1000 // (window + 1)) + 1  # one send per window, about
    assert sum(time.slept) < 1000
    for call in sent.calls:
        for m, _, at in call:
            assert RELEASE_MARGIN_MS <= visible_early_ms(m.due_ms, at) <= RELEASE_LEAD_MS


@dataclass
class SlowSent(Sent):
    """Each send takes 300 ms (a loaded store)."""

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        super().send(messages)
        self.time.now += 300


@pytest.mark.parametrize("slow", [False, True], ids=["fast sends", "300 ms sends"])
def test_a_hand_over_holds_at_most_its_budget_then_sends_unheld_at_most_a_little_late(
    slow: bool,
) -> None:
    time = FakeTime(now=T0)
    sent = SlowSent(time) if slow else Sent(time)
    dues = [T0 + 30_000 + phase for phase in range(0, 1000, 37)]
    ReleasedSender(sent, clock=time.clock, sleep=time.sleep, budget_ms=200).send(
        [(message(d), 0) for d in dues]
    )
    assert sum(time.slept) <= 200
    assert sorted(m.due_ms for call in sent.calls for m, _, _ in call) == dues
    assert all(
        visible_early_ms(m.due_ms, at) >= -LATE_SEND_MS for c in sent.calls for m, _, at in c
    )


def test_a_slow_send_does_not_release_the_next_group_a_second_early() -> None:
    # Each send takes 300 ms (a loaded store). The second group's window (270-380 ms from the
    # start) closes while the first group is being sent: it waits for the next second's
    # window instead of going out then, 970 ms early.
    time = FakeTime(now=T0)

    sent = SlowSent(time)
    dues = [T0 + 30_300, T0 + 30_420]
    ReleasedSender(sent, clock=time.clock, sleep=time.sleep).send([(message(d), 0) for d in dues])
    assert [len(call) for call in sent.calls] == [1, 1]
    for call in sent.calls:
        for m, delay, at in call:
            assert delay == delay_seconds(m.due_ms, at)
            assert RELEASE_MARGIN_MS <= visible_early_ms(m.due_ms, at) <= RELEASE_LEAD_MS
    assert sum(time.slept) <= 1000


@dataclass
class FailingOnCall(Sent):
    """Fails the `failing`th send (1-based), naming one of its messages as not taken."""

    failing: int = 2

    def send(self, messages: Sequence[tuple[RunMessage, int]]) -> None:
        super().send(messages)
        if len(self.calls) == self.failing:
            raise QueueError("SQS did not take a batch", [messages[0][0]])


def test_a_failed_group_names_its_unsent_messages_and_every_later_group_s() -> None:
    # Only the failed group's were named: a batch create would have kept jobs whose runs the
    # groups after it never sent (found while fixing an outside fault audit's finding).
    time = FakeTime(now=T0)
    sent = FailingOnCall(time)
    dues = [T0 + 30_000 + phase for phase in range(0, 1000, 111)]  # several windows: groups
    messages = [(message(d), 0) for d in dues]

    with pytest.raises(QueueError) as raised:
        ReleasedSender(sent, clock=time.clock, sleep=time.sleep).send(messages)

    went = [m for m, _, _ in sent.calls[0]] + [m for m, _, _ in sent.calls[1][1:]]
    assert len(sent.calls) == 2
    assert sorted(m.due_ms for m in raised.value.failed) == sorted(
        m.due_ms for m, _ in messages if m not in went
    )
