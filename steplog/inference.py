"""Decision records rebuilt from the log, for traces that did not record them (older files, a server's trace).

The scheduler records why it did what it did (``steplog.records.DecisionsRecord``); a trace written before that,
or by a tracer that could not, has only *what* happened. This module derives the same records from the log alone,
independently of the engine's code: it is the one place outside a scheduler that knows the scheduling rules, and
the tests check that it reproduces the recorded decisions of every shipped trace and of random workloads.

How, per step ``k`` (walking the steps in order, keeping each request's K/V tokens, outputs and high-water mark):

- **preemptions**: a replay of the running phase from the state at the start of ``k`` (running list in admission
  order, each one's K/V tokens and block table, the free blocks): requests in order compute ``min(lacking, budget
  left)`` tokens; when a request's new blocks do not fit, the queue's victim rule picks who gives its blocks back
  (``newest``: the last running; ``lowest_priority``: the largest ``(priority, arrival)``). The replay must end with
  the victims and work the log shows; if it does not, the records keep only what the log says directly.
- **admissions**: the log's prefix-cache hit and the request's K/V high-water mark split its known tokens into
  hit, recompute and new.
- **head**: the first limit, in the scheduler's order, that the log shows binding for the first request still
  waiting; the prefix-cache hit it would have had comes from ``steplog.cache_model`` (needs prompt token ids).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from steplog.cache_model import CacheModel
from steplog.records import AdmissionRecord, DecisionsRecord, HeadWaitRecord, PreemptionRecord

VICTIM_RULE = {"fcfs": "newest", "priority": "lowest_priority"}  # the waiting queue's rule (engine.request_queue)
QUEUE_ORDER = {"fcfs": "arrival", "priority": "priority"}


def blocks_for(num_tokens: int, block_size: int) -> int:
    return -(-num_tokens // block_size)


class _State:
    """What the log tells about each request before the step being inferred."""

    def __init__(self, view: Any):
        self.view = view
        self.cfg = {"enable_prefix_caching": False, "reserve_full_prompt": False, "scheduling_policy": "fcfs"}
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


def infer_all(view: Any) -> list[DecisionsRecord]:
    """The decision records of every step of ``view`` (a ``TraceView``), inferred from the log."""
    state = _State(view)
    out = []
    for k, st in enumerate(view.steps):
        static = view.policy == "static"
        start_running = _running_at_start(view, k)
        record: DecisionsRecord = {
            "preemptions": [] if static else _preemptions(state, k, start_running),
            "admissions": [_admission(state, st, rid) for rid in st["admitted"]],
            "inferred": True,
        }
        for rid in st["preempted"]:
            state.high[rid] = max(state.high[rid], state.held.get(rid, 0))
            state.held.pop(rid, None)
            state.preempted_before.add(rid)
        head = _static_head(state, k, start_running) if static and st["waiting"] else None
        _advance(state, k)
        if st["waiting"] and not static:
            head = _head(state, k)
        if head is not None:
            record["head"] = head
        out.append(record)
    return out


def _running_at_start(view: Any, k: int) -> list[str]:
    if k == 0:
        return []
    prev = view.steps[k - 1]
    done = {f["request_id"] for f in prev["finished"]}
    return [r for r in prev["running"] if r not in done]


def _advance(state: _State, k: int) -> None:
    """Fold step ``k`` into the state: K/V after the step, the prefix cache, the sampled tokens."""
    view, st = state.view, state.view.steps[k]
    tables = view.block_tables(k)
    caching = state.cfg["enable_prefix_caching"]
    if caching:  # blocks handed out for new tokens lose their cached keys (adopted hit blocks keep theirs)
        hits = prefix_hits(st)
        for rid, blocks in st["kv"].get("allocated", {}).items():
            adopted = set(tables.get(rid, [])[: blocks_for(hits.get(rid, 0), state.bs)] if rid in hits else ())
            state.cache.drop([b for b in blocks if b not in adopted])
        state.cache.drop(st["kv"].get("evicted", ()))
    for s in st["scheduled"]:
        rid = s["request_id"]
        state.held[rid] = s["num_computed_tokens"] + s["num_tokens"]
        ids = state.token_ids(rid) if caching else None
        if ids is not None:
            state.cache.register(list(tables.get(rid, ())), ids, state.held[rid])
    for s in st["sampled"]:
        state.outputs[s["request_id"]].append(int(s["token_id"]))
    for f in st["finished"]:
        state.held.pop(f["request_id"], None)


def prefix_hits(st: dict) -> dict[str, int]:
    """``{request_id: prefix-cache hit tokens}`` of the requests admitted in step record ``st`` (version 1 names it
    ``num_prefix_hit_tokens``; early version 2 traces ``num_cached_tokens`` at the top level)."""
    for name in ("num_prefix_hit_tokens", "num_cached_tokens"):
        if isinstance(st.get(name), dict):
            return {r: int(n) for r, n in st[name].items()}
    first = {}
    for s in st["scheduled"]:
        if s["request_id"] in st["admitted"]:
            first.setdefault(s["request_id"], int(s["num_computed_tokens"]))
    return first


def _admission(state: _State, st: dict, rid: str) -> AdmissionRecord:
    hit = prefix_hits(st).get(rid, 0)
    known, high = state.known(rid), state.high[rid]
    return {
        "request_id": rid,
        "resumed": rid in state.preempted_before,
        "num_prefix_hit_tokens": hit,
        "num_recompute_tokens": max(0, high - hit),
        "num_new_tokens": known - max(high, hit),
    }


def _preemptions(state: _State, k: int, running: list[str]) -> list[PreemptionRecord]:
    """Replay the running phase of step ``k``; fall back to the log's facts if the replay disagrees with it."""
    st = state.view.steps[k]
    if not st["preempted"]:
        return []
    rule = VICTIM_RULE.get(state.cfg["scheduling_policy"], "newest")
    replayed = _replay_running(state, k, running, rule)
    worked = {s["request_id"]: s["num_tokens"] for s in st["scheduled"] if s["request_id"] not in st["admitted"]}
    if replayed is not None and [p["request_id"] for p in replayed[0]] == st["preempted"] and replayed[1] == worked:
        return replayed[0]
    prev = state.view.block_tables(k - 1) if k else {}
    return [
        {
            "request_id": rid,
            "rule": rule,
            "num_dropped_tokens": state.held.get(rid, 0),
            "num_dropped_blocks": len(prev.get(rid, ())),
        }
        for rid in st["preempted"]
    ]


