"""Every function runs a module of duetime.entrypoints, and that module is in the code asset
the cloud assembly holds (what `cdk deploy` uploads)."""

from __future__ import annotations

import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

from duetime import entrypoints
from tests.infra.conftest import STACK, Synth

HANDLER = re.compile(r"duetime\.entrypoints\.(\w+)\.handler")
# CDK's own custom resource providers (e.g. the default security group's restriction).
CDK_PROVIDER_HANDLER = "__entrypoint__.handler"


def _deployed(synth: Synth) -> dict[str, Path]:
    """{entrypoint name: the asset directory of its function} for duetime's functions."""
    found: dict[str, Path] = {}
    for logical_id, resource in synth.of_type("AWS::Lambda::Function").items():
        handler = resource["Properties"]["Handler"]
        metadata = resource["Metadata"]
        if metadata["aws:cdk:path"].startswith(f"{STACK}/Custom::"):
            assert handler == CDK_PROVIDER_HANDLER, logical_id
            continue
        match = HANDLER.fullmatch(handler)
        assert match, f"{logical_id}: {handler}"
        assert match[1] not in found, f"two functions run {handler}"
        found[match[1]] = synth.outdir / metadata["aws:asset:path"]
    return found


def test_every_function_runs_an_entrypoint_that_its_asset_holds(synth: Synth) -> None:
    deployed = _deployed(synth)

    assert set(deployed) == {m.name for m in pkgutil.iter_modules(entrypoints.__path__)}
    for name, asset in deployed.items():
        assert (asset / "duetime" / "entrypoints" / f"{name}.py").is_file(), name
        assert not (asset / "functions").exists()


def test_the_entrypoints_import_from_the_asset(synth: Synth) -> None:
    """As the Lambda runtime does: the asset first on the path, then `handler` of the module
    the handler string names (boto3 and Powertools come from this environment, as from the
    runtime and the layer on AWS)."""
    (asset,) = set(_deployed(synth).values())  # one asset for every function
    names = sorted(_deployed(synth))
    script = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    module = importlib.import_module('duetime.entrypoints.' + name)\n"
        "    assert callable(module.handler), name\n"
        "    assert module.__file__.startswith(sys.argv[1]), module.__file__\n"
    )
    env = {**os.environ, "PYTHONPATH": str(asset), "POWERTOOLS_TRACE_DISABLED": "true"}

    completed = subprocess.run(
        [sys.executable, "-c", script, str(asset)],
        cwd=asset,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
