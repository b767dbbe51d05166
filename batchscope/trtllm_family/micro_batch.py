"""TensorRT-LLM's micro-batch scheduler: of the requests the capacity stage let through, which run in this forward
and how many tokens each computes, under ``max_batch_size`` requests and ``max_num_tokens`` tokens. Follows
``cpp/tensorrt_llm/batch_manager/microBatchScheduler.cpp`` and ``PyMicroBatchScheduler``
(``tensorrt_llm/_torch/pyexecutor/scheduler``).

The walk goes down the list, skipping requests already in flight (pipeline parallelism keeps several micro-batches
in flight; a request is in at most one), and stops after ``max_batch_size`` requests:

- a generating request costs beam width + draft tokens; if that passes ``max_num_tokens`` the walk stops; one whose
  beam width differs from the first generating request's is passed over;
- a context without chunking costs its remaining prompt + drafts (at least 1 with reuse); the walk stops if it does
  not fit;
- with chunking, a context is first counted whole (capped at ``max_context_length``); after the walk, if the
  contexts do not fit beside the generation tokens, ``chunking.chunk_sizes`` cuts them to the tokens left.

The output lists contexts not on their last chunk first, and sorts each list by LoRA task (no task first), as
``utils::sortRequests`` does. Units: tokens, requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from batchscope.trtllm_family.chunking import FORCE_CHUNK, chunk_cost, chunk_sizes, fit_draft_tokens
from batchscope.trtllm_family.request import SeqState


@dataclass
class MicroBatchConfig:
    """``chunking``: ``(policy, chunk_unit_size)`` or ``None`` (contexts are never cut)."""

    max_batch_size: int
    max_num_tokens: int | None = None
    chunking: tuple[str, int] | None = None
    max_context_length: int | None = None


@dataclass
class MicroBatch:
    """One micro-batch: ``contexts`` and ``generations`` in output order; per context its ``chunk_sizes`` and the
    ``drafts_kept`` (its other drafts are discarded); ``num_tokens``: the tokens it computes; ``stop``: why the walk
    ended early (``{"reason", "request_id", ...}``) or ``None``; ``chunked``: the chunk sizing ran."""

    contexts: list[SeqState] = field(default_factory=list)
    generations: list[SeqState] = field(default_factory=list)
    chunk_sizes: dict[str, int] = field(default_factory=dict)
    drafts_kept: dict[str, int] = field(default_factory=dict)
    num_tokens: int = 0
    stop: dict | None = None
    chunked: bool = False


def _lora_key(seq: SeqState) -> tuple[int, int]:
    return (0, 0) if seq.lora_task_id is None else (1, seq.lora_task_id)


def _unchunked_context_cost(seq: SeqState) -> int:
    return max(1, chunk_cost(seq, seq.context_remaining) + seq.num_draft_tokens)


class _Walk:
    """The state of one walk down the list."""

    def __init__(self, config: MicroBatchConfig) -> None:
        self.config = config
        self.batch = MicroBatch()
        self.to_chunk: list[SeqState] = []
        self.chunk_tokens = 0
        self.all_fit = True
        self.beam_width = 0

    def over_budget(self, cost: int) -> bool:
        limit = self.config.max_num_tokens
        return limit is not None and self.batch.num_tokens + cost > limit

    def context(self, seq: SeqState) -> bool:
        """Count a context; ``False`` stops the walk."""
        if self.config.chunking is None:
            cost = _unchunked_context_cost(seq)
            if self.over_budget(cost):
                self.batch.stop = {"reason": "max_num_tokens", "request_id": seq.request_id, "cost": cost}
                return False
            self.batch.contexts.append(seq)
            self.batch.chunk_sizes[seq.request_id] = seq.context_remaining
            self.batch.drafts_kept[seq.request_id] = seq.num_draft_tokens
            self.batch.num_tokens += cost
            return True
        cost = chunk_cost(seq, seq.context_remaining) + seq.num_draft_tokens
        limit = self.config.max_context_length
        if limit is not None and cost > limit:
            cost, self.all_fit = limit, False
        self.to_chunk.append(seq)
        self.chunk_tokens += cost
        return True

    def generation(self, seq: SeqState) -> bool | None:
        """Count a generating request; ``False`` stops the walk, ``None`` passes it over."""
        cost = seq.beam_width + seq.num_draft_tokens
        if self.over_budget(cost):
            self.batch.stop = {"reason": "max_num_tokens", "request_id": seq.request_id, "cost": cost}
            return False
        if self.beam_width == 0:
            self.beam_width = seq.beam_width
        elif seq.beam_width != self.beam_width:
            return None
        self.batch.generations.append(seq)
        self.batch.num_tokens += cost
        return True


def schedule_micro_batch(
    requests: list[SeqState], config: MicroBatchConfig, inflight_ids: frozenset[str] | set[str] = frozenset()
) -> MicroBatch:
    """One micro-batch from ``requests`` (the capacity stage's output, in list order)."""
    walk, count = _Walk(config), 0
    for i, seq in enumerate(requests):
        if seq.request_id in inflight_ids or seq.disagg_init:
            continue
        went_on = walk.context(seq) if seq.is_context else walk.generation(seq)
        if went_on is False:
            break
        if went_on is None:
            continue
        count += 1
        if count >= config.max_batch_size:
            if any(r.request_id not in inflight_ids for r in requests[i + 1 :]):
                walk.batch.stop = {"reason": "max_batch_size", "max_batch_size": config.max_batch_size}
            break
    _finish_contexts(walk)
    return walk.batch


def _finish_contexts(walk: _Walk) -> None:
    """Cut the counted contexts if they do not fit, add those with a chunk, and sort the output."""
    batch, config, contexts = walk.batch, walk.config, walk.to_chunk
    limit = config.max_num_tokens
    capacity = None if limit is None else limit - batch.num_tokens
    if capacity is not None and walk.chunk_tokens > capacity:
        walk.all_fit = False
    if config.chunking is not None and config.chunking[0] == FORCE_CHUNK:
        walk.all_fit = False
    if walk.all_fit or config.chunking is None:
        sizes = [seq.context_remaining for seq in contexts]
        drafts = [seq.num_draft_tokens for seq in contexts]
    else:
        policy, unit = config.chunking
        sizes = chunk_sizes(contexts, policy, unit, capacity, config.max_context_length)
        drafts = fit_draft_tokens(contexts, sizes, unit, capacity, config.max_context_length)
        batch.chunked = True
    for seq, size, kept in zip(contexts, sizes, drafts):
        batch.drafts_kept[seq.request_id] = kept
        if size > 0:
            batch.contexts.append(seq)
            batch.chunk_sizes[seq.request_id] = size
            batch.num_tokens += chunk_cost(seq, size) + (kept if size >= seq.context_remaining else 0)
        elif batch.stop is None:
            batch.stop = {"reason": "max_num_tokens", "request_id": seq.request_id, "chunk": 0}
    if batch.chunked:  # contexts that go on after this chunk come first
        batch.contexts.sort(key=lambda s: (batch.chunk_sizes[s.request_id] >= s.context_remaining, _lora_key(s)))
    else:
        batch.contexts.sort(key=_lora_key)
    batch.generations.sort(key=_lora_key)
