"""What a model-free scheduling core decides for one forward pass, in the engine's terms (the TGI and TensorRT-LLM
families: ``batchscope.tgi_family``, ``batchscope.trtllm_family``). A core works on request ids and token counts only;
its engine adapter turns a ``ForwardPlan`` into the runner's ``SchedulerOutput`` and the step log's decision records.

Units: tokens, KV blocks (block ids are the core's own), steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class Work:
    """One request's share of the forward: ``num_tokens`` tokens from position ``num_computed_tokens`` (the K/V
    positions it already holds). ``samples``: the forward reaches the end of the request's known tokens (its last
    prompt token, or its last sampled one), so it samples a token."""

    request_id: str
    num_tokens: int
    num_computed_tokens: int
    samples: bool


@dataclass
class Admission:
    """A request admitted in this scheduling call. ``cache_len``: its prompt tokens found in the prefix cache (not
    computed); ``num_blocks``: the blocks it was given at admission (TGI: its whole lifetime; TensorRT-LLM: its
    prompt), ``blocks`` their ids (prefix blocks first); ``chunk_len``: its first chunk when the prompt was cut
    (``None``: whole); ``reserved_blocks``: blocks set aside for it beyond those it holds (blocks to completion under a
    no-evict policy; 0 when nothing is set aside)."""

    request_id: str
    cache_len: int
    num_blocks: int
    blocks: list[int]
    chunk_len: int | None = None
    reserved_blocks: int = 0


@dataclass
class Pause:
    """A running request sent back to the queue (TensorRT-LLM's ``MAX_UTILIZATION`` pause): its K/V is dropped and
    its ``num_generated`` output tokens are folded into its prompt, to be computed again when it resumes."""

    request_id: str
    num_generated: int
    num_freed_blocks: int


@dataclass
class ForwardPlan:
    """One forward: ``work`` in batch order; ``kind`` ``prefill`` (prompt tokens only), ``decode`` (decode tokens
    only) or ``mixed``; ``admitted`` in admission order; ``stalled``: running requests that compute nothing in it;
    ``paused``; ``head``: the first request still waiting and why (``{"request_id", "reason", ...numbers}``, ``None``
    if nobody waits); ``decision``: the family's own record of the scheduling call (its budgets and arguments, under
    the engine's own names; ``None`` when the forward was not preceded by one)."""

    kind: Literal["prefill", "decode", "mixed"]
    work: list[Work] = field(default_factory=list)
    admitted: list[Admission] = field(default_factory=list)
    stalled: list[str] = field(default_factory=list)
    paused: list[Pause] = field(default_factory=list)
    head: dict | None = None
    decision: dict | None = None
