"""TGI v3's router batching loop, one forward pass at a time: the model-free core of the ``tgi`` family.

Follows ``batching_task`` in ``backends/v3/src/backend.rs`` (TGI v3, commit db931fc), with the queue of
``request_queue.py``, the allocators of ``block_allocator.py`` / ``radix.py`` and the shard's bookkeeping of
``shard.py``. Units: tokens, KV blocks, steps (one step = one forward pass).

TGI's loop, unrolled into steps::

    idle server:   schedule(no min, max = max_batch_size, full budgets) -> prefill the new batch
    while anything runs:
        schedule(budgets left by the running batch)
        ├─ new batch, chunking on:  prefill it *concatenated* with the running batch   (call "prefill", mixed)
        │                           then one decode forward, not scheduled             (call "decode")
        ├─ new batch, chunking off: prefill it *alone*, the running requests stall     (call "prefill")
        │                           then one decode forward of everybody, not scheduled (call "decode")
        └─ no new batch:            one decode forward                                 (call "decode")

The scheduling call's arguments (``batch`` is the running batch as the shard reported it):

- ``token_budget = max_batch_total_tokens - batch.max_tokens``; 0 means the queue is not consulted;
- chunking on: ``prefill_token_budget = max_batch_prefill_tokens - batch.current_tokens``, no size limits (so
  ``max_batch_size`` only caps an idle server's first batch);
- chunking off: the full prefill budget, ``max_size = max_batch_size - batch.size``, and
  ``min_size = floor(batch.size * waiting_served_ratio)`` (32-bit float) unless ``waiting_tokens`` (1 after each new
  batch, +1 after each decode) reached ``max_waiting_tokens``.

``schedule()`` returns the step's ``ForwardPlan``; ``update()`` applies the forward's outcome (sampled tokens,
early stops), then releases finished requests' blocks in batch order (with prefix caching their prompts enter the
cache). Nothing is ever preempted: a request holds its whole lifetime's blocks from admission to its end.

The plan's ``decision`` is the scheduling call under the reference's names (``batch``, ``waiting_tokens``,
``min_size``, ``max_size``, ``prefill_token_budget`` before rounding, ``token_budget``, ``queue``, ``admitted``,
``queue_after``, ``head``, and ``allocator_calls`` with prefix caching); ``None`` for the unscheduled decode. The
plan's ``head`` is the decision's, or ``{"request_id", "reason": "no_scheduling_call"}`` when the loop did not
consult the queue this step.

One departure from TGI, where TGI would stall for good: see ``_break_idle_deadlock``. And one the engine asks for
(``cache_written_only``): TGI inserts a released request's whole block-aligned prompt into the prefix cache even when
its K/V was never computed (a batch given back under ``min_size``, reference case t13; a prompt sent back for the
prefill budget; a request aborted mid-prefill), so a later hit reads blocks nobody wrote. The reference cases run
with TGI's behaviour; Batchscope's engine, which computes real tokens, caches only the prompt tokens whose K/V were
computed, so its outputs stay those of ``generate``.
"""

from __future__ import annotations

import math
import struct
from typing import Literal

from batchscope.scheduling.forward_plan import Admission, ForwardPlan
from batchscope.tgi_family.block_allocator import SimpleAllocator, blocks_for
from batchscope.tgi_family.radix import RadixAllocator
from batchscope.tgi_family.request_queue import Entry, NextBatch, RequestQueue
from batchscope.tgi_family.shard import (
    Sequence,
    batch_current_tokens,
    batch_max_tokens,
    size_next_chunks,
)


