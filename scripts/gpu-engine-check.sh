#!/usr/bin/env bash
# Batchscope's own engine on a CUDA GPU, in one call of a few minutes (no vLLM, no network, no venv of its own: it
# runs under whatever Python holds a CUDA PyTorch and transformers, with this checkout on the path):
#  1. the device, PyTorch and transformers;
#  2. traces of the sixteen and seed-abcd scenarios, continuous then static, in float32 (the CPU traces' float type, so
#     the two devices run the same numerics and, where greedy decoding agrees, the same schedule): the step-cost
#     chart's GPU points, shipped under batchscope/assets/traces/gpu/;
#  3. `python -m batchscope bench` on the device: the read bandwidth behind the GPU's weight-streaming floor, the decode
#     step at batch 1, 4 and 16, and the share of requests token-identical to transformers generate there.
# Every result is written as soon as it exists, so a run cut short still returns what it finished.
#
# Usage: scripts/gpu-engine-check.sh [--dry-run]      (--dry-run prints the commands without running them)
# Environment: PY (default .venv/bin/python), DEVICE (cuda), DTYPE (float32), OUT (default /tmp/batchscope-gpu),
# SCENARIOS ("sixteen seed-abcd"; empty: no traces), BENCH=0 (no benchmark), BENCH_ARGS (more bench flags).
set -euo pipefail
cd "$(dirname "$0")/.."

DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; fi
PY=${PY:-.venv/bin/python}
DEVICE=${DEVICE:-cuda}
DTYPE=${DTYPE:-float32}
OUT=${OUT:-/tmp/batchscope-gpu}
SCENARIOS=${SCENARIOS-sixteen seed-abcd}
ON=(--device "$DEVICE" --dtype "$DTYPE")

FAILED=()
run() {  # a failing step is reported and the next one still runs: one call of the GPU is worth all its results
  echo "+ $*"
  if [[ $DRY == 0 ]] && ! "$@"; then FAILED+=("$1 ${*:2:3}"); fi
}

say() { echo; echo "== $(date +%T) $*"; }

say "1. the device"
run mkdir -p "$OUT"
run "$PY" -c 'import sys, torch, transformers; d = sys.argv[1]
print("torch", torch.__version__, "transformers", transformers.__version__)
print(torch.cuda.get_device_name(d) if d.startswith("cuda") else d)' "$DEVICE"

say "2. traces ($DTYPE on $DEVICE)"
read -r -a SCENARIO_LIST <<< "$SCENARIOS"
for scenario in "${SCENARIO_LIST[@]}"; do
  for batching in continuous static; do
    run "$PY" -m batchscope run --scenario "$scenario" --batching "$batching" "${ON[@]}" --force \
      --out "$OUT/$scenario-$batching.jsonl"
  done
done

if [[ "${BENCH:-1}" != 0 ]]; then
  say "3. benchmark: the read bandwidth (the floor), the decode step, parity with transformers generate"
  # transformers' own continuous batching (row hf-continuous) is left out: its config's keywords change between
  # transformers versions, and a GPU image carries its own
  read -r -a EXTRA <<< "${BENCH_ARGS:-}"  # more flags, split on spaces (a smaller workload for a dry run elsewhere)
  run "$PY" -m batchscope bench "${ON[@]}" --rounds 1 --parity report "${EXTRA[@]}" \
    --rows hf-sequential hf-static batchscope-static batchscope-continuous \
    --out-json "$OUT/bench.json" --out-md "$OUT/bench.md"
fi
if (( ${#FAILED[@]} )); then
  say "failed: ${FAILED[*]}"
  exit 1
fi
say "done"
