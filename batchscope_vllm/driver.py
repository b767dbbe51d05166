"""Run vLLM 0.33.0's real V1 scheduler on a workload, without a model, and log every step like Batchscope.

The loop is the one vLLM's ``EngineCore.step`` runs, minus the model:

    add arrived requests --> Scheduler.schedule() --> (fake forward: the token Batchscope sampled)
                         --> ModelRunnerOutput --> Scheduler.update_from_output() --> step record

``Scheduler.schedule()`` (vllm/v1/core/sched/scheduler.py) advances each scheduled request's
``num_computed_tokens`` before the step runs, so a request samples in a step when, after ``schedule()``, its
computed tokens reach its known tokens (prompt + outputs so far). vLLM then appends the token and decides
finishes itself (``check_stop`` in vllm/v1/core/sched/utils.py: EOS first, then ``max_tokens`` /
``max_model_len``); that decision is part of what is compared.

The KV cache is one full-attention group. vLLM's ``BlockPool`` keeps block 0 as a *null block* that no request
owns, so the pool here has ``num_kv_blocks + 1`` blocks and every block id in the output is vLLM's id minus 1
(ids start at 0, as in Batchscope). Units: tokens and blocks; a "step" is one ``schedule()`` call.

Usage: ``python -m batchscope_vllm.driver workload.json [--trace OUT.jsonl]`` prints one JSON object per step
(JSON Lines); ``--trace`` also writes the trace of ``batchscope_vllm.tracer.TracingScheduler`` (``run_vllm(...,
trace=path)``). Only the standard library and vLLM are imported.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
from typing import Any

os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")  # read when vllm is first imported

from vllm import SamplingParams
from vllm.config import (
    CacheConfig,
    DeviceConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    SpeculativeConfig,
    VllmConfig,
)
from vllm.utils.hashing import get_hash_fn_by_name
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus
from vllm.v1.spec_decode import ngram_proposer
from vllm.v1.structured_output import StructuredOutputManager

# A generated Llama config.json is all ModelConfig reads (skip_tokenizer_init=True): no weights, no tokenizer.
_MAX_POSITIONS = 1 << 20
_LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "num_hidden_layers": 1,
    "vocab_size": 32000,
    "max_position_embeddings": _MAX_POSITIONS,
    "torch_dtype": "float32",
}


@functools.lru_cache(maxsize=1)
def _model_dir() -> tempfile.TemporaryDirectory:
    """A temporary folder holding only the generated ``config.json`` (cached, so it lives until the process
    exits and is removed then)."""
    tmp = tempfile.TemporaryDirectory(prefix="batchscope-vllm-model-")
    with open(os.path.join(tmp.name, "config.json"), "w") as f:
        json.dump(_LLAMA_CONFIG, f)
    return tmp


@functools.lru_cache(maxsize=16)
def _model_config(max_model_len: int) -> ModelConfig:
    """vLLM's ``ModelConfig`` on the generated folder (~0.01 s once vLLM is imported; cached per length)."""
    return ModelConfig(model=_model_dir().name, skip_tokenizer_init=True, max_model_len=max_model_len, dtype="float32")


