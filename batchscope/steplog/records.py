"""The trace's record types: one definition, used by the engine that writes them, the reader and the visuals.

A trace is JSON Lines: one ``HeaderRecord``, one ``StepRecord`` per engine step, one ``SummaryRecord``. These
``TypedDict`` s are what a type checker sees; the JSON Schema ``batchscope/steplog/trace.schema.json`` stays the
contract for files (ranges, required fields) and ``docs/trace-format.md`` explains every field. Units: tokens, blocks,
seconds from the start of the run. Optional fields are declared in a ``total=False`` base class.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class _ConfigOptional(TypedDict, total=False):
    enable_prefix_caching: bool
    reserve_full_prompt: bool  # vLLM's scheduler_reserve_full_isl
    enable_mixed_chunk: bool  # SGLang's --enable-mixed-chunk (policy sglang; absent: off)
    async_scheduling: bool | None  # a vLLM server's trace
    max_model_len: int


class ConfigRecord(_ConfigOptional):
    """The scheduler's and KV cache's limits (``batchscope.engine.config.EngineConfig`` but ``batching``, the header's
    ``policy``)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    num_kv_blocks: int
    enable_chunked_prefill: bool
    scheduling_policy: str


class _RequestSpecOptional(TypedDict, total=False):
    ignore_eos: bool
    arrival_step: int | None
    prompt: str  # absent in a vLLM tracer's trace without text
    prompt_token_ids: list[int]
    priority: int
    abort_step: int  # the workload aborts it before this step (or on arrival, if later); absent when it does not


class RequestSpecRecord(_RequestSpecOptional):
    """A request as the header lists it (or, in a version 2 trace, the step it arrived before: ``arrived``)."""

    request_id: str
    num_prompt_tokens: int
    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    seed: int | None
    arrival_time: float


class _HeaderOptional(TypedDict, total=False):
    created: str
    scenario: str | None
    source: Literal["batchscope", "vllm", "sglang"]  # required from schema version 2
    vllm_version: str
    sglang_version: str  # source sglang: the SGLang tracer (batchscope_sglang.tracer)
    record_text: bool
    eos_token_ids: list[int]
    max_model_len: int | None
    seed: int | None  # the run's seed: unseeded sampled requests drew their seeds from it
    cpu_share: float  # CPU time during the steps / (their wall time x threads); CPU runs only
    device_name: str  # the accelerator's name, e.g. "NVIDIA H200" (GPU runs of Batchscope's engine)


class HeaderRecord(_HeaderOptional):
    """First line: where the trace comes from and under which limits it ran."""

    type: Literal["header"]
    schema_version: int
    model: str
    device: str
    dtype: str
    policy: str  # batching mode (EngineConfig.batching): continuous or static
    config: ConfigRecord
    requests: list[RequestSpecRecord]


class _ScheduledOptional(TypedDict, total=False):
    recompute: bool
    draft_token_ids: list[int]  # speculative decoding: the last len() of num_tokens are drafts (-1: a placeholder)
    num_accepted_tokens: int  # of them, kept by verification (the step yields num_accepted_tokens + 1 tokens)
    num_draft_tokens: (
        int  # set by the reader for a trace without draft ids (batchscope.steplog.spec_decode.infer_drafts)
    )
    drafts_inferred: bool  # ... and then set: the draft figures are inferred, not recorded


class ScheduledRecord(_ScheduledOptional):
    """One request's work in a step: ``num_tokens`` tokens from position ``num_computed_tokens``; ``slot`` is its
    batch row (``0 .. max_num_seqs - 1``)."""

    request_id: str
    kind: Literal["prefill", "decode"]
    num_tokens: int
    num_computed_tokens: int
    slot: int


class _SampledOptional(TypedDict, total=False):
    text: str  # absent in a vLLM tracer's trace without text
    partial: bool  # ``text`` (the token alone) is only part of a character
    text_delta: str  # what the token adds to the output text (incremental detokenization)


class SampledRecord(_SampledOptional):
    request_id: str
    token_id: int


FinishReason = Literal["stop", "length", "abort", "error", "repetition"]


AbortState = Literal["waiting", "running", "preempted"]


class _AbortOptional(TypedDict, total=False):
    during_step: bool  # aborted while this step ran (after it was scheduled): its work is discarded
    # SGLang family: the abort came earlier, but SGLang only marked the request to finish (``Req.to_finish``): it ran
    # this step with its batch, keeps the token it sampled, and ended at the step's end, its K/V cached as a finish's
    to_finish: bool
    error: str  # SGLang family: its request handling refused the prompt with this message (``request_limits``)


