#!/usr/bin/env bash
# Mutation testing of the pure core, on demand (not part of scripts/test or CI).
#
# mutmut (configured in pyproject.toml, [tool.mutmut]) mutates shared/duetime/domain/{runs,
# retry,planning,schedule,cron,overlap,backfill}.py and runs the unit tests and the in-memory contract suite against
# each mutant, then this prints the figures and the survivors. The score leaves out the
# mutants listed in `excluded` below (an error message's text, or equivalent: no input tells
# them apart); see docs/reliability.md.
#
#   scripts/mutation.sh                  # a full run from scratch (about 30 minutes on 2 cores)
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
    -h|--help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "usage: scripts/mutation.sh [--incremental]" >&2; exit 2 ;;
  esac
done

[ -x .venv/bin/mutmut ] || { echo "no .venv/bin/mutmut: run scripts/test once to set up .venv" >&2; exit 1; }

# Mutants left out of the score, one per line: "<mutant name> <category>: <why>".
# category is `message` (only an error message's text changes) or `equivalent`.
excluded="$(cat <<'EOF'
duetime.domain.schedule.x__instant__mutmut_3 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_6 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_7 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_8 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_15 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_17 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_20 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_23 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_24 message: only an error message's text changes
duetime.domain.schedule.x__instant__mutmut_25 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_4 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_15 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_16 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_17 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_35 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_36 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_37 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_38 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_39 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_40 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_41 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_42 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_43 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_60 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_61 message: only an error message's text changes
duetime.domain.cron.x__item_values__mutmut_62 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_14 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_16 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_17 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_18 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_19 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_20 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_21 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_26 message: only an error message's text changes
duetime.domain.cron.x__day_of_month__mutmut_37 message: only an error message's text changes
duetime.domain.cron.x__day_of_month__mutmut_38 message: only an error message's text changes
duetime.domain.cron.x__day_of_month__mutmut_39 message: only an error message's text changes
duetime.domain.cron.x__day_of_month__mutmut_40 message: only an error message's text changes
duetime.domain.cron.x__day_of_week__mutmut_32 message: only an error message's text changes
duetime.domain.schedule.x__rate_previous__mutmut_4 message: only an error message's text changes
duetime.domain.retry.x_backoff_ms__mutmut_6 message: only an error message's text changes
duetime.domain.retry.x_backoff_ms__mutmut_7 message: only an error message's text changes
duetime.domain.retry.x_backoff_ms__mutmut_8 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_5 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_8 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_9 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_10 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_13 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_16 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_17 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_18 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_23 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_26 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_27 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_28 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_32 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_35 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_36 message: only an error message's text changes
duetime.domain.backfill.x__instant__mutmut_37 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_3 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_8 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_9 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_10 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_13 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_17 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_18 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_34 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_39 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_40 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_49 message: only an error message's text changes
duetime.domain.backfill.x_parse_backfill_range__mutmut_50 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_3 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_6 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_7 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_14 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_17 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_18 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_31 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_34 message: only an error message's text changes
duetime.domain.schedule.x__after__mutmut_35 message: only an error message's text changes
duetime.domain.cron.x__value__mutmut_13 equivalent: a-L ends at 32, not 31: days are only looked up from 1 to the month's length
duetime.domain.cron.x__day_of_month__mutmut_5 equivalent: ? with L unset as None: ? already lists every day, L adds none
duetime.domain.cron.x__day_of_month__mutmut_18 equivalent: ? with L set: ? already lists every day, L adds none
duetime.domain.cron.x__day_of_month__mutmut_14 equivalent: ? as days 0-31: day 0 is never looked up
duetime.domain.cron.x__day_of_month__mutmut_17 equivalent: ? as days 1-32: day 32 is never looked up
duetime.domain.cron.x__day_of_month__mutmut_23 equivalent: L starts as None, not False: it is only read as a truth value
duetime.domain.cron.x__day_of_month__mutmut_51 equivalent: break, not continue, after W: W is the field's only item (checked just before)
duetime.domain.cron.x__day_of_week__mutmut_5 equivalent: ? with no #n set (None): never read, ? matches every weekday first
duetime.domain.cron.x__day_of_week__mutmut_6 equivalent: ? with no L set (None): never read, ? matches every weekday first
duetime.domain.cron.x__day_of_week__mutmut_14 equivalent: ? as weekdays 0-7: weekdays are looked up as 0-6 only
duetime.domain.cron.x__matching_days__mutmut_18 equivalent: also tries day 0: only added beside real days of its weekday, never selected
duetime.domain.schedule.x__cron_next__mutmut_22 equivalent: end_at check > not >=: at equality the found instant is > end_at, refused next
duetime.domain.schedule.x__cron_previous__mutmut_32 equivalent: asks with the probe below the lower bound: the same question as None
duetime.domain.cron.x__next_wall__mutmut_6 equivalent: keeps the start's seconds: only its minute and above are read
duetime.domain.cron.x__next_wall__mutmut_7 equivalent: keeps the start's microseconds: only its minute and above are read
duetime.domain.cron.x__next_wall__mutmut_8 equivalent: start's second 1: only its minute and above are read
duetime.domain.cron.x__next_wall__mutmut_9 equivalent: start's microsecond 1: only its minute and above are read
duetime.domain.cron.x__first_cron_instant_after__mutmut_24 equivalent: walk start keeps seconds: only its minute and above are read
duetime.domain.cron.x__first_cron_instant_after__mutmut_25 equivalent: walk start keeps microseconds: only its minute and above are read
duetime.domain.cron.x__first_cron_instant_after__mutmut_30 equivalent: walk start's second 1: only its minute and above are read
duetime.domain.cron.x__first_cron_instant_after__mutmut_31 equivalent: walk start's microsecond 1: only its minute and above are read
duetime.domain.cron.x__first_cron_instant_after__mutmut_33 equivalent: initial highest None: never read before best, which sets it
duetime.domain.cron.x__first_cron_instant_after__mutmut_35 equivalent: initial highest 1 day: never read before best, which sets it
duetime.domain.cron.x__first_cron_instant_after__mutmut_59 equivalent: <= not <: replaces best with an equal instant
duetime.domain.cron.x__offset__mutmut_5 equivalent: the year-1 side of the fallback: no search reaches year 1 (instants are from 1970)
duetime.domain.cron.x__offset__mutmut_8 equivalent: the year-1 side of the fallback: no search reaches year 1 (instants are from 1970)
duetime.domain.cron.x__shifted__mutmut_2 equivalent: min for a window past 9999: the walk then starts at year 1 or overflows to None, and either finds the same (no wall past 9999 exists)
duetime.domain.cron.x__shifted__mutmut_3 equivalent: max for a window before year 1: no search reaches year 1 (instants are from 1970)
duetime.domain.cron.x__shifted__mutmut_4 equivalent: a zero delta never overflows
duetime.domain.cron.x__shifted__mutmut_6 equivalent: min for a window under a day past 9999: as mutant 2, the same answer
duetime.domain.planning.x__previous__mutmut_10 equivalent: latest-catchup asks for the occurrence before missed_until, and one (`occurrence`) is known there: never None
duetime.domain.cron.x__transition__mutmut_2 equivalent: / not //: whole seconds give exact integral floats, the same probes
duetime.domain.cron.x__transition__mutmut_8 equivalent: / not //: whole seconds give exact integral floats, the same result
duetime.domain.runs.x_finished_run__mutmut_33 equivalent: drops lease=None: None is the field's default
duetime.domain.planning.x_upcoming__mutmut_2 message: only an error message's text changes
duetime.domain.planning.x_upcoming__mutmut_7 message: only an error message's text changes
duetime.domain.planning.x_upcoming__mutmut_8 message: only an error message's text changes
duetime.domain.planning.x__dropped__mutmut_11 equivalent: end_at + 2: _rate_count_before clamps to end_at + 1 anyway
duetime.domain.planning.x_first_due__mutmut_10 equivalent: <= not <: a first occurrence at created_at is found again
duetime.domain.schedule.x__cron_previous__mutmut_48 equivalent: empty_from only steers _last_cron_before's halving search; the answer is the same
duetime.domain.schedule.x__cron_previous__mutmut_49 equivalent: empty_from only steers _last_cron_before's halving search; the answer is the same
duetime.domain.schedule.x__cron_previous__mutmut_52 equivalent: empty_from only steers _last_cron_before's halving search; the answer is the same
duetime.domain.schedule.x__cron_previous__mutmut_53 equivalent: empty_from only steers _last_cron_before's halving search; the answer is the same
duetime.domain.schedule.x__cron_previous__mutmut_55 equivalent: empty_from only steers _last_cron_before's halving search; the answer is the same
duetime.domain.schedule.x__last_cron_before__mutmut_23 equivalent: the halving step only steers the search; the answer is checked against `before`
duetime.domain.schedule.x__last_cron_before__mutmut_24 equivalent: one more evaluation when the midpoint equals `last`; same answer
duetime.domain.schedule.x__cron_previous__mutmut_19 equivalent: a search window from 2 minutes still finds the occurrence before `before`
duetime.domain.schedule.x__cron_previous__mutmut_46 equivalent: a window that triples instead of doubling finds the same occurrence
duetime.domain.schedule.x__cron_previous__mutmut_15 equivalent: no occurrence lies after end_at and instants are whole ms: before end_at + 2 ms equals at or before end_at
duetime.domain.schedule.x__cron_previous__mutmut_24 equivalent: differs only when a 15,006-day window holds no occurrence; the rarest cron (29 Feb on a weekday) has gaps of at most 14,609 days
duetime.domain.schedule.x__cron_previous__mutmut_39 equivalent: differs only when a 15,006-day window holds no occurrence; the rarest cron (29 Feb on a weekday) has gaps of at most 14,609 days
duetime.domain.cron.x__first_cron_instant_after__mutmut_47 equivalent: on equality no instant of that wall time can replace `best`; one more wall time examined
duetime.domain.planning.x__dropped__mutmut_28 equivalent: `first` is always an occurrence and occurrences are >= 1 s apart: first + 1 and first + 2 count the same
duetime.domain.schedule.x_previous_occurrence__mutmut_14 equivalent: drops `case After(): return None`: the match falls through and the function returns None all the same
EOF
)"