def make_scheduler(config: dict[str, Any], scheduler_cls: type[Scheduler] = Scheduler) -> Scheduler:
    """Build vLLM's ``Scheduler`` (``Scheduler.__init__``) for a workload ``config`` (see ``run_vllm``).

    vLLM's ``SchedulerConfig.verify_max_model_len`` refuses ``max_num_batched_tokens < max_model_len`` with
    chunked prefill off (the real engine then raises the budget to the context length); Batchscope allows a small
    budget and rejects longer prompts up front instead. So the config is built with chunking on and the flag is
    set afterwards: ``Scheduler.schedule()`` reads ``scheduler_config.enable_chunked_prefill`` at every step.
    vLLM also refuses ``max_num_batched_tokens < max_num_seqs`` (ValueError), whatever the chunking.
    """
    block_size = int(config["block_size"])
    max_model_len = int(config["max_model_len"])
    sched_cfg = SchedulerConfig(
        max_num_seqs=int(config["max_num_seqs"]),
        max_num_batched_tokens=int(config["max_num_batched_tokens"]),
        max_model_len=max_model_len,
        is_encoder_decoder=False,
        enable_chunked_prefill=True,
        scheduler_reserve_full_isl=bool(config.get("reserve_full_prompt", False)),
        policy=config.get("scheduling_policy", "fcfs"),
        async_scheduling=bool(config.get("async_scheduling", False)),  # run_vllm updates a step before the next
    )
    sched_cfg.enable_chunked_prefill = bool(config["enable_chunked_prefill"])
    cache_cfg = CacheConfig(block_size=block_size, enable_prefix_caching=bool(config.get("enable_prefix_caching")))
    model_cfg = _model_config(max_model_len)
    vllm_cfg = VllmConfig(
        model_config=model_cfg,
        cache_config=cache_cfg,
        scheduler_config=sched_cfg,
        device_config=DeviceConfig(device="cpu"),
        speculative_config=_speculative_config(config, model_cfg),
    )
    num_blocks = int(config["num_kv_blocks"]) + 1  # + vLLM's null block 0
    vllm_cfg.cache_config.num_gpu_blocks = num_blocks
    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype=model_cfg.dtype)
    kv_cfg = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["model.layers.0.self_attn.attn"], spec)],
    )
    sched = scheduler_cls(
        vllm_config=vllm_cfg,
        kv_cache_config=kv_cfg,
        structured_output_manager=StructuredOutputManager(vllm_cfg),
        block_size=block_size,
    )
    got = (
        sched.max_num_running_reqs,
        sched.max_num_scheduled_tokens,
        sched.cache_config.enable_prefix_caching,
        sched.scheduler_config.enable_chunked_prefill,
        sched.scheduler_reserve_full_isl,
        sched.policy.value,
    )
    want = (
        sched_cfg.max_num_seqs,
        sched_cfg.max_num_batched_tokens,
        cache_cfg.enable_prefix_caching,
        sched_cfg.enable_chunked_prefill,
        sched_cfg.scheduler_reserve_full_isl,
        sched_cfg.policy,
    )
    if got != want:
        raise RuntimeError(f"vLLM changed the scheduler settings: asked {want}, got {got}")
    return sched


def _speculative_config(config: dict[str, Any], model_cfg: ModelConfig) -> SpeculativeConfig | None:
    """vLLM's ``SpeculativeConfig`` for the workload's ``speculative_config`` (n-gram drafts only), or None."""
    spec = config.get("speculative_config")
    if not spec:
        return None
    if spec.get("method", "ngram") != "ngram":
        raise ValueError(f"speculative_config.method={spec.get('method')!r}: only 'ngram' is driven model-free")
    return SpeculativeConfig(
        method="ngram",
        num_speculative_tokens=int(spec["num_speculative_tokens"]),
        prompt_lookup_min=int(spec["prompt_lookup_min"]),
        prompt_lookup_max=int(spec["prompt_lookup_max"]),
        target_model_config=model_cfg,
        target_parallel_config=ParallelConfig(),
    )


def _propose_drafts(sched: Scheduler, requests: dict[str, Request], sampled_ids: list[str]) -> None:
    """The n-gram drafts for the next step, as vLLM's model runner proposes them after a step and its engine core
    hands them to the scheduler: vLLM's own ``_find_longest_matched_ngram_and_propose_tokens`` over each request's
    known tokens, for the requests that sampled (``Scheduler.update_draft_token_ids`` drops those that finished)."""
    spec = sched.vllm_config.speculative_config
    if spec is None or not sampled_ids:
        return
    max_len = sched.max_model_len
    drafts = []
    for rid in sampled_ids:
        req = requests[rid]
        tokens = ngram_proposer.np.asarray(list(req.all_token_ids), dtype=ngram_proposer.np.int32)
        if len(tokens) >= max_len:
            drafts.append([])
            continue
        found = ngram_proposer._find_longest_matched_ngram_and_propose_tokens(
            tokens, spec.prompt_lookup_min, spec.prompt_lookup_max, max_len, spec.num_speculative_tokens
        )
        drafts.append([int(t) for t in found])
    sched.update_draft_token_ids(DraftTokenIds(req_ids=list(sampled_ids), draft_token_ids=drafts))


