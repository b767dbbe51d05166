"""A logical clock for SGLang's radix cache, so that its eviction order is the same on every run (standard library
and SGLang only).

SGLang 0.5.23's ``RadixCache`` (sglang/srt/mem_cache/radix_cache.py) stamps tree nodes with ``time.monotonic()``:
a new ``TreeNode`` (its ``last_access_time`` and ``creation_time``), and once per ``_match_prefix_helper`` and
``_insert_helper`` call, stamped on every node the walk enters. ``evict`` drops the unlocked leaf with the oldest
stamp first (``LRUStrategy``). On a real clock two stamps taken microseconds apart may compare equal (the heap then
orders them by where they sit in it, which follows their addresses) or not, so a model-free run that evicts is not
reproducible, and it could not be compared with Batchscope's tree step by step.

``use_logical_clock`` gives that module a ``time`` of its own whose ``monotonic()`` returns 1, 2, 3, ... one more
on every call; every other attribute is the real ``time`` module's (``evict`` times itself with
``time.perf_counter`` for metrics). The module's global name ``time`` is rebound; no line of SGLang's code changes.
The order of stamps is the order of the calls, which is what a real clock gives when no two reads tie: stamps only
grow, and each read is later than the one before. Batchscope's ``batchscope.sglang_family.radix_cache`` keeps the same
order with a counter bumped where SGLang reads its clock.
"""

from __future__ import annotations

import time as _time
from typing import Any


class LogicalTime:
    """Stands in for the ``time`` module inside SGLang's radix cache: ``monotonic()`` counts its calls."""

    def __init__(self) -> None:
        self.reads = 0

    def monotonic(self) -> float:
        """Seconds on the logical clock: the number of reads so far, this one included."""
        self.reads += 1
        return float(self.reads)

    def __getattr__(self, name: str) -> Any:
        return getattr(_time, name)


def use_logical_clock() -> LogicalTime:
    """Give SGLang's radix-cache module a fresh logical clock (call before building the scheduler's tree)."""
    from sglang.srt.mem_cache import radix_cache

    clock = LogicalTime()
    radix_cache.time = clock  # type: ignore[assignment]
    return clock