if [ "$incremental" = false ]; then
  rm -rf mutants
fi
mkdir -p mutants
ln -sfn "$root/shared/duetime" mutants/duetime
for name in tests scripts infra docs pyproject.toml; do
  ln -sfn "$root/$name" "mutants/$name"
done

cd mutants
start=$(date +%s)
"$root/.venv/bin/mutmut" run --max-children "$children"
elapsed=$(( $(date +%s) - start ))

results="$("$root/.venv/bin/mutmut" results --all true)"

RESULTS="$results" EXCLUDED="$excluded" ELAPSED="$elapsed" "$root/.venv/bin/python" - <<'PY'
import os
import re
from collections import Counter


def natural(name: str) -> tuple[str, int]:
    function, _, number = name.rpartition("__mutmut_")
    return function, int(number) if number.isdigit() else 0


statuses = {}
for line in os.environ["RESULTS"].splitlines():
    name, sep, status = line.strip().rpartition(": ")
    if sep and re.search(r"__mutmut_\d+$", name):
        statuses[name] = status
excluded = {}
for line in os.environ["EXCLUDED"].splitlines():
    if line.strip():
        name, _, reason = line.strip().partition(" ")
        excluded[name] = reason

counts = Counter(statuses.values())
total = len(statuses)
killed, timeout = counts["killed"], counts["timeout"]
left_out = {name: reason for name, reason in excluded.items() if statuses.get(name) == "survived"}
stale = sorted((name for name in excluded if statuses.get(name) != "survived"), key=natural)
by_category = Counter(reason.partition(":")[0] for reason in left_out.values())
survivors = sorted((n for n, s in statuses.items() if s == "survived"), key=natural)
counted = [name for name in survivors if name not in left_out]
others = sorted((n for n, s in statuses.items() if s not in ("killed", "survived")), key=natural)
scored = total - len(left_out)
minutes, seconds = divmod(int(os.environ["ELAPSED"]), 60)


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "n/a"


print()
print("== mutation testing of the pure core")
print(f"mutants:              {total}")
for status in sorted(counts):
    print(f"  {status + ':':19} {counts[status]}")
print(f"survivors left out:   {len(left_out)} ({by_category['message']} message-only, "
      f"{by_category['equivalent']} equivalent)")
print(f"survivors counted:    {len(counted)}")
print(f"score:                {percent(killed, scored)} killed / (mutants - left out); "
      f"{percent(killed + timeout, scored)} counting timeouts as detected")
print(f"raw:                  {percent(killed, total)} killed / all mutants")
print(f"wall time:            {minutes} min {seconds} s")
if counted:
    print("\nsurvivors (cd mutants && ../.venv/bin/mutmut show <name>):")
    for name in counted:
        print(f"  {name}")
if others:
    print("\nneither killed nor survived:")
    for name in others:
        print(f"  {name}: {statuses[name]}")
if left_out:
    print("\nleft out of the score:")
    for name in sorted(left_out, key=natural):
        print(f"  {name}  {left_out[name]}")
if stale:
    print("\nlisted as left out but not a survivor (renumbered after a source change, or killed?):")
    for name in stale:
        print(f"  {name}: {statuses.get(name, 'no such mutant')}")
PY
