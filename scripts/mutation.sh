#!/usr/bin/env bash
# Mutation testing of the pure core, on demand (not part of scripts/test or CI).
#
# mutmut (configured in pyproject.toml, [tool.mutmut]) mutates shared/duetime/domain/{runs,
# retry,planning,schedule}.py and runs the unit tests and the in-memory contract suite against
# each mutant, then this prints the figures and the survivors. The score leaves out the
# mutants listed in `excluded` below (an error message's text, or equivalent: no input tells
# them apart); see docs/reliability.md.
#
#   scripts/mutation.sh                  # a full run from scratch (about 40 minutes on 2 cores)
#   scripts/mutation.sh --incremental    # reuse mutants/: retest only what changed
#   MUTMUT_CHILDREN=1 scripts/mutation.sh
#
# mutmut names a module after its file's path, so it runs from mutants/, a staging root whose
# duetime/ links to shared/duetime (and tests/, pyproject.toml, ... to the project's); its own
# copies and results are in mutants/mutants/. Inspect a survivor from there:
#   (cd mutants && ../.venv/bin/mutmut show <name>)      # or `mutmut browse` for all
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

children="${MUTMUT_CHILDREN:-2}"
incremental=false
for arg in "$@"; do
  case "$arg" in
    --incremental) incremental=true ;;
    *) echo "usage: scripts/mutation.sh [--incremental]" >&2; exit 2 ;;
  esac
done

[ -x .venv/bin/mutmut ] || { echo "no .venv/bin/mutmut: run scripts/test once to set up .venv" >&2; exit 1; }

# Mutants left out of the score, one per line: "<mutant name> <category>: <why>".
# category is `message` (only an error message's text changes) or `equivalent`.
excluded="$(cat <<'EOF'
EOF
)"

if [ "$incremental" = false ]; then
  rm -rf mutants
fi
mkdir -p mutants
ln -sfn "$root/shared/duetime" mutants/duetime
for name in tests functions scripts infra docs pyproject.toml; do
  ln -sfn "$root/$name" "mutants/$name"
done

cd mutants
start=$(date +%s)
"$root/.venv/bin/mutmut" run --max-children "$children"
elapsed=$(( $(date +%s) - start ))

results="$("$root/.venv/bin/mutmut" results --all true)"

RESULTS="$results" EXCLUDED="$excluded" ELAPSED="$elapsed" "$root/.venv/bin/python" - <<'PY'
import os
from collections import Counter

statuses = {}
for line in os.environ["RESULTS"].splitlines():
    name, sep, status = line.strip().rpartition(": ")
    if sep:
        statuses[name] = status
excluded = {}
for line in os.environ["EXCLUDED"].splitlines():
    if line.strip():
        name, _, reason = line.strip().partition(" ")
        excluded[name] = reason

counts = Counter(statuses.values())
total = len(statuses)
killed = counts["killed"]
left_out = {name: reason for name, reason in excluded.items() if statuses.get(name) == "survived"}
stale = sorted(name for name in excluded if statuses.get(name) != "survived")
by_category = Counter(reason.partition(":")[0] for reason in left_out.values())
survivors = sorted(name for name, status in statuses.items() if status == "survived")
unexplained = [name for name in survivors if name not in left_out]
scored = total - len(left_out)
minutes, seconds = divmod(int(os.environ["ELAPSED"]), 60)

print()
print("== mutation testing of the pure core")
print(f"mutants:            {total}")
for status in sorted(counts):
    print(f"  {status + ':':17} {counts[status]}")
print(f"survived, left out: {len(left_out)} ({by_category['message']} message-only, "
      f"{by_category['equivalent']} equivalent)")
print(f"survived, counted:  {len(unexplained)}")
print(f"raw score:          {100 * killed / total:.1f} % (killed / all mutants)" if total else "")
print(f"score:              {100 * killed / scored:.1f} % (killed / mutants not left out)"
      if scored else "")
print(f"wall time:          {minutes} min {seconds} s")
if unexplained:
    print("\nsurvivors (see `cd mutants && ../.venv/bin/mutmut show <name>`):")
    for name in unexplained:
        print(f"  {name}")
if left_out:
    print("\nleft out of the score:")
    for name, reason in sorted(left_out.items()):
        print(f"  {name}  {reason}")
if stale:
    print("\nlisted as left out but not a survivor any more (renumbered or killed?):")
    for name in stale:
        print(f"  {name}: {statuses.get(name, 'no such mutant')}")
PY
