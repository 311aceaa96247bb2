#!/usr/bin/env bash
# One run on a lent GPU machine (an H200 with 16 cores, no network), well under its 10-minute limit per command:
# the CUDA tests, then the kernels' and the step's figures (benchmarks/gpu.py), then `ranklit fit` from JPEG files
# (benchmarks/fit_throughput.py). Each part has its own time bound, so a stall in one leaves the others' logs.
# Logs and the RESULTS.md sections land in $OUT (the device tool's folder) or ./gpu-logs; copy the sections into
# benchmarks/RESULTS.md with the device named.
#
#   bash benchmarks/gpu_session.sh            # the device command (its timeout_s: 600)
set -uo pipefail
out="${OUT:-gpu-logs}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 WANDB_MODE=offline
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$out/device.txt"
python -c "import torch, triton, torchvision, lightning; print(torch.__version__, triton.__version__, \
torchvision.__version__, lightning.__version__)" 2>&1 | tee -a "$out/device.txt"
timeout 120 python -m pytest -q -p no:cacheprovider -o addopts="" -m gpu tests/test_gpu.py 2>&1 | tee "$out/gpu_tests.log"
timeout 210 python benchmarks/gpu.py --repeat 3 --results "$out/RESULTS_gpu.md" 2>&1 | tee "$out/gpu.log"
timeout 220 python benchmarks/fit_throughput.py --results "$out/RESULTS_fit.md" 2>&1 | tee "$out/fit.log"
