"""One Lambda function's container, in a clean interpreter (tests/infra/offline_runtime.py
starts it as `python -I -S -B offline_driver.py ASSET PROVIDED TIMEOUT ARN`).

Only the standard library is importable when this starts: no site-packages, no PYTHONPATH,
not even this file's directory. Like the Lambda runtime, it puts the code asset first on the
path and then what the runtime and the layers provide, imports the module `_HANDLER` names
(the init phase) and answers one JSON line on stdout: where things import from. Then each line
on stdin is an event: the handler's result (or its traceback) is the answer line. Everything
else the handler prints (Powertools' logs and metrics) goes to stderr.

Every AWS call the function makes (botocore's `_make_api_call`, from any thread) is recorded
and sent with the next answer (`calls`): its service, operation, the parameters that name
what it acts on, and the access key that signed it (the function's own, or one a role
assumed by `AssumeRole` handed out: the answer says which role). tests/infra/offline_iam.py
checks each against the policies of the role that made it.

With `OFFLINE_CLOCK_OFFSET_MS` in its environment (removed before the handler is imported:
the function sees only its own variables), the container lives that many milliseconds
ahead: the wall clock (`time.time`, `time.time_ns`) is shifted before anything else is
imported, so every read of it, including a default argument bound at import, gives the
later time. The monotonic clock and sleeping are left alone: durations, timeouts and waits
stay real.
"""

import importlib
import importlib.util
import json
import os
import sys
import time
import traceback
import uuid

CLOCK_OFFSET = "OFFLINE_CLOCK_OFFSET_MS"
# Where these import from in the container, or None: not importable at all.
PROBED = (
    "duetime",
    "duetime.local",
    "tzdata",
    "boto3",
    "botocore",
    "aws_lambda_powertools",
    "pyarrow",
    "numpy",
    "croniter",
    "moto",
    "pytest",
    "hypothesis",
    "aws_cdk",
    "duckdb",
    "tests",
)


class Context:
    """The parts of the Lambda context the handlers and Powertools read."""

    def __init__(self, timeout_seconds: int, function_arn: str) -> None:
        self.function_name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        self.function_version = os.environ["AWS_LAMBDA_FUNCTION_VERSION"]
        self.memory_limit_in_mb = int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"])
        self.invoked_function_arn = function_arn
        self.aws_request_id = str(uuid.uuid4())
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


# The parameters that name what a call acts on (IAM's resource).
RESOURCE_PARAMS = (
    "TableName",
    "IndexName",
    "QueueUrl",
    "QueueName",
    "Bucket",
    "Key",
    "KeyId",
    "SecretId",
    "FunctionName",
    "RoleArn",
    "StreamArn",
)
CALLS: list[dict[str, object]] = []


def record_calls() -> None:
    """Record every AWS call before it is made (see the module's docstring)."""
    from botocore.client import BaseClient

    make_api_call = BaseClient._make_api_call

    def recorded(self: BaseClient, operation_name: str, api_params: dict[str, object]) -> object:
        credentials = getattr(self._request_signer, "_credentials", None)
        call: dict[str, object] = {
            "service": self.meta.service_model.service_name,
            "operation": operation_name,
            "access_key": credentials.access_key if credentials is not None else None,
        }
        call |= {k: api_params[k] for k in RESOURCE_PARAMS if k in api_params}
        if isinstance(api_params.get("RequestItems"), dict):
            call["tables"] = sorted(api_params["RequestItems"])  # type: ignore[arg-type]
        if isinstance(api_params.get("TransactItems"), list):
            call["transact"] = [
                (kind, item["TableName"])
                for entry in api_params["TransactItems"]  # type: ignore[union-attr]
                for kind, item in entry.items()
            ]
        if operation_name == "DeleteObjects":
            objects = api_params["Delete"]["Objects"]  # type: ignore[index]
            call["keys"] = [o["Key"] for o in objects]
        CALLS.append(call)
        result = make_api_call(self, operation_name, api_params)
        if operation_name == "AssumeRole":
            CALLS.append(
                {
                    "assumed": api_params["RoleArn"],
                    "access_key": result["Credentials"]["AccessKeyId"],  # type: ignore[index]
                }
            )
        return result

    BaseClient._make_api_call = recorded  # type: ignore[method-assign]


def recorded_calls() -> list[dict[str, object]]:
    calls = CALLS[:]
    del CALLS[: len(calls)]
    return calls


def origin(name: str) -> str | None:
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its parent package is not importable
        return None
    return None if spec is None else str(spec.origin)


def shift_wall_clock(offset_ms: int) -> None:
    """Move the wall clock `offset_ms` ahead. duetime reads the time of day through
    `time.time_ns` (its clocks) and `time.time` (the HTTP target's), as do the logs' times."""
    if not offset_ms:
        return
    real_time_ns = time.time_ns
    offset_ns = offset_ms * 1_000_000

    def shifted_time_ns() -> int:
        return real_time_ns() + offset_ns

    def shifted_time() -> float:
        return shifted_time_ns() / 1e9

    time.time_ns = shifted_time_ns
    time.time = shifted_time


def main() -> int:
    shift_wall_clock(int(os.environ.pop(CLOCK_OFFSET, "0")))
    asset, provided, timeout, function_arn = sys.argv[1:5]
    sys.path[:0] = [asset, provided]
    answers = sys.stdout
    sys.stdout = sys.stderr

    def answer(message: dict[str, object]) -> None:
        answers.write(json.dumps(message, default=str) + "\n")
        answers.flush()

    module_name, _, function_name = os.environ["_HANDLER"].rpartition(".")
    try:
        record_calls()
        module = importlib.import_module(module_name)
        handler = getattr(module, function_name)
    except Exception:
        answer({"init_error": traceback.format_exc()})
        return 1
    answer(
        {
            "module_file": module.__file__,
            "sys_path": sys.path,
            "origins": {name: origin(name) for name in PROBED},
            "calls": recorded_calls(),
        }
    )
    for line in sys.stdin:
        event = json.loads(line)
        try:
            result = handler(event, Context(int(timeout), function_arn))
            answer({"result": result, "calls": recorded_calls()})
        except Exception:
            answer({"error": traceback.format_exc(), "calls": recorded_calls()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
