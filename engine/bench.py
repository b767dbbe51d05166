"""The benchmark (``python -m engine bench``): Batchscope against transformers on one workload, in one process.

Rows (all greedy, the same prompts and ``max_tokens``; output tokens/s and the ratio to row 1):

1. ``hf-sequential``: transformers ``generate``, one request at a time (its own ``DynamicCache``, SDPA).
2. ``hf-static``: transformers ``generate`` on static batches of ``max_num_seqs`` requests in arrival order, left
   padded; a batch runs until its slowest member ends.
3. ``hf-continuous``: transformers' own continuous batching (``model.generate_batch`` with a
   ``ContinuousBatchingConfig``: ``max_requests_per_batch = max_num_seqs``, ``max_batch_tokens`` = Batchscope's
   token budget, and ``num_blocks`` sized for ``max_num_seqs`` requests, so its set-up does not reserve 60 % of the
   RAM as it does by default on CPU).
4. ``batchscope-static`` and 5. ``batchscope-continuous``: this engine, ``num_kv_blocks`` sized so that
   ``max_num_seqs`` requests always fit (no preemption: the rows compare batching, not pool pressure).

Rounds are interleaved (A B C D E, then E D C B A, ...) so that a machine whose speed drifts hurts every row
alike; a row's time is its best round (another process on the machine only ever adds time; every round's time is
kept in the JSON, with the mean). Every row's greedy outputs must be token-identical to row 1's, else
``ParityError`` (``parity="strict"``, the default for float32 and float64). In reduced precision (bfloat16 on CUDA) the
rounding of a matmul depends on the batch shape, so greedy outputs of different batchings legitimately drift apart
after a near-tie; ``parity="auto"`` then only reports the agreement.

Also measured in the same run:

- the median decode step (all rows decoding, ``t_end - t_start`` of Batchscope steps) at batch 1, 4 and 16,
  against the weight-streaming floor: model weight bytes / read bandwidth, the bandwidth being measured by summing
  a buffer as large as the weights (every decode step must read every weight once);
- the share of each step spent outside the model forward (scheduling, building the step's tensors, sampling,
  updating requests, writing the step record): ``1 - forward / step cycle``, with the cycle from one step's start
  to the next's.

Units: seconds (wall clock), tokens, bytes; ``*_ms`` are milliseconds.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from engine.block_manager import blocks_needed
from engine.config import EngineConfig
from engine.models import LoadedModel
from engine.workload import render_prompt, to_requests

if TYPE_CHECKING:  # imported where used: transformers takes seconds to import, `python -m engine scenarios` none
    from engine.model_runner import ModelRunner

ROW_TITLES = {
    "hf-sequential": "transformers generate, one request at a time",
    "hf-static": "transformers generate, static batches (left padding)",
    "hf-continuous": "transformers continuous batching (generate_batch)",
    "batchscope-static": "Batchscope static",
    "batchscope-continuous": "Batchscope continuous",
}
BATCHED_ROWS = ("hf-static", "hf-continuous", "batchscope-static", "batchscope-continuous")

# Targets of the benchmark issue (CPU, the `sixteen` workload): (description, measured key, minimum or maximum).
TARGETS = [
    ("Batchscope continuous >= 1.3x transformers continuous batching, 4 slots", "cont_vs_hf_cb@4", ">=", 1.3),
    ("Batchscope continuous >= 2x Batchscope static, 4 slots", "cont_vs_static@4", ">=", 2.0),
    ("Batchscope continuous >= 1.1x transformers continuous batching, 16 slots", "cont_vs_hf_cb@16", ">=", 1.1),
    ("decode step at batch 4 <= 1.5x the weight-streaming floor", "step4_vs_floor", "<=", 1.5),
    ("scheduler + bookkeeping <= 5 % of a step (Batchscope continuous, 4 slots)", "outside_share@4", "<=", 0.05),
]


class ParityError(AssertionError):
    """Greedy outputs of two benchmark rows differ; the message names the rows, the request and the position."""


@dataclass
class Workload:
    """The benchmark's requests: ``specs`` (engine request specs) and their prompts as token ids."""

    specs: list[dict]
    prompts: list[list[int]]
    max_tokens: int
    ignore_eos: bool

    @property
    def request_ids(self) -> list[str]:
        return [s["request_id"] for s in self.specs]


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


