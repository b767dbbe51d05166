"""What TGI's model shard keeps about each running request, and how it sizes a prompt's next chunk.

Follows ``FlashCausalLMBatch`` and ``FlashCausalLM.generate_token`` in
``server/text_generation_server/models/flash_causal_lm.py`` (TGI v3). Units: tokens.

A running request's tokens, with ``num_computed`` the K/V positions it already holds::

    | cached prefix | computed chunks | next chunk | rest of prompt |  sampled tokens ...
    0           cache_len        num_computed   +chunk          prompt_len

The router hands each new request a first chunk (``chunk_len``, or the whole rest of its prompt). After every
forward of a batch that is still prefilling, **the shard** sizes the next chunks itself, whatever the router
schedules next: a budget of ``max_batch_prefill_tokens - (requests in the forward - 1)`` (one token kept for every
other request) is handed out from the newest request of the batch to the oldest, each prefilling request getting
``min(its remaining prompt, what is left)`` but at least 1. The forward that computes a prompt's last token samples
its first output token; after that each forward computes and samples one token.

The router reads two numbers back from the shard's batch (``CachedBatch``): ``max_tokens`` = the batch's blocks x
block size (a prefix block shared by n requests counts n times) and ``current_tokens`` = the tokens its next
forward computes (1 per decoding request, the next chunk of a prefilling one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from batchscope.scheduling.forward_plan import Work
from batchscope.tgi_family.block_allocator import Allocation


@dataclass
class Sequence:
    """One running request: its prompt, its blocks, how far it got."""

    request_id: str
    prompt: list[int]
    max_new_tokens: int
    allocation: Allocation
    cache_len: int
    chunk: int  # prompt tokens the next forward computes while the request is prefilling
    num_computed: int = 0
    output: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.num_computed = self.cache_len

    @property
    def prefilling(self) -> bool:
        return self.num_computed < len(self.prompt)

    @property
    def remaining_prompt(self) -> int:
        return len(self.prompt) - self.num_computed

    def work(self) -> Work:
        """This request's share of the next forward."""
        if self.prefilling:
            last_chunk = self.num_computed + self.chunk == len(self.prompt)
            return Work(self.request_id, self.chunk, self.num_computed, samples=last_chunk)
        return Work(self.request_id, 1, self.num_computed, samples=True)

    def advance(self, work: Work, token: int | None) -> None:
        """After the forward: ``work``'s tokens now have K/V; ``token`` is the one it sampled (if it sampled)."""
        self.num_computed += work.num_tokens
        if work.samples:
            assert token is not None, f"{self.request_id} sampled no token"
            self.output.append(token)

    @property
    def done(self) -> bool:
        return len(self.output) >= self.max_new_tokens


def size_next_chunks(batch: list[Sequence], max_prefill_tokens: int) -> None:
    """The shard's chunk sizes for the next forward of ``batch`` (every request of the forward just run)."""
    budget = max_prefill_tokens - (len(batch) - 1)
    for seq in reversed(batch):
        if seq.prefilling:
            seq.chunk = max(min(seq.remaining_prompt, budget), 1)
            budget -= seq.chunk


def batch_max_tokens(batch: list[Sequence], block_size: int) -> int:
    """``CachedBatch.max_tokens``: the batch's block-table lengths x block size."""
    return sum(len(seq.allocation.blocks) for seq in batch) * block_size


def batch_current_tokens(batch: list[Sequence]) -> int:
    """``CachedBatch.current_tokens``: the tokens the batch's next forward computes."""
    return sum(seq.chunk if seq.prefilling else 1 for seq in batch)
