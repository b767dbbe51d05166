"""SGLang's admission rule: who joins a prefill (EXTEND) batch, charged by an estimate of the output still to come.

Rules of SGLang 0.5.23, ``PrefillAdder`` in sglang/srt/managers/schedule_policy.py with the ``PrefillBudget`` of
sglang/srt/mem_cache/prefill_budget.py, for one token pool with ``page_size`` 1. Units: tokens.

- The memory an adder may hand out is the free tokens plus the evictable cached ones (``_available_and_evictable``).
- Each running request is charged ``min(max_new_tokens - generated, 4096) * new_token_ratio``: the part of its
  remaining output it is expected to still write (``_get_running_request_total_token_offset``).
- A new request is admitted if ``extend + min(max_new_tokens - generated, 4096) + 1 < memory left``
  (``add_one_req``, ``PrefillBudget.check_prefill``); it is then charged ``extend + 1`` now and
  ``min(max_new_tokens, 4096)`` later (0 if its prompt is cut into chunks) (``_update_prefill_budget``, ``reserve``).
- A prompt longer than the chunk tokens left is cut to them: it becomes the one *chunked* request.
- The continuing chunked request goes first and takes ``min(chunk tokens, memory left)`` (``add_chunked_req``).
- The adder stops on ``NO_TOKEN`` (memory left <= 0) or ``OTHER`` (chunk or input tokens used up)
  (``budget_state``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: the most output any estimate counts
CONTINUE, NO_TOKEN, OTHER = "continue", "no_token", "other"  # AddReqResult


class Budgeted(Protocol):
    """What the adder reads of a request: its budget, its output so far, its known tokens and cached prefix."""

    max_new_tokens: int
    output_token_ids: list[int]
    prefix_len: int

    @property
    def num_tokens(self) -> int: ...


class PrefillAdder:
    """One step's admission budget. ``capacity()``: free + evictable tokens now (locking a prefix changes it)."""

    def __init__(
        self,
        capacity: Callable[[], int],
        running: Sequence[Budgeted],
        new_token_ratio: float,
        chunk_tokens: int,
        input_tokens: int,
    ):
        self.capacity = capacity
        self.rem_chunk_tokens = chunk_tokens  # chunked_prefill_size, spent by every extend of the step
        self.rem_input_tokens = input_tokens  # max_prefill_tokens
        self.total_offset: float = sum(_remaining_output(r) * new_token_ratio for r in running)
        self.current_offset = 0
        self.can_run: list[Budgeted] = []
        self.new_chunked: Budgeted | None = None
        self.last_reserved = 0  # output tokens the last admission's estimate charged (0: its prompt is chunked)
        self.last_need: tuple[int, float] = (0, 0.0)  # the last ``add_one``'s need and the memory left it met

    @property
    def rem_total_tokens(self) -> float:
        return self.capacity() - self.total_offset

    def budget_state(self) -> str:
        """``NO_TOKEN`` when memory is spent, ``OTHER`` when the step's prefill tokens are, else ``CONTINUE``."""
        if not (self.rem_total_tokens > 0 and self.capacity() - self.current_offset > 0):
            return NO_TOKEN
        if self.rem_input_tokens <= 0 or self.rem_chunk_tokens <= 0:
            return OTHER
        return CONTINUE

    def _reserve(self, extend: int, max_new: int) -> None:
        self.last_reserved = max_new
        self.total_offset += extend + 1 + max_new
        self.current_offset += extend + 1
        self.rem_input_tokens -= extend
        self.rem_chunk_tokens -= extend

    def add_chunked(self, req: Budgeted) -> tuple[int, bool]:
        """The continuing chunked request's next chunk: (its tokens, still cut short)."""
        left = min(self.rem_chunk_tokens, int(self.rem_total_tokens))
        limit = left if left > 0 else self.rem_chunk_tokens
        want = req.num_tokens - req.prefix_len
        n, truncated = min(want, limit), want > limit
        self.can_run.append(req)
        self._reserve(n, 0 if truncated else min(req.max_new_tokens, CLIP_MAX_NEW_TOKENS))
        return n, truncated

    def add_one(self, req: Budgeted, lock: Callable[[], None], unlock: Callable[[], None]) -> tuple[str, int]:
        """Try to admit a waiting request (its prefix match already in ``req.prefix_len``): (result, tokens it
        computes; 0 if not admitted). Its matched prefix is locked while it is judged (so it does not count as
        evictable) and stays locked if it is admitted. The result is ``budget_state()`` after admitting it."""
        want = req.num_tokens - req.prefix_len
        lock()
        n, max_new = want, min(req.max_new_tokens, CLIP_MAX_NEW_TOKENS)
        if want > self.rem_chunk_tokens:
            n, max_new = self.rem_chunk_tokens, 0
        self.last_need = (want + _remaining_output(req) + 1, self.rem_total_tokens)
        fits = self.last_need[0] < self.last_need[1]
        if not fits or n <= 0:
            unlock()
            return (OTHER if fits else NO_TOKEN), 0
        if n < want:
            self.new_chunked = req
        self.can_run.append(req)
        self._reserve(n, max_new)
        return self.budget_state(), n


def min_pool_tokens(num_prompt_tokens: int, max_new_tokens: int) -> int:
    """The smallest pool (tokens, free and evictable) that admits a request alone: ``add_one`` needs its extend
    plus its output estimate plus 1 to be below the memory left."""
    return num_prompt_tokens + min(max_new_tokens, CLIP_MAX_NEW_TOKENS) + 2


def _remaining_output(req: Budgeted) -> int:
    return min(max(req.max_new_tokens - len(req.output_token_ids), 0), CLIP_MAX_NEW_TOKENS)
