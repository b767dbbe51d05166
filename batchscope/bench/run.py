"""One benchmark run: every row ``rounds`` times, interleaved (A..E, then E..A), then the decode-step timings."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from batchscope.bench.measure import (
    ParityError,
    _sync,
    agreement,
    check_parity,
    decode_step_times,
    read_bandwidth,
    weight_bytes,
)
from batchscope.bench.report import evaluate_targets, provenance
from batchscope.bench.rows import BATCHED_ROWS, ROW_TITLES, ROWS
from batchscope.bench.workload import Workload
from batchscope.model.models import LoadedModel


@dataclass
class BenchOptions:
    """Knobs of one benchmark run (the CLI's flags)."""

    max_num_seqs: list[int] = field(default_factory=lambda: [4, 16])
    rounds: int = 2
    max_num_batched_tokens: int = 128
    block_size: int = 16
    step_batches: list[int] = field(default_factory=lambda: [1, 4, 16])
    step_tokens: int = 32
    parity: str = "auto"  # auto | strict | report
    rows: list[str] = field(default_factory=lambda: list(ROW_TITLES))


def _schedule(opts: BenchOptions) -> list[tuple[str, int]]:
    """(row, max_num_seqs) in the order of the first round; ``hf-sequential`` does not depend on slots."""
    order = [("hf-sequential", 0)] if "hf-sequential" in opts.rows else []
    for n in opts.max_num_seqs:
        order += [(row, n) for row in ROW_TITLES if row in BATCHED_ROWS and row in opts.rows]
    return order


def _call(row: str, loaded: LoadedModel, work: Workload, n: int, opts: BenchOptions, sink: dict | None = None):
    fn = ROWS[row]
    if row in ("hf-sequential", "hf-static"):
        return fn(loaded, work, n)
    if row == "hf-continuous":
        return fn(loaded, work, n, opts.max_num_batched_tokens)
    return fn(loaded, work, n, opts.max_num_batched_tokens, opts.block_size, sink=sink)


def run_bench(
    loaded: LoadedModel, work: Workload, opts: BenchOptions, progress: Callable[[str], None] | None = None
) -> dict:
    """Run every row ``opts.rounds`` times, interleaved, then the decode-step measurements.

    Returns the result dict written to ``batchscope/assets/bench.json`` (``batchscope.bench.report.to_markdown``: the
    table). Ctrl-C or an error in a row stops it cleanly, keeping the rounds done so far: ``"partial": true`` (and
    ``"error"``). Raises:
        ParityError: outputs differ and parity is strict (``"strict"``, or ``"auto"`` with 32-bit floats or wider).
    """
    say = progress or (lambda msg: None)
    order = _schedule(opts)
    labels = [f"{row}@{n}" if n else row for row, n in order]
    times: dict[str, list[float]] = {label: [] for label in labels}
    outputs: dict[str, dict[str, list[int]]] = {}
    extras: dict[str, list[dict]] = {label: [] for label in labels}  # per round (Batchscope rows)
    partial, failure = False, None  # Ctrl-C / an error: keep what ran
    try:
        _warm_up(loaded, work, opts, order, say)
        _rounds(loaded, work, opts, order, labels, say, (times, outputs, extras))
    except KeyboardInterrupt:
        partial = True
    except ParityError:
        raise
    except Exception as exc:  # keep what was measured; the CLI reports the error
        partial, failure = True, f"{type(exc).__name__}: {exc}"
    strict = not partial and (opts.parity == "strict" or (opts.parity == "auto" and loaded.dtype.itemsize >= 4))
    reference = next((label for label in labels if label in outputs), labels[0])
    parity_error = None
    try:
        check_parity(outputs, reference)
    except ParityError as exc:
        if strict:
            raise
        parity_error = str(exc)
    decode_step: dict = {"batches": []}
    if not partial:
        try:
            say("decode steps")
            decode_step = _decode_steps(loaded, work, opts)
        except KeyboardInterrupt:
            partial = True
    result = {
        "provenance": provenance(loaded),
        **_describe(work, opts),
        "rows": _row_table(order, labels, times, outputs, extras),
        "parity": {
            "strict": strict,
            "identical": parity_error is None,
            "reference": reference,
            "agreement": agreement(outputs, reference) if outputs else {},
            "error": parity_error,
        },
        "decode_step": decode_step,
        **({"partial": True} if partial else {}),
        **({"error": failure} if failure else {}),
    }
    result["targets"] = evaluate_targets(result)
    return result


def _warm_up(loaded: LoadedModel, work: Workload, opts: BenchOptions, order, say) -> None:
    """Every row once on two short requests (first-call costs stay out of the timed rounds)."""
    say("warm-up")
    n_warm = min(4, work.max_tokens)
    warm = Workload([dict(s, max_tokens=n_warm) for s in work.specs[:2]], work.prompts[:2], n_warm, work.ignore_eos)
    for row, n in order:
        _call(row, loaded, warm, max(1, min(n, 2)), opts)


def _describe(work: Workload, opts: BenchOptions) -> dict:
    """The ``workload`` and ``options`` parts of a result."""
    return {
        "workload": {
            "num_requests": len(work.specs),
            "max_tokens": work.max_tokens,
            "ignore_eos": work.ignore_eos,
            "prompt_tokens": sum(map(len, work.prompts)),
            "request_ids": work.request_ids,
        },
        "options": {
            "max_num_seqs": opts.max_num_seqs,
            "rounds": opts.rounds,
            "max_num_batched_tokens": opts.max_num_batched_tokens,
            "block_size": opts.block_size,
            "step_batches": opts.step_batches,
            "step_tokens": opts.step_tokens,
            "parity": opts.parity,
        },
    }


def _rounds(
    loaded: LoadedModel,
    work: Workload,
    opts: BenchOptions,
    order: list[tuple[str, int]],
    labels: list[str],
    say: Callable[[str], None],
    into: tuple[dict, dict, dict],
) -> None:
    """Fill ``into`` = (seconds per round, outputs, Batchscope extras) per row label, round by round (so that an
    interrupted run keeps what it measured); outputs must not change between rounds."""
    times, outputs, extras = into
    for r in range(opts.rounds):
        seq = list(zip(order, labels))
        for (row, n), label in seq if r % 2 == 0 else seq[::-1]:
            say(f"round {r + 1}/{opts.rounds}: {label}")
            _sync(loaded.device)
            t = time.perf_counter()
            sink: dict | None = {} if row.startswith("batchscope") else None
            out = _call(row, loaded, work, n, opts, sink=sink)
            extras[label].append(sink or {})
            _sync(loaded.device)
            times[label].append(time.perf_counter() - t)
            outputs.setdefault(label, out)
            if outputs[label] != out:
                raise ParityError(f"{label}: greedy outputs changed between rounds")


def _row_table(order: list[tuple[str, int]], labels: list[str], times: dict, outputs: dict, extras: dict) -> list:
    """One dict per row: every round's seconds, the best, output tokens per second and the ratio to row 1."""
    total_tokens = {label: sum(map(len, out.values())) for label, out in outputs.items()}
    rows = []
    base = None
    for (row, n), label in zip(order, labels):
        if not times[label]:  # never ran (an interrupted run)
            continue
        best_s = min(times[label])
        extra = extras[label][times[label].index(best_s)]
        tps = total_tokens[label] / best_s
        base = base or tps
        rows.append(
            {
                "label": label,
                "row": row,
                "title": ROW_TITLES[row],
                "max_num_seqs": n or None,
                "seconds": times[label],
                "mean_seconds": statistics.fmean(times[label]),
                "best_seconds": best_s,
                "output_tokens": total_tokens[label],
                "output_tokens_per_s": tps,
                "ratio_to_row_1": tps / base,
                **(
                    {"outside_forward_share": extra.get("outside_share"), "num_steps": extra.get("num_steps")}
                    if extra
                    else {}
                ),
            }
        )
    return rows


def _decode_steps(loaded: LoadedModel, work: Workload, opts: BenchOptions) -> dict:
    """The weight-streaming floor and the median decode step at each batch of ``opts.step_batches``."""
    wbytes = weight_bytes(loaded.model)
    bandwidth = read_bandwidth(wbytes, loaded.device)
    floor_ms = 1e3 * wbytes / bandwidth
    steps = []
    for b in opts.step_batches:
        m = decode_step_times(loaded, work, b, opts.step_tokens, opts.block_size)
        m["floor_ms"] = floor_ms
        m["ratio_to_floor"] = m["median_ms"] / floor_ms if m["median_ms"] else None
        steps.append(m)
    return {"weight_bytes": wbytes, "read_bandwidth_GBps": bandwidth / 1e9, "floor_ms": floor_ms, "batches": steps}
