"""TensorRT-LLM's capacity scheduler: which active requests may run this iteration given the KV cache (and LoRA
pages, and ``max_num_requests``), and which running ones to pause. Follows
``cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp`` and its Python port (``PyCapacityScheduler`` in
``tensorrt_llm/_torch/pyexecutor/scheduler``). It walks the active list in order; three policies:

- ``GUARANTEED_NO_EVICT`` (the default): every generating request is kept and its blocks *to completion* are set
  aside; then the waiting ones (disaggregated-generation first, then contexts) are taken while their blocks to
  completion fit in what is left. The first that does not fit ends the walk (nobody jumps the queue). Nothing is
  ever paused: what starts can finish.
- ``STATIC_BATCH``: the same, but waiting requests are considered only when nothing is generating (a new batch
  starts once the old one has drained).
- ``MAX_UTILIZATION``: a request is taken if its blocks for the *next step only* fit. If not, the last *started*
  request of the list (from this one to an end marker) is paused, its blocks count as free again, the end marker
  moves to it, and the same request is tried again; with nothing started left, the walk stops.

Reuse-aware skip (``beneficialToSkip``): with block reuse, a context on its first chunk whose first not-yet-stored
block is also the first new block of a context taken in this pass (or of one already mid-prompt) waits one
iteration, to reuse that block instead of computing it twice. ``STATIC_BATCH`` never skips.

LoRA: each new task of a request costs ``pages_per_task`` device pages; a request whose task does not fit is passed
over (``MAX_UTILIZATION``: it counts as not fitting). Units: blocks, pages, requests.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from batchscope.trtllm_family.kv_budget import KvBudget
from batchscope.trtllm_family.request import SeqState

GUARANTEED_NO_EVICT = "GUARANTEED_NO_EVICT"
MAX_UTILIZATION = "MAX_UTILIZATION"
STATIC_BATCH = "STATIC_BATCH"
POLICIES = (GUARANTEED_NO_EVICT, MAX_UTILIZATION, STATIC_BATCH)


@dataclass
class PeftLimit:
    """LoRA weights in the PEFT cache: ``pages_per_task`` device pages per distinct task, ``max_pages`` in all."""

    pages_per_task: int
    max_pages: int


@dataclass
class CapacityResult:
    """One capacity pass. ``scheduled`` in list order (disaggregated-generation requests apart, in
    ``disagg_init``); ``paused`` in the order the walk paused them; ``reserved`` (no-evict policies): blocks set
    aside per taken request, to completion; ``needed`` (``MAX_UTILIZATION``): blocks per taken request for its next
    step; ``free_blocks``: allocatable blocks when the pass began; ``why_not``: for each request the pass did not
    take, ``{"reason", ...numbers}``."""

    scheduled: list[SeqState] = field(default_factory=list)
    disagg_init: list[SeqState] = field(default_factory=list)
    paused: list[SeqState] = field(default_factory=list)
    reserved: dict[str, int] = field(default_factory=dict)
    needed: dict[str, int] = field(default_factory=dict)
    free_blocks: int = 0
    why_not: dict[str, dict] = field(default_factory=dict)


class _Lora:
    """The LoRA pages claimed in one pass."""

    def __init__(self, limit: PeftLimit | None) -> None:
        self.limit = limit
        self.tasks: set[int] = set()
        self.used = 0

    def pages(self, seq: SeqState) -> int:
        if self.limit is None or seq.lora_task_id is None or seq.lora_task_id in self.tasks:
            return 0
        return self.limit.pages_per_task

    def fits(self, seq: SeqState) -> bool:
        return self.limit is None or self.used + self.pages(seq) <= self.limit.max_pages

    def claim(self, seq: SeqState) -> None:
        self.used += self.pages(seq)
        if seq.lora_task_id is not None:
            self.tasks.add(seq.lora_task_id)


class _ReuseSkip:
    """The first new blocks being written this iteration, and the skip rule that reads them."""

    def __init__(self, budget: KvBudget, active: list[SeqState], enabled: bool) -> None:
        self.budget = budget
        self.enabled = enabled and budget.reuse_enabled
        self.contributed: set[Hashable] = set()
        if self.enabled:
            for seq in active:
                if seq.is_context and seq.has_kv:  # mid-prompt: its next blocks are being written
                    self._add(seq)

    def _add(self, seq: SeqState) -> None:
        key = self.budget.first_new_block(seq)
        if key is not None:
            self.contributed.add(key)

    def should_skip(self, seq: SeqState) -> bool:
        if not self.enabled or not seq.is_first_chunk:
            return False
        key = self.budget.first_new_block(seq)
        return key is not None and key in self.contributed

    def taken(self, seq: SeqState) -> None:
        if self.enabled and seq.is_first_chunk:
            self._add(seq)


def schedule_capacity(
    active: list[SeqState],
    policy: str,
    max_num_requests: int,
    budget: KvBudget,
    peft: PeftLimit | None = None,
) -> CapacityResult:
    """Run one capacity pass over ``active`` (in list order). Finished requests must not be in the list."""
    budget.start()
    if policy == MAX_UTILIZATION:
        result = _max_utilization(active, max_num_requests, budget, peft)
    elif policy in (GUARANTEED_NO_EVICT, STATIC_BATCH):
        result = _no_evict(active, max_num_requests, budget, peft, static=policy == STATIC_BATCH)
    else:
        raise ValueError(f"capacity policy must be one of {POLICIES}, got {policy!r}")
    result.disagg_init = [s for s in result.scheduled if s.disagg_init]
    result.scheduled = [s for s in result.scheduled if not s.disagg_init]
    return result


def _take(seq: SeqState, budget: KvBudget, skip: _ReuseSkip) -> None:
    """A request is taken: it holds its reused blocks for the rest of the pass, a first chunk learns how many prompt
    tokens the cache gives it (read by the micro-batch stage), and its first new block is being written."""
    if seq.is_first_chunk:
        seq.estimated_reusable_tokens = budget.reusable_tokens(seq)
    skip.taken(seq)
    budget.take(seq)


def _not_reached(result: CapacityResult, rest: list[SeqState], why: dict) -> None:
    for seq in rest:
        result.why_not.setdefault(seq.request_id, why)


def _no_evict(
    active: list[SeqState], max_num_requests: int, budget: KvBudget, peft: PeftLimit | None, static: bool
) -> CapacityResult:
    result = CapacityResult(free_blocks=budget.free_blocks())
    available, lora = result.free_blocks, _Lora(peft)
    pending: list[SeqState] = []
    for i, seq in enumerate(active):
        if len(result.scheduled) >= max_num_requests:
            _not_reached(result, active[i:], {"reason": "max_num_requests", "max_num_requests": max_num_requests})
            break
        if seq.is_generating:
            result.scheduled.append(seq)
            result.reserved[seq.request_id] = need = budget.blocks_to_completion(seq)
            available -= need
            lora.claim(seq)
        else:
            pending.append(seq)
    pending.sort(key=lambda s: not s.disagg_init)  # stable: disaggregated-generation requests first
    if static and result.scheduled:
        _not_reached(result, pending, {"reason": "static_batch_running", "num_running": len(result.scheduled)})
        return result
    skip = _ReuseSkip(budget, active, enabled=not static)
    for i, seq in enumerate(pending):
        if skip.should_skip(seq):
            result.why_not[seq.request_id] = {"reason": "reuse_wait"}
            continue
        if len(result.scheduled) >= max_num_requests:
            _not_reached(result, pending[i:], {"reason": "max_num_requests", "max_num_requests": max_num_requests})
            break
        need = budget.blocks_to_completion(seq)
        if need > available:
            why = {"reason": "kv_blocks_to_completion", "needed": need, "available": available}
            result.why_not[seq.request_id] = why
            _not_reached(result, pending[i + 1 :], {**why, "behind": seq.request_id})
            break
        if not lora.fits(seq):
            result.why_not[seq.request_id] = {"reason": "lora_pages", "needed": lora.pages(seq)}
            continue
        lora.claim(seq)
        _take(seq, budget, skip)
        result.scheduled.append(seq)
        result.reserved[seq.request_id] = need
        available -= need
    return result


def _try_take(
    seq: SeqState, result: CapacityResult, max_num_requests: int, budget: KvBudget, lora: _Lora
) -> dict | None:
    """MAX_UTILIZATION's attempt on one request: ``None`` when taken, else why not."""
    if len(result.scheduled) >= max_num_requests:
        return {"reason": "max_num_requests", "max_num_requests": max_num_requests}
    need = budget.blocks_one_step(seq)
    available = budget.free_blocks() - sum(result.needed.values())
    if need > available:
        return {"reason": "kv_blocks_next_step", "needed": need, "available": available}
    if not lora.fits(seq):
        return {"reason": "lora_pages", "needed": lora.pages(seq)}
    lora.claim(seq)
    result.scheduled.append(seq)
    result.needed[seq.request_id] = need
    return None


def _max_utilization(
    active: list[SeqState], max_num_requests: int, budget: KvBudget, peft: PeftLimit | None
) -> CapacityResult:
    result = CapacityResult(free_blocks=budget.free_blocks())
    lora, skip = _Lora(peft), _ReuseSkip(budget, active, enabled=True)
    end, i = len(active), 0
    while i < end:
        seq = active[i]
        if skip.should_skip(seq):
            result.why_not[seq.request_id] = {"reason": "reuse_wait"}
            i += 1
            continue
        why = _try_take(seq, result, max_num_requests, budget, lora)
        if why is None:
            _take(seq, budget, skip)
            i += 1
            continue
        victim = next((j for j in range(end - 1, i - 1, -1) if active[j].is_started), None)
        if victim is None:
            result.why_not[seq.request_id] = why
            _not_reached(result, active[i + 1 : end], {**why, "behind": seq.request_id})
            break
        result.paused.append(active[victim])
        budget.pause(active[victim])
        result.why_not[active[victim].request_id] = {"reason": "paused"}
        end = victim
    return result