def _block_hasher(config: dict[str, Any]):
    """vLLM's per-request block hasher (as ``EngineCore.__init__`` builds it), or None without prefix caching."""
    if not config.get("enable_prefix_caching"):
        return None
    hash_fn = get_hash_fn_by_name("sha256")
    init_none_hash(hash_fn)
    return get_request_block_hasher(int(config["block_size"]), hash_fn)


def _make_request(spec: dict[str, Any], eos_token_ids: list[int], arrival_time: float, hasher) -> Request:
    """A vLLM ``Request``; EOS ids go through ``SamplingParams.update_from_generation_config`` as in vLLM's
    input processor (first id = the tokenizer's EOS, the rest = generation-config stop ids; all off with
    ``ignore_eos``)."""
    params = SamplingParams(
        max_tokens=int(spec["max_tokens"]), ignore_eos=bool(spec.get("ignore_eos", False)), temperature=0.0
    )
    if eos_token_ids:
        params.update_from_generation_config({"eos_token_id": list(eos_token_ids)}, eos_token_ids[0])
    return Request(
        request_id=str(spec["request_id"]),
        prompt_token_ids=list(spec["prompt_token_ids"]),
        sampling_params=params,
        pooling_params=None,
        arrival_time=arrival_time,
        priority=int(spec.get("priority", 0)),
        block_hasher=hasher,
    )


def _max_steps(workload: dict[str, Any]) -> int:
    """A generous bound on the steps of a run, so a livelock raises instead of hanging."""
    reqs = workload["requests"]
    work = sum(len(r["prompt_token_ids"]) + int(r["max_tokens"]) for r in reqs)
    return 1000 + max((int(r.get("arrival_step", 0)) for r in reqs), default=0) + 20 * work * max(1, len(reqs))


def _sampled_tokens(
    scheduled_ids, requests: dict[str, Request], sampled: dict[str, list[int]], drafts: dict[str, list[int]]
) -> tuple[list[list[int]], list[str]]:
    """The fake forward pass: per scheduled request (in order), its next sampled token if it samples this step
    (its computed tokens reach its known tokens once ``schedule()`` has advanced them), else ``[]``; with drafts
    (``drafts``, vLLM's ``scheduled_spec_decode_tokens``), verification as a greedy target model does it: each
    draft is accepted while it equals the next recorded token, then one more token (the model's own at the first
    mismatch, or the bonus token); plus the requests that sample but whose ``sampled`` list is used up (to be
    aborted)."""
    tokens: list[list[int]] = []
    exhausted: list[str] = []
    for rid in scheduled_ids:
        req = requests[rid]
        todo, k = sampled.get(rid, []), len(req.output_token_ids)
        if req.num_computed_tokens < req.num_tokens:
            tokens.append([])  # a prefill chunk that stops short of the known tokens samples nothing
        elif k < len(todo):
            out = []
            for draft in drafts.get(rid, []):
                if k + len(out) >= len(todo) or int(todo[k + len(out)]) != draft:
                    break
                out.append(draft)
            tokens.append(out + [int(t) for t in todo[k + len(out) : k + len(out) + 1]])
        else:
            tokens.append([])
            exhausted.append(rid)
    return tokens, exhausted


