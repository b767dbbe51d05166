"""Latency and throughput metrics from a trace, with vLLM's definitions.

Everything here is a pure function of the trace records ``[header, step..., summary]`` (``docs/trace-format.md``).
Each figure comes in two clocks, and its name says which:

- ``*_s``: **seconds** of wall clock (``time.perf_counter`` from the start of the run), as recorded in the trace.
  What a user waits; depends on the machine and its load.
- ``*_steps``: **engine steps** on a step clock where step ``k`` runs from time ``k`` to ``k + 1`` (a request that
  arrives before step 0 and samples in step 0 has a TTFT of 1 step); the same workload and config give the same.

Per-request definitions (vLLM's ``RequestMetrics`` and ``benchmarks/benchmark_serving.py``):

- queue time = first scheduled - arrival
- TTFT (time to first token) = first token - arrival
- E2E latency = finish - arrival (the time the last token was sampled; an aborted request's: the abort)
- ITL (inter-token latency) = every gap between two consecutive steps that sampled tokens of the request; a token's
  time is the ``t_end`` of the step that sampled it. ``n`` output tokens give ``n - 1`` gaps (fewer with speculative
  decoding: a step that yields several tokens is one output, as vLLM's ``inter_token_latency`` counts it); a
  preemption shows as one long gap (recomputation never re-emits a token, so no token is counted twice).
- TPOT (time per output token) = (last token - first token) / (n - 1), vLLM's ``mean_time_per_output_token``,
  defined only for an ended request with ``n >= 2`` (``None`` otherwise: never 0, never infinite, never an
  exception). It is (E2E - TTFT) / (n - 1) for a finished request, and without speculation the mean of its ITLs.

Aggregates (``summarize``): mean, p50, p90, p99 (``numpy.percentile``, linear interpolation) over requests (for
queue time, E2E and TPOT: finished ones; aborted requests are counted apart, as vLLM does:
``batchscope.steplog.finishes``); ITL pools every gap of every request, so mean ITL = sum of gaps / number of gaps (not
/ number of tokens: NVIDIA/TensorRT-LLM#8378); mean TPOT is over requests with at least 2 output tokens only. Output
tokens include EOS when it was sampled (it is an output token the model computed).

No figure is ever NaN, infinite or negative: a latency that cannot be computed (a request that never ran, TPOT of a
one-token request, or records that contradict each other when they were not read through ``batchscope.steplog.trace``)
is ``None``, shown as "n/a". The step clock counts idle steps too (``idle_steps_before``): a run's ``num_steps`` is its
last step + 1, and slot and KV utilisation count an idle step as empty.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from batchscope.steplog.decisions import dropped_and_recomputed
from batchscope.steplog.finishes import counts, end_steps, in_aggregate
from batchscope.steplog.prefix_cache import prefix_cache_stats
from batchscope.steplog.spec_decode import draft_counts, request_figures, spec_decode_stats, step_starts
from batchscope.steplog.view import declared_requests

PERCENTILES = (50, 90, 99)

# metric name -> (unit, description); the per-request columns of ``requests_frame`` use these names.
LATENCY_METRICS = {
    "queue_time_s": ("s", "queue time: first scheduled - arrival"),
    "ttft_s": ("s", "TTFT: first token - arrival"),
    "tpot_s": ("s", "TPOT: (E2E - TTFT) / (output tokens - 1), requests with >= 2 tokens"),
    "itl_s": ("s", "ITL: every gap between consecutive steps that sampled output tokens"),
    "e2e_s": ("s", "E2E latency: finish - arrival"),
    "queue_time_steps": ("steps", "queue time on the step clock"),
    "ttft_steps": ("steps", "TTFT on the step clock"),
    "tpot_steps": ("steps", "TPOT on the step clock"),
    "itl_steps": ("steps", "ITL on the step clock"),
    "e2e_steps": ("steps", "E2E latency on the step clock"),
}


class MetricsError(ValueError):
    """A trace whose records contradict each other (e.g. sampled tokens that do not match the summary)."""


def _split(records: list[dict]) -> tuple[dict, list[dict], dict]:
    if len(records) < 2 or records[0].get("type") != "header" or records[-1].get("type") != "summary":
        raise MetricsError("expected trace records [header, step..., summary]")
    return records[0], records[1:-1], records[-1]


def _token_steps(steps: list[dict]) -> dict[str, list[int]]:
    """request_id -> the steps that sampled its output tokens, in order (a step once per token it yielded)."""
    out: dict[str, list[int]] = {}
    for st in steps:
        for s in st["sampled"]:
            out.setdefault(s["request_id"], []).append(st["step"])
    return out


def _arrival_steps(requests: list[dict], steps: list[dict]) -> dict[str, int]:
    """request_id -> the first step it was visible to the scheduler (admitted, in that step's batch or waiting
    queue; a static batch may admit a member that computes nothing in that step): the engine adds an arrived request
    right before a step, so for a step-clock workload it is the ``arrival_step``."""
    out: dict[str, int] = {}
    for st in steps:
        for rid in [s["request_id"] for s in st["scheduled"]] + st["admitted"] + st["waiting"] + st["preempted"]:
            out.setdefault(rid, st["step"])
    for r in requests:
        if r["request_id"] not in out and r.get("arrival_step") is not None:
            out[r["request_id"]] = r["arrival_step"]
    return out


def _gaps(times: list[float] | list[int]) -> list[float]:
    return [g for a, b in itertools.pairwise(times) if (g := _clean(b - a)) is not None]


def _clean(value: float | None) -> float | None:
    """``value`` if it is a finite number >= 0, else ``None`` (n/a): a metric is never NaN or negative."""
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def _diff(b: float | None, a: float | None) -> float | None:
    return None if a is None or b is None else _clean(b - a)


def request_metrics(records: list[dict]) -> list[dict]:
    """Per-request latency figures, in arrival order (the header's order).

    Each dict holds ``request_id``, ``num_prompt_tokens``, ``num_output_tokens`` (EOS included), ``finish_reason``,
    ``num_preemptions``, ``num_dropped_tokens`` (K/V tokens its preemptions dropped), ``num_recomputed_tokens``
    (tokens computed again: dropped and not found in the prefix cache), the raw times ``arrival_time_s``,
    ``first_scheduled_time_s``, ``first_token_time_s``, ``finish_time_s`` and the step-clock equivalents
    ``arrival_step``, ``first_scheduled_step``, ``first_token_step``, ``finish_step`` (step indices; ``finish_step``
    is the step whose ``finished`` lists it, ``end_step`` its end on the step clock), the token times
    ``token_times_s`` / ``token_steps``, and every metric of ``LATENCY_METRICS`` (``itl_*``: lists of gaps;
    ``tpot_*``: ``None`` below 2 output tokens). A request that never ran has ``None`` latencies; one still running
    at the end (cancelled, cut short) has no ``finish_step``, E2E or TPOT. Steps that stop early
    (``truncated_at_step``: a size cap) are measured alone: their tokens, a finish only where they hold it.

    Raises:
        MetricsError: the steps sampled a different number of tokens for a request than its summary holds.
    """
    header, steps, summary = _split(records)
    by_step = {st["step"]: st for st in steps}
    token_steps = _token_steps(steps)
    requests = declared_requests(header, steps)  # a server's trace declares its requests in the steps (arrived)
    arrival_steps = _arrival_steps(requests, steps)
    first_sched_step = {s["request_id"]: st["step"] for st in reversed(steps) for s in st["scheduled"]}  # earliest
    prompts = {r["request_id"]: r["num_prompt_tokens"] for r in requests}
    cost = dropped_and_recomputed(records)
    capped = "truncated_at_step" in summary  # the steps stop early (a size cap, a trace cut short): measure those
    done = {f["request_id"]: st["step"] for st in steps for f in st["finished"]}
    ends, spec = end_steps(steps), draft_counts(steps)
    result = []
    for r in summary["requests"]:
        rid = r["request_id"]
        tsteps = token_steps.get(rid, [])
        n = len(tsteps) if capped else len(r["output_token_ids"])
        ended = r.get("finish_reason") is not None and (rid in done or not capped)  # within the steps
        if len(tsteps) != n:
            raise MetricsError(f"request {rid!r}: the steps sampled {len(tsteps)} tokens but the summary holds {n}")
        ttimes, arrival = [by_step[k]["t_end"] for k in tsteps], r["arrival_time"]
        m = {
            "request_id": rid,
            "num_prompt_tokens": prompts.get(rid),
            "num_output_tokens": n,
            "finish_reason": r.get("finish_reason"),
            "num_preemptions": r.get("num_preemptions", 0),
            **cost.get(rid, {"num_dropped_tokens": 0, "num_recomputed_tokens": 0}),
            "arrival_time_s": arrival,
            "first_scheduled_time_s": r.get("first_scheduled_time"),
            "first_token_time_s": (ttimes[:1] or [None])[0] if capped else r.get("first_token_time"),
            "finish_time_s": r.get("finish_time") if ended else None,
            "arrival_step": arrival_steps.get(rid),
            "first_scheduled_step": first_sched_step.get(rid),
            "first_token_step": tsteps[0] if tsteps else None,
            "finish_step": done.get(rid) if ended else None,  # still running: none
            "end_step": ends.get(rid) if ended else None,
            "token_times_s": ttimes,
            "token_steps": tsteps,
        }
        _add_latencies(m, n, tsteps, ttimes, arrival)
        result.append({**m, **request_figures(spec.get(rid))})
    return result


def _add_latencies(m: dict, n: int, tsteps: list[int], ttimes: list[float], arrival: float) -> None:
    """Queue time, TTFT, E2E, ITL and TPOT of one request, on both clocks (see the module docstring)."""
    for clock, arr, sched, first, last, times in (
        ("s", arrival, m["first_scheduled_time_s"], m["first_token_time_s"], m["finish_time_s"], ttimes),
        (
            "steps",
            m["arrival_step"],
            m["first_scheduled_step"],
            None if not tsteps else tsteps[0] + 1,
            m["end_step"],
            [k + 1 for k in tsteps],
        ),
    ):
        m[f"queue_time_{clock}"] = _diff(sched, arr)
        m[f"ttft_{clock}"] = _diff(first, arr)
        m[f"e2e_{clock}"] = _diff(last, arr)
        m[f"itl_{clock}"] = _gaps([times[i] for i in step_starts(tsteps)])
        decode_time = _diff(times[-1], times[0]) if n >= 2 and last is not None else None  # vLLM's decode_time
        m[f"tpot_{clock}"] = decode_time / (n - 1) if decode_time is not None else None


def distribution(values: list[float | None]) -> dict[str, float | None]:
    """``{"count", "mean", "p50", "p90", "p99"}`` of ``values`` (``None`` entries dropped); ``None`` stats if empty."""
    vals = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return {"count": 0, "mean": None, **{f"p{p}": None for p in PERCENTILES}}
    arr = np.asarray(vals)
    return {
        "count": len(vals),
        "mean": float(arr.mean()),
        **{f"p{p}": float(np.percentile(arr, p)) for p in PERCENTILES},
    }


def steps_frame(records: list[dict]) -> pd.DataFrame:
    """One row per step: ``step``, ``t_start_s``, ``t_end_s``, ``duration_s``, ``num_batched_tokens`` (tokens),
    ``num_scheduled`` / ``num_prefill`` / ``num_decode`` / ``num_padding`` (rows), ``num_sampled`` (tokens),
    ``num_running`` / ``num_waiting`` (requests), ``num_preempted`` (requests), ``slot_utilisation`` (useful rows /
    ``max_num_seqs``, 0..1), ``kv_used_blocks`` (blocks), ``kv_utilisation`` (used / ``num_blocks``, 0..1)."""
    header, steps, _ = _split(records)
    max_num_seqs = header["config"]["max_num_seqs"]
    rows = []
    for st in steps:
        kinds = [s["kind"] for s in st["scheduled"]]
        rows.append(
            {
                "step": st["step"],
                "t_start_s": st["t_start"],
                "t_end_s": st["t_end"],
                "duration_s": st["t_end"] - st["t_start"],
                "num_batched_tokens": st["num_batched_tokens"],
                "num_scheduled": len(kinds),
                "num_prefill": kinds.count("prefill"),
                "num_decode": kinds.count("decode"),
                "num_padding": len(st["padding_slots"]),
                "num_sampled": len(st["sampled"]),
                "num_running": len(st["running"]),
                "num_waiting": len(st["waiting"]),
                "num_preempted": len(st["preempted"]),
                "slot_utilisation": len(kinds) / max_num_seqs,
                "kv_used_blocks": st["kv"]["num_used_blocks"],
                "kv_utilisation": st["kv"]["num_used_blocks"] / st["kv"]["num_blocks"],
            }
        )
    columns = (  # noqa: SIM905 (a list literal would take a line per name)
        "step t_start_s t_end_s duration_s num_batched_tokens num_scheduled num_prefill num_decode num_padding "
        "num_sampled num_running num_waiting num_preempted slot_utilisation kv_used_blocks kv_utilisation"
    ).split()
    return pd.DataFrame(rows, columns=columns)


def summarize(records: list[dict]) -> dict:
    """Aggregate figures of one run.

    Returns a dict with
      - ``policy``, ``num_requests``, ``num_finished`` / ``num_aborted`` (``batchscope.steplog.finishes.counts``),
    ``num_steps``,
        ``duration_s`` (end of the last step; the run starts at 0), ``total_output_tokens``, ``total_prompt_tokens``;
      - ``output_throughput_tok_s`` (output tokens / duration_s), ``request_throughput_req_s``,
        ``output_throughput_tok_step``, ``request_throughput_req_step`` (per step);
      - one ``distribution`` (count, mean, p50, p90, p99) per metric of ``LATENCY_METRICS``, under its name
        (``itl_*`` pools all gaps; ``tpot_*`` only requests with >= 2 tokens);
      - ``slot_utilisation`` (useful rows / (steps x max_num_seqs), 0..1), ``padding_slot_steps`` (rows),
        ``kv_utilisation_mean`` / ``kv_utilisation_max`` (0..1), ``num_preemptions`` (events),
        ``num_dropped_tokens`` (K/V tokens preemptions dropped) and ``num_recomputed_tokens`` (of those, computed
        again: the rest came back from the prefix cache);
      - the prefix-cache figures of ``batchscope.steplog.prefix_cache.prefix_cache_stats`` (``prefix_cache_hit_rate``:
    vLLM's
        hit tokens / queried tokens) and speculative decoding's of ``batchscope.steplog.spec_decode.spec_decode_stats``.
    A run without steps has ``None`` throughputs.
    """
    header, steps, _ = _split(records)
    reqs = request_metrics(records)
    frame = steps_frame(records)
    num_steps = steps[-1]["step"] + 1 if steps else 0  # the step clock, idle steps included
    duration = (_clean(steps[-1]["t_end"]) or 0.0) if steps else 0.0
    out_tokens = sum(r["num_output_tokens"] for r in reqs)
    out: dict = {
        "policy": header.get("policy"),
        "num_requests": len(reqs),
        "num_steps": num_steps,
        "duration_s": duration,
        "total_output_tokens": out_tokens,
        "total_prompt_tokens": sum(r["num_prompt_tokens"] or 0 for r in reqs),
        "output_throughput_tok_s": out_tokens / duration if duration > 0 else None,
        "request_throughput_req_s": len(reqs) / duration if duration > 0 else None,
        "output_throughput_tok_step": out_tokens / num_steps if num_steps else None,
        "request_throughput_req_step": len(reqs) / num_steps if num_steps else None,
    }
    out.update(counts(reqs))
    for name in LATENCY_METRICS:
        if name.startswith("itl_"):
            out[name] = distribution([g for r in reqs for g in r[name]])
        else:
            out[name] = distribution([r[name] for r in reqs if in_aggregate(name, r)])
    out["slot_utilisation"] = float(frame["slot_utilisation"].sum()) / num_steps if num_steps else None
    out["padding_slot_steps"] = int(frame["num_padding"].sum())
    out["kv_utilisation_mean"] = float(frame["kv_utilisation"].sum()) / num_steps if num_steps else None
    out["kv_utilisation_max"] = float(frame["kv_utilisation"].max()) if num_steps else None
    out["num_preemptions"] = int(frame["num_preempted"].sum())
    out["num_dropped_tokens"] = sum(r["num_dropped_tokens"] for r in reqs)
    out["num_recomputed_tokens"] = sum(r["num_recomputed_tokens"] for r in reqs)
    out.update(prefix_cache_stats(records))
    out.update(spec_decode_stats(steps))
    return out
