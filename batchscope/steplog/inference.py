"""Decision records rebuilt from the log, for traces that did not record them (older files, a server's trace).

Traces written before the scheduler recorded why (``batchscope.steplog.records.DecisionsRecord``) have only *what*
happened. This module derives the same records from the log alone, independently of the engine's code: the one place
outside a scheduler that knows its rules; tests check it reproduces the records of every shipped trace and random ones.

How, per step ``k`` (walking the steps in order, keeping each request's K/V tokens, outputs and high-water mark):

- **preemptions**: a replay of the running phase from the state at the start of ``k`` (running list in admission
  order, each one's K/V tokens and block table, the free blocks): requests in order compute ``min(lacking, budget
  left)`` tokens; when a request's new blocks do not fit, the queue's victim rule picks who gives its blocks back
  (``newest``: the last running; ``lowest_priority``: the largest ``(priority, arrival)``). The replay must end with
  the victims and work the log shows; if it does not, the records keep only what the log says directly.
- **admissions**: the log's prefix-cache hit and the request's K/V high-water mark split its known tokens into
  hit, recompute and new.
- **head**: the first limit, in the scheduler's order, that the log shows binding for the first request still
  waiting; the prefix-cache hit it would have had comes from ``batchscope.steplog.cache_model`` (needs prompt token
ids).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from batchscope.steplog.head_wait import continuous_head, static_head
from batchscope.steplog.log_state import VICTIM_RULE, State, blocks_for, prefix_hits, running_at_start
from batchscope.steplog.records import AdmissionRecord, DecisionsRecord, PreemptionRecord


def infer_all(view: Any) -> list[DecisionsRecord]:
    """The decision records of every step of ``view`` (a ``TraceView``), inferred from the log."""
    state = State(view)
    out = []
    for k, st in enumerate(view.steps):
        static = view.policy == "static"
        start_running = running_at_start(view, k)
        record: DecisionsRecord = {
            "preemptions": [] if static else _preemptions(state, k, start_running),
            "admissions": [_admission(state, st, rid) for rid in st["admitted"]],
            "inferred": True,
        }
        for rid in st["preempted"]:
            state.high[rid] = max(state.high[rid], state.held.get(rid, 0))
            state.held.pop(rid, None)
            state.preempted_before.add(rid)
        head = static_head(state, k, start_running) if static and st["waiting"] else None
        _advance(state, k)
        if st["waiting"] and not static:
            head = continuous_head(state, k)
        if head is not None:
            record["head"] = head
        out.append(record)
    return out


def _advance(state: State, k: int) -> None:
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


def _admission(state: State, st: dict, rid: str) -> AdmissionRecord:
    hit = prefix_hits(st).get(rid, 0)
    known, high = state.known(rid), state.high[rid]
    return {
        "request_id": rid,
        "resumed": rid in state.preempted_before,
        "num_prefix_hit_tokens": hit,
        "num_recompute_tokens": max(0, high - hit),
        "num_new_tokens": known - max(high, hit),
    }


def _preemptions(state: State, k: int, running: list[str]) -> list[PreemptionRecord]:
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
    state: State, k: int, running: list[str], rule: str
) -> tuple[list[PreemptionRecord], dict[str, int]] | None:
    cfg, bs = state.cfg, state.bs
    running = list(running)
    start = state.view.block_tables(k - 1) if k else {}
    tables = {r: list(start.get(r, ())) for r in running}
    refs = Counter(b for t in tables.values() for b in t)
    free = int(state.view.steps[k]["kv"]["num_blocks"]) - len(refs)
    budget, fresh = int(cfg["max_num_batched_tokens"]), -1
    worked: dict[str, int] = {}
    records: list[PreemptionRecord] = []
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
        for _ in range(need):  # a block handed out in this step: a victim later in the step gives it back too
            tables[r].append(fresh)
            refs[fresh] += 1
            fresh -= 1
        free -= need
        worked[r] = n
        budget -= n
        i += 1
    return records, worked
