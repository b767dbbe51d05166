"""Where each glossary term happens in a trace: ``finder(view) -> (step, what you see there)`` or ``None``.

Nothing here names a step: every place is found by a rule over the step log, so a re-recorded trace moves the
"see it" links with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from batchscope.explain.words import article
from batchscope.glossary.term import Found
from batchscope.quiz.facts import prefix_hits, prompt_lengths
from batchscope.steplog.decisions import decisions
from batchscope.steplog.metrics import request_metrics
from batchscope.steplog.reasons import VICTIM_RULES
from batchscope.steplog.view import TraceView

SLO_TTFT_STEPS = 8  # the example service-level objective of the goodput entry, on the step clock
SLO_TPOT_STEPS = 1.5


def first(view: TraceView, test: Callable[[Any], object]) -> Found:
    """The first step whose record makes ``test`` return a description."""
    for st in view.steps:
        what = test(st)
        if what:
            return st["step"], str(what)
    return None


def request(view: TraceView) -> Found:
    return first(view, lambda st: f"{', '.join(st['admitted'])} admitted from the queue" if st["admitted"] else None)


def prefill(view: TraceView) -> Found:
    def test(st: dict) -> str | None:
        s = next((s for s in st["scheduled"] if s["kind"] == "prefill"), None)
        return s and f"{s['request_id']} prefills {s['num_tokens']} tokens in one forward pass"

    return first(view, test)


def decode(view: TraceView) -> Found:
    def test(st: dict) -> str | None:
        ids = [s["request_id"] for s in st["scheduled"] if s["kind"] == "decode"]
        return f"{', '.join(ids)} decode{'s' if len(ids) == 1 else ''} 1 token each" if ids else None

    return first(view, test)


def chunked_prefill(view: TraceView) -> Found:
    plen = prompt_lengths(view)

    def test(st: dict) -> str | None:
        for s in st["scheduled"]:
            rid, c, n = s["request_id"], s["num_computed_tokens"], s["num_tokens"]
            if s["kind"] == "prefill" and not s.get("recompute") and c + n < plen[rid]:
                return f"{rid} prefills {article(n)} {n}-token chunk ({c}→{c + n} of {plen[rid]} prompt tokens)"
        return None

    return first(view, test)


def token_budget(view: TraceView) -> Found:
    budget = view.header["config"]["max_num_batched_tokens"]
    return first(view, lambda st: st["num_batched_tokens"] == budget and f"{budget} of {budget} budget tokens are used")


def max_num_seqs(view: TraceView) -> Found:
    """The first step whose recorded (or inferred) reason for the head's wait is that every row is taken."""
    m = view.header["config"]["max_num_seqs"]
    for k in range(view.num_steps):
        head = decisions(view, k).get("head")
        if head and head["limit"] == "max_num_seqs":
            return view.steps[k]["step"], f"all {m} rows are busy while {head['request_id']} waits"
    return None


def kv_block(view: TraceView) -> Found:
    """A decoding request that crosses into a new block: memory grows one block at a time."""

    def test(st: dict) -> str | None:
        for s in st["scheduled"]:
            blocks = st["kv"].get("allocated", {}).get(s["request_id"])
            if s["kind"] == "decode" and blocks:
                pos = s["num_computed_tokens"]
                return f"{s['request_id']} writes token position {pos} into a new block, block {blocks[0]}"
        return None

    return first(view, test)


def _scattered(st: dict) -> tuple[str, list[int]] | None:
    for rid, table in st["kv"]["block_tables"].items():
        if any(b != a + 1 for a, b in itertools.pairwise(table)):
            return rid, table
    return None


def block_table(view: TraceView) -> Found:
    def test(st: dict) -> str | None:
        hit = _scattered(st)
        return hit and f"{hit[0]}'s block table is {hit[1]}: its blocks need not be next to each other"

    return first(view, test)


