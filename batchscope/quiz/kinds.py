"""The registry of quiz kinds: name -> generator ``(view, step, rng) -> Question | None`` (``None`` where the
question makes no sense at that step). ``batchscope.quiz.deck.questions`` walks it in this order."""

from __future__ import annotations

from collections.abc import Callable

from batchscope.quiz import memory as quiz_memory
from batchscope.quiz import more as quiz_more
from batchscope.quiz import reserving as quiz_reserving
from batchscope.quiz import scheduling as quiz_sched
from batchscope.quiz import sglang as quiz_sglang

KINDS: dict[str, Callable] = {
    "admitted": quiz_sched.admitted,
    "num_tokens": quiz_sched.num_tokens,
    "kv_blocks": quiz_sched.kv_blocks,
    "kv_memory": quiz_memory.kv_memory,
    "fragmentation": quiz_memory.fragmentation,
    "samples": quiz_sched.samples,
    "preempted": quiz_sched.preempted,
    "recompute": quiz_sched.recompute,
    "finished": quiz_sched.finished,
    "unused_budget": quiz_more.unused_budget,
    "padding": quiz_more.padding,
    "prefix_hit": quiz_more.prefix_hit,
    "queue_order": quiz_more.queue_order,
    "ttft": quiz_more.ttft,
    "tpot": quiz_more.tpot,
    "e2e": quiz_more.e2e,
    "batch_kind": quiz_sglang.batch_kind,
    "reserved_output": quiz_sglang.reserved_output,
    "lifetime_blocks": quiz_reserving.lifetime_blocks,
    "tgi_batch": quiz_reserving.tgi_batch,
}

KIND_TITLES = {
    "admitted": "Admission",
    "num_tokens": "Tokens computed",
    "kv_blocks": "KV blocks in use",
    "kv_memory": "KV-cache bytes",
    "fragmentation": "Last-block fragmentation",
    "samples": "Sampling",
    "preempted": "Preemption",
    "recompute": "Recompute cost",
    "finished": "Finishing",
    "unused_budget": "Unused budget",
    "padding": "Static padding",
    "prefix_hit": "Prefix cache",
    "queue_order": "Priority queue",
    "ttft": "TTFT",
    "tpot": "TPOT",
    "e2e": "E2E latency",
    "batch_kind": "Prefill first (SGLang)",
    "reserved_output": "Reserved output (SGLang)",
    "lifetime_blocks": "Whole-lifetime blocks (TGI)",
    "tgi_batch": "Stall or join (TGI)",
}
