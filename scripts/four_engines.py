"""Print the "four engines" table of docs/engines-compared.md: the four-engines scenario's shipped traces (one
workload, one pool, six schedulers), measured on the step clock from ``batchscope.steplog.metrics.summarize`` (the
figures every view shows). Usage: python scripts/four_engines.py [scenario]"""

from __future__ import annotations

import sys
from pathlib import Path

from batchscope.steplog.metrics import summarize
from batchscope.steplog.trace import read

TRACES = Path(__file__).resolve().parents[1] / "batchscope" / "assets" / "traces"
RUNS = ("continuous", "sglang", "tgi", "tgi_no_chunking", "trtllm", "trtllm_max_utilization")
ROWS = (  # label, summary key, statistic (None: a plain value), format
    ("steps", "num_steps", None, "{:.0f}"),
    ("mean TTFT (steps)", "ttft_steps", "mean", "{:.1f}"),
    ("mean ITL (steps)", "itl_steps", "mean", "{:.2f}"),
    ("mean E2E (steps)", "e2e_steps", "mean", "{:.1f}"),
    ("output tokens per step", "output_throughput_tok_step", None, "{:.2f}"),
    ("evictions (preempt / retract / pause)", "num_preemptions", None, "{:.0f}"),
    ("tokens computed again", "num_recomputed_tokens", None, "{:.0f}"),
    ("KV pool in use, mean", "kv_utilisation_mean", None, "{:.0%}"),
)


def main(scenario: str = "four-engines") -> None:
    runs = [(name, read(TRACES / f"{scenario}-{name}.jsonl")) for name in RUNS]
    heads = [name for name, _ in runs]
    summaries = [summarize(records) for _, records in runs]
    print("| | " + " | ".join(heads) + " |")
    print("|---" * (len(runs) + 1) + "|")
    for label, key, stat, fmt in ROWS:
        values = [s[key][stat] if stat else s[key] for s in summaries]
        print(f"| {label} | " + " | ".join("n/a" if v is None else fmt.format(v) for v in values) + " |")


if __name__ == "__main__":
    main(*sys.argv[1:])