class AbortRecord(_AbortOptional):
    """What an abort (``reason`` ``abort``: a request finished from outside the scheduler) took away, read from the
    scheduler's state at the abort. Without ``during_step`` the request was aborted before this step was scheduled:
    it is not in the step's batch and its blocks are already out of the step's tables (``kv.freed`` lists it)."""

    state: AbortState  # waiting (never admitted), running (admitted), preempted (back in the queue, no K/V)
    num_output_tokens: int  # tokens it had sampled
    num_freed_blocks: int  # its block table's length when freed (a block shared through the prefix cache stays used)


class _FinishedOptional(TypedDict, total=False):
    aborted: AbortRecord  # reason ``abort`` only; absent in traces written before aborts were recorded


class FinishedRecord(_FinishedOptional):
    request_id: str
    reason: FinishReason


class _RequestLimitOptional(TypedDict, total=False):
    error: str  # the prompt was refused (SGLang's ``validate_input_length``): it runs a one-token stand-in, then aborts


class RequestLimitRecord(_RequestLimitOptional):
    """SGLang family: what SGLang's request handling did to a request that arrived before this step
    (``batchscope.sglang_family.request_handling``): its ``max_tokens`` clipped to ``max_new_tokens``, and/or its prompt
    refused. ``max_req_len``: the most tokens one request may hold, min(context - 1, pool - 1); ``bound``: which of
    the two sets it."""

    request_id: str
    num_prompt_tokens: int  # the prompt as sent
    max_tokens: int  # asked
    max_new_tokens: int  # granted
    max_req_len: int
    bound: Literal["pool", "context"]


class PaddingRecord(TypedDict):
    """A finished member of a static batch that still runs a row."""

    slot: int
    request_id: str


class KVExtras(TypedDict, total=False):
    """Optional KV facts; a scheduler adds its own through ``step_stats`` (static batching: reserved blocks).
    ``block_tables``: every request's table (schema version 1); ``freed`` and ``allocated``: what changed since the
    previous step (version 2; ``batchscope.steplog.blocks`` and ``TraceView.block_tables`` rebuild the tables)."""

    block_tables: dict[str, list[int]]
    freed: list[str]
    num_cached_tokens: dict[str, int]
    allocated: dict[str, list[int]]
    num_reserved_blocks: int
    ref_counts: dict[str, int]  # block id (as text) -> holders, blocks held by more than one request
    cached_free_blocks: list[int]  # free blocks that keep a cached prefix, in eviction order
    evicted: list[int]  # cached blocks handed out for new tokens in this step
    cache_hits: dict[str, list[int]]  # version 2: blocks of ``allocated`` adopted from the prefix cache
    block_size: int  # absent in some traces: the header's ``config.block_size``


class KVRecord(KVExtras):
    """The KV pool after the step's scheduling."""

    num_blocks: int
    num_used_blocks: int


class _HeadOptional(TypedDict, total=False):
    need: int  # what the head needed, in the limit's unit (``batchscope.steplog.reasons.LIMIT_UNITS``)
    left: int  # what was left of it
    order: str  # the waiting queue's order: ``arrival`` or ``priority`` (``batchscope.steplog.reasons.QUEUE_ORDERS``)


class HeadWaitRecord(_HeadOptional):
    """Why the head of the waiting queue (after this step's admissions) was not admitted: the first limit that
    held it, in the scheduler's order (``batchscope.steplog.reasons``)."""

    request_id: str
    limit: str


class _PreemptionOptional(TypedDict, total=False):
    requester: str  # the running request whose block allocation failed (the victim itself for a self-preemption)
    need: int  # blocks the requester's allocation needed
    free: int  # free blocks when it asked
    num_freed_tokens: int  # SGLang retraction: K/V tokens freed (those not in the radix cache, which keeps the rest)


class PreemptionRecord(_PreemptionOptional):
    """One preemption by recompute, in the order they happened."""

    request_id: str  # the victim
    rule: str  # how the victim was chosen (``batchscope.steplog.reasons.VICTIM_RULES``)
    num_dropped_tokens: int  # tokens of K/V it held and lost
    num_dropped_blocks: int  # blocks its table held (a block shared through the prefix cache stays in use)


class _AdmissionOptional(TypedDict, total=False):
    num_reserved_output_tokens: int  # SGLang: output tokens its admission estimate charged (0: a chunked prompt)
    output_ratio: float  # SGLang: the ratio its remaining output is charged at while it runs (1.0: ignore_eos)
    num_blocks: int  # TGI, TensorRT-LLM: blocks it was given at admission (TGI: its whole lifetime)
    num_reserved_blocks: int  # TensorRT-LLM no-evict: blocks set aside to its completion beyond those it holds