def make_workload(loaded: LoadedModel, specs: list[dict], num_requests: int | None = None,
                  max_tokens: int | None = None) -> Workload:
    """First ``num_requests`` specs, greedy, every ``max_tokens`` set to ``max_tokens`` (or their common value).

    Raises:
        ValueError: the specs sample (temperature > 0), mix ``ignore_eos`` settings, or differ in ``max_tokens``
            while no ``max_tokens`` override is given (transformers' continuous batching takes one value).
    """
    chosen = [dict(s) for s in specs[: num_requests or len(specs)]]
    for i, s in enumerate(chosen):
        s.setdefault("request_id", f"r{i}")
        if s.get("temperature", 0.0) != 0.0:
            raise ValueError(f"request {s['request_id']!r}: the benchmark compares greedy outputs; "
                             "temperature must be 0")
        if max_tokens is not None:
            s["max_tokens"] = max_tokens
    lengths = {s["max_tokens"] for s in chosen}
    if len(lengths) != 1:
        raise ValueError(f"max_tokens differs across requests ({sorted(lengths)}); pass --max-tokens")
    eos_flags = {bool(s.get("ignore_eos", False)) for s in chosen}
    if len(eos_flags) != 1:
        raise ValueError("ignore_eos differs across requests; the transformers rows take one setting")
    prompts = [render_prompt(s, loaded.tokenizer)[1] for s in chosen]
    return Workload(chosen, prompts, lengths.pop(), eos_flags.pop())


# -- the five rows -------------------------------------------------------------------------------------------------

def _eos(loaded: LoadedModel, work: Workload) -> list[int] | None:
    from engine.llm import eos_token_ids

    return None if work.ignore_eos else sorted(eos_token_ids(loaded))


def _pad_id(loaded: LoadedModel) -> int:
    pad = loaded.model.config.pad_token_id
    return pad if pad is not None else 0


def _trim(tokens: list[int], eos: list[int] | None, max_tokens: int) -> list[int]:
    """Output tokens up to and including the first EOS, at most ``max_tokens`` (drops generate's padding)."""
    out = []
    for t in tokens[:max_tokens]:
        out.append(t)
        if eos and t in eos:
            break
    return out


def _generation_config(loaded: LoadedModel, work: Workload):
    from transformers import GenerationConfig

    eos = _eos(loaded, work)
    return GenerationConfig(max_new_tokens=work.max_tokens, do_sample=False, eos_token_id=eos,
                            pad_token_id=_pad_id(loaded), min_new_tokens=work.max_tokens if eos is None else 0)


@torch.inference_mode()
def hf_sequential(loaded: LoadedModel, work: Workload, max_num_seqs: int) -> dict[str, list[int]]:
    """Row 1: ``generate`` per request. Returns ``{request_id: output token ids}`` (EOS included)."""
    gen, eos, out = _generation_config(loaded, work), _eos(loaded, work), {}
    for rid, ids in zip(work.request_ids, work.prompts):
        x = torch.tensor([ids], device=loaded.device)
        y = loaded.model.generate(x, attention_mask=torch.ones_like(x), generation_config=gen)
        out[rid] = _trim(y[0, len(ids):].tolist(), eos, work.max_tokens)
    return out


