"""Check a vLLM tracer's trace and print the GPU check's figures (Batchscope's venv).

    python scripts/gpu_report.py trace OUT/vllm-server.jsonl.gz --expect-requests 64
    python scripts/gpu_report.py figures OUT

``trace``: validates the file (schema, via ``batchscope.steplog.trace``), checks that every request the client sent has
a summary entry and a finish, that block tables rebuilt from the deltas never exceed the pool and that
``num_used_blocks`` stays within it, then prints the trace's shape. ``figures``: the burst, the trace, the share of
requests token-identical to transformers ``generate`` in bfloat16 on CUDA (seed-abcd and sixteen) and the
benchmark's table, as Markdown for the README.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from batchscope.steplog import trace
from batchscope.steplog.spec_decode import spec_decode_stats
from batchscope.steplog.view import TraceView


def check_trace(path: Path, expect: int | None) -> dict:
    records = trace.read(path)
    view = TraceView(records)
    summary = records[-1]["requests"]
    problems = []
    if expect is not None and len(summary) < expect:
        problems.append(f"{len(summary)} requests in the summary, {expect} sent")
    if any(r["finish_reason"] is None for r in summary):
        problems.append("requests without a finish reason")
    pool = records[0]["config"]["num_kv_blocks"]
    for k in range(view.num_steps):
        held = {b for t in view.block_tables(k).values() for b in t}
        if max(held, default=0) >= pool or view.steps[k]["kv"]["num_used_blocks"] > pool:
            problems.append(f"step {k}: blocks outside the pool")
            break
    if problems:
        raise SystemExit(f"{path}: " + "; ".join(problems))
    steps = view.steps
    return {
        "badge": view.provenance(),
        "steps": len(steps),
        "requests": len(summary),
        "max_running": max(len(s["running"]) for s in steps),
        "max_waiting": max(len(s["waiting"]) for s in steps),
        "max_used_blocks": max(s["kv"]["num_used_blocks"] for s in steps),
        "pool_blocks": pool,
        "preemptions": sum(len(s["preempted"]) for s in steps),
        "aborted": sum(1 for r in summary if r["finish_reason"] == "abort"),  # clients gone, stop strings
        "n2_children": sum(1 for r in summary if r["request_id"][:2] in ("0_", "1_")),
        **spec_decode_stats(steps),  # drafts, draft tokens, accepted, acceptance rate
        "mean_step_ms": round(1000 * sum(s["t_end"] - s["t_start"] for s in steps) / max(1, len(steps)), 2),
        "bytes": path.stat().st_size,
    }


def figures(out: Path) -> str:
    """The figures as Markdown (also written to ``out/figures.md``)."""
    burst = json.loads((out / "burst.json").read_text())
    shape = check_trace(out / "vllm-server.jsonl.gz", burst["requests"])
    lines = ["### vLLM server traced", "", "```json", json.dumps({"burst": burst, "trace": shape}, indent=2), "```", ""]
    lines += ["### Batchscope on CUDA (bfloat16): share of requests token-identical to transformers generate", ""]
    lines += ["| workload | row | identical |", "|---|---|---|"]
    for name in ("bench-seed-abcd.json", "bench.json"):
        result = json.loads((out / name).read_text())
        for row, share in result["parity"]["agreement"].items():
            lines.append(f"| {name.removesuffix('.json')} | {row} | {100 * share:.0f} % |")
    lines += ["", (out / "bench.md").read_text()]
    text = "\n".join(lines)
    (out / "figures.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("path", type=Path)
    t.add_argument("--expect-requests", type=int)
    f = sub.add_parser("figures")
    f.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "trace":
        print(json.dumps(check_trace(args.path, args.expect_requests), indent=2))
    else:
        print(figures(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
