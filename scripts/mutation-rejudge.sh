#!/usr/bin/env bash
# Judge again, each in a fresh pytest process, the mutants that a `scripts/mutation.sh --module` run reported as
# `segfault` (or the mutants named on stdin, one a line). mutmut forks its process per mutant; once that process has
# run a Ray test, a fork that uses Ray again dies in Ray's core whether the test passes or fails, so those verdicts
# say nothing (fleet.gather: see its section in scripts/mutation-survivors.md).
#
#   bash scripts/mutation-rejudge.sh cudamatrix/fleet/gather.py tests/fleet/test_gather.py -k "gather_ray or in_time"
#   grep ... | bash scripts/mutation-rejudge.sh --stdin cudamatrix/fleet/gather.py TEST ...   # these mutants only
#
# Each verdict is appended to mutants-module/<module>/rejudged.txt as "MUTANT killed|survived|timeout SECONDS"
# (a pytest exit status 0 is survived; a run past REJUDGE_TIMEOUT seconds, 240 by default, is a time-out and counts
# as killed, as in mutmut). The unmutated code runs the selection first, and nothing is judged unless it passes;
# a pytest that cannot run the selection (exit 4 or 5) stops the run. A mutant already listed there is not run
# again; touch rejudge.stop there to stop after the current one. Run it in the module's copy as it was left by its `--module` run (same tests, same code).
set -euo pipefail
cd "$(dirname "$0")/.."
from_stdin=""
if [ "${1:-}" = "--stdin" ]; then from_stdin=1; shift; fi
module="${1:?usage: bash scripts/mutation-rejudge.sh [--stdin] cudamatrix/X.py PYTEST_ARG ...}"
shift
name=$(echo "${module%.py}" | tr '/' '.')
work="mutants-module/$name"
[ -d "$work/mutants" ] || { echo "no --module run of $module to judge again: $work/mutants" >&2; exit 2; }
list=$(mktemp)
trap 'rm -f "$list"' EXIT
if [ -n "$from_stdin" ]; then
  cat > "$list"
else
  (cd "$work" && mutmut results --all true 2>/dev/null) | sed -n 's/^ *\([^ :]*\): segfault$/\1/p' > "$list"
fi
verdicts="$(pwd)/$work/rejudged.txt"
touch "$verdicts"
cd "$work/mutants"
rm -f ../rejudge.stop
# the unmutated code first: a selection that fails, or selects nothing (pytest exit 5), would call every mutant killed
status=0
MUTANT_UNDER_TEST="" timeout "${REJUDGE_TIMEOUT:-240}" python -m pytest -x -q -p no:cacheprovider "$@" >/dev/null 2>&1 \
  || status=$?
[ "$status" -eq 0 ] || { echo "the unmutated code does not pass this selection (pytest exit $status): nothing judged" >&2; exit 2; }
while read -r mutant; do
  [ -n "$mutant" ] || continue
  grep -q "^$mutant " "$verdicts" && continue
  [ -e ../rejudge.stop ] && break
  start=$(date +%s)
  status=0
  MUTANT_UNDER_TEST="$mutant" timeout "${REJUDGE_TIMEOUT:-240}" python -m pytest -x -q -p no:cacheprovider "$@" \
    > /dev/null 2>&1 || status=$?
  case "$status" in
    0) verdict=survived ;; 124) verdict=timeout ;;
    4|5) echo "pytest could not run the selection for $mutant (exit $status): stopped" >&2; exit 2 ;;
    *) verdict=killed ;;
  esac
  echo "$mutant $verdict $(( $(date +%s) - start ))" | tee -a "$verdicts"
done < "$list"
awk '{n[$2]++} END {for (v in n) printf "%s %d\n", v, n[v]}' "$verdicts" | sort
