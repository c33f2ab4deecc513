"""The local stack's key files (duetime.local.keys.load_or_create_key): processes starting
together agree on one key, and none reads it half written."""

from __future__ import annotations

import multiprocessing
import stat
from multiprocessing.synchronize import Barrier
from pathlib import Path

from duetime.local.keys import load_or_create_key


def _create(state_dir: Path, barrier: Barrier, answers: multiprocessing.Queue[str]) -> None:
    barrier.wait()
    try:
        answers.put(load_or_create_key(state_dir)[0].decode())
    except Exception as exc:  # what the process met is the answer
        answers.put(f"error: {exc}")


def test_processes_creating_the_key_at_once_agree_on_one_and_none_reads_it_half_written(
    tmp_path: Path,
) -> None:
    # The file was created, then written: the other process could read it empty between the
    # two ("shorter than 32 bytes: delete it"), about one round in two (found by an audit).
    context = multiprocessing.get_context("fork")
    for round_ in range(25):
        state_dir = tmp_path / str(round_)
        barrier, answers = context.Barrier(3), context.Queue()
        processes = [
            context.Process(target=_create, args=(state_dir, barrier, answers)) for _ in range(3)
        ]
        for process in processes:
            process.start()
        keys = {answers.get(timeout=30) for _ in processes}
        for process in processes:
            process.join(30)
        assert len(keys) == 1, keys
        assert not next(iter(keys)).startswith("error")
        files = sorted(p.name for p in state_dir.iterdir())
        assert files == ["jwt-hs256.key"]  # no draft left behind
        assert stat.S_IMODE((state_dir / files[0]).stat().st_mode) == 0o600
