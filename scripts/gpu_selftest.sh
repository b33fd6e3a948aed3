#!/usr/bin/env bash
# GPU self-test: run cudamatrix on a real NVIDIA machine (no network needed) and keep everything it saw.
#
#   bash scripts/gpu_selftest.sh OUTDIR [WHEELDIR] [all|loader|speed]
#
# WHEELDIR holds the cudamatrix wheel and any runtime dependency the machine lacks (built elsewhere with
# `pip wheel . --no-deps -w WHEELDIR` and `pip download`). They are installed into a private folder, never
# into the machine's environment, and compiled to bytecode there as pip does (the image may set
# PYTHONDONTWRITEBYTECODE=1, so compileall runs explicitly). OUTDIR receives raw tool outputs (raw/),
# cudamatrix's JSON (json/), timings (timing/), the loader case (loader/: scripts/gpu_loader_case.py, the
# system-cuDNN case for torch and JAX), speed figures (speed/: scripts/bench_gpu.py, interleaved medians of
# python -c pass, detect, doctor, fix --dry-run, a no-op cudamatrix.fix() and verify next to import torch + one
# convolution, the targets of issue #29 checked, -X importtime and a cProfile of doctor) and a summary;
# OUTDIR.tar.gz packs it all. "loader" runs the install and the loader case only (about 3 minutes); "speed" the
# install and the speed figures only (under 3 minutes: bench_gpu.py has a 170 s deadline); "all" (the default)
# runs everything; "stack" the install, doctor and verify over the installed extensions, and the gpu-marked tests.
set -u
OUT=${1:?usage: gpu_selftest.sh OUTDIR [WHEELDIR] [all|loader|speed|stack]}
WHEELS=${2:-.whl}
MODE=${3:-all}
PY=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/raw" "$OUT/json" "$OUT/timing"
SITE=$(mktemp -d)
export XDG_CACHE_HOME=$(mktemp -d)   # no remembered results from earlier runs
# which of cudamatrix's runtime dependencies the machine has (the wheels in WHEELDIR stand in for the rest)
for mod in packaging pydantic pydantic_core typer requests; do
  "$PY" -c "import $mod, sys; print('$mod', getattr($mod, '__version__', getattr($mod, 'VERSION', '?')))" 2>/dev/null \
    || echo "$mod MISSING"
