#!/usr/bin/env bash
# Re-record the traces the app opens on (batchscope/assets/traces/), on the default model, with this engine. --strict-timing:
# a run whose step times show CPU contention writes nothing and stops the script (exit 3): re-run on a quiet machine.
# SGLang's scheduler (--batching sglang) is recorded for the scenarios that ship its trace: not every scenario's
# settings are SGLang's (the priority queue); tests_sglang checks each against SGLang's own scheduler.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in $(python -m batchscope scenarios | cut -d' ' -f1); do
  batchings="continuous static"
  [ -e "batchscope/assets/traces/$scenario-sglang.jsonl" ] && batchings="$batchings sglang"
  for batching in $batchings; do
    python -m batchscope run --scenario "$scenario" --batching "$batching" --strict-timing --force --out "batchscope/assets/traces/$scenario-$batching.jsonl"
  done
done