def _abort_due(
    sched: Scheduler, specs: list[dict[str, Any]], requests: dict[str, Request], step: int
) -> list[dict[str, Any]]:
    """Before step ``step`` is scheduled, abort (``Scheduler.finish_requests(id, FINISHED_ABORTED)``, as vLLM's
    engine core does for a client's abort between steps) each arrived, unfinished request whose ``abort_step`` is
    due, one call per request in arrival order (``requests``' order; ties in workload order), as Batchscope's engine
    aborts them (vLLM iterates a set of ids, whose order would decide the order the blocks go back); returns their
    ``finished`` entries."""
    due_at = {str(spec["request_id"]): spec.get("abort_step") for spec in specs}
    out: list[dict[str, Any]] = []
    for rid, req in requests.items():
        due = due_at.get(rid)
        if due is None or int(due) > step or req.is_finished():
            continue
        sched.finish_requests(rid, RequestStatus.FINISHED_ABORTED)
        out.append({"request_id": rid, "reason": str(req.get_finished_reason())})
    return out


def _stalled(
    record: dict[str, Any], pending: list, specs: list[dict[str, Any]], requests: dict[str, Request], step: int
) -> bool:
    """The step scheduled, preempted and finished nothing, and no arrival or abort is left: vLLM's scheduler is
    deterministic in its state, so it would loop (as Batchscope's ``batchscope.engine.engine.LLMEngine._stalled``
    says)."""
    if record["scheduled"] or record["finished"] or record["preempted"] or pending:
        return False
    later = {str(s["request_id"]) for s in specs if s.get("abort_step") is not None and int(s["abort_step"]) > step}
    return not any(rid in later and not r.is_finished() for rid, r in requests.items())


def _record_preemptions_and_evictions(sched: Scheduler) -> tuple[list[str], list[int]]:
    """Wrap the scheduler so that each step's preemptions (in order; vLLM reports a set) and evicted cached blocks
    (vLLM ids, in order) are appended to the two returned lists."""
    preempted: list[str] = []
    evicted: list[int] = []
    original_preempt = sched._preempt_request
    pool = sched.kv_cache_manager.block_pool
    original_evict = pool._maybe_evict_cached_block

    def record_preemption(request: Request, *args: Any, **kwargs: Any) -> None:
        preempted.append(request.request_id)
        original_preempt(request, *args, **kwargs)

    def record_eviction(block: Any) -> bool:
        done = original_evict(block)
        if done:
            evicted.append(block.block_id)
        return done

    sched._preempt_request = record_preemption  # type: ignore[method-assign]
    pool._maybe_evict_cached_block = record_eviction  # type: ignore[method-assign]
    return preempted, evicted


def _pool_facts(sched: Scheduler, num_kv_blocks: int) -> dict[str, Any]:
    """``num_used_blocks``, ``ref_counts`` (blocks held more than once) and ``cached_free_blocks`` (free blocks with
    a hash, in free-queue order), in Batchscope's block ids (vLLM's minus 1; the null block left out)."""
    pool = sched.kv_cache_manager.block_pool
    free = pool.free_block_queue.get_all_free_blocks()
    return {
        "num_used_blocks": num_kv_blocks - pool.get_num_free_blocks(),
        "ref_counts": {str(b.block_id - 1): b.ref_cnt for b in pool.blocks if not b.is_null and b.ref_cnt > 1},
        "cached_free_blocks": [b.block_id - 1 for b in free if b.block_hash is not None],
    }


def _traced_scheduler(config: dict[str, Any], scheduler_cls: type[Scheduler], trace: str | os.PathLike | None):
    """``make_scheduler``; with ``trace``, a tracing scheduler (``TracingScheduler`` unless ``scheduler_cls`` is one)
    writing there: ``BATCHSCOPE_TRACE`` is set while it starts (the tracer reads it then), and put back after."""
    if trace is None:
        return make_scheduler(config, scheduler_cls)
    from batchscope_vllm.tracer import TracingMixin, TracingScheduler

    cls = scheduler_cls if issubclass(scheduler_cls, TracingMixin) else TracingScheduler
    before = os.environ.get("BATCHSCOPE_TRACE")
    os.environ["BATCHSCOPE_TRACE"] = os.fspath(trace)
    try:
        return make_scheduler(config, cls)
    finally:
        if before is None:
            os.environ.pop("BATCHSCOPE_TRACE", None)
        else:
            os.environ["BATCHSCOPE_TRACE"] = before