class AdmissionRecord(_AdmissionOptional):
    """How an admitted (or resumed) request's known tokens (prompt + outputs so far) get their K/V:
    ``num_prefix_hit_tokens + num_recompute_tokens + num_new_tokens`` = known tokens."""

    request_id: str
    resumed: bool  # admitted again after a preemption
    num_prefix_hit_tokens: int  # found in the prefix cache: not computed
    num_recompute_tokens: int  # had K/V before a preemption and are not in the cache: computed again
    num_new_tokens: int  # never had K/V: computed for the first time


class _BatchOptional(TypedDict, total=False):
    new_token_ratio: float  # SGLang: after this step's decision: what admission used (extend) or decode left
    decodes_mixed: list[str]  # enable_mixed_chunk: running requests that decode inside this EXTEND batch


class BatchRecord(_BatchOptional):
    """The step's batch kind: SGLang family (``batchscope.sglang_family.batching``, with the admission estimate's
    ratio), TGI and TensorRT-LLM families (``batchscope.scheduling.plan_batching``)."""

    kind: str  # SGLang: "extend" (a prefill batch, run alone unless mixed), "decode" or "idle"; TGI, TensorRT-LLM:
    # "prefill" (prompt tokens only), "decode" (decode tokens only) or "mixed"
    decodes_waiting: list[str]  # running requests that do not decode this step: the EXTEND batch runs without them


class DecisionsRecord(TypedDict, total=False):
    """What the scheduler decided in a step and why (optional; ``batchscope.steplog.decisions`` infers it for older
    traces)."""

    admissions: list[AdmissionRecord]  # in admission order
    preemptions: list[PreemptionRecord]
    request_limits: list[RequestLimitRecord]  # SGLang family: requests clipped or refused on arrival
    head: HeadWaitRecord  # absent when nobody waits after the step's admissions
    batch: BatchRecord  # SGLang, TGI and TensorRT-LLM families
    scheduling_call: dict[str, Any]  # TGI and TensorRT-LLM families: the scheduling call under the engine's names
    inferred: bool  # set by ``batchscope.steplog.decisions`` when it rebuilt the decisions from the log (never written)


class _StepOptional(TypedDict, total=False):
    decisions: DecisionsRecord
    arrived: list[RequestSpecRecord]  # version 2: requests that arrived since the previous step
    num_prefix_hit_tokens: dict[str, int]  # prefix-cache hit tokens of each request admitted in this step
    idle_steps_before: int  # empty steps skipped right before this one (the step clock jumped to an arrival)
    idle: bool  # never in a file: a skipped idle step put back on the clock by ``batchscope.steplog.view.on_the_clock``
    idle_steps: int  # never in a file: the idle steps such a record stands for (1, unless the gap is huge)


class StepRecord(_StepOptional):
    """One engine step: who ran and how, what was sampled, who joined, left or was preempted, and the KV pool."""

    type: Literal["step"]
    step: int
    t_start: float
    t_end: float
    scheduled: list[ScheduledRecord]
    num_batched_tokens: int
    sampled: list[SampledRecord]
    admitted: list[str]
    finished: list[FinishedRecord]
    preempted: list[str]
    waiting: list[str]
    running: list[str]
    padding_slots: list[PaddingRecord]
    kv: KVRecord


class _RequestResultOptional(TypedDict, total=False):
    output_text: str  # absent in a vLLM tracer's trace without text
    num_dropped_tokens: int  # K/V tokens its preemptions dropped (then ``num_recomputed_tokens`` counts only the
    # tokens computed again; older traces lack it and their ``num_recomputed_tokens`` counted the dropped ones)


class RequestResultRecord(_RequestResultOptional):
    """A request's outcome and its timestamps (seconds from the start of the run)."""

    request_id: str
    output_token_ids: list[int]
    finish_reason: FinishReason | None
    num_preemptions: int
    num_recomputed_tokens: int  # tokens computed again (their K/V had been dropped and was not in the cache)
    arrival_time: float
    first_scheduled_time: float | None
    first_token_time: float | None
    finish_time: float | None


class _SummaryOptional(TypedDict, total=False):
    partial: bool  # stopped early: unfinished requests have finish_reason null
    truncated_at_step: int  # the step records stop before this step (a size cap, or a trace cut short)
    # no summary line in the file: the reader made this one (batchscope.steplog.cutshort)
    cut_short: Literal["no_summary"]


class SummaryRecord(_SummaryOptional):
    """Last line: every request's outcome."""

    type: Literal["summary"]
    requests: list[RequestResultRecord]


Record = HeaderRecord | StepRecord | SummaryRecord
# A whole trace as the writer returns it and ``batchscope.steplog.trace.read`` gives it back: [HeaderRecord,
# StepRecord..., SummaryRecord]. A list type cannot say "first, middle, last", so code that needs the parts uses
# ``TraceView``.
TraceRecords = list[Any]
