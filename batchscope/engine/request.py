"""A request and its sampling settings: the unit the scheduler moves between queues.

Progress is one number, as in vLLM V1: ``num_computed_tokens`` counts the tokens whose K/V are already in the
paged cache. Prefill and decode are then the same rule, "compute the tokens you have not computed yet":

    all_token_ids:  | prompt ................ | output ...... |
                    |<-- num_computed_tokens -->|<- new ->|
                                               (one step's work)

A fresh request has ``num_computed_tokens = 0`` and many new tokens (prefill, possibly split into chunks);
a decoding request has exactly one new token (the last sampled one). A preempted request drops its K/V,
goes back to ``num_computed_tokens = 0`` and later computes prompt *and* output tokens in one prefill. Of those,
the ones found in the prefix cache are not computed, the ones below ``num_kv_high`` (the most tokens it ever held
K/V for) are *recomputed*, and the rest (a prompt cut short by the preemption, the last sampled token) are computed
for the first time:

    after a preemption:  | prefix-cache hit | recomputed ... | new (never had K/V) |
                         0                 hit            num_kv_high          num_tokens
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class RequestStatus(str, enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"  # back in the waiting queue after losing its KV blocks
    FINISHED = "finished"


class FinishReason(str, enum.Enum):
    STOP = "stop"  # sampled an EOS / stop token
    LENGTH = "length"  # reached max_tokens
    ABORT = "abort"  # finished from outside the step loop (``Scheduler.abort``: a workload's abort_step, a Cancel)


class FieldError(ValueError):
    """A field out of its range; ``field``, ``value`` and ``allowed`` say which, what, and what would do."""

    def __init__(self, message: str, field: str, value: object, allowed: str):
        super().__init__(message)
        self.field, self.value, self.allowed = field, value, allowed


I32_MAX = 2**31 - 1  # token ids and token or step counts: a tokenizer's u32 and an int32 tensor both hold them
INT64 = (-(2**63), 2**63 - 1)  # vLLM's priority and seed are 64-bit signed integers
# Every integer field of a request (a workload line): its range. ``prompt_token_ids``: each id (the model's
# vocabulary narrows it once the model is known). Checked before a value reaches a tokenizer, a tensor or the player.
INT_RANGES: dict[str, tuple[int, int]] = {
    "prompt_token_ids": (0, I32_MAX),
    "max_tokens": (1, I32_MAX),
    "top_k": (0, I32_MAX),
    "seed": (0, INT64[1]),
    "arrival_step": (0, I32_MAX),
    "abort_step": (0, I32_MAX),
    "priority": INT64,
}
_POWERS = {I32_MAX: "2**31 - 1", INT64[1]: "2**63 - 1", INT64[0]: "-2**63"}


def range_text(lo: int, hi: int) -> str:
    """``[lo, hi]`` as the messages write it: ``[0, 2**31 - 1]``."""
    return f"[{_POWERS.get(lo, lo)}, {_POWERS.get(hi, hi)}]"


def is_int(value: object) -> bool:
    """An integer, not a boolean (JSON's ``true`` is not 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)  # NaN then fails every range


def int_in_range(value: object, name: str) -> bool:
    """``value`` is an integer within ``INT_RANGES[name]``."""
    lo, hi = INT_RANGES[name]
    return is_int(value) and lo <= value <= hi  # type: ignore[operator]


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling settings.

    ``temperature == 0`` is greedy (argmax); otherwise logits are divided by ``temperature``, filtered by
    ``top_k`` (0 = off) and ``top_p`` (nucleus; the most likely token is always kept, so ``top_p=0`` is greedy, as
    in transformers' ``TopPLogitsWarper``), and a token is drawn with a generator seeded by ``seed``.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    max_tokens: int = 16
    ignore_eos: bool = False

    def validate(self, where: str) -> None:
        """Raise ``FieldError`` naming the field and its allowed range (a wrong type is out of range too)."""
        checks = (
            ("temperature", _is_number(self.temperature) and 0.0 <= self.temperature <= 10.0, "[0, 10]"),
            ("top_p", _is_number(self.top_p) and 0.0 <= self.top_p <= 1.0, "[0, 1]"),
            ("top_k", int_in_range(self.top_k, "top_k"), range_text(*INT_RANGES["top_k"]) + " (0 turns top-k off)"),
            ("max_tokens", int_in_range(self.max_tokens, "max_tokens"), range_text(*INT_RANGES["max_tokens"])),
            ("seed", self.seed is None or int_in_range(self.seed, "seed"), range_text(*INT_RANGES["seed"])),
        )
        for name, ok, allowed in checks:
            if not ok:
                value = getattr(self, name)
                raise FieldError(f"{where}: {name}={value!r} is out of range {allowed}", name, value, allowed)


@dataclass
class Request:
    """One generation request. Times are seconds from the start of the run."""

    request_id: str
    prompt_token_ids: list[int]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    prompt: str = ""  # display text (the rendered chat template for chat requests)
    arrival_time: float = 0.0
    arrival_step: int | None = None  # if set, the request arrives before this step instead of by the clock
    priority: int = 0  # scheduling_policy "priority": lower runs first (vLLM's ``priority``); ignored by FCFS
    abort_step: int | None = None  # if set, aborted before this step is scheduled (or on arrival, if later)

    arrival_seq: int = 0  # position in arrival order, set by the scheduler (the priority policy's tie-break)

    status: RequestStatus = RequestStatus.WAITING
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    finish_reason: FinishReason | None = None
    num_preemptions: int = 0
    num_kv_high: int = 0  # most tokens it has held K/V for (its computed tokens when it was last preempted)
    num_dropped_tokens: int = 0  # tokens of K/V its preemptions dropped
    num_recomputed_tokens: int = 0  # tokens computed again after a preemption (dropped and not found in the cache)
    # n-gram drafts for its next decode step (batchscope.engine.spec_decode)
    spec_token_ids: list[int] = field(default_factory=list)
    is_prefill_chunk: bool = False  # its last scheduled chunk stopped short of its known tokens (vLLM's flag)
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    finish_time: float | None = None

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_new_tokens(self) -> int:
        """Tokens not yet in the KV cache (the whole prompt for a fresh request, 1 when decoding)."""
        return self.num_tokens - self.num_computed_tokens

    @property
    def max_kv_tokens(self) -> int:
        """Most tokens this request ever holds in the KV cache: the last sampled token is never fed back."""
        return self.num_prompt_tokens + self.sampling.max_tokens - 1

    @property
    def is_finished(self) -> bool:
        return self.status == RequestStatus.FINISHED