def _replay_running(
    state: _State, k: int, running: list[str], rule: str
) -> tuple[list[PreemptionRecord], dict[str, int]] | None:
    cfg, bs = state.cfg, state.bs
    running = list(running)
    start = state.view.block_tables(k - 1) if k else {}
    tables = {r: list(start.get(r, ())) for r in running}
    refs = Counter(b for t in tables.values() for b in t)
    free = int(state.view.steps[k]["kv"]["num_blocks"]) - len(refs)
    budget, worked, records, fresh = int(cfg["max_num_batched_tokens"]), {}, [], -1
    i = 0
    while i < len(running) and budget > 0:
        r = running[i]
        held = state.held.get(r, 0)
        n = state.known(r) - held
        if n > budget:
            n = budget if cfg["enable_chunked_prefill"] or r in state.preempted_before else 0
        if n == 0:
            i += 1
            continue
        while (need := max(0, blocks_for(held + n, bs) - len(tables[r]))) > free:
            v = running[-1] if rule == "newest" else max(running, key=state.key.__getitem__)
            if running.index(v) < i:  # scheduled earlier in this step: its work is taken back
                budget += worked.pop(v)
                i -= 1
            records.append(
                {
                    "request_id": v,
                    "rule": rule,
                    "num_dropped_tokens": state.held.get(v, 0),
                    "num_dropped_blocks": len(tables[v]),
                    "requester": r,
                    "need": need,
                    "free": free,
                }
            )
            for b in tables.pop(v):
                refs[b] -= 1
                free += refs[b] == 0
            running.remove(v)
            if v == r:
                break
        if r not in tables:  # it preempted itself
            if rule == "newest":
                break
            continue
        for _ in range(need):
            tables[r].append(fresh)
            fresh -= 1
        free -= need
        worked[r] = n
        budget -= n
        i += 1
    return records, worked