def run_vllm(
    workload: dict[str, Any], scheduler_cls: type[Scheduler] = Scheduler, trace: str | os.PathLike | None = None
) -> list[dict[str, Any]]:
    """Run ``workload`` through vLLM's scheduler; one record per step, until every request has finished.

    ``workload``: ``{"config": {max_num_seqs, max_num_batched_tokens, block_size, num_kv_blocks (Batchscope's
    count, without vLLM's null block), enable_chunked_prefill, enable_prefix_caching, reserve_full_prompt (->
    ``SchedulerConfig.scheduler_reserve_full_isl``), scheduling_policy ("fcfs" | "priority"), max_model_len},
    "eos_token_ids": [...], "requests": [{request_id, prompt_token_ids, max_tokens, ignore_eos, arrival_step,
    priority, optional abort_step}], "sampled": {request_id: [output token ids, in order]}}``.

    Requests are added (``Scheduler.add_request``) just before step k once ``arrival_step <= k``, in list order;
    ``arrival_time`` is the position in that list (the priority policy's tie-break). Steps run while anything is
    pending or unfinished; an empty step (nothing arrived yet) is still a step. A request that samples gets the
    next token of its ``sampled`` list; if that list is used up (vLLM wants more tokens than Batchscope made) the
    request is aborted (``Scheduler.finish_requests``) and logged with reason ``"abort"``. A request with an
    ``abort_step`` is aborted before that step is scheduled (or once it has arrived, if later; ``_abort_due``) and
    listed in that step's ``finished``, as Batchscope's engine lists it.

    Returns per step: ``step``; ``scheduled`` (vLLM's batch order: ``request_id``, ``num_tokens``,
    ``num_computed_tokens`` before the step); ``admitted`` (newly scheduled from waiting, resumed included);
    ``preempted`` (in preemption order); ``finished`` (``request_id``, ``reason`` "stop" | "length" | "abort");
    ``num_prefix_hit_tokens`` (prefix-cache hit tokens of each request admitted this step); ``block_tables``
    (every block-holding request after ``schedule()``, block ids minus 1); ``num_used_blocks`` (blocks referenced
    by some request; cached-but-free blocks count as free); ``ref_counts`` (block -> count, blocks held by more
    than one request); ``cached_free_blocks`` (free blocks still holding a cached prefix, in eviction order);
    ``evicted`` (cached blocks handed out for new tokens in this step). The field names are those of Batchscope's
    step records (``docs/trace-format.md``), so ``batchscope_vllm.compare`` reads both the same way.

    ``scheduler_cls``: a subclass of vLLM's ``Scheduler`` to drive instead (``batchscope_vllm.tracer``'s); it is
    shut down at the end, as vLLM's engine core does (a tracing scheduler then writes its summary). ``trace``: a
    path for the trace of ``batchscope_vllm.tracer.TracingScheduler`` (or of ``scheduler_cls`` if that is a
    tracing scheduler), written as on a server (``BATCHSCOPE_TRACE``); the other ``BATCHSCOPE_TRACE_*`` settings
    are read from the environment as there. Without it a tracing ``scheduler_cls`` traces where
    ``BATCHSCOPE_TRACE`` says, if set.
    """
    config = workload["config"]
    sched = _traced_scheduler(config, scheduler_cls, trace)
    hasher = _block_hasher(config)
    eos = [int(t) for t in workload.get("eos_token_ids", [])]
    sampled = {str(k): list(v) for k, v in workload.get("sampled", {}).items()}
    pending = list(workload["requests"])
    requests: dict[str, Request] = {}
    num_kv_blocks = int(config["num_kv_blocks"])

    preempted, evicted = _record_preemptions_and_evictions(sched)

    records: list[dict[str, Any]] = []
    step, limit = 0, _max_steps(workload)
    while pending or any(not r.is_finished() for r in requests.values()):
        if step >= limit:
            stuck = [
                (r.request_id, r.status.name, r.num_computed_tokens, r.num_tokens)
                for r in requests.values()
                if not r.is_finished()
            ]
            raise RuntimeError(
                f"vLLM did not finish the workload within {limit} steps; unfinished (id, status, "
                f"computed tokens, known tokens): {stuck}"
            )
        for spec in [s for s in pending if int(s.get("arrival_step", 0)) <= step]:
            pending.remove(spec)
            req = _make_request(spec, eos, float(len(requests)), hasher)
            requests[req.request_id] = req
            sched.add_request(req)
        aborts = _abort_due(sched, workload["requests"], requests, step)
        was_waiting = {
            rid for rid, r in requests.items() if r.status in (RequestStatus.WAITING, RequestStatus.PREEMPTED)
        }
        preempted.clear()
        evicted.clear()

        out = sched.schedule()

        spec_tokens = {rid: list(t) for rid, t in out.scheduled_spec_decode_tokens.items()}
        scheduled = [
            {"request_id": rid, "num_tokens": n, "num_computed_tokens": requests[rid].num_computed_tokens - n}
            | ({"draft_token_ids": spec_tokens[rid]} if spec_tokens.get(rid) else {})
            for rid, n in out.num_scheduled_tokens.items()
        ]
        admitted = [s["request_id"] for s in scheduled if s["request_id"] in was_waiting]
        block_tables = {
            r.request_id: [b - 1 for b in sched.kv_cache_manager.get_block_ids(r.request_id)[0]] for r in sched.running
        }
        pool_facts = _pool_facts(sched, num_kv_blocks)

        tokens, aborted = _sampled_tokens(out.num_scheduled_tokens, requests, sampled, spec_tokens)
        if aborted:
            sched.finish_requests(aborted, RequestStatus.FINISHED_ABORTED)
        ids = list(out.num_scheduled_tokens)
        sched.update_from_output(
            out,
            ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)}, sampled_token_ids=tokens),
        )
        _propose_drafts(sched, requests, [rid for rid, t in zip(ids, tokens) if t])
        finished = aborts + [
            {"request_id": rid, "reason": str(requests[rid].get_finished_reason())}
            for rid in ids
            if requests[rid].is_finished()
        ]
        records.append(
            {
                "step": step,
                "scheduled": scheduled,
                "admitted": admitted,
                "preempted": list(preempted),
                "finished": finished,
                "num_prefix_hit_tokens": {
                    s["request_id"]: s["num_computed_tokens"] for s in scheduled if s["request_id"] in admitted
                },
                "block_tables": block_tables,
                "evicted": [b - 1 for b in evicted],
                **pool_facts,
            }
        )
        if _stalled(records[-1], pending, workload["requests"], requests, step):
            waiting = [r.request_id for r in requests.values() if not r.is_finished()]
            raise RuntimeError(
                f"vLLM's scheduler made no progress at step {step}: it scheduled nothing, nothing is left to arrive "
                f"or be aborted, and {waiting} wait, so every later step would repeat it"
            )
        step += 1
    sched.shutdown()  # as vLLM's engine core does when it stops (a tracing scheduler writes its summary)
    return records


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m batchscope_vllm.driver workload.json [--trace OUT]`` prints the step records as JSON Lines
    (and writes the tracing scheduler's trace to ``OUT``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    trace = None
    if len(args) == 3 and args[1] == "--trace":
        trace = args.pop(2)
        args.pop(1)
    if len(args) != 1:
        print("usage: python -m batchscope_vllm.driver workload.json [--trace OUT.jsonl]", file=sys.stderr)
        return 2
    with open(args[0]) as f:
        workload = json.load(f)
    for record in run_vllm(workload, trace=trace):
        print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
