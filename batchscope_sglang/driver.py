"""Run SGLang 0.5.23's real scheduler on a workload, without a model, and log every step.

The loop is the one of ``Scheduler.event_loop_normal`` (sglang/srt/managers/scheduler.py) with overlap off, minus
the model:

    arrived requests, as the tokenizer manager sends them (Scheduler.handle_generate_request: the output budget
    clipped, a prompt too long refused), then due aborts (Scheduler.abort_request with an AbortReq)
      --> Scheduler.get_next_batch_to_run(running_batch, last_batch)
      --> batch?  yes: stand-in result processor (append the workload's next token, update_finish_state,
                       release_kv_cache / checkpoint_kv_cache), as process_batch_result_prefill / _decode do
                  no:  the ratio reset of Scheduler.on_idle (NewTokenRatioTracker.reset)
      --> step record

The scheduler is made with ``object.__new__`` (its constructor loads a model and spawns processes) and given CPU
pools: a ``ReqToTokenPool``, a ``TokenToKVPoolAllocator`` over a K/V pool that stores nothing, a ``RadixCache``
(``disable=True`` when the prefix cache is off), a ``SchedulePolicy`` and a ``NewTokenRatioTracker``. SGLang's own
test helpers stub the kernel library and publish the server arguments (``sglang.test.test_utils``); torchvision,
which SGLang imports at module level for multimodal configs only, is stubbed the same way (no CPU build of it
matches torch 2.13.0 here). The radix cache's module gets a logical clock for the wall clock it stamps access times
with (``batchscope_sglang.clock``), so eviction order does not depend on timing. Nothing of SGLang's code is
patched: to name the condition that ends each step's admission, two of the scheduler's methods are wrapped on
the one instance to note what SGLang's own return (``batchscope_sglang.probe``).

A request reaches the scheduler as a ``TokenizedGenerateReqInput`` (the tokenizer manager's message, with its token
ids and ``SamplingParams``) through SGLang's own ``handle_generate_request``, so its request handling applies its
limits (``max_req_len``, ``max_req_input_len``: ``batchscope_sglang.shell``); an abort as the ``AbortReq`` the
tokenizer manager sends when a client goes away, through SGLang's own ``abort_request``. SGLang matches an abort's id
as a prefix of request ids: a workload's ids must not be prefixes of each other.

Units: tokens (page_size 1, so a token is a KV slot); a "step" is one ``get_next_batch_to_run`` call.

Usage: ``python -m batchscope_sglang.driver workload.json`` prints one JSON object per step. Only the standard
library and SGLang (with what it imports) are used.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Callable
from typing import Any

from batchscope_sglang.stubs import stub_modules

SGLANG_VERSION = "0.5.23"
stub_modules(("torchvision",))

import sglang  # noqa: E402

if sglang.__version__ != SGLANG_VERSION:
    raise ImportError(
        f"batchscope_sglang drives sglang=={SGLANG_VERSION} exactly (it sets the attributes that version's "
        f"Scheduler.__init__ would set); found sglang {sglang.__version__}: pip install sglang=={SGLANG_VERSION}"
    )

from sglang.test.test_utils import maybe_stub_sgl_kernel, published_topology  # noqa: E402

maybe_stub_sgl_kernel()

from sglang.srt.managers.io_struct import AbortReq, TokenizedGenerateReqInput  # noqa: E402
from sglang.srt.managers.schedule_batch import Req  # noqa: E402
from sglang.srt.managers.scheduler import Scheduler  # noqa: E402
from sglang.srt.mem_cache.common import checkpoint_kv_cache, release_kv_cache  # noqa: E402
from sglang.srt.sampling.sampling_params import SamplingParams  # noqa: E402

from batchscope_sglang.clock import use_logical_clock  # noqa: E402
from batchscope_sglang.probe import StopProbe  # noqa: E402
from batchscope_sglang.shell import VOCAB_SIZE, build_scheduler  # noqa: E402

DEFAULT_CONFIG: dict[str, Any] = {
    "max_running_requests": 4,
    "chunked_prefill_size": 64,
    "pool_tokens": 256,
    "schedule_policy": "fcfs",
    "enable_prefix_cache": True,
    "enable_mixed_chunk": False,  # ServerArgs.enable_mixed_chunk (--enable-mixed-chunk)
}


def _make_req(r: dict[str, Any], eos: list[int]) -> Req:
    """SGLang's ``Req`` for one workload request (greedy; ``max_new_tokens`` as given)."""
    sp = SamplingParams(max_new_tokens=r["max_new_tokens"], temperature=0.0, ignore_eos=bool(r.get("ignore_eos")))
    sp.normalize(None)
    prompt = array("q", r["prompt_token_ids"])
    return Req(r["request_id"], "", prompt, sp, eos_token_ids=set(eos), vocab_size=VOCAB_SIZE)