done > "$OUT/raw/deps.txt"
ls "$WHEELS" > "$OUT/raw/wheels.txt" 2>&1
"$PY" -m pip install -q --no-index --no-deps --target "$SITE" "$WHEELS"/*.whl \
    > "$OUT/raw/install.txt" 2>&1 || { echo "install failed"; cat "$OUT/raw/install.txt"; exit 1; }
"$PY" -m compileall -q -j 0 "$SITE" >> "$OUT/raw/install.txt" 2>&1
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
cd "$(mktemp -d)"   # so the checkout's own package cannot shadow the installed wheel
CM=("$PY" -m cudamatrix)
"$PY" -c 'import cudamatrix, cudamatrix.matrix.data as m; print(cudamatrix.__file__); print(m.default_data_dir())' \
    > "$OUT/raw/installed-from.txt" 2>&1
speed() {
  # SPEED_ARGS: more options for bench_gpu.py (e.g. "--no-verify -n 9" for a shorter run)
  "$PY" "$HERE/bench_gpu.py" "$OUT/speed" --python "$PY" --deadline "${SPEED_DEADLINE:-170}" ${SPEED_ARGS:-} > "$OUT/speed.log" 2>&1
  echo "speed rc=$?" >> "$OUT/summary.txt"
}
if [ "$MODE" = speed ]; then
  # NVML's answers next to nvidia-smi's, from the same machine (the child calls NVML's C interface by ctypes)
  nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,memory.used,mig.mode.current,pci.bus_id,uuid \
      --format=csv > "$OUT/raw/nvidia-smi-query.csv" 2>&1
  nvidia-smi --query-gpu=index,memory.reserved --format=csv > "$OUT/raw/nvidia-smi-reserved.csv" 2>&1
  "${CM[@]}" detect --json > "$OUT/json/detect.json" 2> "$OUT/json/detect.stderr"; echo "detect rc=$?" >> "$OUT/summary.txt"
  speed
  tar -C "$(dirname "$OUT")" -czf "$OUT.tar.gz" "$(basename "$OUT")"
  cat "$OUT/summary.txt" "$OUT/speed.log"
  exit 0
fi
if [ "$MODE" = stack ]; then
  # the stack on the framework (issue #39): doctor and verify with the extensions this machine has installed (each
  # one's smallest GPU operation against the CPU, the maps after it), then the checkout's gpu-marked tests
  nvidia-smi > "$OUT/raw/nvidia-smi.txt" 2>&1
  "$PY" -m pip list > "$OUT/raw/pip-list.txt" 2>&1
  "${CM[@]}" doctor --json > "$OUT/json/doctor.json" 2> "$OUT/json/doctor.stderr"; echo "doctor rc=$?" >> "$OUT/summary.txt"
  # the machine's own nvidia-smi table read as a paste: the compute capability it names from the GPU's name
  "${CM[@]}" detect --json --from "$OUT/raw/nvidia-smi.txt" > "$OUT/json/detect-from-smi.json" 2>&1
  echo "detect --from nvidia-smi rc=$?" >> "$OUT/summary.txt"
  "${CM[@]}" verify --framework all --json --timeout 150 > "$OUT/json/verify.json" 2> "$OUT/json/verify.stderr"
  echo "verify rc=$?" >> "$OUT/summary.txt"
  (cd "$HERE/.." && "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/verify tests/detect/test_detect.py) \
      > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests rc=$?" >> "$OUT/summary.txt"
  tar -C "$(dirname "$OUT")" -czf "$OUT.tar.gz" "$(basename "$OUT")"
  cat "$OUT/summary.txt"; tail -n 30 "$OUT/gpu-tests.log"
  exit 0
fi
if [ "$MODE" = loader ]; then
  "$PY" "$HERE/gpu_loader_case.py" "$OUT/loader" --python "$PY" --system-dir "${SYSTEM_CUDNN_DIR:-/lib/x86_64-linux-gnu}" > "$OUT/loader.log" 2>&1
  echo "loader rc=$?" >> "$OUT/summary.txt"
  tar -C "$(dirname "$OUT")" -czf "$OUT.tar.gz" "$(basename "$OUT")"
  cat "$OUT/summary.txt"
  exit 0
fi

# 1. raw outputs of the tools people paste into bug reports
{ date -u; uname -a; } > "$OUT/raw/machine.txt" 2>&1
nvidia-smi > "$OUT/raw/nvidia-smi.txt" 2>&1
nvidia-smi -q > "$OUT/raw/nvidia-smi-q.txt" 2>&1
nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,memory.used,mig.mode.current \
    --format=csv > "$OUT/raw/nvidia-smi-query.csv" 2>&1
ldconfig -p > "$OUT/raw/ldconfig-p.txt" 2>&1
nvcc --version > "$OUT/raw/nvcc.txt" 2>&1
"$PY" -m pip freeze > "$OUT/raw/pip-freeze.txt" 2>&1
cat /proc/driver/nvidia/version > "$OUT/raw/proc-driver-version.txt" 2>&1
s=$(date +%s%N); "$PY" -m torch.utils.collect_env > "$OUT/raw/collect_env.txt" 2>&1; e=$(date +%s%N)
echo $(( (e - s) / 1000000 )) > "$OUT/timing/collect_env-ms.txt"

# 2. cudamatrix itself
"${CM[@]}" detect --json > "$OUT/json/detect.json" 2> "$OUT/json/detect.stderr"; echo "detect rc=$?" >> "$OUT/summary.txt"
"${CM[@]}" doctor --json > "$OUT/json/doctor.json" 2> "$OUT/json/doctor.stderr"; echo "doctor rc=$?" >> "$OUT/summary.txt"
"${CM[@]}" doctor > "$OUT/json/doctor.txt" 2>&1
for fw in torch tensorflow jax; do
  "${CM[@]}" solve "$fw" --json --explain > "$OUT/json/solve-$fw.json" 2> "$OUT/json/solve-$fw.stderr"
  echo "solve $fw rc=$?" >> "$OUT/summary.txt"
done
"${CM[@]}" verify --framework all --json --timeout 150 > "$OUT/json/verify.json" 2> "$OUT/json/verify.stderr"
echo "verify rc=$?" >> "$OUT/summary.txt"
"${CM[@]}" detect --json --from "$OUT/raw/nvidia-smi.txt" --from "$OUT/raw/nvidia-smi-query.csv" \
    --from "$OUT/raw/collect_env.txt" --from "$OUT/raw/ldconfig-p.txt" --from "$OUT/raw/nvcc.txt" \
    --from "$OUT/raw/pip-freeze.txt" > "$OUT/json/detect-from-reports.json" 2>&1
echo "detect --from rc=$?" >> "$OUT/summary.txt"

# 3. timings: five runs each of the hot commands (the benchmark scripts compute medians from these)
for cmd in detect doctor; do
  for i in 1 2 3 4 5; do
    s=$(date +%s%N); "${CM[@]}" "$cmd" --json > /dev/null 2>&1; e=$(date +%s%N)
    echo $(( (e - s) / 1000000 ))
  done > "$OUT/timing/$cmd-ms.txt"
done
for i in 1 2 3; do
  s=$(date +%s%N); "$PY" -c 'import torch' > /dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000000 ))
done > "$OUT/timing/import-torch-ms.txt"
for i in 1 2 3; do
  s=$(date +%s%N); "${CM[@]}" verify --framework torch --json > /dev/null 2>&1; e=$(date +%s%N); echo $(( (e - s) / 1000000 ))
done > "$OUT/timing/verify-torch-ms.txt"
"$PY" "$HERE/gpu_loader_case.py" "$OUT/loader" --python "$PY" --system-dir "${SYSTEM_CUDNN_DIR:-/lib/x86_64-linux-gnu}" > "$OUT/loader.log" 2>&1
echo "loader rc=$?" >> "$OUT/summary.txt"
speed
echo done >> "$OUT/summary.txt"
tar -C "$(dirname "$OUT")" -czf "$OUT.tar.gz" "$(basename "$OUT")"
cat "$OUT/summary.txt"
