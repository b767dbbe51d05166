"""The sentence of a step whose allocations evicted cached entries: SGLang's radix cache frees the slots of unlocked
leaves when the pool runs short; vLLM's free queue hands out a cached free block for new tokens, dropping its
prefix from the prefix cache. Read from the step's ``kv.evicted`` (``batchscope.steplog.records.KVExtras``), in the
pool's unit; the order is ``batchscope.steplog.reasons.eviction_order``:

    "To make room, 63 cached token slots were evicted from the radix cache (whole unlocked leaves, least recently
    used first)."

SGLang frees a leaf whole, even past the tokens it asked for (``batchscope/sglang_family/radix_cache.py``, as its
``RadixCache.evict``), so its count can exceed what the step allocates; ``eviction_order`` says so.
"""

from __future__ import annotations

from batchscope.explain.words import plural
from batchscope.steplog.reasons import cache_name, eviction_order, pool_unit
from batchscope.steplog.view import TraceView


def eviction(view: TraceView, step: int) -> list[str]:
    """One sentence if ``step`` evicted cached blocks (token slots), else none."""
    n = len(view.steps[step]["kv"].get("evicted", ()))
    if not n:
        return []
    was = "was" if n == 1 else "were"
    return [
        f"To make room, {plural(n, 'cached ' + pool_unit(view.header))} {was} evicted from the "
        f"{cache_name(view.header)} ({eviction_order(view.header)})."
    ]