def slot_mapping(view: TraceView) -> Found:
    """A decode whose block is not where a contiguous layout would put it, with the slot arithmetic."""
    bs = view.header["config"]["block_size"]

    def test(st: dict) -> str | None:
        for s in st["scheduled"]:
            table = st["kv"]["block_tables"].get(s["request_id"], [])
            pos = s["num_computed_tokens"]
            i = pos // bs
            if s["kind"] == "decode" and i < len(table) and table[i] != table[0] + i:
                slot = table[i] * bs + pos % bs
                return (
                    f"{s['request_id']} writes position {pos} to slot table[{pos} // {bs}] × {bs} + {pos} % {bs} = "
                    f"{table[i]} × {bs} + {pos % bs} = {slot}"
                )
        return None

    return first(view, test)


def padding(view: TraceView) -> Found:
    def test(st: dict) -> str | None:
        ids = [p["request_id"] for p in st["padding_slots"]]
        return f"{', '.join(ids)} finished but still run{'s' if len(ids) == 1 else ''} a padding row" if ids else None

    return first(view, test)


def preemption(view: TraceView) -> Found:
    """The first preemption, as the scheduler recorded it: the victim, its rule, the K/V it dropped."""
    for k in range(view.num_steps):
        for p in decisions(view, k).get("preemptions", []):
            rule = VICTIM_RULES.get(p["rule"], p["rule"])
            return view.steps[k]["step"], (
                f"{p['request_id']} ({rule}) is preempted: its {p['num_dropped_blocks']} KV blocks "
                f"({p['num_dropped_tokens']} tokens of K/V) are given back"
            )
    return None


def prefix_caching(view: TraceView) -> Found:
    for k in range(view.num_steps):
        hits = {r: h for r, h in (prefix_hits(view, k) or {}).items() if h > 0}
        if hits:
            rid, h = next(iter(hits.items()))
            return k, f"{rid} finds {h} of its prompt tokens in the prefix cache"
    return None


def throughput(view: TraceView) -> Found:
    if not view.num_steps:
        return None
    n = sum(len(st["sampled"]) for st in view.steps)
    return view.num_steps - 1, f"{n} output tokens in {view.num_steps} steps = {n / view.num_steps:.2f} tokens/step"


def _steps(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:g} step" if x == 1 else f"{x:.3g} steps"


def goodput(view: TraceView) -> Found:
    """The first request that finishes outside the example SLO: throughput counts its tokens, goodput does not
    (or, if every request meets the SLO, the first that finishes within it)."""
    ms = sorted(
        (m for m in request_metrics(view.records) if m["ttft_steps"] is not None), key=lambda m: m["finish_step"]
    )

    def within(m: dict) -> bool:
        return m["ttft_steps"] <= SLO_TTFT_STEPS and (m["tpot_steps"] is None or m["tpot_steps"] <= SLO_TPOT_STEPS)

    m = next((m for m in ms if not within(m)), None) or next(iter(ms), None)
    if m is None:
        return None
    verdict = "within the SLO: it counts" if within(m) else "outside the SLO: throughput counts it, goodput does not"
    ttft, tpot = _steps(m["ttft_steps"]), _steps(m["tpot_steps"])
    return m["finish_step"], f"{m['request_id']} finishes with TTFT {ttft} and TPOT {tpot}, {verdict}"


def example_request(view: TraceView) -> dict | None:
    """The request the latency terms are worked on: the one that waited longest for its first token (ties: the
    earliest in the header), among those that finished with at least two output tokens."""
    ms = [m for m in request_metrics(view.records) if m["num_output_tokens"] >= 2 and m["e2e_steps"] is not None]
    return max(ms, key=lambda m: (m["ttft_steps"], -view.request_ids.index(m["request_id"])), default=None)


def latency(which: str) -> Callable[[TraceView], Found]:
    def find(view: TraceView) -> Found:
        m = example_request(view)
        if m is None:
            return None
        rid, a = m["request_id"], m["arrival_step"]
        if which == "ttft":
            return m["first_token_step"], f"{rid} (arrived before step {a}) samples its first token"
        if which == "itl":
            k0, k1 = m["token_steps"][:2]
            return k1, f"{rid} samples its second token, {_steps(k1 - k0)} after its first"
        return m["finish_step"], f"{rid} samples its last token ({m['num_output_tokens']} in all)"

    return find