def _f32(x: float) -> float:
    """``x`` rounded to a 32-bit float (TGI computes the minimum batch size in ``f32``)."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def min_batch_size(batch_size: int, waiting_served_ratio: float) -> int:
    """``floor(batch_size * waiting_served_ratio)`` as TGI computes it, in 32-bit floats."""
    return math.floor(_f32(_f32(batch_size) * _f32(waiting_served_ratio)))


class TgiCore:
    """TGI v3's router scheduling over request ids and token counts (no model)."""

    def __init__(
        self,
        *,
        max_batch_prefill_tokens: int,
        max_batch_total_tokens: int,
        max_batch_size: int | None,
        block_size: int,
        waiting_served_ratio: float,
        max_waiting_tokens: int,
        prefix_caching: bool,
        prefill_chunking: bool,
        cache_written_only: bool = False,
    ) -> None:
        _check_settings(max_batch_prefill_tokens, max_batch_total_tokens, max_batch_size, block_size)
        self.max_batch_prefill_tokens = max_batch_prefill_tokens
        self.max_batch_total_tokens = max_batch_total_tokens
        self.max_batch_size = max_batch_size
        self.block_size = block_size
        self.waiting_served_ratio = waiting_served_ratio
        self.max_waiting_tokens = max_waiting_tokens
        self.prefix_caching = prefix_caching
        self.prefill_chunking = prefill_chunking
        num_blocks = max_batch_total_tokens // block_size
        self.usable_blocks = num_blocks - 1  # block 0 is reserved
        self._allocator = (
            RadixAllocator(num_blocks, block_size) if prefix_caching else SimpleAllocator(num_blocks, block_size)
        )
        self._queue = RequestQueue(
            self._allocator, block_size=block_size, chunking=prefill_chunking, cache_written_only=cache_written_only
        )
        self.cache_written_only = cache_written_only
        self._running: list[Sequence] = []
        self._waiting_tokens = 0
        self._decode_due = False  # the last forward was a prefill inside the loop: a decode follows unscheduled
        self._pending: ForwardPlan | None = None  # scheduled, not yet updated
        self._pending_in_loop = False
        self.last_freed: list[dict] = []  # the last update's releases: request_id, num_blocks (, inserted_into_cache)

    # ------------------------------------------------------------------ state the engine reads

    @property
    def running(self) -> list[str]:
        return [seq.request_id for seq in self._running]

    @property
    def waiting(self) -> list[str]:
        return self._queue.ids()

    @property
    def block_tables(self) -> dict[str, list[int]]:
        return {seq.request_id: list(seq.allocation.blocks) for seq in self._running}

    def has_work(self) -> bool:
        return bool(self._running or self._queue.entries)

    def pool(self) -> dict:
        """The block pool as the reference's ``kv``: free list, cached blocks nobody running pins, the rest used
        (and, with prefix caching, every block the cache tree holds)."""
        free, cached = len(self._allocator.free_blocks), self._allocator.cached_blocks()
        out = {"free_blocks": free, "cached_blocks": cached, "used_blocks": self.usable_blocks - free - cached}
        if isinstance(self._allocator, RadixAllocator):
            out["trie_blocks"] = self._allocator.trie.num_blocks()
        return out

    def cached_free_blocks(self) -> list[int]:
        """Blocks the prefix cache holds that no running request's table uses, least recently used node first (the
        step log's ``cached_free_blocks``; a node a running request pins is not reclaimable yet, but it is not in
        anybody's table either)."""
        if not isinstance(self._allocator, RadixAllocator):
            return []
        held = {b for seq in self._running for b in seq.allocation.blocks}
        trie = self._allocator.trie
        nodes = sorted((n.last_accessed, i) for i, n in enumerate(trie._slots) if n is not None and i != trie.root)
        return [b for _, i in nodes for b in trie.node(i).blocks if b not in held]

    def free_block_ids(self) -> list[int]:
        """The allocator's free list, in order (its tail is handed out first)."""
        return list(self._allocator.free_blocks)

    def cache_block_ids(self) -> list[int]:
        """Every block the prefix cache holds, pinned by a running request or not (none without prefix caching)."""
        return self._allocator.trie.block_ids() if isinstance(self._allocator, RadixAllocator) else []

    # ------------------------------------------------------------------ requests in and out

    def add_request(self, request_id: str, prompt_token_ids: list[int], max_new_tokens: int) -> None:
        """Queue a request (it is considered at the next scheduling call)."""
        if request_id in self.running or request_id in self.waiting:
            raise ValueError(f"request_id {request_id!r} is already queued or running")
        if not prompt_token_ids or max_new_tokens < 1:
            raise ValueError(f"{request_id}: the prompt must be non-empty and max_new_tokens >= 1")
        entry = Entry(request_id, list(prompt_token_ids), max_new_tokens)
        need = blocks_for(entry.lifetime_tokens, self.block_size)
        if need > self.usable_blocks:
            raise ValueError(
                f"{request_id}: prompt + max_new_tokens - 1 = {entry.lifetime_tokens} tokens need {need} blocks; "
                f"the pool has {self.usable_blocks} (max_batch_total_tokens={self.max_batch_total_tokens})"
            )
        if not self.prefill_chunking and len(entry.prompt) > self.max_batch_prefill_tokens:
            raise ValueError(
                f"{request_id}: a {len(entry.prompt)}-token prompt exceeds max_batch_prefill_tokens="
                f"{self.max_batch_prefill_tokens}, and without chunking a prompt is prefilled whole"
            )
        self._queue.append(entry)

    def abort(self, request_id: str) -> str | None:
        """Drop a request between steps: ``"waiting"`` (it held nothing), ``"running"`` (its blocks are released as
        TGI's dropped allocation does: with prefix caching its prompt enters the cache) or ``None``."""
        if self._pending is not None:
            raise RuntimeError("abort() between steps: call update() for the scheduled forward first")
        if self._queue.remove(request_id):
            return "waiting"
        for seq in self._running:
            if seq.request_id == request_id:
                self._running.remove(seq)
                self._release(seq)
                self._decode_due = self._decode_due and bool(self._running)
                return "running"
        return None

    # ------------------------------------------------------------------ one step

    def schedule(self) -> ForwardPlan:
        """The next forward pass, with the router's scheduling call when the loop makes one."""
        if self._pending is not None:
            raise RuntimeError("schedule() twice: call update() with the last plan first")
        if not self.has_work():
            raise RuntimeError("schedule() with nothing running or waiting")
        self._pending_in_loop = bool(self._running)
        if not self._running:
            plan = self._idle_schedule()
        elif self._decode_due:
            plan = self._forward(self._running, decision=None)
        else:
            plan = self._loop_schedule()
        self._pending = plan
        self.last_freed = []
        return plan

    def _idle_schedule(self) -> ForwardPlan:
        """An idle server's first batch: no minimum, ``max_batch_size`` as maximum, the full budgets."""
        decision: dict = {"batch": None, "min_size": None, "max_size": self.max_batch_size}
        new, admitted = self._consult(decision, self.max_batch_prefill_tokens, self.max_batch_total_tokens)
        if not new and isinstance(self._allocator, RadixAllocator):
            decision = self._break_idle_deadlock(decision)
            new, admitted = self._consult(decision, self.max_batch_prefill_tokens, self.max_batch_total_tokens)
        if not new:
            raise RuntimeError(f"an idle server admitted nothing: {decision['head']}")
        return self._forward(new, decision=decision, admitted=admitted)

    def _break_idle_deadlock(self, failed: dict) -> dict:
        """**Not TGI**: an idle server whose head request cannot be allocated, although every request fits the pool
        alone, is stuck only because the request's own partial prefix match pins a cached node whose unmatched tail
        it would need. TGI waits forever there; the core drops the prefix cache and asks again. The new call's record
        keeps the failed one's head and allocator calls, and says how many blocks were dropped."""
        assert isinstance(self._allocator, RadixAllocator)
        cleared = self._allocator.clear_cache()
        calls = [*failed["allocator_calls"], {"call": "clear_cache", "reclaimed_cached_blocks": sorted(cleared)}]
        return {
            "batch": None,
            "min_size": None,
            "max_size": self.max_batch_size,
            "cache_cleared": {"after": failed["head"], "num_blocks": len(cleared), "allocator_calls": calls},
        }

    def _loop_schedule(self) -> ForwardPlan:
        """The scheduling call of one loop iteration, and the forward it leads to."""
        old = list(self._running)
        size, max_tokens = len(old), batch_max_tokens(old, self.block_size)
        current = batch_current_tokens(old)
        decision: dict = {"batch": {"size": size, "max_tokens": max_tokens, "current_tokens": current}}
        if self.prefill_chunking:
            decision.update(waiting_tokens=None, min_size=None, max_size=None)
            prefill_budget = max(0, self.max_batch_prefill_tokens - current)
        else:
            waited = self._waiting_tokens >= self.max_waiting_tokens
            min_size = None if waited else min_batch_size(size, self.waiting_served_ratio)
            max_size = None if self.max_batch_size is None else max(0, self.max_batch_size - size)
            decision.update(waiting_tokens=self._waiting_tokens, min_size=min_size, max_size=max_size)
            prefill_budget = self.max_batch_prefill_tokens
        new, admitted = self._consult(decision, prefill_budget, max(0, self.max_batch_total_tokens - max_tokens))
        if not new:
            return self._forward(old, decision=decision)
        if self.prefill_chunking:
            return self._forward(old + new, decision=decision, admitted=admitted)
        return self._forward(new, decision=decision, admitted=admitted, stalled=[s.request_id for s in old])

    def _consult(
        self, decision: dict, prefill_budget: int, token_budget: int
    ) -> tuple[list[Sequence], list[Admission]]:
        """Call the batch builder, record the call in ``decision``, and start the admitted requests."""
        decision.update(prefill_token_budget=prefill_budget, token_budget=token_budget, queue=self.waiting)
        nb = self._queue.next_batch(decision["min_size"], decision["max_size"], prefill_budget, token_budget)
        new, admitted = self._start(nb)
        decision["admitted"] = [_admitted_record(seq, a) for seq, a in zip(new, admitted)]
        decision.update(queue_after=self.waiting, head=nb.head)
        if self.prefix_caching:
            decision["allocator_calls"] = nb.allocator_calls
        return new, admitted

    def _start(self, nb: NextBatch) -> tuple[list[Sequence], list[Admission]]:
        """Admitted requests join the running batch (after it, in admission order)."""
        new, admitted = [], []
        for a in nb.admitted:
            chunk = a.chunk_len if a.chunk_len is not None else len(a.entry.prompt) - a.cache_len
            seq = Sequence(a.entry.request_id, a.entry.prompt, a.entry.max_new_tokens, a.allocation, a.cache_len, chunk)
            blocks = list(a.allocation.blocks)
            reserved = len(blocks) - blocks_for(len(a.entry.prompt), self.block_size)
            admitted.append(Admission(seq.request_id, a.cache_len, len(blocks), blocks, a.chunk_len, reserved))
            new.append(seq)
        self._running += new
        return new, admitted

    def _forward(
        self,
        batch: list[Sequence],
        *,
        decision: dict | None,
        admitted: list[Admission] | None = None,
        stalled: list[str] | None = None,
    ) -> ForwardPlan:
        phases = {seq.prefilling for seq in batch}
        kind: Literal["prefill", "decode", "mixed"] = (
            "mixed" if len(phases) > 1 else "prefill" if phases == {True} else "decode"
        )
        if decision is not None:
            head = decision["head"]
        else:
            head = {"request_id": self.waiting[0], "reason": "no_scheduling_call"} if self.waiting else None
        return ForwardPlan(
            kind=kind,
            work=[seq.work() for seq in batch],
            admitted=admitted or [],
            stalled=stalled or [],
            head=head,
            decision=decision,
        )

    def update(
        self, plan: ForwardPlan, sampled: dict[str, int], stopped: set[str] | frozenset[str] = frozenset()
    ) -> list[str]:
        """Apply the forward of ``plan``: advance every request, append the sampled tokens, finish the requests that
        reached ``max_new_tokens`` or sampled an end of sequence (``stopped``), size the next chunks, release the
        finished requests' blocks. Returns the finished ids in batch order."""
        if plan is not self._pending:
            raise ValueError("update() takes the plan of the last schedule()")
        self._pending = None
        by_id = {seq.request_id: seq for seq in self._running}
        batch = [by_id[w.request_id] for w in plan.work]
        samplers = {w.request_id for w in plan.work if w.samples}
        if not set(stopped) <= samplers:
            raise ValueError(f"stopped {sorted(set(stopped) - samplers)} sampled nothing in this forward")
        for work, seq in zip(plan.work, batch):
            if work.samples and work.request_id not in sampled:
                raise KeyError(f"no sampled token for {work.request_id}")
            seq.advance(work, sampled.get(work.request_id))
        if self.prefill_chunking:
            size_next_chunks(batch, self.max_batch_prefill_tokens)
        finished = [seq for seq in batch if seq.done or seq.request_id in stopped]
        for seq in finished:
            self._running.remove(seq)
            self._release(seq)
        self._end_iteration(prefill_call=bool(plan.admitted))
        return [seq.request_id for seq in finished]

    def _end_iteration(self, *, prefill_call: bool) -> None:
        """The loop's counters after a forward: a prefill inside the loop is followed by an unscheduled decode."""
        if prefill_call:
            self._waiting_tokens = 1
            self._decode_due = self._pending_in_loop
        else:
            self._waiting_tokens += 1
            self._decode_due = False
        if not self._running:
            self._decode_due = False

    def _release(self, seq: Sequence) -> None:
        if self.cache_written_only:  # a request aborted mid-prefill caches only the K/V it computed
            seq.allocation.written = min(seq.num_computed, len(seq.prompt))
        inserted = self._allocator.free(seq.allocation)
        record: dict = {"request_id": seq.request_id, "num_blocks": len(seq.allocation.blocks)}
        if self.prefix_caching:
            record["inserted_into_cache"] = len(inserted)
        self.last_freed.append(record)


def _admitted_record(seq: Sequence, admission: Admission) -> dict:
    """An admitted request under the reference's names."""
    return {
        "request_id": seq.request_id,
        "prompt_len": len(seq.prompt),
        "max_new_tokens": seq.max_new_tokens,
        "cache_len": seq.cache_len,
        "chunk_len": admission.chunk_len,
        "num_blocks": admission.num_blocks,
        "blocks": list(admission.blocks),
    }


def _check_settings(prefill: int, total: int, max_batch_size: int | None, block_size: int) -> None:
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if total // block_size < 2:
        raise ValueError(
            f"max_batch_total_tokens={total} holds fewer than 2 blocks of {block_size} (block 0 is reserved)"
        )
    if prefill < 1:
        raise ValueError(f"max_batch_prefill_tokens must be >= 1, got {prefill}")
    if max_batch_size is not None and max_batch_size < 1:
        raise ValueError(f"max_batch_size must be None or >= 1, got {max_batch_size}")