def _head(state: _State, k: int) -> HeadWaitRecord:
    """Why the first request still waiting after step ``k`` (continuous batching) was not admitted."""
    st, cfg = state.view.steps[k], state.cfg
    rid = st["waiting"][0]
    head: HeadWaitRecord = {"request_id": rid, "limit": "preempted_this_step"}
    left = int(cfg["max_num_batched_tokens"]) - int(st["num_batched_tokens"])
    if st["preempted"]:
        pass
    elif left <= 0:
        head.update(limit="token_budget", need=1, left=0)
    elif len(st["running"]) >= int(cfg["max_num_seqs"]):
        head.update(limit="max_num_seqs", need=1, left=0)
    else:
        head.update(_memory_limit(state, k, rid, left))
    head["order"] = QUEUE_ORDER.get(cfg["scheduling_policy"], "arrival")
    return head


def _memory_limit(state: _State, k: int, rid: str, left: int) -> dict:
    """A row and budget were left: chunking or KV blocks held ``rid`` back (numbers when the log can tell)."""
    st, cfg, bs = state.view.steps[k], state.cfg, state.bs
    free = int(st["kv"]["num_blocks"]) - int(st["kv"]["num_used_blocks"])
    known = state.known(rid)
    hits = state.cache.hit_blocks(state.token_ids(rid)) if cfg["enable_prefix_caching"] else []
    if hits is None:  # caching on but no prompt token ids: the hit, and so the numbers, are unknown
        full = cfg["reserve_full_prompt"]
        return {"limit": "kv_blocks_full_prompt" if full else "kv_blocks"}
    held = {b for t in state.view.block_tables(k).values() for b in t}
    hit = len(hits) * bs
    taken = sum(1 for b in hits if b not in held)  # a free hit block must leave the free queue

    def blocks(tokens: int) -> int:
        return max(0, blocks_for(tokens, bs) - len(hits)) + taken

    if known - hit > left and not cfg["enable_chunked_prefill"] and rid not in state.preempted_before:
        return {"limit": "chunked_prefill_off", "need": known - hit, "left": left}
    if cfg["reserve_full_prompt"] and blocks(known) > free:
        return {"limit": "kv_blocks_full_prompt", "need": blocks(known), "left": free}
    return {"limit": "kv_blocks", "need": blocks(hit + min(known - hit, left)), "left": free}


def _static_head(state: _State, k: int, start_running: list[str]) -> HeadWaitRecord:
    """Static batching: the batch still runs, or the batch formed in step ``k`` was full or out of blocks (looked
    up before step ``k`` registers anything in the cache, as the batch forms before any member computes)."""
    st, cfg, bs = state.view.steps[k], state.cfg, state.bs
    rid = st["waiting"][0]
    head: HeadWaitRecord = {"request_id": rid, "limit": "static_batch_running"}
    if not start_running and len(st["admitted"]) >= int(cfg["max_num_seqs"]):
        head.update(limit="max_num_seqs", need=1, left=0)
    elif not start_running:
        info, tables = state.view.request_info, state.view.block_tables(k)
        hits = prefix_hits(st)
        reserved, shared = 0, set()
        for m in st["admitted"]:
            worst = int(info[m]["num_prompt_tokens"]) + int(info[m]["max_tokens"]) - 1
            n_hit = blocks_for(hits.get(m, 0), bs)
            reserved += blocks_for(worst, bs) - n_hit
            shared |= set(tables.get(m, [])[:n_hit])
        mine = state.cache.hit_blocks(state.token_ids(rid)) if cfg["enable_prefix_caching"] else []
        head["limit"] = "kv_blocks_reserved"
        if mine is not None:
            worst = int(info[rid]["num_prompt_tokens"]) + int(info[rid]["max_tokens"]) - 1
            head["need"] = blocks_for(worst, bs) - len(mine) + len(set(mine) - shared)
            head["left"] = int(cfg["num_kv_blocks"]) - reserved - len(shared)
    head["order"] = QUEUE_ORDER.get(cfg["scheduling_policy"], "arrival")
    return head