@torch.inference_mode()
def hf_static(loaded: LoadedModel, work: Workload, max_num_seqs: int) -> dict[str, list[int]]:
    """Row 2: ``generate`` on batches of ``max_num_seqs`` prompts in arrival order, left padded with a mask."""
    gen, eos, pad, out = _generation_config(loaded, work), _eos(loaded, work), _pad_id(loaded), {}
    for start in range(0, len(work.prompts), max_num_seqs):
        prompts = work.prompts[start : start + max_num_seqs]
        width = max(map(len, prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=loaded.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=loaded.device)
        y = loaded.model.generate(ids, attention_mask=mask, generation_config=gen)
        for rid, row in zip(work.request_ids[start : start + max_num_seqs], y[:, width:].tolist()):
            out[rid] = _trim(row, eos, work.max_tokens)
    return out


def hf_cb_config(work: Workload, max_num_seqs: int, max_num_batched_tokens: int):
    """transformers' ``ContinuousBatchingConfig`` for the row: pages of 256 tokens (its default), enough blocks for
    ``max_num_seqs`` requests of the longest prompt + ``max_tokens``, and the same token budget as Batchscope."""
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    page = 256
    per_request = blocks_needed(max(map(len, work.prompts)) + work.max_tokens, page)
    return ContinuousBatchingConfig(page_size=page, num_blocks=max_num_seqs * per_request + 1,
                                    max_batch_tokens=max_num_batched_tokens, max_requests_per_batch=max_num_seqs)


@torch.inference_mode()
def hf_continuous(loaded: LoadedModel, work: Workload, max_num_seqs: int,
                  max_num_batched_tokens: int = 128) -> dict[str, list[int]]:
    """Row 3: ``model.generate_batch`` (transformers' continuous batching manager, its own paged cache)."""
    model = loaded.model
    attn = model.config._attn_implementation
    try:
        res = model.generate_batch(work.prompts, generation_config=_generation_config(loaded, work),
                                   continuous_batching_config=hf_cb_config(work, max_num_seqs, max_num_batched_tokens),
                                   warmup=loaded.device.type == "cuda", progress_bar=False)
    finally:
        if model.config._attn_implementation != attn:
            model.set_attn_implementation(attn)
    results = list(res.values())
    if len(results) != len(work.prompts) or any(r.error for r in results):
        errors = [r.error for r in results if r.error]
        raise RuntimeError(f"transformers continuous batching returned {len(results)} of {len(work.prompts)} "
                           f"results{': ' + errors[0] if errors else ''}")
    eos = _eos(loaded, work)
    return {rid: _trim(list(r.generated_tokens), eos, work.max_tokens) for rid, r in zip(work.request_ids, results)}


def engine_config(work: Workload, policy: str, max_num_seqs: int, max_num_batched_tokens: int,
                  block_size: int) -> EngineConfig:
    """Batchscope's config for a row: a pool where ``max_num_seqs`` worst-case requests fit (never preempts)."""
    per_request = blocks_needed(max(map(len, work.prompts)) + work.max_tokens, block_size)
    return EngineConfig(policy=policy, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        block_size=block_size, num_kv_blocks=max_num_seqs * per_request)


def run_engine(loaded: LoadedModel, specs: list[dict], config: EngineConfig,
               time_forward: bool = False) -> tuple[list[dict], ModelRunner]:
    """Run Batchscope on ``specs`` (as ``engine.llm.generate_trace``) and keep the runner for its forward timings."""
    from engine.engine import LLMEngine
    from engine.llm import eos_token_ids
    from engine.model_runner import ModelRunner

    runner = ModelRunner(loaded.model, config, loaded.device)
    runner.time_forward = time_forward
    tok = loaded.tokenizer
    engine = LLMEngine(runner, config, eos_token_ids=eos_token_ids(loaded),
                       decode=(lambda ids: tok.decode(ids, skip_special_tokens=False)) if tok else None,
                       max_model_len=getattr(loaded.model.config, "max_position_embeddings", None),
                       meta={"model": loaded.name, "device": str(loaded.device),
                             "dtype": str(loaded.dtype).replace("torch.", "")})
    return engine.run(to_requests(specs, tok)), runner


def _batchscope(policy: str):
    def row(loaded: LoadedModel, work: Workload, max_num_seqs: int, max_num_batched_tokens: int = 128,
            block_size: int = 16, sink: dict | None = None) -> dict[str, list[int]]:
        config = engine_config(work, policy, max_num_seqs, max_num_batched_tokens, block_size)
        records, runner = run_engine(loaded, work.specs, config, time_forward=sink is not None)
        if sink is not None:
            sink["outside_share"] = outside_forward_share(records, runner.forward_times)
            sink["num_steps"] = len(records) - 2
        return {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}

    row.__doc__ = f"Rows 4/5: Batchscope, policy {policy!r}. Returns ``{{request_id: output token ids}}``."
    return row


ROWS: dict[str, Callable[..., dict[str, list[int]]]] = {
    "hf-sequential": hf_sequential,
    "hf-static": hf_static,
    "hf-continuous": hf_continuous,
    "batchscope-static": _batchscope("static"),
    "batchscope-continuous": _batchscope("continuous"),
}


# -- checks and measurements ---------------------------------------------------------------------------------------

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
            raise ParityError(f"{label}: requests {sorted(set(got) ^ set(ref))} are missing in one of "
                              f"{label!r} / {reference!r}")
        for rid, want in ref.items():
            have = got[rid]
            if have != want:
                pos = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
                raise ParityError(
                    f"greedy outputs differ: {label!r} vs {reference!r}, request {rid!r}, first at output token {pos} "
                    f"({have[pos] if pos < len(have) else 'end'} vs {want[pos] if pos < len(want) else 'end'}; "
                    f"lengths {len(have)} vs {len(want)})")


def agreement(outputs: dict[str, dict[str, list[int]]], reference: str) -> dict[str, float]:
    """Row label -> share of requests (0..1) whose outputs equal the reference row's exactly."""
    ref = outputs[reference]
    return {label: sum(got.get(rid) == want for rid, want in ref.items()) / max(1, len(ref))
            for label, got in outputs.items()}


def outside_forward_share(records: list[dict], forward_times: list[float]) -> dict[str, float | None]:
    """Share of the step cycle spent outside the model forward, from a Batchscope run.

    The cycle of step ``k`` runs from its ``t_start`` to the next step's ``t_start`` (so it includes the
    bookkeeping after ``t_end``); the last step has no successor and is left out. ``forward_times[k]`` is the
    seconds of step ``k``'s forward (``ModelRunner.forward_times``).
    Returns ``{"median": per-step median share, "total": (sum of cycles - sum of forwards) / sum of cycles}``
    (fractions 0..1; ``None`` with fewer than 2 steps).
    """
    steps = records[1:-1]
    if len(steps) < 2 or len(forward_times) < len(steps) - 1:
        return {"median": None, "total": None}
    cycles = [b["t_start"] - a["t_start"] for a, b in zip(steps, steps[1:])]
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


def decode_step_times(loaded: LoadedModel, work: Workload, batch: int, num_tokens: int,
                      block_size: int = 16) -> dict:
    """Median decode step at ``batch`` rows: ``batch`` requests (prompts cycled), ``num_tokens`` tokens each,
    EOS ignored, all admitted at once; only steps where all ``batch`` rows decode count.

    Returns ``{"batch", "num_steps", "median_ms", "forward_ms" (median model forward), "outside_share"}``.
    """
    specs = [dict(work.specs[i % len(work.specs)], request_id=f"b{i}", max_tokens=num_tokens, ignore_eos=True)
             for i in range(batch)]
    prompt_tokens = sum(len(work.prompts[i % len(work.prompts)]) for i in range(batch))
    sub = Workload(specs, [work.prompts[i % len(work.prompts)] for i in range(batch)], num_tokens, True)
    config = engine_config(sub, "continuous", batch, max(prompt_tokens, batch), block_size)
    records, runner = run_engine(loaded, specs, config, time_forward=True)
    steps = records[1:-1]
    idx = [i for i, st in enumerate(steps)
           if len(st["scheduled"]) == batch and all(s["kind"] == "decode" for s in st["scheduled"])]
    durations = [steps[i]["t_end"] - steps[i]["t_start"] for i in idx]
    cycles = [steps[i + 1]["t_start"] - steps[i]["t_start"] for i in idx if i + 1 < len(steps)]
    forwards = [runner.forward_times[i] for i in idx if i + 1 < len(steps)]
    outside = [(c - f) / c for c, f in zip(cycles, forwards) if c > 0]
    return {"batch": batch, "num_steps": len(idx),
            "median_ms": 1e3 * statistics.median(durations) if durations else None,
            "forward_ms": 1e3 * statistics.median(forwards) if forwards else None,
            "outside_share": statistics.median(outside) if outside else None}


# -- the whole run ---------------------------------------------------------------------------------------------------

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


def run_bench(loaded: LoadedModel, work: Workload, opts: BenchOptions,
              progress: Callable[[str], None] | None = None) -> dict:
    """Run every row ``opts.rounds`` times, interleaved, then the decode-step measurements.

    Returns the result dict written to ``assets/bench.json`` (see ``to_markdown`` for the table).
    Raises:
        ParityError: outputs differ and parity is strict (``opts.parity == "strict"``, or ``"auto"`` with a
            dtype of 32 bits or more).
    """
    say = progress or (lambda msg: None)
    order = _schedule(opts)
    labels = [f"{row}@{n}" if n else row for row, n in order]
    say("warm-up")
    n_warm = min(4, work.max_tokens)
    warm = Workload([dict(s, max_tokens=n_warm) for s in work.specs[:2]], work.prompts[:2], n_warm, work.ignore_eos)
    for row, n in order:
        _call(row, loaded, warm, max(1, min(n, 2)), opts)
    times: dict[str, list[float]] = {label: [] for label in labels}
    outputs: dict[str, dict[str, list[int]]] = {}
    extras: dict[str, list[dict]] = {label: [] for label in labels}  # per round (Batchscope rows)
    for r in range(opts.rounds):
        seq = list(zip(order, labels))
        for (row, n), label in (seq if r % 2 == 0 else seq[::-1]):
            say(f"round {r + 1}/{opts.rounds}: {label}")
            _sync(loaded.device)
            t = time.perf_counter()
            sink = {} if row.startswith("batchscope") else None
            out = _call(row, loaded, work, n, opts, sink=sink)
            extras[label].append(sink or {})
            _sync(loaded.device)
            times[label].append(time.perf_counter() - t)
            outputs.setdefault(label, out)
            if outputs[label] != out:
                raise ParityError(f"{label}: greedy outputs changed between rounds")
    strict = opts.parity == "strict" or (opts.parity == "auto" and loaded.dtype.itemsize >= 4)
    parity_error = None
    try:
        check_parity(outputs, labels[0])
    except ParityError as exc:
        if strict:
            raise
        parity_error = str(exc)
    total_tokens = {label: sum(map(len, out.values())) for label, out in outputs.items()}
    rows = []
    base = None
    for (row, n), label in zip(order, labels):
        mean_s = statistics.fmean(times[label])
        best_s = min(times[label])
        extra = extras[label][times[label].index(best_s)]
        tps = total_tokens[label] / best_s
        base = base or tps
        rows.append({"label": label, "row": row, "title": ROW_TITLES[row], "max_num_seqs": n or None,
                     "seconds": times[label], "mean_seconds": mean_s, "best_seconds": best_s,
                     "output_tokens": total_tokens[label],
                     "output_tokens_per_s": tps, "ratio_to_row_1": tps / base,
                     **({"outside_forward_share": extra.get("outside_share"),
                         "num_steps": extra.get("num_steps")} if extra else {})})
    say("decode steps")
    wbytes = weight_bytes(loaded.model)
    bandwidth = read_bandwidth(wbytes, loaded.device)
    floor_ms = 1e3 * wbytes / bandwidth
    steps = []
    for b in opts.step_batches:
        m = decode_step_times(loaded, work, b, opts.step_tokens, opts.block_size)
        m["floor_ms"] = floor_ms
        m["ratio_to_floor"] = m["median_ms"] / floor_ms if m["median_ms"] else None
        steps.append(m)
    result = {
        "provenance": provenance(loaded),
        "workload": {"num_requests": len(work.specs), "max_tokens": work.max_tokens, "ignore_eos": work.ignore_eos,
                     "prompt_tokens": sum(map(len, work.prompts)), "request_ids": work.request_ids},
        "options": {"max_num_seqs": opts.max_num_seqs, "rounds": opts.rounds,
                    "max_num_batched_tokens": opts.max_num_batched_tokens, "block_size": opts.block_size,
                    "step_batches": opts.step_batches, "step_tokens": opts.step_tokens, "parity": opts.parity},
        "rows": rows,
        "parity": {"strict": strict, "identical": parity_error is None, "reference": labels[0],
                   "agreement": agreement(outputs, labels[0]), "error": parity_error},
        "decode_step": {"weight_bytes": wbytes, "read_bandwidth_GBps": bandwidth / 1e9, "floor_ms": floor_ms,
                        "batches": steps},
    }
    result["targets"] = evaluate_targets(result)
    return result


def evaluate_targets(result: dict) -> list[dict]:
    """The issue's targets that this run measured: ``{"target", "measured", "met"}`` each."""
    tps = {r["label"]: r["output_tokens_per_s"] for r in result["rows"]}
    measured: dict[str, float] = {}
    for n in (4, 16):
        cont, static, hf = (tps.get(f"{k}@{n}") for k in ("batchscope-continuous", "batchscope-static",
                                                          "hf-continuous"))
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
            out.append({"target": text, "key": key, "bound": bound, "op": op, "measured": value,
                        "met": value >= bound if op == ">=" else value <= bound})
    return out


def provenance(loaded: LoadedModel) -> dict:
    """Model, device, dtype, library versions, CPU, threads and the time of the run."""
    import transformers

    dev = loaded.device
    return {
        "model": loaded.name, "device": str(dev), "dtype": str(loaded.dtype).replace("torch.", ""),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or
        platform.machine(),
        "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m engine " + " ".join(sys.argv[1:]) if sys.argv and sys.argv[0].endswith("__main__.py")
        else None,
    }


def _fmt(x, spec=".1f") -> str:
    return "–" if x is None else format(x, spec)


def to_markdown(result: dict) -> str:
    """The benchmark's tables (rows, decode steps, targets) as Markdown."""
    p, w = result["provenance"], result["workload"]
    lines = [f"Model {p['model']} ({p['dtype']}) on {p['device']} ({p['device_name']}, {p['torch_threads']} torch "
             f"threads), torch {p['torch']}, transformers {p['transformers']}, {p['created']}. "
             f"Workload: {w['num_requests']} requests, max_tokens {w['max_tokens']}, greedy; "
             f"{result['options']['rounds']} interleaved rounds.", "",
             "| # | engine | max_num_seqs | seconds (best round) | output tokens/s | × row 1 | outside forward |",
             "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(result["rows"], start=1):
        share = r.get("outside_forward_share") or {}
        lines.append(f"| {i} | {r['title']} | {r['max_num_seqs'] or '–'} | {r['best_seconds']:.1f} | "
                     f"{r['output_tokens_per_s']:.1f} | {r['ratio_to_row_1']:.2f} | "
                     f"{_fmt(100 * share['total'] if share.get('total') is not None else None)}"
                     f"{' %' if share.get('total') is not None else ''} |")
    par = result["parity"]
    lines += ["", "Greedy outputs: " + ("token-identical across all rows." if par["identical"] else
                                        f"NOT identical ({par['error']})."), ""]
    d = result["decode_step"]
    lines += [f"Decode step (Batchscope, all rows decoding) against the weight-streaming floor: "
              f"{d['weight_bytes'] / 1e6:.0f} MB of weights / {d['read_bandwidth_GBps']:.1f} GB/s measured read "
              f"bandwidth = {d['floor_ms']:.1f} ms.", "",
              "| batch | median step (ms) | model forward (ms) | × floor | outside forward |", "|---|---|---|---|---|"]
    for s in d["batches"]:
        lines.append(f"| {s['batch']} | {_fmt(s['median_ms'])} | {_fmt(s['forward_ms'])} | "
                     f"{_fmt(s['ratio_to_floor'], '.2f')} | "
                     f"{_fmt(100 * s['outside_share'] if s['outside_share'] is not None else None)} % |")
    if result["targets"]:
        lines += ["", "| target | measured | met |", "|---|---|---|"]
        for t in result["targets"]:
            value = f"{100 * t['measured']:.1f} %" if "share" in t["key"] else f"{t['measured']:.2f}×"
            lines.append(f"| {t['target']} | {value} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines) + "\n"


def write(result: dict, json_path: str | Path, md_path: str | Path) -> None:
    """Write the result as JSON and the Markdown table."""
    Path(json_path).write_text(json.dumps(result, indent=1) + "\n")
    Path(md_path).write_text(to_markdown(result))
