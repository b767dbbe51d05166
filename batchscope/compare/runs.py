"""Compare runs of one workload (two, or up to four: sides A, B, C, D in the order given): what differs between their
settings, whether they really ran the same requests, and a strip of headline metrics side by side. Pure functions
of traces (no Streamlit).

Typical pairs: static vs continuous, chunked prefill on vs off, budget 32 vs 128, 4 vs 8 slots, full-prompt
admission on vs off, prefix caching on vs off, FCFS vs priority.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchscope.steplog.metrics import summarize
from batchscope.steplog.reasons import RECORDED_WHEN_ON
from batchscope.steplog.view import TraceView

# Header fields (besides ``config``) that change how a run behaves or what it computes.
HEADER_FIELDS = ("policy", "model", "dtype", "device")
SHOWN_AS = {"policy": "batching"}  # the header's batching mode, named apart from the queue's scheduling_policy
# Per-request fields that define the workload. ``seed`` is left out: an unseeded sampled request gets a seed drawn
# per run. ``arrival_time`` is compared only without ``arrival_step`` (step-clock arrivals record the actual time).
REQUEST_FIELDS = ("prompt", "num_prompt_tokens", "max_tokens", "temperature", "top_p", "top_k", "ignore_eos")
ABSENT = "not recorded"
SIDES = "ABCD"  # the sides of a comparison, in the order its runs are given
MAX_RUNS = len(SIDES)


def _fmt(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return ABSENT if value is None else str(value)


def settings_diff(views: list[TraceView]) -> list[dict]:
    """Each setting that differs among ``views``, ``{"setting": name, "values": [each run's value, as text]}``: the
    batching mode, the model (and dtype, device), then every field of ``config`` (sorted; a field a trace does not
    record shows as "not recorded", one recorded only when on as "off"). Empty when every run has the same settings.
    The values are in the order of ``views`` (sides A, B, C, D)."""
    rows = []
    for name in HEADER_FIELDS:
        values = [v.header.get(name) for v in views]
        if any(x != values[0] for x in values):
            rows.append({"setting": SHOWN_AS.get(name, name), "values": [_fmt(x) for x in values]})
    configs = [v.header.get("config", {}) for v in views]
    for name in sorted(set().union(*configs)):
        values = [c.get(name, RECORDED_WHEN_ON.get(name)) for c in configs]  # absent: off, for these
        if any(x != values[0] for x in values):
            rows.append({"setting": name, "values": [_fmt(x) for x in values]})
    return rows


def config_diff(a: TraceView, b: TraceView) -> list[str]:
    """One line per setting that differs between two runs, ``"name: A's value → B's value"``, in the order of
    ``settings_diff``. Empty when the settings are the same."""
    return [f"{r['setting']}: {r['values'][0]} → {r['values'][1]}" for r in settings_diff([a, b])]


def diff_lines(views: list[TraceView]) -> list[str]:
    """``settings_diff`` as one line per setting with each run's value by its side,
    ``"max_num_seqs: A 4 · B 8 · C 4"``."""
    return [
        f"{r['setting']}: " + " · ".join(f"{side} {value}" for side, value in zip(SIDES, r["values"]))
        for r in settings_diff(views)
    ]


def pool_tokens(view: TraceView) -> int:
    """The KV pool in token slots (``num_kv_blocks`` x ``block_size``): the same memory whether a trace counts it in
    blocks (vLLM) or in tokens (SGLang's ``page_size`` 1, a block of 1 token)."""
    c = view.header["config"]
    return c["num_kv_blocks"] * c["block_size"]


def family_pair(a: TraceView, b: TraceView) -> bool:
    """True when ``a`` and ``b`` are vLLM's scheduler (continuous) and SGLang's (sglang), in either order, under the
    same settings: the only other differences are the pool's layout (blocks of ``block_size`` tokens against
    token slots) for the same number of token slots."""
    if {a.policy, b.policy} != {"continuous", "sglang"} or pool_tokens(a) != pool_tokens(b):
        return False
    layout = ("block_size", "num_kv_blocks")
    return all(line.split(":")[0] in ("batching", *layout) for line in config_diff(a, b))


def _arrival(req: Mapping[str, Any]) -> tuple[str, object]:
    if req.get("arrival_step") is not None:
        return "arrival_step", req["arrival_step"]
    return "arrival_time", round(float(req.get("arrival_time") or 0.0), 9)


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def same_workload(a: TraceView, b: TraceView, sides: tuple[str, str] = ("A", "B")) -> tuple[bool, str]:
    """Whether both traces ran the same requests: the same ids in the same order, and per request the same prompt
    (text and token count), ``max_tokens``, sampling settings and arrival, each compared where both traces record
    it (a vLLM server's trace without text has no prompt, only its token count). The message names the first
    difference ("request S03: max_tokens 400 in A, 128 in B"; ``sides``: the names of ``a`` and ``b`` in it), or
    says what matched."""
    A, B = sides
    ids_a, ids_b = a.request_ids, b.request_ids
    if ids_a != ids_b:
        only_a = [r for r in ids_a if r not in ids_b]
        only_b = [r for r in ids_b if r not in ids_a]
        if only_a or only_b:
            in_a, in_b = ", ".join(only_a) or "none", ", ".join(only_b) or "none"
            return False, f"different requests: only in {A}: {in_a}; only in {B}: {in_b}"
        first = next(i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y)
        return False, (
            f"the requests arrive in a different order: position {first + 1} is {ids_a[first]} in {A}, "
            f"{ids_b[first]} in {B}"
        )
    for ra, rb in zip(a.header["requests"], b.header["requests"]):
        rid = ra["request_id"]
        for name in REQUEST_FIELDS:
            va, vb = ra.get(name), rb.get(name)
            if va is not None and vb is not None and va != vb:  # a server's trace without text has no prompt
                return False, f"request {rid}: {name} {_short(va)} in {A}, {_short(vb)} in {B}"
        (na, va), (nb, vb) = _arrival(ra), _arrival(rb)
        if (na, va) != (nb, vb):
            return False, f"request {rid}: arrives at {na} {va} in {A}, {nb} {vb} in {B}"
    return True, f"same workload: {len(ids_a)} requests with the same prompts, max_tokens, sampling and arrivals"


def same_workloads(views: list[TraceView]) -> tuple[bool, str]:
    """``same_workload`` of every run against run A (side B, C, D in turn): the first difference found, named by
    its sides ("request S03: max_tokens 400 in A, 128 in C"), or what matched. Raises ``ValueError`` unless there
    are 2 to ``MAX_RUNS`` runs."""
    if not 2 <= len(views) <= MAX_RUNS:
        raise ValueError(f"compare 2 to {MAX_RUNS} runs, got {len(views)}")
    said = ""
    for side, other in zip(SIDES[1:], views[1:]):
        ok, said = same_workload(views[0], other, ("A", side))
        if not ok:
            return False, said
    return True, said


STRIP = (
    # label, summary key, stat (None: a plain value), unit, lower is better
    ("steps", "num_steps", None, "steps", True),
    ("mean TTFT", "ttft_steps", "mean", "steps", True),
    ("mean TPOT", "tpot_steps", "mean", "steps", True),
    ("throughput", "output_throughput_tok_step", None, "tokens/step", False),
    ("evictions (preempt / retract / pause)", "num_preemptions", None, "events", True),  # each engine's word
    ("padding slot-steps", "padding_slot_steps", None, "rows", True),
)


def _figure(summary: dict, key: str, stat: str | None) -> float | None:
    """One headline figure of a run's ``summarize`` output (``None`` where the trace cannot tell it)."""
    return summary[key][stat] if stat else summary[key]


def best_sides(values: list[float | None], lower: bool) -> list[str]:
    """The sides (letters, in order) whose value is best (the least if ``lower``, else the greatest); empty on a tie
    of every run or where any run lacks the figure: no run is best then."""
    if any(x is None for x in values) or all(x == values[0] for x in values):
        return []
    nums = [x for x in values if x is not None]
    top = min(nums) if lower else max(nums)
    return [side for side, x in zip(SIDES, values) if x == top]


def metrics_table(views: list[TraceView]) -> list[dict]:
    """Headline figures of 2 to 4 runs on the step clock (reproducible), one dict per figure (``STRIP``'s order)
    with ``metric``, ``unit``, ``values`` (one per run, in side order; ``None`` where a trace cannot tell it) and
    ``best`` (the sides with the best value, ``best_sides``: empty on a tie or a missing value)."""
    summaries = [summarize(v.records) for v in views]
    rows = []
    for label, key, stat, unit, lower in STRIP:
        values = [_figure(s, key, stat) for s in summaries]
        rows.append({"metric": label, "unit": unit, "values": values, "best": best_sides(values, lower)})
    return rows


def metrics_strip(a: TraceView, b: TraceView) -> list[dict]:
    """Headline figures of both runs on the step clock (reproducible), from ``batchscope.steplog.metrics.summarize``:
    one dict per figure with ``metric``, ``unit``, ``a``, ``b``, ``delta`` (b - a, ``None`` if either is missing) and
    ``better`` ("a", "b" or ``None`` on a tie or a missing value)."""
    rows = []
    for row in metrics_table([a, b]):
        va, vb = row["values"]
        delta = None if va is None or vb is None else vb - va
        better = row["best"][0].lower() if row["best"] else None
        rows.append({"metric": row["metric"], "unit": row["unit"], "a": va, "b": vb, "delta": delta, "better": better})
    return rows
