#!/usr/bin/env bash
# Re-record the traces the app opens on (assets/traces/), on the default model, with this engine.
set -euo pipefail
cd "$(dirname "$0")/.."
for scenario in $(python -m engine scenarios | cut -d' ' -f1); do
  for policy in continuous static; do
    python -m engine run --scenario "$scenario" --policy "$policy" --force --out "assets/traces/$scenario-$policy.jsonl"
  done
done
