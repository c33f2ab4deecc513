"""What Lambda gives the deployed code, offline: a clean interpreter per function, and the
Invoke API the coordinator calls.

- `provided_packages`: a directory exposing only what the Python runtime (boto3 and its
  dependencies) and a function's layers provide, as links into this interpreter's
  site-packages.
- `Container`: one function's container: `python -I -S -B` running offline_driver.py, with the
  asset first on its path, the provided packages after it, and the function's environment
  and nothing else; started at once, it stays up between invocations (a warm container).
  With `clock_offset_ms`, a container of later: its wall clock that far ahead.
- `InvokeRecorder`: the Lambda Invoke API (`AWS_ENDPOINT_URL_LAMBDA`), recording each
  asynchronous invocation instead of running it: the test runs it in the invoked function's
  container, as Lambda would.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

DRIVER = Path(__file__).with_name("offline_driver.py")
CLOCK_OFFSET = "OFFLINE_CLOCK_OFFSET_MS"  # the driver's, not the function's: it removes it
# The Python runtime's: boto3 with its dependencies.
RUNTIME_DISTRIBUTIONS = (
    "boto3",
    "botocore",
    "s3transfer",
    "jmespath",
    "python-dateutil",
    "six",
    "urllib3",
)
# A managed layer's (by the start of its name), of what duetime uses: Powertools with the X-Ray
# SDK of its tracer; AWS SDK for pandas for pyarrow (which needs nothing more: no numpy).
LAYER_DISTRIBUTIONS = {
    "AWSLambdaPowertoolsPythonV3": (
        "aws-lambda-powertools",
        "typing-extensions",
        "jmespath",
        "aws-xray-sdk",
        "wrapt",
    ),
    "AWSSDKPandas": ("pyarrow",),
}
ANSWER_TIMEOUT_SECONDS = 120


def provided_packages(target: Path, layer_arns: Sequence[str]) -> Path:
    """Link the top-level packages, modules and metadata of the runtime's and the layers'
    distributions from the environment running the tests into `target`."""
    names = list(RUNTIME_DISTRIBUTIONS)
    for arn in layer_arns:
        layer = arn.split(":")[6]  # arn:aws:lambda:<region>:<account>:layer:<name>:<version>
        families = [f for f in LAYER_DISTRIBUTIONS if layer.startswith(f)]
        if len(families) != 1:
            raise LookupError(f"what the layer {layer} provides is not known here")
        names += LAYER_DISTRIBUTIONS[families[0]]
    target.mkdir(parents=True)
    for name in names:
        dist = importlib.metadata.distribution(name)
        tops = {f.parts[0] for f in dist.files or ()} - {"..", "__pycache__", "bin"}
        for top in tops:
            link = target / top
            if not top.endswith(".pth") and not link.exists():  # jmespath: runtime and layer
                link.symlink_to(Path(str(dist.locate_file(top))))
    return target


@dataclass(frozen=True)
class Invocation:
    function_name: str
    invocation_type: str
    payload: Any


class Container:
    """One function's container, in a clean interpreter (see offline_driver.py)."""

    def __init__(
        self,
        asset: Path,
        provided: Path,
        environment: dict[str, str],
        *,
        timeout_seconds: int,
        function_arn: str,
        log: Path,
        clock_offset_ms: int = 0,
    ) -> None:
        self.log = log
        self.clock_offset_ms = clock_offset_ms
        assert CLOCK_OFFSET not in environment
        driver_environment = {CLOCK_OFFSET: str(clock_offset_ms)} if clock_offset_ms else {}
        self._stderr = log.open("w")
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                "-B",  # the task root is read-only on Lambda: no bytecode is written
                str(DRIVER),
                str(asset),
                str(provided),
                str(timeout_seconds),
                function_arn,
            ],
            cwd=asset,  # Lambda's working directory: the task root
            env=environment | driver_environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._answers: queue.Queue[str] = queue.Queue()
        self.calls: list[dict[str, Any]] = []  # every AWS call it made (offline_driver.py)
        assert self._process.stdout is not None
        threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True).start()

    @functools.cached_property
    def init(self) -> dict[str, Any]:
        """The init phase's answer (waited for): where the handler and the probed names
        import from."""
        answer = self._answer()
        if "init_error" in answer:
            raise AssertionError(f"the handler did not import:\n{answer['init_error']}")
        return answer

    def invoke(self, event: dict[str, Any]) -> Any:
        """The handler's result; a raise in the handler fails here with its traceback."""
        assert self.init
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(event) + "\n")
        self._process.stdin.flush()
        answer = self._answer()
        if "error" in answer:
            raise AssertionError(f"the handler raised:\n{answer['error']}")
        return answer["result"]

    def stop(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._stderr.close()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._answers.put(line)

    def _answer(self) -> dict[str, Any]:
        try:
            line = self._answers.get(timeout=ANSWER_TIMEOUT_SECONDS)
        except queue.Empty:
            raise AssertionError(f"no answer; its log:\n{self.log.read_text()[-4000:]}") from None
        answer: dict[str, Any] = json.loads(line)
        self.calls += answer.get("calls", [])
        return answer


class InvokeRecorder:
    """The Lambda Invoke API: accepts every invocation (202) and records it."""

    def __init__(self) -> None:
        self.invocations: list[Invocation] = []
        recorded = self.invocations

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                # /2015-03-31/functions/<name>/invocations
                name = unquote(self.path.split("/functions/", 1)[1].split("/", 1)[0])
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                kind = self.headers.get("X-Amz-Invocation-Type", "RequestResponse")
                recorded.append(Invocation(name, kind, json.loads(body or b"null")))
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
