"""The benchmark's report: the issue's targets, provenance of the run, and the Markdown tables."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path

import torch

from batchscope.model.models import LoadedModel
from batchscope.steplog.trace import write_text_atomic

# Targets of the benchmark issue (CPU, the `sixteen` workload): (description, measured key, minimum or maximum).
TARGETS = [
    ("Batchscope continuous >= 1.3x transformers continuous batching, 4 slots", "cont_vs_hf_cb@4", ">=", 1.3),
    ("Batchscope continuous >= 2x Batchscope static, 4 slots", "cont_vs_static@4", ">=", 2.0),
    ("Batchscope continuous >= 1.1x transformers continuous batching, 16 slots", "cont_vs_hf_cb@16", ">=", 1.1),
    ("decode step at batch 4 <= 1.5x the weight-streaming floor", "step4_vs_floor", "<=", 1.5),
    ("scheduler + bookkeeping <= 5 % of a step (Batchscope continuous, 4 slots)", "outside_share@4", "<=", 0.05),
]


def evaluate_targets(result: dict) -> list[dict]:
    """The issue's targets that this run measured: ``{"target", "measured", "met"}`` each."""
    tps = {r["label"]: r["output_tokens_per_s"] for r in result["rows"]}
    measured: dict[str, float] = {}
    for n in (4, 16):
        cont, static, hf = (
            tps.get(f"{k}@{n}") for k in ("batchscope-continuous", "batchscope-static", "hf-continuous")
        )
        if cont and hf:
            measured[f"cont_vs_hf_cb@{n}"] = cont / hf
        if cont and static:
            measured[f"cont_vs_static@{n}"] = cont / static
        row = next((r for r in result["rows"] if r["label"] == f"batchscope-continuous@{n}"), None)
        if row and row.get("outside_forward_share") and row["outside_forward_share"]["total"] is not None:
            measured[f"outside_share@{n}"] = row["outside_forward_share"]["total"]
    for s in result["decode_step"]["batches"]:
        if s["batch"] == 4 and s["ratio_to_floor"]:
            measured["step4_vs_floor"] = s["ratio_to_floor"]
    out = []
    for text, key, op, bound in TARGETS:
        if key in measured:
            value = measured[key]
            out.append(
                {
                    "target": text,
                    "key": key,
                    "bound": bound,
                    "op": op,
                    "measured": value,
                    "met": value >= bound if op == ">=" else value <= bound,
                }
            )
    return out


def provenance(loaded: LoadedModel) -> dict:
    """Model, device, dtype, library versions, CPU, threads and the time of the run."""
    import transformers

    dev = loaded.device
    return {
        "model": loaded.name,
        "device": str(dev),
        "dtype": str(loaded.dtype).replace("torch.", ""),
        "device_name": torch.cuda.get_device_name(dev)
        if dev.type == "cuda"
        else platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m batchscope " + " ".join(sys.argv[1:])
        if sys.argv and sys.argv[0].endswith("__main__.py")
        else None,
    }


def _fmt(x, spec=".1f") -> str:
    return "–" if x is None else format(x, spec)


def to_markdown(result: dict) -> str:
    """The benchmark's tables (rows, decode steps, targets) as Markdown."""
    p, w = result["provenance"], result["workload"]
    lines = [
        f"Model {p['model']} ({p['dtype']}) on {p['device']} ({p['device_name']}, {p['torch_threads']} torch "
        f"threads), torch {p['torch']}, transformers {p['transformers']}, {p['created']}. "
        f"Workload: {w['num_requests']} requests, max_tokens {w['max_tokens']}, greedy; "
        f"{result['options']['rounds']} interleaved rounds.",
        "",
        *([f"**PARTIAL: {_stopped_by(result)}; these are the rounds it finished.**", ""] * bool(result.get("partial"))),
        "| # | engine | max_num_seqs | seconds (best round) | output tokens/s | × row 1 | outside forward |",
        "|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(result["rows"], start=1):
        share = r.get("outside_forward_share") or {}
        lines.append(
            f"| {i} | {r['title']} | {r['max_num_seqs'] or '–'} | {r['best_seconds']:.1f} | "
            f"{r['output_tokens_per_s']:.1f} | {r['ratio_to_row_1']:.2f} | "
            f"{_fmt(100 * share['total'] if share.get('total') is not None else None)}"
            f"{' %' if share.get('total') is not None else ''} |"
        )
    par = result["parity"]
    lines += [
        "",
        "Greedy outputs: "
        + ("token-identical across all rows." if par["identical"] else f"NOT identical ({par['error']})."),
        "",
    ]
    d = result["decode_step"]
    if not d.get("batches"):
        return "\n".join(lines) + "\n"
    lines += [
        f"Decode step (Batchscope, all rows decoding) against the weight-streaming floor: "
        f"{d['weight_bytes'] / 1e6:.0f} MB of weights / {d['read_bandwidth_GBps']:.1f} GB/s measured read "
        f"bandwidth = {d['floor_ms']:.1f} ms.",
        "",
        "| batch | median step (ms) | model forward (ms) | × floor | outside forward |",
        "|---|---|---|---|---|",
    ]
    for s in d["batches"]:
        lines.append(
            f"| {s['batch']} | {_fmt(s['median_ms'])} | {_fmt(s['forward_ms'])} | "
            f"{_fmt(s['ratio_to_floor'], '.2f')} | "
            f"{_fmt(100 * s['outside_share'] if s['outside_share'] is not None else None)} % |"
        )
    if result["targets"]:
        lines += ["", "| target | measured | met |", "|---|---|---|"]
        for t in result["targets"]:
            value = f"{100 * t['measured']:.1f} %" if "share" in t["key"] else f"{t['measured']:.2f}×"
            lines.append(f"| {t['target']} | {value} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines) + "\n"


def write(result: dict, json_path: str | Path, md_path: str | Path) -> None:
    """Write the result as JSON and the Markdown table (each atomically: never half a file)."""
    write_text_atomic(json.dumps(result, indent=1, allow_nan=False) + "\n", json_path)
    write_text_atomic(to_markdown(result), md_path)


def _stopped_by(result: dict) -> str:
    """Why a partial run stopped: the error that ended it, else Ctrl-C."""
    if result.get("error"):
        return f"the run stopped at an error ({result['error']})"
    return "the run was stopped early (Ctrl-C)"
