"""The run messages' keys read on first use (duetime.adapters.message_keys): a failed read is
KeysUnavailable (the SQS adapter's QueueUnavailable: no message's fault), is not made again
for each message, and is made again a few seconds later."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from duetime.adapters.message_keys import (
    KEYS_FRESH_MS,
    REREAD_AFTER_MS,
    RETRY_AFTER_MS,
    KeysOnFirstUse,
    KeysUnavailable,
)
from duetime.adapters.sqs import SqsJobQueue
from duetime.domain.jobs import Priority, Runtime
from duetime.domain.messages import (
    MessageAuth,
    RunMessage,
    UnauthenticatedMessage,
    UnverifiedSignature,
)
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


class Rotating:
    """A key store whose keys the test changes (an operator's rotation), counting its reads."""

    def __init__(self, keys: str) -> None:
        self.keys = keys
        self.reads = 0

    def __call__(self) -> str:
        self.reads += 1
        return self.keys


OLD, NEW, OTHER = "o" * 32, "n" * 32, "x" * 32


def test_given_a_rotation_then_a_warm_worker_opens_what_a_new_container_signs() -> None:
    # security.md's rotation put `new,old`: a container started after it signed with `new`,
    # and a worker warm from before (its keys read once, for its life) refused those runs as
    # forged, parked unsigned for good (an outside fault audit, round ten). A wrong signature
    # now reads the keys again before it is refused.
    now = [0]
    secret = Rotating(OLD)
    warm = KeysOnFirstUse(secret, clock=lambda: now[0])
    warm.open(warm.seal(MESSAGE))  # its keys read
    secret.keys = f"{NEW},{OLD}"  # the rotation's first step
    now[0] += 60_000
    cold = KeysOnFirstUse(Rotating(secret.keys), clock=lambda: now[0])

    assert warm.open(cold.seal(MESSAGE)) == MESSAGE
    assert secret.reads == 2


def test_given_a_forged_message_then_it_is_refused_after_one_read_of_the_keys() -> None:
    now = [0]
    secret = Rotating(OLD)
    keys = KeysOnFirstUse(secret, clock=lambda: now[0])
    keys.open(keys.seal(MESSAGE))
    forged = MessageAuth.from_text(OTHER).seal(MESSAGE)
    now[0] += 60_000

    with pytest.raises(UnauthenticatedMessage):
        keys.open(forged)  # read again: still not duetime's
    assert secret.reads == 2
    # Another within seconds of that read: refused on those keys, not read again for each (a
    # stream of forged messages is refused, counted, at once: a review).
    now[0] += 1_000
    with pytest.raises(UnauthenticatedMessage):
        keys.open(forged)
    assert secret.reads == 2
    now[0] += RETRY_AFTER_MS
    with pytest.raises(UnauthenticatedMessage):
        keys.open(forged)
    assert secret.reads == 3
    with pytest.raises(UnauthenticatedMessage, match="not signed"):  # nothing to read again for
        keys.open(MESSAGE.to_json())
    assert secret.reads == 3


def test_given_keys_older_than_their_lifetime_then_they_are_read_again_to_sign() -> None:
    # A warm signer keeps up with a rotation within KEYS_FRESH_MS; a failed read keeps the
    # keys it has (no seal fails for a moment of Secrets Manager).
    now = [0]
    secret = Rotating(OLD)
    keys = KeysOnFirstUse(secret, clock=lambda: now[0])
    assert MessageAuth.from_text(OLD).open(keys.seal(MESSAGE)) == MESSAGE
    secret.keys = f"{NEW},{OLD}"
    now[0] += KEYS_FRESH_MS - 1
    assert MessageAuth.from_text(OLD).open(keys.seal(MESSAGE)) == MESSAGE
    now[0] += 1
    assert MessageAuth.from_text(NEW).open(keys.seal(MESSAGE)) == MESSAGE
    assert secret.reads == 2

    def failing() -> str:
        raise ConnectionError("no answer")

    keys._read = failing
    now[0] += KEYS_FRESH_MS
    assert MessageAuth.from_text(NEW).open(keys.seal(MESSAGE)) == MESSAGE


def test_given_keys_in_hand_then_a_silent_re_read_holds_back_no_other_thread() -> None:
    # A review: the re-read ran under the lock, every other thread waiting ~30 s on a silent
    # Secrets Manager, and its failure was timed before the read, so the next seal read again.
    now = [0]
    secret = Rotating(OLD)
    keys = KeysOnFirstUse(secret, clock=lambda: now[0])
    keys.seal(MESSAGE)
    entered, release = threading.Event(), threading.Event()

    def silent() -> str:
        secret.reads += 1
        entered.set()
        assert release.wait(10)
        now[0] += 28_000  # the SDK's tries, then no answer
        raise ConnectionError("no answer")

    keys._read = silent
    now[0] += KEYS_FRESH_MS
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(keys.seal, MESSAGE)
        assert entered.wait(10)
        for _ in range(5):  # meanwhile, the others seal with the keys in hand at once
            assert MessageAuth.from_text(OLD).open(keys.seal(MESSAGE)) == MESSAGE
        release.set()
        assert MessageAuth.from_text(OLD).open(reading.result(10)) == MESSAGE
    now[0] += REREAD_AFTER_MS - 1
    keys.seal(MESSAGE)
    assert secret.reads == 2  # not read again before REREAD_AFTER_MS after the failure


def test_given_a_silent_first_read_then_the_next_message_does_not_read_at_once() -> None:
    now = [0]
    reads = []

    def silent() -> str:
        reads.append(now[0])
        now[0] += 28_000
        raise ConnectionError("no answer")

    keys = KeysOnFirstUse(silent, clock=lambda: now[0])
    for _ in range(3):
        with pytest.raises(KeysUnavailable):
            keys.seal(MESSAGE)
    assert reads == [0]


def test_given_keys_that_cannot_be_read_again_then_an_unknown_signature_is_not_judged() -> None:
    # A re-read failing (or under way on another thread): the message may be signed with a key
    # put since; it comes back (UnverifiedSignature, a KeysUnavailable) rather than be refused.
    now = [0]
    secret = Rotating(OLD)
    keys = KeysOnFirstUse(secret, clock=lambda: now[0])
    keys.seal(MESSAGE)
    newer = MessageAuth.from_text(NEW).seal(MESSAGE)

    def failing() -> str:
        raise ConnectionError("throttled")

    keys._read = failing
    now[0] += 60_000
    with pytest.raises(UnverifiedSignature) as unsure:
        keys.open(newer)
    assert isinstance(unsure.value, KeysUnavailable)
    assert unsure.value.message == MESSAGE
    keys._read = Rotating(f"{NEW},{OLD}")
    now[0] += REREAD_AFTER_MS
    assert keys.open(newer) == MESSAGE
