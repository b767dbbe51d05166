"""Checks and measurements of a benchmark run: greedy parity across rows, the share of a step outside the model
forward, the weight-streaming floor of a decode step (weight bytes / measured read bandwidth) and decode-step times.
Units: seconds, bytes, bytes per second; ``*_ms`` are milliseconds."""

from __future__ import annotations

import itertools
import statistics
import time

import torch

from batchscope.bench.workload import Workload, engine_config, run_engine
from batchscope.model.models import LoadedModel


class ParityError(AssertionError):
    """Greedy outputs of two benchmark rows differ; the message names the rows, the request and the position."""


def check_parity(outputs: dict[str, dict[str, list[int]]], reference: str | None = None) -> None:
    """Every row's outputs must equal the reference row's (the first row by default), token for token.

    Args:
        outputs: row label -> ``{request_id: output token ids}``.
    Raises:
        ParityError: naming the row, the request, the first differing position and both tokens there.
    """
    if not outputs:
        return
    reference = reference or next(iter(outputs))
    ref = outputs[reference]
    for label, got in outputs.items():
        if set(got) != set(ref):
            raise ParityError(
                f"{label}: requests {sorted(set(got) ^ set(ref))} are missing in one of {label!r} / {reference!r}"
            )
        for rid, want in ref.items():
            have = got[rid]
            if have != want:
                pos = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
                raise ParityError(
                    f"greedy outputs differ: {label!r} vs {reference!r}, request {rid!r}, first at output token {pos} "
                    f"({have[pos] if pos < len(have) else 'end'} vs {want[pos] if pos < len(want) else 'end'}; "
                    f"lengths {len(have)} vs {len(want)})"
                )


def agreement(outputs: dict[str, dict[str, list[int]]], reference: str) -> dict[str, float]:
    """Row label -> share of requests (0..1) whose outputs equal the reference row's exactly."""
    ref = outputs[reference]
    return {
        label: sum(got.get(rid) == want for rid, want in ref.items()) / max(1, len(ref))
        for label, got in outputs.items()
    }


def outside_forward_share(records: list[dict], forward_times: list[float]) -> dict[str, float | None]:
    """Share of the step cycle spent outside the model forward, from a Batchscope run.

    The cycle of step ``k`` runs from its ``t_start`` to the next step's ``t_start`` (so it includes the
    bookkeeping after ``t_end``); the last step has no successor and is left out. ``forward_times[k]`` is the
    seconds of step ``k``'s forward (``ModelRunner.forward_times``). Returns ``{"median": per-step median share,
    "total": (sum of cycles - sum of forwards) / sum of cycles}``
    (fractions 0..1; ``None`` with fewer than 2 steps).
    """
    steps = records[1:-1]
    if len(steps) < 2 or len(forward_times) < len(steps) - 1:
        return {"median": None, "total": None}
    cycles = [b["t_start"] - a["t_start"] for a, b in itertools.pairwise(steps)]
    fwd = forward_times[: len(cycles)]
    shares = [max(0.0, c - f) / c for c, f in zip(cycles, fwd) if c > 0]
    return {"median": statistics.median(shares), "total": (sum(cycles) - sum(fwd)) / sum(cycles)}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters and buffers, each tensor counted once (tied embeddings are one tensor)."""
    seen, total = set(), 0
    for t in list(model.parameters()) + list(model.buffers()):
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


def read_bandwidth(num_bytes: int, device: torch.device, repeats: int = 7) -> float:
    """Memory read bandwidth in bytes/s: the median time to ``sum()`` a float32 buffer of ``num_bytes``."""
    buf = torch.ones(max(1, num_bytes // 4), dtype=torch.float32, device=device)
    times = []
    for _ in range(repeats):
        _sync(device)
        t = time.perf_counter()
        buf.sum()
        _sync(device)
        times.append(time.perf_counter() - t)
    del buf
    return num_bytes / statistics.median(times)


def decode_step_times(loaded: LoadedModel, work: Workload, batch: int, num_tokens: int, block_size: int = 16) -> dict:
    """Median decode step at ``batch`` rows: ``batch`` requests (prompts cycled), ``num_tokens`` tokens each,
    EOS ignored, all admitted at once; only steps where all ``batch`` rows decode count.

    Returns ``{"batch", "num_steps", "median_ms", "forward_ms" (median model forward), "outside_share"}``.
    """
    specs = [
        dict(work.specs[i % len(work.specs)], request_id=f"b{i}", max_tokens=num_tokens, ignore_eos=True)
        for i in range(batch)
    ]
    prompt_tokens = sum(len(work.prompts[i % len(work.prompts)]) for i in range(batch))
    sub = Workload(specs, [work.prompts[i % len(work.prompts)] for i in range(batch)], num_tokens, True)
    config = engine_config(sub, "continuous", batch, max(prompt_tokens, batch), block_size)
    records, runner = run_engine(loaded, specs, config, time_forward=True)
    steps = records[1:-1]
    idx = [
        i
        for i, st in enumerate(steps)
        if len(st["scheduled"]) == batch and all(s["kind"] == "decode" for s in st["scheduled"])
    ]
    durations = [steps[i]["t_end"] - steps[i]["t_start"] for i in idx]
    cycles = [steps[i + 1]["t_start"] - steps[i]["t_start"] for i in idx if i + 1 < len(steps)]
    forwards = [runner.forward_times[i] for i in idx if i + 1 < len(steps)]
    outside = [(c - f) / c for c, f in zip(cycles, forwards) if c > 0]
    return {
        "batch": batch,
        "num_steps": len(idx),
        "median_ms": 1e3 * statistics.median(durations) if durations else None,
        "forward_ms": 1e3 * statistics.median(forwards) if forwards else None,
        "outside_share": statistics.median(outside) if outside else None,
    }
