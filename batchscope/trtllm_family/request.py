"""One request as TensorRT-LLM's schedulers see it (``LlmRequest`` in ``cpp/tensorrt_llm/batch_manager``, reduced to
the fields that scheduling reads).

A request is a *context* until its whole prompt has K/V, then it is *generating*::

    prompt: | computed (context_position) | left to compute |        output: | generated tokens |
    context:      0 <= context_position < prompt_len          generating: context_position == prompt_len

``has_kv`` says the request holds KV blocks (TensorRT-LLM's "started": a generating request, or a context past its
first chunk). The KV of a context is set up on its first chunk for its whole prompt, so a context that holds KV is
mid-prompt. A *disaggregated generation* request (``disagg_init``) arrives with its prompt computed elsewhere: it only
needs KV for its prompt and its first token.

A pause (``MAX_UTILIZATION``) folds the generated tokens into the prompt (``fold_into_prompt``): the request becomes
a fresh context that will recompute prompt + output, with ``max_new_tokens`` shrunk by the same count.

Units: tokens; ids are strings (the engine's request ids).
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_PRIORITY = 0.5  # TensorRT-LLM's default request priority


@dataclass
class SeqState:
    """A request's scheduling state. ``prompt`` holds token ids (only prefix reuse reads their values);
    ``num_draft_tokens`` are speculative tokens carried by the request (they cost compute and KV like real ones);
    ``context_chunk_size`` is a preset chunk (the capacity tests set it; the micro-batch stage computes its own)."""

    request_id: str
    prompt: list[int]
    max_new_tokens: int
    output: list[int] = field(default_factory=list)
    context_position: int = 0
    has_kv: bool = False
    num_draft_tokens: int = 0
    beam_width: int = 1
    lora_task_id: int | None = None
    priority: float = DEFAULT_PRIORITY
    disagg_init: bool = False
    estimated_reusable_tokens: int = 0
    context_chunk_size: int | None = None
    num_folded: int = 0  # generated tokens folded into the prompt by pauses

    @property
    def prompt_len(self) -> int:
        return len(self.prompt)

    @property
    def num_generated(self) -> int:
        return len(self.output)

    @property
    def num_tokens(self) -> int:
        """Prompt + generated tokens."""
        return len(self.prompt) + len(self.output)

    @property
    def is_context(self) -> bool:
        return not self.disagg_init and self.context_position < len(self.prompt)

    @property
    def is_generating(self) -> bool:
        return not self.disagg_init and self.context_position >= len(self.prompt)

    @property
    def is_first_chunk(self) -> bool:
        """A context that holds no KV yet: its next chunk is its first."""
        return self.is_context and not self.has_kv

    @property
    def context_remaining(self) -> int:
        return len(self.prompt) - self.context_position

    @property
    def is_started(self) -> bool:
        """What MAX_UTILIZATION may pause: a request that holds KV (generating, or a context past its first chunk)."""
        return self.has_kv and not self.disagg_init

    def kv_tokens_after_step(self) -> int:
        """Tokens whose K/V the request holds once its next step has run: a context sets up its whole prompt (plus
        drafts) on its first chunk; a generating step writes the K/V of its last token (plus drafts)."""
        if self.is_generating:
            return self.num_tokens + self.num_draft_tokens
        return len(self.prompt) + self.num_draft_tokens

    def fold_into_prompt(self, max_input_len: int | None = None) -> int:
        """A pause: the generated tokens join the prompt (capped at ``max_input_len``), ``max_new_tokens`` shrinks
        by as many, and the request is a context again at position 0 without KV. Returns the folded count."""
        folded = len(self.output)
        prompt = self.prompt + self.output
        if max_input_len is not None:
            prompt = prompt[:max_input_len]
        self.prompt = prompt
        self.max_new_tokens -= folded
        self.num_folded += folded
        self.output = []
        self.context_position = 0
        self.has_kv = False
        self.context_chunk_size = None
        return folded
