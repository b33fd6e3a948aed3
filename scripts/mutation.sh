#!/usr/bin/env bash
# Mutation testing of the rule, solver, diagnosis, install, lock and verify modules, and (issue #28) the loader,
# ELF reader, paste readers, overlay, verification memory, safe writer, fleet classes and disk-space measure
# (a maintainer tool; not part of .ci/run, which it would slow down far past its budget).
#
#   bash scripts/mutation.sh            # run (resumes: mutants already judged are not run again)
#   bash scripts/mutation.sh --fresh    # forget earlier results first
#   bash scripts/mutation.sh --report   # print the per-module score and the surviving mutants only
#   bash scripts/mutation.sh --module cudamatrix/safe/files.py tests/safe/test_files.py [TEST ...]
#                                       # one module against the named tests only, in mutants-module/<name>/
#                                       # (a copy of this tree whose [tool.mutmut] names just them; resumes;
#                                       # add --report after the tests to print that module's score only)
#
# The configuration is [tool.mutmut] in pyproject.toml: which modules are mutated and which test files can
# kill their mutants (tests that run the code in this process; each mutant runs only the tests that reached
# the function it changes). On a 2-core machine the run took about 23 minutes before the issue #28 modules were added; with them, run
# it per module (--module, below: a few minutes each) or expect hours. The mutants
# left alive, each with its reason, are listed in scripts/mutation-survivors.md. Needs the mutation extra:
#   pip install -e '.[test,mutation]'
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${MUTATION_JOBS:-$(nproc 2>/dev/null || echo 2)}"
if [ "${1:-}" = "--module" ]; then
  # one module, judged by the tests named after it: minutes, where the whole selection takes hours
  shift
  module="${1:?usage: bash scripts/mutation.sh --module cudamatrix/X.py TEST [TEST ...] [--report]}"
  shift
  report_only=""
  tests=()
  for arg in "$@"; do
    if [ "$arg" = "--report" ]; then report_only=1; else tests+=("$arg"); fi
  done
  [ "${#tests[@]}" -gt 0 ] || { echo "name the tests that judge $module" >&2; exit 2; }
  [ -f "$module" ] || { echo "no such module: $module" >&2; exit 2; }
  name=$(echo "${module%.py}" | tr '/' '.')
  work="mutants-module/$name"
  mkdir -p "$work"
  # the tree as git sees it (tracked and untracked, ignored files left out), copied over the last copy
  git ls-files -z --cached --others --exclude-standard | python -c '
import os, shutil, sys
work = sys.argv[1]
for name in sys.stdin.read().split("\0"):
    if name and os.path.isfile(name) and not name.startswith("mutants-module/"):
        os.makedirs(os.path.join(work, os.path.dirname(name)), exist_ok=True)
        shutil.copy2(name, os.path.join(work, name))
' "$work"
  python - "$work/pyproject.toml" "$module" "${tests[@]}" <<'PY'
import json, re, sys
path, module, tests = sys.argv[1], sys.argv[2], sys.argv[3:]
text = open(path, encoding="utf-8").read()
def field(key, values):
    global text
    text, n = re.subn(rf"(?ms)^{key} = \[[^\n]*\]\n|^{key} = \[\n.*?^\]\n", f"{key} = {json.dumps(values)}\n", text, count=1)
    assert n == 1, key
field("only_mutate", [module])
field("pytest_add_cli_args_test_selection", tests)
open(path, "w", encoding="utf-8").write(text)
PY
  cd "$work"
  if [ -z "$report_only" ]; then
    start=$(date +%s)
    # mutmut keeps a verdict until the mutated function changes: the last run's survivors are named again
    # after the first pass, so that tests written since judge them
    again=()
    if [ -d mutants ]; then
      mapfile -t again < <(mutmut results 2>/dev/null | grep -E ': (survived|no tests)$' | sed 's/^ *//; s/:.*//')
    fi
    mutmut run --max-children "$jobs" 2>&1 | tr '\r' '\n' | grep -E '[0-9]+/[0-9]+ +🎉|mutations/second' \
      | sed 's/^[^0-9]*//' | tail -n 2
    if [ "${#again[@]}" -gt 0 ]; then
      echo "the last run's ${#again[@]} survivors, judged again:"
      mutmut run --max-children "$jobs" "${again[@]}" 2>&1 | tr '\r' '\n' \
        | grep -E '[0-9]+/[0-9]+ +🎉|mutations/second' | sed 's/^[^0-9]*//' | tail -n 2
    fi
    echo "run time: $(( $(date +%s) - start )) s"
  fi
  set -- --report
fi
case "${1:-}" in
  --fresh) rm -rf mutants ;;
  --report) ;;
  "") ;;
  *) echo "usage: bash scripts/mutation.sh [--fresh|--report]" >&2; exit 2 ;;
esac

if ! python -c "import mutmut" 2>/dev/null; then
  echo "mutmut is not installed: pip install -e '.[test,mutation]'" >&2
  exit 2
fi

if [ "${1:-}" != "--report" ]; then
  start=$(date +%s)
  # mutmut redraws one status line; its last state is the summary: done/total, killed, no tests, timeouts,
  # suspicious, survived, skipped, caught by type check; then the rate
  mutmut run --max-children "$jobs" 2>&1 | tr '\r' '\n' | grep -E '[0-9]+/[0-9]+ +🎉|mutations/second' | sed 's/^[^0-9]*//' | tail -n 2
  echo "run time: $(( $(date +%s) - start )) s"
fi

# per module: killed (timeouts count as killed, as mutmut's own score does) / all, and the rest by name
listing=$(mktemp)
trap 'rm -f "$listing"' EXIT
mutmut results --all true > "$listing" 2>/dev/null
python - "$listing" <<'PY'
import collections, re, sys

counts = collections.defaultdict(collections.Counter)
rest = []
for line in open(sys.argv[1], encoding="utf-8"):
    m = re.match(r"\s*(\S+?)\.x[_\u01c1]\S*: (.+)$", line.rstrip())
    if not m:
        continue
    module, status = m.group(1), m.group(2).strip()
    counts[module][status] += 1
    if status not in ("killed", "timeout"):
        rest.append(line.strip())
total = collections.Counter()
for module in sorted(counts):
    c = counts[module]
    total.update(c)
    n, k = sum(c.values()), c["killed"] + c["timeout"]
    print(f"{module:32s} killed {k:4d} / {n:4d}  survived {c['survived']:3d}  no tests {c['no tests']:3d}  "
          f"other {n - k - c['survived'] - c['no tests']:3d}")
n, k = sum(total.values()), total["killed"] + total["timeout"]
print(f"{'all':32s} killed {k:4d} / {n:4d}  ({100 * k / max(n, 1):.1f} %)")
print("\nnot killed:")
print("\n".join(rest) or "none")
PY
