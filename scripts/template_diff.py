#!/usr/bin/env python3
"""Compare the CloudFormation template of two revisions, `cdk diff`-style, offline.

Synthesizes `infra/app.py` (as `cdk synth` runs it, with cdk.json's context) once in a clean
checkout of BASE (a git revision) and once in the working tree, then compares the two
`Duetime.template.json` with the Lambda handler strings and the 64-hex asset hashes
normalized: a move of code that changes nothing deployed shows only those.

    scripts/template_diff.py daa35a2        # the commit before the re-layout
    scripts/template_diff.py HEAD~3 --json

Prints the handler changes and every other difference (a JSON path each); exits 1 when
anything but handlers and asset hashes differs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STACK = "Duetime"
HASH = re.compile(r"[0-9a-f]{64}")
CLI_CONTEXT = {
    "aws:cdk:enable-path-metadata": True,
    "aws:cdk:enable-asset-metadata": True,
    "aws:cdk:version-reporting": False,
}


def synth(checkout: Path, outdir: Path) -> dict[str, Any]:
    context = json.loads((checkout / "cdk.json").read_text())["context"] | CLI_CONTEXT
    env = os.environ | {
        "CDK_CONTEXT_JSON": json.dumps(context),
        "CDK_OUTDIR": str(outdir),
        "PYTHONPATH": f"{checkout / 'shared'}{os.pathsep}{checkout}",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    subprocess.run(
        [sys.executable, "infra/app.py"], cwd=checkout, env=env, check=True, capture_output=True
    )
    template: dict[str, Any] = json.loads((outdir / f"{STACK}.template.json").read_text())
    return template


def handlers(template: dict[str, Any]) -> dict[str, str]:
    return {
        name: resource["Properties"]["Handler"]
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Lambda::Function" and "Handler" in resource["Properties"]
    }


def normalized(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "<handler>" if k == "Handler" else normalized(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalized(v) for v in value]
    if isinstance(value, str):
        return HASH.sub("<hash>", value)
    return value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                found.append(f"{path}/{key}: only in {'after' if key in b else 'before'}")
            else:
                found += differences(a[key], b[key], f"{path}/{key}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {json.dumps(a)[:120]} -> {json.dumps(b)[:120]}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the git revision to compare the working tree with")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    known = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if known.returncode != 0:
        parser.error(f"not a revision of this repository: {args.base!r}")
    with tempfile.TemporaryDirectory(prefix="duetime-template-diff-") as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base_tree), args.base],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            before = synth(base_tree, Path(tmp) / "before.out")
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False
            )
        after = synth(ROOT, Path(tmp) / "after.out")
    old, new = handlers(before), handlers(after)
    changed = {
        name: [old.get(name), new.get(name)]
        for name in sorted(set(old) | set(new))
        if old.get(name) != new.get(name)
    }
    others = differences(normalized(before), normalized(after))
    result = {
        "base": args.base,
        "resources_before": len(before["Resources"]),
        "resources_after": len(after["Resources"]),
        "handlers_changed": changed,
        "other_differences": others,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"template of {args.base} vs the working tree: {len(before['Resources'])} -> "
            f"{len(after['Resources'])} resources"
        )
        for name, (was, now) in changed.items():
            print(f"  handler {name}: {was} -> {now}")
        print(f"other differences (asset hashes and handlers normalized): {len(others)}")
        for line in others:
            print(f"  {line}")
    return 1 if others else 0


if __name__ == "__main__":
    raise SystemExit(main())
