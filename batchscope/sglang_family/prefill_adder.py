"""SGLang's admission rule: who joins a prefill (EXTEND) batch, charged by an estimate of the output still to come.

Rules of SGLang 0.5.23, ``PrefillAdder`` in sglang/srt/managers/schedule_policy.py with the ``PrefillBudget`` of
sglang/srt/mem_cache/prefill_budget.py, for one token pool with ``page_size`` 1. Units: tokens.

- The memory an adder may hand out is the free tokens plus the evictable cached ones (``_available_and_evictable``).
- Each running request is charged ``min(max_new_tokens - generated, 4096) * new_token_ratio``: the part of its
  remaining output it is expected to still write (``_get_running_request_total_token_offset``); an ``ignore_eos``
  request at ratio 1.0 (a fixed length gains nothing from the early-EOS estimate).
- A new request is admitted if ``extend + min(max_new_tokens - generated, 4096) + 1 < memory left``
  (``add_one_req``, ``PrefillBudget.check_prefill``); it is then charged ``extend + 1`` now and
  ``min(max_new_tokens, 4096)`` later (0 if its prompt is cut into chunks) (``_update_prefill_budget``, ``reserve``).
- A prompt longer than the chunk tokens left is cut to them: it becomes the one *chunked* request.
- The continuing chunked request goes first and takes ``min(chunk tokens, memory left)`` (``add_chunked_req``).
- A new ``ignore_eos`` request with the prefix cache off is judged by ``add_one_req_ignore_eos`` instead: its
  ``extend + 1`` must be at most the memory left (now and after the estimates), and a simulated run must not run
  out: every request of the step (it, the running ones, those admitted before it) with
  ``max_new_tokens * ratio - generated`` output left (ratio 1.0 for ``ignore_eos``; none left: not counted),
  sorted by that, finishing shortest first and freeing its prompt and output so far; before each finish the free
  tokens must stay above 1 per request still running (``IGNORE_EOS_RESERVE_TOKENS``). The list is made once per
  step, at the first such request; later ones are inserted by SGLang's loop (which puts one longer than all
  before the last).
- The adder stops on ``NO_TOKEN`` (memory left <= 0) or ``OTHER`` (chunk or input tokens used up)
  (``budget_state``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: the most output any estimate counts
CONTINUE, NO_TOKEN, OTHER = "continue", "no_token", "other"  # AddReqResult
IGNORE_EOS_RESERVE_TOKENS = 1  # free tokens per request the simulated run of ``add_one_req_ignore_eos`` keeps


class Budgeted(Protocol):
    """What the adder reads of a request: its budget, its output so far, its known tokens and cached prefix."""

    max_new_tokens: int
    output_token_ids: list[int]
    prefix_len: int
    ignore_eos: bool

    @property
    def num_tokens(self) -> int: ...

    @property
    def num_prompt_tokens(self) -> int: ...


class PrefillAdder:
    """One step's admission budget. ``capacity()``: free + evictable tokens now (locking a prefix changes it)."""

    def __init__(
        self,
        capacity: Callable[[], int],
        running: Sequence[Budgeted],
        new_token_ratio: float,
        chunk_tokens: int,
        input_tokens: int,
        prefix_cache: bool = True,
        mixed_decode_tokens: int = 0,
    ):
        """``prefix_cache`` False: SGLang's tree cache is disabled, so a new ``ignore_eos`` request is judged by
        ``add_one_req_ignore_eos``. ``mixed_decode_tokens``: the running requests' decode tokens that may join the
        batch (``--enable-mixed-chunk``: one each), taken from the chunk and input tokens and the memory first."""
        self.capacity = capacity
        self.ratio, self.prefix_cache = new_token_ratio, prefix_cache
        self.running = list(running)
        self.rem_chunk_tokens = chunk_tokens - mixed_decode_tokens  # chunked_prefill_size, spent by every extend
        self.rem_input_tokens = input_tokens - mixed_decode_tokens  # max_prefill_tokens
        self.total_offset: float = mixed_decode_tokens
        self.total_offset += sum(_remaining_output(r) * _ratio(r, new_token_ratio) for r in running)
        self.current_offset = mixed_decode_tokens
        self.can_run: list[Budgeted] = []
        self.new_chunked: Budgeted | None = None
        self.last_reserved = 0  # output tokens the last admission's estimate charged (0: its prompt is chunked)
        self.last_need: tuple[float, float] = (0, 0.0)  # the last ``add_one``'s need and the memory left it met
        self.last_limit = "sglang_reserved_output"  # the rule ``last_need`` is of (``batchscope.steplog.reasons``)
        self.req_states: list[tuple[float, int]] | None = None  # the simulated run's (output left, tokens held)

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
        if req.ignore_eos and not self.prefix_cache:
            return self._add_ignore_eos(req)
        self.last_limit = "sglang_reserved_output"
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

    def _add_ignore_eos(self, req: Budgeted) -> tuple[str, int]:
        """``add_one_req_ignore_eos`` (prefix cache off): the memory check, the simulated run, then admission."""
        self.last_limit = "sglang_fixed_length_run"
        want = req.num_tokens - req.prefix_len
        left_now = min(self.capacity() - self.current_offset, self.rem_total_tokens)
        self.last_need = (want + 1, left_now)
        if want + 1 > left_now:
            return NO_TOKEN, 0
        if self.req_states is None:
            self.req_states = [s for r in [req, *self.running, *self.can_run] if (s := self._state(r))]
            self.req_states.sort(key=lambda x: x[0])
        elif (state := self._state(req)) is not None:
            i = 0
            for i in range(len(self.req_states)):  # SGLang's insertion: i stays at the last index if none is longer
                if state[0] <= self.req_states[i][0]:
                    break
            self.req_states.insert(i, state)
        free, freed = self.capacity() - self.current_offset - (want + 1), 0
        for i, (left, held) in enumerate(self.req_states):
            rows = len(self.req_states) - i
            if free + freed - left * rows <= IGNORE_EOS_RESERVE_TOKENS * rows:
                self.last_need = (left * rows + IGNORE_EOS_RESERVE_TOKENS * rows, free + freed)
                return NO_TOKEN, 0
            freed += held
        n, max_new = want, min(req.max_new_tokens, CLIP_MAX_NEW_TOKENS)
        if want > self.rem_chunk_tokens:
            if self.rem_chunk_tokens <= 0:
                return OTHER, 0
            n, max_new = self.rem_chunk_tokens, 0
            self.new_chunked = req
        self.can_run.append(req)
        self._reserve(n, max_new)
        return self.budget_state(), n

    def _state(self, r: Budgeted) -> tuple[float, int] | None:
        left = r.max_new_tokens * _ratio(r, self.ratio) - len(r.output_token_ids)
        return (left, r.num_prompt_tokens + len(r.output_token_ids)) if left > 0 else None


def min_pool_tokens(num_prompt_tokens: int, max_new_tokens: int, fixed_length_run: bool = False) -> int:
    """The smallest pool (tokens, free and evictable) that admits a request alone: ``add_one`` needs its extend
    plus its output estimate plus 1 to be below the memory left; ``fixed_length_run`` (an ``ignore_eos`` request,
    prefix cache off): the simulated run needs the pool less its extend + 1 less its whole output (not clipped) to
    stay above 1."""
    if fixed_length_run:
        return num_prompt_tokens + max_new_tokens + 3
    return num_prompt_tokens + min(max_new_tokens, CLIP_MAX_NEW_TOKENS) + 2


def _ratio(req: Budgeted, new_token_ratio: float) -> float:
    return 1.0 if req.ignore_eos else new_token_ratio


def _remaining_output(req: Budgeted) -> int:
    return min(max(req.max_new_tokens - len(req.output_token_ids), 0), CLIP_MAX_NEW_TOKENS)