def _tokenized(r: dict[str, Any]) -> TokenizedGenerateReqInput:
    """The tokenizer manager's message for one workload request (``TokenizerManager._create_tokenized_object``):
    greedy, its token ids, ``max_new_tokens`` as given (None: unset), no logprobs, not streamed."""
    sp = SamplingParams(max_new_tokens=r["max_new_tokens"], temperature=0.0, ignore_eos=bool(r.get("ignore_eos")))
    sp.normalize(None)
    return TokenizedGenerateReqInput(
        rid=r["request_id"],
        input_text="",
        input_ids=array("q", r["prompt_token_ids"]),
        input_embeds=None,
        mm_inputs=None,
        token_type_ids=None,
        sampling_params=sp,
        return_logprob=False,
        logprob_start_len=-1,
        top_logprobs_num=0,
        token_ids_logprob=None,
        stream=False,
    )


def _handled(s: Scheduler, rid: str, asked: int | None) -> list | None:
    """What SGLang's request handling did to the request ``rid`` just handled: [max_new_tokens, the refusal's
    message or None], or None if it left it as asked (``max_new_tokens`` as given, the prompt accepted)."""
    req = next(r for r in s.waiting_queue if r.rid == rid)
    error = req.to_finish.message if req.to_finish is not None else None
    granted = req.sampling_params.max_new_tokens
    return None if granted == asked and error is None else [granted, error]


def _reason(req: Req) -> str:
    """A finished request's reason in the OpenAI words SGLang reports (``stop``, ``length``, ``abort``)."""
    return req.finished_reason.to_json()["type"]


def _process(s: Scheduler, batch: Any, outputs: dict[str, list[int]]) -> list[str]:
    """The stand-in result processor: what ``process_batch_result_prefill`` / ``_decode`` do for a plain greedy
    request (sglang/srt/managers/scheduler_components/batch_result_processor.py), with the workload's token."""
    finished = []
    extend = batch.forward_mode.is_extend()
    for req in batch.reqs:
        if req.finished() or req.is_retracted:
            continue
        if extend and req.inflight_middle_chunks > 0:  # a chunk that stops mid-prompt samples nothing
            req.inflight_middle_chunks -= 1
            continue
        req.output_ids.append(outputs[req.rid][len(req.output_ids)])
        req.update_finish_state()
        if req.finished():
            release_kv_cache(req, s.tree_cache, checkpoint=True)
            finished.append(req.rid)
        elif extend and req not in (batch.decoding_reqs or []):  # a mixed decode's K/V is not cached yet
            checkpoint_kv_cache(req, s.tree_cache)
    return finished


def _record(step: int, s: Scheduler, batch: Any, waiting_before: set[str], running_before: set[str]) -> dict:
    """One step: the batch kind, who runs with how many tokens, admissions with their prefix hits, the running
    requests that decode inside an EXTEND batch (``decoding_reqs``, ``--enable-mixed-chunk``), retractions."""
    waiting_after = {r.rid for r in s.waiting_queue}
    rec: dict[str, Any] = {"step": step, "kind": "idle", "run": [], "admitted": [], "prefix_hits": {}, "mixed": []}
    if batch is not None and batch.forward_mode.is_extend():
        rec["kind"] = "extend"
        rec["run"] = [[r.rid, int(n)] for r, n in zip(batch.reqs, batch.extend_lens)]
        rec["admitted"] = [r.rid for r in batch.reqs if r.rid in waiting_before]
        hits = zip(batch.reqs, batch.prefix_lens)
        rec["prefix_hits"] = {r.rid: int(n) for r, n in hits if r.rid in waiting_before}
        rec["mixed"] = [r.rid for r in batch.decoding_reqs or []]  # --enable-mixed-chunk: decodes in the batch
    elif batch is not None:
        rec["kind"] = "decode"
        rec["run"] = [[r.rid, 1] for r in batch.reqs]
    rec["retracted"] = sorted(running_before & waiting_after)
    rec["chunked"] = s.chunked_req.rid if s.chunked_req is not None else None
    rec["new_token_ratio"] = s.new_token_ratio_tracker.current
    return rec


