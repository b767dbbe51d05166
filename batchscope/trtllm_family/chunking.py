"""Context chunking: how many prompt tokens each context computes this iteration when the contexts do not all fit,
after ``MicroBatchScheduler::setCtxRequestsChunkSize`` (``cpp/tensorrt_llm/batch_manager/microBatchScheduler.cpp``)
and ``PyMicroBatchScheduler._set_ctx_requests_chunk_size`` (``tensorrt_llm/_torch/pyexecutor/scheduler``).

``capacity`` is the token budget left for contexts (``None``: unlimited), ``unit`` the chunk unit
(``chunk_unit_size``), ``max_context_length`` a cap on one chunk (``None``: none). Policies:

- ``EQUAL_PROGRESS``: rounds in which every context grows by one unit (never past its remaining prompt); a growth
  that would pass the capacity or ``max_context_length`` is skipped. Rounds repeat until one adds nothing::

      capacity 30, unit 5, two 25-token prompts:  5/5 -> 10/10 -> 15/15  (then 25/25 next iteration)

- ``FIRST_COME_FIRST_SERVED``: in list order each takes min(remaining prompt, capacity left, max context length),
  rounded down to a unit multiple when it was cut::

      capacity 30, unit 5, two 25-token prompts:  25/5  (then 25/25)

- ``FORCE_CHUNK`` (Python port only, as of the vectors' commit): each context takes at most one unit, and a context
  that would pass the capacity gets what is left rounded down to a unit (so later ones may get 0).

Then drafts: a context on its last chunk keeps only the draft tokens that fill the rest of its last unit, within
``max_context_length`` and the capacity.

Reused tokens (``estimated_reusable_tokens``, on a first chunk): the cached prefix costs nothing, so a chunk of
``c`` tokens counted from position 0 costs ``max(0, c - reusable)``. Units: tokens.
"""

from __future__ import annotations

from batchscope.trtllm_family.request import SeqState

EQUAL_PROGRESS = "EQUAL_PROGRESS"
FIRST_COME_FIRST_SERVED = "FIRST_COME_FIRST_SERVED"
FORCE_CHUNK = "FORCE_CHUNK"
CHUNKING_POLICIES = (EQUAL_PROGRESS, FIRST_COME_FIRST_SERVED, FORCE_CHUNK)


def reusable_tokens(seq: SeqState) -> int:
    """The prompt tokens of a first chunk that the cache provides (0 past the first chunk)."""
    return min(seq.estimated_reusable_tokens, seq.context_remaining) if seq.is_first_chunk else 0


def chunk_cost(seq: SeqState, chunk: int) -> int:
    """Tokens a chunk of ``chunk`` prompt tokens puts through the model."""
    return max(0, chunk - reusable_tokens(seq))


def chunk_sizes(
    contexts: list[SeqState], policy: str, unit: int, capacity: int | None, max_context_length: int | None
) -> list[int]:
    """The chunk of every context (in order); 0 means the context does not run this iteration."""
    if unit < 1:
        raise ValueError(f"chunk_unit_size must be >= 1, got {unit}")
    if policy == EQUAL_PROGRESS:
        return _equal_progress(contexts, unit, capacity, max_context_length)
    if policy == FIRST_COME_FIRST_SERVED:
        return _first_come_first_served(contexts, unit, capacity, max_context_length)
    if policy == FORCE_CHUNK:
        return _force_chunk(contexts, unit, capacity, max_context_length)
    raise ValueError(f"chunking policy must be one of {CHUNKING_POLICIES}, got {policy!r}")


def _equal_progress(contexts: list[SeqState], unit: int, capacity: int | None, max_len: int | None) -> list[int]:
    sizes = [0] * len(contexts)
    spent, grown = 0, True
    while grown and (capacity is None or spent < capacity):
        grown = False
        for i, seq in enumerate(contexts):
            size = min(sizes[i] + unit, seq.context_remaining)
            extra = chunk_cost(seq, size) - chunk_cost(seq, sizes[i])
            if size == sizes[i] or (capacity is not None and spent + extra > capacity):
                continue
            if max_len is not None and size > max_len:
                continue
            spent += extra
            grown = True
            sizes[i] = size
    return sizes


def _first_come_first_served(
    contexts: list[SeqState], unit: int, capacity: int | None, max_len: int | None
) -> list[int]:
    sizes = []
    left = capacity
    for seq in contexts:
        whole = seq.context_remaining
        size = whole
        if left is not None and left < chunk_cost(seq, whole):
            size = left
        if max_len is not None and chunk_cost(seq, size) > max_len:
            size = min(max_len, whole)
        if size < whole:
            size = size // unit * unit
        sizes.append(size)
        if left is not None:
            left -= chunk_cost(seq, size)
    return sizes


def _force_chunk(contexts: list[SeqState], unit: int, capacity: int | None, max_len: int | None) -> list[int]:
    sizes, spent = [], 0
    for seq in contexts:
        size = min(unit, seq.context_remaining)
        if max_len is not None and size > max_len:
            size = max_len // unit * unit
        if capacity is not None and spent + size > capacity:
            size = min(size, max(0, capacity - spent)) // unit * unit
        sizes.append(size)
        spent += size
    return sizes


def fit_draft_tokens(
    contexts: list[SeqState], sizes: list[int], unit: int, capacity: int | None, max_context_length: int | None
) -> list[int]:
    """The draft tokens each context keeps: only a context on its last chunk keeps any, and only those that fill
    the rest of its last chunk unit, within ``max_context_length`` and what the capacity leaves."""
    spent = sum(chunk_cost(seq, size) for seq, size in zip(contexts, sizes))
    kept = []
    for seq, size in zip(contexts, sizes):
        drafts = seq.num_draft_tokens
        if drafts and size > 0 and size >= seq.context_remaining:
            room = (unit - size % unit) % unit
            if max_context_length is not None:
                room = min(room, max_context_length - size)
            drafts = min(drafts, max(0, room))
            if capacity is not None:
                drafts = max(0, min(drafts, capacity - spent))
                spent += drafts
        kept.append(drafts)
    return kept
