"""What the log tells about each request before a step: the state ``batchscope.steplog.inference`` walks through a
trace.

Per request: its K/V tokens (where its last scheduled work ended), the most K/V it ever held before a preemption,
its output tokens so far, whether it was preempted before, its place in arrival order and its priority; plus a
model of the prefix cache (``batchscope.steplog.cache_model``). Units: tokens.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from batchscope.steplog.cache_model import CacheModel

VICTIM_RULE = {
    "fcfs": "newest",
    "priority": "lowest_priority",
}  # the waiting queue's rule (batchscope.scheduling.request_queue)
QUEUE_ORDER = {"fcfs": "arrival", "priority": "priority"}


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)  # ceil


class State:
    """What the log tells about each request before the step being inferred."""

    def __init__(self, view: Any):
        self.view = view
        self.cfg: dict[str, Any] = {
            "enable_prefix_caching": False,
            "reserve_full_prompt": False,
            "scheduling_policy": "fcfs",
        }
        self.cfg.update(view.header["config"])
        self.bs = int(self.cfg["block_size"])
        self.held: dict[str, int] = {}  # K/V tokens of each request holding blocks
        self.high: Counter[str] = Counter()  # most K/V tokens each ever held before a preemption
        self.outputs: dict[str, list[int]] = {rid: [] for rid in view.request_ids}
        self.preempted_before: set[str] = set()
        self.cache = CacheModel(self.bs)
        info = view.request_info
        order = _arrival_order(view)
        self.key = {rid: (int(info[rid].get("priority", 0)), order[rid]) for rid in view.request_ids}

    def known(self, rid: str) -> int:
        return int(self.view.request_info[rid]["num_prompt_tokens"]) + len(self.outputs[rid])

    def token_ids(self, rid: str) -> list[int] | None:
        prompt = self.view.request_info[rid].get("prompt_token_ids")
        return None if prompt is None else list(prompt) + self.outputs[rid]


def _arrival_order(view: Any) -> dict[str, int]:
    """Each request's place in arrival order: first step seen, then the engine's pending order (step-clock arrivals
    after wall-clock ones, then arrival time), then the header's order."""
    pos = {rid: i for i, rid in enumerate(view.request_ids)}

    def key(rid: str) -> tuple:
        r = view.request_info[rid]
        clock = -1 if r.get("arrival_step") is None else r["arrival_step"]
        return (view.first_seen.get(rid, math.inf), clock, r.get("arrival_time") or 0.0, pos[rid])

    return {rid: i for i, rid in enumerate(sorted(view.request_ids, key=key))}


def prefix_hits(st: dict) -> dict[str, int]:
    """``{request_id: prefix-cache hit tokens}`` of the requests admitted in step record ``st`` (version 1 names it
    ``num_prefix_hit_tokens``; early version 2 traces ``num_cached_tokens`` at the top level)."""
    for name in ("num_prefix_hit_tokens", "num_cached_tokens"):
        if isinstance(st.get(name), dict):
            return {r: int(n) for r, n in st[name].items()}
    first: dict[str, int] = {}
    for s in st["scheduled"]:
        if s["request_id"] in st["admitted"]:
            first.setdefault(s["request_id"], int(s["num_computed_tokens"]))
    return first


def running_at_start(view: Any, k: int) -> list[str]:
    """Unfinished requests holding a row when step position ``k`` starts, in admission order: the previous step's
    running list minus those that finished at its end."""
    if k == 0:
        return []
    prev = view.steps[k - 1]
    done = {f["request_id"] for f in prev["finished"]}
    return [r for r in prev["running"] if r not in done]
