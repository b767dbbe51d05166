"""What SGLang does with a request as it arrives, before it joins the waiting queue: its output budget clipped to
the pool, a prompt too long for the pool refused.

Rules of SGLang 0.5.23, ``Scheduler.handle_generate_request`` (sglang/srt/managers/scheduler.py), page_size 1, one
rank. Units: tokens. The pool of ``pool_tokens`` K/V slots and the model's context (``context_len``) give two limits,
computed once when the server starts (``TpModelWorker.get_worker_info``, sglang/srt/managers/tp_worker.py):

    max_req_len       = min(context_len - 1, pool_tokens - 1)     the most tokens one request may hold
    max_req_input_len = max_req_len - 5                           a prompt must be shorter than this

1. **Clip** (``init_req_max_new_tokens``, scheduler.py:2693-2740): ``max_new_tokens`` (None: 2**30) becomes
   ``max(0, min(max_new_tokens, max_req_len - prompt - 1))``, then at most what an empty pool holds past the prompt
   (``max_new_tokens_for_memory``, mem_cache/allocator/base.py:88-105): ``pool_tokens - prompt - 2``. With the pool
   the smaller limit the two bounds are the same number, so a request whose prompt + max_new_tokens reaches the pool
   is cut by 2 or more, silently, and always fits the pool alone afterwards.
2. **Refuse** (``validate_input_length``, managers/utils.py:259-289, after the clip): a prompt of
   ``max_req_input_len`` tokens or more is refused with "Input length (N tokens) exceeds the maximum allowed length
   (M tokens). ...". SGLang does not drop it there: ``Req.set_finish_with_abort`` (schedule_batch.py:2221-2238)
   swaps its prompt for one token (id 0, "to skip the long prefill") and marks it to finish with an abort; it joins
   the waiting queue like any request, is admitted with that one-token prefill (its clipped max_new_tokens
   charged as usual), and ends with the abort when that prefill samples (``Req.update_finish_state``).

Before either, SGLang's tokenizer manager refuses (an HTTP 400, the request never reaches the scheduler) a prompt
of ``context_len`` tokens or more, or prompt + max_new_tokens above ``context_len``
(``TokenizerManager._validate_one_request``): Batchscope's ``batchscope.engine.validation`` does the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

UNSET_MAX_NEW_TOKENS = 1 << 30  # init_req_max_new_tokens: max_new_tokens None stands for this
STAND_IN_PROMPT = (0,)  # set_finish_with_abort: the one token a refused request's prefill computes
INPUT_MARGIN = 5  # max_req_input_len = max_req_len - 5


@dataclass(frozen=True)
class RequestLimits:
    """SGLang's two per-request limits for a pool of ``pool_tokens`` and a context of ``context_len`` tokens
    (None: unbounded); ``bound`` names the one that sets them (``pool`` or ``context``)."""

    pool_tokens: int
    context_len: int | None = None

    @property
    def max_req_len(self) -> int:
        pool = self.pool_tokens - 1
        return pool if self.context_len is None else min(self.context_len - 1, pool)

    @property
    def max_req_input_len(self) -> int:
        return self.max_req_len - INPUT_MARGIN

    @property
    def bound(self) -> Literal["pool", "context"]:
        return "context" if self.context_len is not None and self.context_len < self.pool_tokens else "pool"


@dataclass(frozen=True)
class Handled:
    """What SGLang's request handling made of one request: the ``max_new_tokens`` it runs with, and for a refused
    prompt SGLang's message (``error``; it then runs ``STAND_IN_PROMPT`` and ends with an abort)."""

    max_new_tokens: int
    error: str | None = None


def clip_max_new_tokens(limits: RequestLimits, num_prompt_tokens: int, max_new_tokens: int | None) -> int:
    """Rule 1: the output budget SGLang grants a prompt of ``num_prompt_tokens`` (``max_new_tokens`` None: unset)."""
    asked = UNSET_MAX_NEW_TOKENS if max_new_tokens is None else max_new_tokens
    granted = max(0, min(asked, limits.max_req_len - num_prompt_tokens - 1))
    return max(0, min(granted, limits.pool_tokens - num_prompt_tokens - 2))


def input_length_error(limits: RequestLimits, num_prompt_tokens: int) -> str | None:
    """Rule 2: SGLang's message for a prompt it refuses (None: it passes)."""
    if num_prompt_tokens < limits.max_req_input_len:
        return None
    return (
        f"Input length ({num_prompt_tokens} tokens) exceeds the maximum allowed length "
        f"({limits.max_req_input_len} tokens). Use a shorter input or enable --allow-auto-truncate."
    )


def handle(limits: RequestLimits, num_prompt_tokens: int, max_new_tokens: int | None) -> Handled:
    """Rules 1 and 2 in SGLang's order (the clip first, on the prompt as sent)."""
    granted = clip_max_new_tokens(limits, num_prompt_tokens, max_new_tokens)
    return Handled(granted, input_length_error(limits, num_prompt_tokens))
