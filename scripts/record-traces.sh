#!/usr/bin/env bash
# Re-record the traces the app opens on (batchscope/assets/traces/), on the default model, with this engine. --strict-timing:
# a run whose step times show CPU contention writes nothing and stops the script (exit 3): re-run on a quiet machine.
# SGLang's scheduler (--batching sglang) is recorded for the scenarios that ship its trace: not every scenario's
# settings are SGLang's (the priority queue); tests_sglang checks each against SGLang's own scheduler. The same for
# TGI's and TensorRT-LLM's families (four-engines), and TensorRT-LLM's MAX_UTILIZATION policy and TGI without
# prefill chunking where they ship; n-gram speculative decoding (the continuous run with draft tokens, run name
# "speculative") where it ships (spec-decode). Arguments: only these scenarios (scripts/record-traces.sh spec-decode).
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in ${@:-$(python -m batchscope scenarios | cut -d' ' -f1)}; do
  batchings="continuous static"
  for family in sglang tgi trtllm; do
    [ -e "batchscope/assets/traces/$scenario-$family.jsonl" ] && batchings="$batchings $family"
  done
  for batching in $batchings; do
    python -m batchscope run --scenario "$scenario" --batching "$batching" --strict-timing --force --out "batchscope/assets/traces/$scenario-$batching.jsonl"
  done
  if [ -e "batchscope/assets/traces/$scenario-trtllm_max_utilization.jsonl" ]; then
    python -m batchscope run --scenario "$scenario" --batching trtllm --capacity-policy max_utilization --strict-timing \
      --force --out "batchscope/assets/traces/$scenario-trtllm_max_utilization.jsonl"
  fi
  # TGI without prefill chunking: a whole prompt must fit the prefill budget, so that run has a budget of 64 tokens
  if [ -e "batchscope/assets/traces/$scenario-tgi_no_chunking.jsonl" ]; then
    python -m batchscope run --scenario "$scenario" --batching tgi --no-chunked-prefill --max-num-batched-tokens 64 \
      --strict-timing --force --out "batchscope/assets/traces/$scenario-tgi_no_chunking.jsonl"
  fi
  if [ -e "batchscope/assets/traces/$scenario-speculative.jsonl" ]; then
    python -m batchscope run --scenario "$scenario" --batching continuous --num-speculative-tokens 3 --prompt-lookup-min 2 \
      --prompt-lookup-max 4 --strict-timing --force --out "batchscope/assets/traces/$scenario-speculative.jsonl"
  fi
done
