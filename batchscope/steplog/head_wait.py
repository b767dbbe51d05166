"""Why the head of the waiting queue waited, rebuilt from the log (``batchscope.steplog.inference`` for the whole
record).

The first limit, in the scheduler's order of checks (``batchscope.steplog.reasons.checks``), that the log shows binding
for the first request still waiting after a step; the prefix-cache hit it would have had comes from the cache model, so
the numbers need the prompts' token ids when prefix caching is on (without them they are left out).
"""

from __future__ import annotations

from batchscope.steplog.log_state import QUEUE_ORDER, State, blocks_for, prefix_hits
from batchscope.steplog.records import HeadWaitRecord


def continuous_head(state: State, k: int) -> HeadWaitRecord:
    """Why the first request still waiting after step ``k`` (continuous batching) was not admitted."""
    st, cfg = state.view.steps[k], state.cfg
    rid = st["waiting"][0]
    head: HeadWaitRecord = {"request_id": rid, "limit": "preempted_this_step"}
    left = int(cfg["max_num_batched_tokens"]) - int(st["num_batched_tokens"])
    if st["preempted"]:
        pass  # the record already says so
    elif left <= 0:
        head["limit"], head["need"], head["left"] = "token_budget", 1, 0
    elif len(st["running"]) >= int(cfg["max_num_seqs"]):
        head["limit"], head["need"], head["left"] = "max_num_seqs", 1, 0
    else:
        head.update(_memory_limit(state, k, rid, left))  # type: ignore[typeddict-item]
    head["order"] = QUEUE_ORDER.get(cfg["scheduling_policy"], "arrival")
    return head


def _memory_limit(state: State, k: int, rid: str, left: int) -> dict:
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

    whole = known - hit  # chunking off: it runs whole, unless a comeback that can never fit the whole budget
    fits_never = rid in state.preempted_before and whole > int(cfg["max_num_batched_tokens"])
    if whole > left and not cfg["enable_chunked_prefill"] and not fits_never:
        return {"limit": "chunked_prefill_off", "need": known - hit, "left": left}
    if cfg["reserve_full_prompt"] and blocks(known) > free:
        return {"limit": "kv_blocks_full_prompt", "need": blocks(known), "left": free}
    return {"limit": "kv_blocks", "need": blocks(hit + min(known - hit, left)), "left": free}


def static_head(state: State, k: int, start_running: list[str]) -> HeadWaitRecord:
    """Static batching: the batch still runs, or the batch formed in step ``k`` was full or out of blocks (looked
    up before step ``k`` registers anything in the cache, as the batch forms before any member computes)."""
    st, cfg, bs = state.view.steps[k], state.cfg, state.bs
    rid = st["waiting"][0]
    head: HeadWaitRecord = {"request_id": rid, "limit": "static_batch_running"}
    if not start_running and len(st["admitted"]) >= int(cfg["max_num_seqs"]):
        head["limit"], head["need"], head["left"] = "max_num_seqs", 1, 0
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
