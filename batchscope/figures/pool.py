"""The KV pool at one step, block by block: the model both block maps draw.

``kv.block_map`` draws every block of a small pool; ``blockgroups`` draws a large pool one cell per group of
blocks. Both read a block's state from here, so a group counts exactly the blocks the full map would draw:

    block -> owner (or None), fill (slots holding K/V), refs (block tables holding it),
             and the marks that last one step: new (allocated), releasing (its owner finished),
             preempted_from (a preemption freed it), plus cached / reserved for a free block
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from batchscope.facts import facts
from batchscope.facts.blocks import freed_blocks
from batchscope.steplog.view import TraceView


def one_step_flags(view: TraceView, step: int) -> dict[str, Any]:
    """Blocks with a mark that lasts one step: ``new`` (allocated in it, not a prefix-cache hit: a version 2 trace
    lists its hits among the allocated blocks, and names them), ``hits`` (block -> the request that found it in the
    prefix cache in this step), ``releasing`` (the owner finished) and ``preempted`` (block -> the request a
    preemption took it from)."""
    kv = view.steps[step]["kv"]
    hits = kv.get("cache_hits", {})
    freed = freed_blocks(view, step)
    return {
        "new": {b for rid, blocks in kv.get("allocated", {}).items() for b in blocks if b not in hits.get(rid, ())},
        "hits": cache_hit_blocks(view, step),
        "releasing": {b for blocks in freed["finished"].values() for b in blocks},
        "preempted": facts(view).pool(step).given_back,
    }


def cache_hit_blocks(view: TraceView, step: int) -> dict[int, str]:
    """Blocks found in the prefix cache in ``step`` -> the request that found them: a version 2 trace names them
    (``kv.cache_hits``); else a hit of N tokens (``num_prefix_hit_tokens``) covers the first N // block_size blocks
    of the request's table (a hit is whole blocks)."""
    st = view.steps[step]
    kv = st["kv"]
    if "cache_hits" in kv:
        return {b: rid for rid, blocks in kv["cache_hits"].items() for b in blocks}
    bs = kv.get("block_size") or view.header["config"]["block_size"]
    tables = view.block_tables(step)
    return {
        b: rid for rid, n in st.get("num_prefix_hit_tokens", {}).items() if n for b in tables.get(rid, [])[: n // bs]
    }


def kv_tokens(view: TraceView, step: int) -> dict[str, int]:
    """request_id -> slots of its blocks that hold K/V after ``step``'s forward pass: the record's
    ``kv.num_cached_tokens``, else (a trace that does not record it) where each scheduled request's work ended."""
    st = view.steps[step]
    return st["kv"].get("num_cached_tokens") or {
        s["request_id"]: s["num_computed_tokens"] + s["num_tokens"] for s in st["scheduled"]
    }


def set_aside(kv: Mapping[str, Any]) -> int:
    """Free blocks a static batch or TensorRT-LLM sets aside at a step (``kv``: the step's ``kv`` record): its
    reservation (``num_reserved_blocks``, which counts the blocks in use too) beyond the blocks in use, at most the
    free blocks. The block map marks that many free cells *res* and its title counts them."""
    used = kv["num_used_blocks"]
    return min(max(0, kv.get("num_reserved_blocks", 0) - used), kv["num_blocks"] - used)


def block_map_cells(view: TraceView, step: int) -> list[dict]:
    """Every block of the pool at ``step``: owner (or None), and how many of its slots hold K/V."""
    st = view.steps[step]
    kv = st["kv"]
    bs = kv.get("block_size") or view.header["config"]["block_size"]
    cached = kv_tokens(view, step)
    flags = one_step_flags(view, step)
    cells: list[dict] = [
        {"block": b, "owner": None, "fill": 0, "new": False, "releasing": False, "preempted_from": None, "hit": None}
        for b in range(kv["num_blocks"])
    ]
    for rid, table in view.block_tables(step).items():
        n = cached.get(rid, len(table) * bs)
        for i, b in enumerate(table):
            if cells[b]["owner"] is None:  # a shared block is drawn as its first holder's (who computed it, or
                # the earliest of those who found it in the prefix cache), not as the latest to join
                cells[b].update(owner=rid, fill=max(0, min(bs, n - i * bs)), new=b in flags["new"])
    refs = {int(b): n for b, n in kv.get("ref_counts", {}).items()}
    # a static batch reserves a number of blocks, not particular ones: the first free cells stand for that count
    free = [c["block"] for c in cells if c["owner"] is None]
    reserved = set(free[: set_aside(kv)])
    cached_free = set(kv.get("cached_free_blocks", ()))
    for b in range(len(cells)):
        cells[b]["refs"] = refs.get(b, 1 if cells[b]["owner"] else 0)  # prefix caching: a block in N tables
        cells[b]["cached"] = b in cached_free  # free, but keeps a cached prefix until it is reused (evictable)
        cells[b]["reserved"] = b in reserved
        cells[b]["unwritten"] = cells[b]["owner"] is not None and cells[b]["fill"] == 0  # allocated ahead (TGI)
        cells[b]["releasing"] = b in flags["releasing"]
        cells[b]["hit"] = flags["hits"].get(b)  # the request that found it in the prefix cache in this step
        cells[b]["preempted_from"] = flags["preempted"].get(b)  # given back by an eviction (``given_back``)
    return cells
