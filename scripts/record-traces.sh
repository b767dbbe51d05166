#!/usr/bin/env bash
# Re-record the traces the app opens on (assets/traces/), on the default model, with this engine. --strict-timing:
# a run whose step times show CPU contention writes nothing and stops the script (exit 3): re-run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in $(python -m engine scenarios | cut -d' ' -f1); do
  for batching in continuous static; do
    python -m engine run --scenario "$scenario" --batching "$batching" --strict-timing --force --out "assets/traces/$scenario-$batching.jsonl"
  done
done
