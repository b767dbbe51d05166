"""What one step runs, as the scheduler hands it to the model runner (vLLM's ``SchedulerOutput``), with the decision
records the scheduler wrote while deciding (``batchscope.steplog.records``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from batchscope.engine.request import Request
from batchscope.steplog.records import (
    AbortRecord,
    AdmissionRecord,
    BatchRecord,
    HeadWaitRecord,
    PreemptionRecord,
    RequestLimitRecord,
)


@dataclass
class ScheduledRequest:
    """One request's work in a step: ``num_tokens`` tokens starting at position ``num_computed_tokens``."""

    request: Request
    num_tokens: int
    num_computed_tokens: int  # before this step
    row: int  # batch row (the trace's ``slot``)
    draft_token_ids: list[int] = field(default_factory=list)  # the last ``len`` of the tokens: drafts to verify
    # "decode": computing exactly the last sampled token; else "prefill"
    kind: Literal["prefill", "decode"] = field(init=False)
    samples: bool = field(init=False)  # this step reaches the end of the known tokens, so a token is sampled
    num_recomputed: int = field(init=False)  # tokens of this chunk that had K/V before a preemption
    recompute: bool = field(init=False)  # a prefill that redoes K/V dropped by a preemption
    num_accepted: int | None = field(default=None, init=False)  # drafts kept by verification (set by ``update``)

    def __post_init__(self):
        req = self.request
        start, end = self.num_computed_tokens, self.num_computed_tokens + self.num_tokens - len(self.draft_token_ids)
        self.samples = end == req.num_tokens
        is_decode = end - start == 1 and bool(req.output_token_ids) and self.samples
        self.kind = "decode" if is_decode else "prefill"
        self.num_recomputed = max(0, min(end, req.num_kv_high) - start)
        self.recompute = self.kind == "prefill" and self.num_recomputed > 0

    @property
    def token_ids(self) -> list[int]:
        """The ``num_tokens`` token ids the step computes for this request (known tokens, then the drafts)."""
        c = self.num_computed_tokens
        return self.request.all_token_ids[c : c + self.num_tokens - len(self.draft_token_ids)] + self.draft_token_ids


@dataclass
class SchedulerOutput:
    """What one step runs: scheduled work in batch order, plus padding rows (static batching only)."""

    scheduled: list[ScheduledRequest] = field(default_factory=list)
    padding: list[tuple[int, str]] = field(default_factory=list)  # (row, request_id) of finished static members
    admitted_req_ids: list[str] = field(default_factory=list)
    preempted_req_ids: list[str] = field(default_factory=list)
    allocated_blocks: dict[str, list[int]] = field(default_factory=dict)
    prefix_hit_tokens: dict[str, int] = field(default_factory=dict)  # admitted request -> tokens found in the cache
    # why: written at the line of the scheduler that decides (``batchscope.steplog.records.DecisionsRecord``)
    admissions: list[AdmissionRecord] = field(default_factory=list)
    preemptions: list[PreemptionRecord] = field(default_factory=list)
    head: HeadWaitRecord | None = None
    batch: BatchRecord | None = (
        None  # SGLang family: the batch kind and the ratio (``batchscope.sglang_family.batching``)
    )
    scheduling_call: dict | None = None  # TGI and TensorRT-LLM families: their call's own record (``forward_plan``)
    running_prefill: bool = False  # a running request continued its prefill this step (vLLM's prefill_scheduled)
    # SGLang family: requests its request handling clipped or refused as they arrived before this step
    request_limits: list[RequestLimitRecord] = field(default_factory=list)
    # SGLang family: requests that end in this step by an abort they were marked with earlier (``to_finish``)
    aborted: dict[str, AbortRecord] = field(default_factory=dict)

    @property
    def num_batched_tokens(self) -> int:
        return sum(s.num_tokens for s in self.scheduled)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled and not self.padding


def admission_record(req: Request, hit: int) -> AdmissionRecord:
    """How an admitted request's known tokens get their K/V (``batchscope.steplog.records.AdmissionRecord``): ``hit``
    tokens from the prefix cache, the rest of what it once held K/V for (``Request.num_kv_high``, before a preemption or
    a retraction) computed again, the remainder new. Units: tokens."""
    high = req.num_kv_high
    return {
        "request_id": req.request_id,
        "resumed": req.num_preemptions > 0,
        "num_prefix_hit_tokens": hit,
        "num_recompute_tokens": max(0, high - hit),
        "num_new_tokens": req.num_tokens - max(high, hit),
    }
