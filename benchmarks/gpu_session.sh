#!/usr/bin/env bash
# One run on a lent GPU machine (no network, 10 minutes per command), correctness before speed:
#   1. preflight: ranklit from this checkout (PYTHONPATH; a carried `.device-site` folder of packages made with
#      `pip install --target .device-site PACKAGES` is added too), the versions, the packages each step needs;
#   2. `ranklit check gpu` at B = 4,096 and 16,384, N = 100,000: every kernel against the torch path, BEFORE any timing;
#   3. the CUDA tests (`-m gpu`); 4. benchmarks/gpu.py (the figures); 5. benchmarks/fit_throughput.py, sized to fit.
# Each step has its own time bound (their sum, about 560 s, fits the 600 s command), its log, and its status in the
# summary line printed last; the exit status is 0 only when every step passed.
# Logs and the RESULTS.md sections land in $OUT (the device tool's folder) or ./gpu-logs; copy the sections into
# benchmarks/RESULTS.md with the device named.
#
#   bash benchmarks/gpu_session.sh            # the device command (its timeout_s: 600)
set -u
cd "$(dirname "$0")/.."
out="${OUT:-gpu-logs}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 WANDB_MODE=offline
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # ranklit from this checkout, installed or not
if [ -d .device-site ]; then export PYTHONPATH="$PYTHONPATH:$PWD/.device-site"; fi
summary=()
failed=0

# step NAME SECONDS COMMAND...: run it under `timeout`, log it, record its status
step() {
  local name="$1" seconds="$2"
  shift 2
  timeout "$seconds" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  cat "$out/$name.log"
  if [ "$rc" -eq 0 ]; then summary+=("$name: ok")
  elif [ "$rc" -eq 124 ]; then summary+=("$name: TIMEOUT after ${seconds}s"); failed=1
  else summary+=("$name: FAILED (exit $rc)"); failed=1
  fi
  return "$rc"
}

# skip NAME WHY: a step that cannot run here
skip() { summary+=("$1: skipped ($2)"); failed=1; }

(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || true) | tee "$out/device.txt"
if step preflight 60 python -c "
import importlib.util, torch, triton, ranklit
print('ranklit', ranklit.__version__, 'from', ranklit.__file__, '| torch', torch.__version__, '| triton',
      triton.__version__, '| cuda', torch.cuda.is_available())
missing = [m for m in ('lightning', 'timm', 'torchvision', 'jsonargparse', 'torchmetrics', 'PIL')
           if importlib.util.find_spec(m) is None]
print('missing:', ' '.join(missing) or 'none')
raise SystemExit(3 if missing else 0)
"; then ready=1; else ready=0; fi
if grep -q "^ranklit " "$out/preflight.log"; then
  step check_gpu 150 python -m ranklit.cli check gpu --sizes 4096 16384 --items 100000 --repeat 1
  if [ "$ready" -eq 1 ]; then
    step gpu_tests 120 python -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_gpu.py
    step gpu_figures 130 python benchmarks/gpu.py --repeat 2 --results "$out/RESULTS_gpu.md"
    step fit_throughput 100 python benchmarks/fit_throughput.py --sizes 800x600 --workers 4 15 --images 512 \
      --seconds 3 --results "$out/RESULTS_fit.md"
  else
    for name in gpu_tests gpu_figures fit_throughput; do skip "$name" "packages missing: see preflight.log"; done
  fi
else
  for name in check_gpu gpu_tests gpu_figures fit_throughput; do skip "$name" "ranklit does not import"; done
fi
line="gpu_session summary: $(IFS=';'; echo "${summary[*]}" | sed 's/;/; /g')"
echo "$line" | tee "$out/summary.txt"
exit "$failed"
