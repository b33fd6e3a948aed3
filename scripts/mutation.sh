#!/usr/bin/env bash
# Mutation testing of the rule, solver, diagnosis, install, lock and verify modules (a maintainer tool; not
# part of .ci/run, which it would slow down far past its budget).
#
#   bash scripts/mutation.sh            # run (resumes: mutants already judged are not run again)
#   bash scripts/mutation.sh --fresh    # forget earlier results first
#   bash scripts/mutation.sh --report   # print the per-module score and the surviving mutants only
#
# The configuration is [tool.mutmut] in pyproject.toml: which modules are mutated and which test files can
# kill their mutants (tests that run the code in this process; each mutant runs only the tests that reached
# the function it changes). On a 2-core machine the run takes well under an hour. Needs the mutation extra:
#   pip install -e '.[test,mutation]'
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${MUTATION_JOBS:-$(nproc 2>/dev/null || echo 2)}"
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
  # the final line of `mutmut run` is its summary (killed, survived, timeouts ...)
  mutmut run --max-children "$jobs" 2>&1 | tr '\r' '\n' | grep -v '^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]' | tail -n 5
  echo "run time: $(( $(date +%s) - start )) s"
fi

# per module: killed / all, from mutmut's own result listing
mutmut results --all true 2>/dev/null | python - <<'PY'
import collections, re, sys

counts = collections.defaultdict(collections.Counter)
survivors = []
for line in sys.stdin:
    m = re.match(r"\s*([\w.]+?)\.x[_ǁ].*?: (\w[\w ]*)$", line.strip())
    if not m:
        continue
    module, status = m.group(1), m.group(2).strip()
    counts[module][status] += 1
    if status in ("survived", "no tests"):
        survivors.append(line.strip())
total = collections.Counter()
for module in sorted(counts):
    c = counts[module]
    total.update(c)
    n = sum(c.values())
    print(f"{module:40s} killed {c['killed'] + c['timeout']:4d} / {n:4d}  survived {c['survived']:3d}  "
          f"no tests {c['no tests']:3d}")
n = sum(total.values())
print(f"{'all':40s} killed {total['killed'] + total['timeout']:4d} / {n:4d}  "
      f"({100 * (total['killed'] + total['timeout']) / max(n, 1):.1f} %)")
print("\nsurvivors:")
print("\n".join(survivors) or "none")
PY
