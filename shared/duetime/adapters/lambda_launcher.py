"""Starting shard sweeps on AWS: one asynchronous invocation of the sweeper function each."""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from duetime.observability import logger

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

_PARALLEL_INVOKES = 16  # an async invoke returns in tens of milliseconds: 25 shards in ~0.1 s


class LambdaSweepLauncher:
    def __init__(self, client: LambdaClient, function_name: str) -> None:
        self._client = client
        self._function = function_name

    def launch(self, shards: Sequence[int]) -> list[int]:
        def start(shard: int) -> bool:
            try:
                self._client.invoke(
                    FunctionName=self._function,
                    InvocationType="Event",
                    Payload=json.dumps({"shard": shard}).encode(),
                )
            except (BotoCoreError, ClientError):
                logger.exception("starting a shard sweep failed", extra={"shard": shard})
                return False
            return True

        workers = max(1, min(_PARALLEL_INVOKES, len(shards)))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            started = list(pool.map(start, shards))
        return [s for s, ok in zip(shards, started, strict=True) if not ok]