def run_sglang(
    workload: dict[str, Any], max_steps: int = 10_000, observe: Callable[[Scheduler, Any, dict], None] | None = None
) -> list[dict]:
    """SGLang's step records for ``workload``: ``config`` (keys of ``DEFAULT_CONFIG``, and ``context_len``, the
    model's context) and ``requests`` (request_id, prompt_token_ids, max_new_tokens (None: unset), arrival_step,
    output_token_ids, optional ignore_eos and abort_step), plus ``eos_token_ids``. Each request samples its
    ``output_token_ids`` in order; it finishes on an EOS id (unless ``ignore_eos``) or at ``max_new_tokens``, as
    SGLang decides (``Req.update_finish_state``). A request with ``abort_step`` is aborted before that step (or as it
    arrives, if later). Each record also says what the request handling did to the requests that arrived before it
    (``limits``: id -> [max_new_tokens, refusal message or None], where SGLang changed something), which requests
    SGLang reported aborted before the step's batch ran (``aborted``, sorted) and each finish's reason
    (``finish_reasons``). ``observe(scheduler, batch, record)``: called after each step that ran a batch, once its
    results are processed (where SGLang's metrics reporter reads the scheduler)."""
    cfg = {**DEFAULT_CONFIG, **workload.get("config", {})}
    eos = list(workload.get("eos_token_ids", []))
    pending = sorted(workload["requests"], key=lambda r: r.get("arrival_step", 0))
    outputs = {r["request_id"]: list(r["output_token_ids"]) for r in pending}
    aborts = {r["request_id"]: r["abort_step"] for r in pending if r.get("abort_step") is not None}
    records: list[dict] = []
    with published_topology(
        role="test",
        page_size=1,
        chunked_prefill_size=cfg["chunked_prefill_size"],
        max_running_requests=cfg["max_running_requests"],
        schedule_policy=cfg["schedule_policy"],
        disable_radix_cache=not cfg["enable_prefix_cache"],
        disable_overlap_schedule=True,
        enable_mixed_chunk=cfg["enable_mixed_chunk"],
    ):
        use_logical_clock()  # eviction order by access time, reproducible (batchscope_sglang.clock)
        s = build_scheduler(cfg)
        s.model_config.hf_eos_token_id = set(eos)
        outbox = s.ipc_channels.send_to_tokenizer
        probe = StopProbe(s)
        unfinished = {r["request_id"] for r in pending}
        arrived: list[str] = []
        step = 0
        while unfinished and step < max_steps:
            limits = _arrivals(s, pending, arrived, step)
            _aborts(s, arrived, aborts, step)
            waiting_before = {r.rid for r in s.waiting_queue}
            running_before = {r.rid for r in s.running_batch.reqs}
            if s.last_batch is not None and s.last_batch.forward_mode.is_extend():
                running_before |= {r.rid for r in s.last_batch.reqs if not r.finished()}
            probe.begin(s)
            plan = s.get_next_batch_to_run(running_batch=s.running_batch, last_batch=s.last_batch)
            s.running_batch, batch = plan.running_batch, plan.batch_to_run
            rec = _record(step, s, batch, waiting_before, running_before)
            rec["limits"], rec["aborted"] = limits, sorted(outbox.take())
            unfinished -= set(rec["aborted"])
            # the head of the queue after the step, and the condition that ended admission (``probe``)
            rec["head"] = {"request_id": s.waiting_queue[0].rid, "stop": probe.stop} if s.waiting_queue else None
            _run_batch(s, batch, outputs, rec)
            unfinished -= set(rec["finished"])
            if batch is not None and observe is not None:
                observe(s, batch, rec)
            s.last_batch = batch
            records.append(rec)
            step += 1
    return records


def _arrivals(s: Scheduler, pending: list[dict], arrived: list[str], step: int) -> dict[str, list]:
    """Hand SGLang the requests due by ``step`` (``pending`` in arrival order, taken from its front) through its
    request handling; returns what the handling changed (``_handled``), by request id."""
    limits = {}
    while pending and pending[0].get("arrival_step", 0) <= step:
        r = pending.pop(0)
        s.handle_generate_request(_tokenized(r))
        arrived.append(r["request_id"])
        if (handled := _handled(s, r["request_id"], r["max_new_tokens"])) is not None:
            limits[r["request_id"]] = handled
    return limits


def _aborts(s: Scheduler, arrived: list[str], aborts: dict[str, int], step: int) -> None:
    """Send SGLang, once each and in arrival order, the aborts due by ``step`` of the requests that have arrived
    (``aborts``: request id -> abort step, emptied as they are sent), as the tokenizer manager sends an ``AbortReq``."""
    for rid in [rid for rid in arrived if aborts.get(rid, step + 1) <= step]:
        s.abort_request(AbortReq(rid=rid))
        del aborts[rid]


def _run_batch(s: Scheduler, batch: Any, outputs: dict[str, list[int]], rec: dict) -> None:
    """The step's result (the stand-in processor's finishes and their reasons), or an idle step's ratio reset; then
    the radix cache's sizes after the step: what eviction has left, and inserts."""
    if batch is not None:
        rec["finished"] = _process(s, batch, outputs)
        rec["finish_reasons"] = {rid: _reason(r) for r in batch.reqs if (rid := r.rid) in rec["finished"]}
    else:
        s.new_token_ratio_tracker.reset()  # Scheduler.on_idle
        rec["finished"], rec["finish_reasons"] = [], {}
    rec["cached_tokens"] = s.tree_cache.total_size()
    rec["evictable_tokens"] = s.tree_cache.evictable_size()


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        workload = json.load(f)
    for rec in run_sglang(workload):
        print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
