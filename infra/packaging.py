"""The Lambda code asset, built at synth time without Docker or network.

One directory holds everything the functions import besides the Lambda runtime (boto3) and
the managed layers (Powertools; AWS SDK for pandas for pyarrow):

    duetime/      shared/duetime without duetime/local and duetime/cli (the local stack and
                  the command line are not deployed); the handlers are its
                  duetime/entrypoints/<name>.py
    tzdata/       the time zone database duetime reads its zones from
                  (duetime.domain.schedule.zone), copied from the environment that runs the
                  synth (the pinned version of pyproject.toml); RUNTIME_DISTRIBUTIONS lists
                  any other pure-Python runtime
                  dependency to bundle with its requirements (none today)
    console/      the web console's static files (the repository's flat console/ directory,
                  its top-level files only), served by the API function from
                  /var/task/console (CONSOLE_DIR_IN_LAMBDA); absent when the repository has
                  none (the console routes then answer 404)

The same directory serves every function (one asset, uploaded once). Its content hash is the
asset hash, so an unchanged tree does not redeploy anything.
"""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

# Distributions bundled with their pure-Python dependencies (found through their metadata).
RUNTIME_DISTRIBUTIONS: tuple[str, ...] = ()
# Bundled when installed: the time zone database (a dependency in pyproject.toml, so always).
OPTIONAL_DISTRIBUTIONS = ("tzdata",)
# Provided by the Lambda runtime (boto3) or by the managed layers: never bundled.
PROVIDED = frozenset(
    {
        "boto3",
        "botocore",
        "s3transfer",
        "jmespath",
        "urllib3",
        "aws-lambda-powertools",
        "aws-xray-sdk",
        "wrapt",
        "typing-extensions",
        "pyarrow",
        "numpy",
        "pandas",
    }
)
# Where a Lambda handler lives in the asset: duetime.entrypoints.<name>.handler
HANDLER_MODULE = "duetime.entrypoints.{name}"
# The web console's files: the repository's directory, its name in the asset, and where Lambda
# puts it (a zip function's code is extracted to /var/task, LAMBDA_TASK_ROOT).
CONSOLE_SOURCE = "console"
CONSOLE_ASSET_DIR = "console"
LAMBDA_TASK_ROOT = "/var/task"
CONSOLE_DIR_IN_LAMBDA = f"{LAMBDA_TASK_ROOT}/{CONSOLE_ASSET_DIR}"

_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache")
_NATIVE_SUFFIXES = (".so", ".pyd", ".dylib")


class PackagingError(RuntimeError):
    """The asset cannot be built from this environment (missing or native dependency)."""


def handler(name: str) -> str:
    """The handler string of the function in `shared/duetime/entrypoints/<name>.py`."""
    return HANDLER_MODULE.format(name=name) + ".handler"


@functools.cache
def lambda_asset_dir() -> Path:
    """Build the asset once per process into a temporary directory (removed at exit; CDK
    copies it into the cloud assembly when the construct is created)."""
    target = Path(tempfile.mkdtemp(prefix="duetime-lambda-asset-"))
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    build_lambda_asset(target)
    return target


def build_lambda_asset(target: Path, repo_root: Path = REPO_ROOT) -> Path:
    """Copy the library (its entrypoints are the handlers) and the runtime dependencies into
    `target`."""
    package = repo_root / "shared" / "duetime"
    shutil.copytree(
        package,
        target / "duetime",
        ignore=_ignore_undeployed(package),
        dirs_exist_ok=True,
    )
    for dist in runtime_distributions():
        _copy_distribution(dist, target)
    copy_console(repo_root / CONSOLE_SOURCE, target / CONSOLE_ASSET_DIR)
    return target


def copy_console(source: Path, destination: Path) -> list[str]:
    """Copy the console's files (the top level of a flat directory: no subdirectories, no
    hidden files, exactly what the console handler may serve) and return their names. No
    source directory, nothing copied: the asset is still valid, the console answers 404."""
    if not source.is_dir():
        return []
    names = sorted(f.name for f in source.iterdir() if f.is_file() and not f.name.startswith("."))
    if names:
        destination.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copyfile(source / name, destination / name)
    return names


def runtime_distributions(
    roots: Iterable[str] = RUNTIME_DISTRIBUTIONS,
    optional: Iterable[str] = OPTIONAL_DISTRIBUTIONS,
) -> list[str]:
    """The runtime distributions and their transitive requirements, minus what Lambda and the
    layers provide. Missing required ones fail the synth: the functions would not import."""
    wanted = [*roots]
    for name in optional:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        wanted.append(name)
    seen: list[str] = []
    while wanted:
        name = _canonical(wanted.pop(0))
        if name in seen or name in PROVIDED:
            continue
        try:
            requirements = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError as exc:
            raise PackagingError(
                f"{name} is not installed: run the synth from the project's .venv"
            ) from exc
        seen.append(name)
        wanted += [_requirement_name(r) for r in requirements if "extra ==" not in r]
    return seen


def _copy_distribution(name: str, target: Path) -> None:
    dist = importlib.metadata.distribution(name)
    for file in dist.files or ():
        parts = file.parts
        if (
            parts[0].endswith((".dist-info", ".egg-info"))
            or parts[0] in ("..", "bin")
            or "__pycache__" in parts
            or "tests" in parts[1:]
        ):
            continue
        if file.name.endswith(_NATIVE_SUFFIXES):
            raise PackagingError(
                f"{name} ships a native extension ({file}); Lambda runs arm64, so it "
                "cannot be copied from this environment: use a layer instead"
            )
        source = Path(str(dist.locate_file(file)))
        destination = target.joinpath(*parts)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)


def _ignore_undeployed(package: Path) -> Callable[[str, list[str]], set[str]]:
    def ignore(directory: str, names: list[str]) -> set[str]:
        skipped = set(_IGNORED(directory, names))
        if Path(directory) == package:
            # The local stack (moto server, emulators) and the command line stay home.
            skipped.update(("local", "cli"))
        return skipped

    return ignore


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise PackagingError(f"cannot read the requirement {requirement!r}")
    return match.group(1)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
