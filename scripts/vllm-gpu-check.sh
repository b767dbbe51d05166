#!/usr/bin/env bash
# GPU check, under 5 minutes on one GPU once both venvs exist (creating vLLM's takes ~3 minutes more):
#  1. vLLM 0.33.0 serves a small local model with Batchscope's tracing scheduler
#     (--scheduler-cls batchscope_vllm.tracer.TracingScheduler, BATCHSCOPE_TRACE set); a local client sends a burst
#     of requests through the OpenAI-compatible API on 127.0.0.1 (stdlib urllib; stop strings, n=2, clients that give
#     up: aborts), with n-gram speculative decoding on; the server stops; the trace is
#     validated (schema, a summary for every request, block counts within the pool) and summarized;
#  2. Batchscope's own engine on CUDA in bfloat16: the seed-abcd and sixteen scenarios, the share of requests
#     token-identical to transformers generate there, and `python -m batchscope bench --device cuda --rounds 1`.
# Figures for the README are printed at the end (and kept under $OUT).
#
# Usage: scripts/vllm-gpu-check.sh [--dry-run]      (--dry-run prints the commands without running them)
# Environment: OUT (default /tmp/batchscope-gpu-check), PORT (8765), REQUESTS (64), MODEL (default: Batchscope's
# converted SmolLM2-135M-Instruct folder), ASYNC=1 (TracingAsyncScheduler with vLLM's async scheduling instead),
# SPECULATE=0 (no speculative decoding).
set -euo pipefail
cd "$(dirname "$0")/.."

DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; fi
PY=.venv/bin/python
VPY=.venv-vllm/bin/python
OUT=${OUT:-/tmp/batchscope-gpu-check}
PORT=${PORT:-8765}
REQUESTS=${REQUESTS:-64}
TRACE=$OUT/vllm-server.jsonl.gz
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

run() {
  echo "+ $*"
  if [[ $DRY == 0 ]]; then "$@"; fi
}

say() { echo; echo "== $*"; }

say "0. virtual environments (Batchscope's .venv, vLLM's .venv-vllm) and Batchscope inside vLLM's venv"
run mkdir -p "$OUT"
if [[ $DRY == 1 || ! -x $PY ]]; then run make .venv/.installed; fi
if [[ $DRY == 1 || ! -x $VPY ]]; then run make .venv-vllm/.installed; fi
run "$VPY" -m pip install -q --no-deps .   # the tracer: standard library + vLLM only, no torch pin pulled
if [[ -z "${MODEL:-}" ]]; then
  echo "+ MODEL=\$($PY -c 'from batchscope.model.models import default_model_path; print(default_model_path())')"
  if [[ $DRY == 1 ]]; then
    MODEL=MODEL_DIR
  else
    MODEL=$("$PY" -c 'from batchscope.model.models import default_model_path; print(default_model_path())')
  fi
fi

say "1. vllm serve with the tracing scheduler"
if [[ "${ASYNC:-0}" == 1 ]]; then
  SCHED=(--scheduler-cls batchscope_vllm.tracer.TracingAsyncScheduler)
else
  SCHED=(--scheduler-cls batchscope_vllm.tracer.TracingScheduler --no-async-scheduling)
fi
# n-gram speculative decoding on (SPECULATE=0: off), so the trace records drafts and acceptances
SPEC_CFG='{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'
SPEC=()
if [[ "${SPECULATE:-1}" != 0 ]]; then SPEC=(--speculative-config "$SPEC_CFG"); fi
SERVE=(.venv-vllm/bin/vllm serve "$MODEL" --served-model-name smollm2 --host 127.0.0.1 --port "$PORT"
  --max-model-len 2048 --gpu-memory-utilization 0.3 --enforce-eager "${SCHED[@]}" "${SPEC[@]}")
echo "+ BATCHSCOPE_TRACE=$TRACE ${SERVE[*]} > $OUT/server.log 2>&1 &"
START=$(date +%s)
if [[ $DRY == 0 ]]; then
  BATCHSCOPE_TRACE=$TRACE "${SERVE[@]}" > "$OUT/server.log" 2>&1 &
  SERVER=$!
  trap 'kill "$SERVER" 2>/dev/null || true' EXIT
  for _ in $(seq 240); do
    if "$VPY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
      "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; then break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then tail -40 "$OUT/server.log"; exit 1; fi
    sleep 1
  done
  echo "server ready after $(($(date +%s) - START)) s"
fi

say "2. a burst of $REQUESTS requests from a local client (OpenAI-compatible API, urllib, 16 at a time)"
run "$VPY" scripts/openai_burst.py --url "http://127.0.0.1:$PORT" --model smollm2 --requests "$REQUESTS" \
  --out "$OUT/burst.json"

say "3. stop the server (its scheduler writes the trace's summary at shutdown) and check the trace"
if [[ $DRY == 0 ]]; then
  kill -INT "$SERVER"
  wait "$SERVER" || true
  trap - EXIT
  grep -E "batchscope" "$OUT/server.log" || true
fi
run "$PY" scripts/gpu_report.py trace "$TRACE" --expect-requests "$REQUESTS"

say "4. Batchscope's engine on CUDA (bfloat16): scenarios, parity with generate, benchmark"
for scenario in seed-abcd sixteen; do
  run "$PY" -m batchscope run --scenario "$scenario" --device cuda --out "$OUT/$scenario-continuous-cuda.jsonl"
  run "$PY" -m batchscope run --scenario "$scenario" --batching static --device cuda --out "$OUT/$scenario-static-cuda.jsonl"
done
run "$PY" -m batchscope bench --scenario seed-abcd --device cuda --rounds 1 --parity report \
  --rows hf-sequential batchscope-static batchscope-continuous --max-num-seqs 3 --step-batches 1 \
  --out-json "$OUT/bench-seed-abcd.json" --out-md "$OUT/bench-seed-abcd.md"
run "$PY" -m batchscope bench --device cuda --rounds 1 --out-json "$OUT/bench.json" --out-md "$OUT/bench.md"

say "5. figures for the README"
run "$PY" scripts/gpu_report.py figures "$OUT"   # also written to $OUT/figures.md
echo "total $(($(date +%s) - START)) s since the server started"
