#!/usr/bin/env bash
# GPU check of the SGLang tracer, a few minutes on one GPU once the venvs exist (SGLang's CUDA venv: ~5 minutes more):
#  1. SGLang 0.5.23 serves a small local model through Batchscope's launcher (python -m batchscope_sglang.serve,
#     BATCHSCOPE_TRACE set) with a small token pool (--max-total-tokens), so that decode runs out and retracts;
#  2. a local client sends a burst through the OpenAI-compatible API on 127.0.0.1 (stop strings, n=2, clients that
#     give up: aborts), then requests that share a long system prompt (radix-cache hits);
#  3. the server stops (the launcher ends the scheduler through SGLang's graceful exit: the trace gets its summary);
#     the trace is validated and summarized, and must hold a retraction, an abort and radix-cache hits.
# Figures for the README are printed at the end (and kept under $OUT).
#
# Usage: scripts/sglang-gpu-check.sh [--dry-run]     (--dry-run prints the commands without running them)
# Environment: OUT (default /tmp/batchscope-sglang-check), PORT (8766), REQUESTS (64), SHARED (16), POOL (4000 token
# slots), MODEL (default: Batchscope's converted SmolLM2-135M-Instruct folder), OVERLAP=0 (--disable-overlap-schedule).
set -euo pipefail
cd "$(dirname "$0")/.."

DRY=0
if [[ "${1:-}" == "--dry-run" ]]; then DRY=1; fi
PY=.venv/bin/python
GVENV=.venv-sglang-gpu  # SGLang with its CUDA dependencies (the model-free .venv-sglang has none)
SPY=$GVENV/bin/python
OUT=${OUT:-/tmp/batchscope-sglang-check}
PORT=${PORT:-8766}
REQUESTS=${REQUESTS:-64}
SHARED=${SHARED:-16}
POOL=${POOL:-4000}
TRACE=$OUT/sglang-server.jsonl.gz
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

run() {
  echo "+ $*"
  if [[ $DRY == 0 ]]; then "$@"; fi
}

say() { echo; echo "== $*"; }

say "0. virtual environments (Batchscope's .venv, SGLang's $GVENV) and Batchscope inside SGLang's venv"
run mkdir -p "$OUT"
if [[ $DRY == 1 || ! -x $PY ]]; then run make .venv/.installed; fi
if [[ $DRY == 1 || ! -x $SPY ]]; then
  run python3 -m venv "$GVENV"
  run "$SPY" -m pip install -q sglang==0.5.23
fi
run "$SPY" -m pip install -q --no-deps .   # the tracer: standard library + SGLang only
if [[ -z "${MODEL:-}" ]]; then
  echo "+ MODEL=\$($PY -c 'from batchscope.model.models import default_model_path; print(default_model_path())')"
  if [[ $DRY == 1 ]]; then
    MODEL=MODEL_DIR
  else
    MODEL=$("$PY" -c 'from batchscope.model.models import default_model_path; print(default_model_path())')
  fi
fi

say "1. SGLang's server with the tracing scheduler (python -m batchscope_sglang.serve)"
OVERLAP_FLAG=()
if [[ "${OVERLAP:-1}" == 0 ]]; then OVERLAP_FLAG=(--disable-overlap-schedule); fi
SERVE=("$SPY" -m batchscope_sglang.serve --model-path "$MODEL" --served-model-name smollm2 --host 127.0.0.1
  --port "$PORT" --max-total-tokens "$POOL" --max-running-requests 32 --mem-fraction-static 0.3
  --disable-cuda-graph "${OVERLAP_FLAG[@]}")
echo "+ BATCHSCOPE_TRACE=$TRACE ${SERVE[*]} > $OUT/server.log 2>&1 &"
START=$(date +%s)
if [[ $DRY == 0 ]]; then
  BATCHSCOPE_TRACE=$TRACE "${SERVE[@]}" > "$OUT/server.log" 2>&1 &
  SERVER=$!
  trap 'kill "$SERVER" 2>/dev/null || true' EXIT
  for _ in $(seq 300); do
    if "$SPY" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
      "http://127.0.0.1:$PORT/health" > /dev/null 2>&1; then break; fi
    if ! kill -0 "$SERVER" 2>/dev/null; then tail -40 "$OUT/server.log"; exit 1; fi
    sleep 1
  done
  echo "server ready after $(($(date +%s) - START)) s"
fi

say "2. a burst of $REQUESTS requests (stop strings, n=2, clients that give up), then $SHARED with a shared prefix"
run "$SPY" scripts/openai_burst.py --url "http://127.0.0.1:$PORT" --model smollm2 --requests "$REQUESTS" \
  --out "$OUT/burst.json"
SHARED_CLIENT='
import json, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
url, n = sys.argv[1], int(sys.argv[2])
system = "You are a patient teacher of operating systems. Answer in plain words, with one example. " * 8
def one(i):
    body = {"model": "smollm2", "prompt": system + f"Question {i}: what is a page table?", "max_tokens": 64,
            "temperature": 0.0}
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read())["usage"]["completion_tokens"]
with ThreadPoolExecutor(4) as pool:
    print("shared-prefix requests, output tokens:", sum(pool.map(one, range(n))))
'
run "$SPY" -c "$SHARED_CLIENT" "http://127.0.0.1:$PORT" "$SHARED"

say "3. stop the server (the launcher ends its scheduler gracefully: the summary is written) and check the trace"
if [[ $DRY == 0 ]]; then
  kill -INT "$SERVER"
  wait "$SERVER" || true
  trap - EXIT
  grep -E "batchscope" "$OUT/server.log" || true
fi
run "$PY" scripts/gpu_report.py trace "$TRACE" --expect-requests "$((REQUESTS + SHARED))"
CHECK='
import sys
from batchscope.steplog import trace
records = trace.read(sys.argv[1])
steps = records[1:-1]
retracted = sum(len(s["preempted"]) for s in steps)
aborted = sum(1 for s in steps for f in s["finished"] if f["reason"] == "abort")
hits = sum(v for s in steps for v in s.get("num_prefix_hit_tokens", {}).values())
overlap = records[0]["config"].get("async_scheduling")
print(f"retractions {retracted}, aborts {aborted}, radix-cache hit tokens {hits}, overlap scheduler {overlap}")
if not (retracted and aborted and hits):
    sys.exit("the trace should hold a retraction, an abort and radix-cache hits: raise REQUESTS or lower POOL")
'
run "$PY" -c "$CHECK" "$TRACE"
run "$PY" -m batchscope metrics "$TRACE"
echo "total $(($(date +%s) - START)) s since the server started"
