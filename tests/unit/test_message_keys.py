"""The run messages' keys read on first use (duetime.adapters.message_keys): a failed read is
KeysUnavailable (the SQS adapter's QueueUnavailable: no message's fault), is not made again
for each message, and is made again a few seconds later."""

from __future__ import annotations

import pytest

from duetime.adapters.message_keys import RETRY_AFTER_MS, KeysOnFirstUse, KeysUnavailable
from duetime.adapters.sqs import SqsJobQueue
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import MessageAuth, RunMessage
from duetime.ports import QueueUnavailable
from duetime.settings import QueueUrls, queue_key

MESSAGE = RunMessage("tenant-a", "01JOB", 1_000, 1, 1_000)


class Secret:
    """A key store that fails while `failing`, counting its reads."""

    def __init__(self) -> None:
        self.failing = True
        self.reads = 0

    def __call__(self) -> str:
        self.reads += 1
        if self.failing:
            raise ConnectionError("no answer")
        return "k" * 32


def test_given_the_key_unreadable_then_each_seal_fails_and_reads_it_once_a_while() -> None:
    now = [0]
    secret = Secret()
    keys = KeysOnFirstUse(secret, clock=lambda: now[0])

    for _ in range(5):  # one message after another (a split hand-over, a batch's records)
        with pytest.raises(KeysUnavailable, match="no answer"):
            keys.seal(MESSAGE)
    assert secret.reads == 1
    with pytest.raises(KeysUnavailable):  # a worker's open too: not a malformed message
        keys.open("{}")
    assert secret.reads == 1

    now[0] += RETRY_AFTER_MS
    secret.failing = False
    sealed = keys.seal(MESSAGE)
    assert secret.reads == 2
    assert MessageAuth.from_text("k" * 32).open(sealed) == MESSAGE


def test_given_the_key_unreadable_then_a_send_is_queue_unavailable_naming_its_messages() -> None:
    urls = {
        queue_key(r, p): QueueUrls(f"q/{r}/{p}", f"dlq/{r}/{p}") for r in Runtime for p in Priority
    }
    queue = SqsJobQueue(None, urls, KeysOnFirstUse(Secret()))  # type: ignore[arg-type]

    with pytest.raises(QueueUnavailable) as raised:
        queue.send([(MESSAGE, 0)])  # (no request made: the client is never called)

    assert raised.value.failed == [MESSAGE]
    with pytest.raises(QueueUnavailable):
        queue.send_dead(MESSAGE, "why")
