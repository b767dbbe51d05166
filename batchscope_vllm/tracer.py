"""See your own vLLM server: a scheduler that writes a Batchscope trace of every engine step.

    BATCHSCOPE_TRACE=/tmp/server.jsonl.gz vllm serve MODEL --no-async-scheduling \\
        --scheduler-cls batchscope_vllm.tracer.TracingScheduler

``TracingScheduler`` is vLLM 0.33's own V1 ``Scheduler`` (subclassed, every decision unchanged): around the
parent's ``schedule()`` and ``update_from_output()`` it records one step (requests scheduled with their token
counts and positions, prefill / decode / recompute, admissions, preemptions, finishes and reasons, aborts with the
request's state, tokens and blocks, sampled token ids, prefix-cache hit tokens, the waiting and running queues,
KV blocks used and each block table's changes, wall-clock start and end) in Batchscope's trace format, schema
version 2, with a header (model, vLLM version, device, the scheduler's limits) and, at shutdown, a summary. The
Batchscope app opens the file.

Each step also says why it looks as it does (``decisions``, the same records Batchscope's scheduler writes, read
from vLLM's state where vLLM decides; see ``batchscope_vllm.tracebook``): every admission with its prefix-cache hit,
recomputed and new tokens; every preemption with its victim, the victim rule, the K/V tokens and blocks it dropped,
and the running request whose block allocation failed, with the blocks it needed and the free ones; and the limit
that held the head of the waiting queue. For those numbers the scheduler's ``kv_cache_manager.allocate_slots`` and
its coordinator's ``get_num_blocks_to_allocate`` are wrapped on the instance (a few attribute writes per call), and
``_get_local_prefix_cache_hit`` is overridden. A scheduled prefill is ``recompute`` only when its chunk starts below
the most tokens the request held K/V for before a preemption; the summary's ``num_dropped_tokens`` sums the K/V
tokens its preemptions dropped and ``num_recomputed_tokens`` counts only the tokens computed again.

Environment:
- ``BATCHSCOPE_TRACE``: output path (``.gz``: compressed). Unset: the scheduler only schedules. One file per
  engine-core process; with data parallelism each rank writes its own, the rank before the extension
  (``server.dp1.jsonl.gz``).
- ``BATCHSCOPE_TRACE_MAX_MB`` (default 200): cap on the uncompressed text; step records stop there, with one log
  line, and the summary is still written.
- ``BATCHSCOPE_TRACE_TEXT=1``: also record prompt and output text (decoded off the engine's thread). By default
  only token ids and counts are recorded (sampled ids, prompt lengths).
- ``BATCHSCOPE_TRACE_PROMPT_IDS=1``: also record each prompt's token ids (so ``batchscope_vllm.compare`` can replay
  the trace through Batchscope's scheduler with prefix caching; they can be most of a trace's size).

Asynchronous scheduling (vLLM's default: step k+1 is scheduled before step k's tokens return) needs a scheduler
derived from vLLM's ``AsyncScheduler``; vLLM runs a plain ``Scheduler`` subclass with async scheduling on by
leaving every other step empty. So: ``TracingScheduler`` with ``--no-async-scheduling``, or
``TracingAsyncScheduler`` with async scheduling on (each update is matched to its own step by its
``SchedulerOutput``, so the log stays correct; see README). Either one says at start-up if it does not match the
server's setting. Tracing never raises into vLLM's loop: any failure stops it with one log line.

Imports only the standard library and vLLM.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import multiprocessing
import os
import time
from typing import Any

import vllm
from vllm.logger import init_logger
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from batchscope_vllm.tracebook import TraceBook
from batchscope_vllm.tracewriter import TraceWriter, trace_path

logger = init_logger(__name__)
DEFAULT_MAX_MB = 200


def _rank(vllm_config: Any) -> int | None:
    """This engine core's data-parallel rank, or None without data parallelism. vLLM resets a non-MoE rank's
    ``data_parallel_size`` to 1 but keeps the rank in ``data_parallel_index`` and names the process
    ``EngineCore_DP<rank>``."""
    pc = vllm_config.parallel_config
    rank = int(getattr(pc, "data_parallel_index", None) or pc.data_parallel_rank or 0)
    dp = pc.data_parallel_size > 1 or rank > 0 or multiprocessing.current_process().name.startswith("EngineCore_DP")
    return rank if dp else None


def _device(vllm_config: Any) -> str:
    kind = str(vllm_config.device_config.device_type)
    try:
        from vllm.platforms import current_platform

        name = current_platform.get_device_name() if kind != "cpu" else ""
    except Exception:
        name = ""
    return f"{kind} ({name})" if name else kind


def _header(sched: Any, record_text: bool) -> dict:
    cfg, sc = sched.vllm_config.model_config, sched.scheduler_config
    served = getattr(cfg, "served_model_name", None)
    served = served[0] if isinstance(served, (list, tuple)) and served else served
    return {
        "type": "header",
        "schema_version": 2,
        "source": "vllm",
        "vllm_version": str(vllm.__version__),
        "model": str(served or cfg.model),
        "device": _device(sched.vllm_config),
        "dtype": str(cfg.dtype).removeprefix("torch."),
        "policy": "continuous",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "scenario": None,
        "record_text": record_text,
        "config": {
            "max_num_seqs": int(sched.max_num_running_reqs),
            "max_num_batched_tokens": int(sched.max_num_scheduled_tokens),
            "block_size": int(sched.block_size),
            "num_kv_blocks": max(1, int(sched.kv_cache_config.num_blocks) - 1),  # without vLLM's null block
            "enable_chunked_prefill": bool(sc.enable_chunked_prefill),
            "enable_prefix_caching": bool(sched.cache_config.enable_prefix_caching),
            "reserve_full_prompt": bool(getattr(sched, "scheduler_reserve_full_isl", False)),
            "scheduling_policy": str(sched.policy.value),
            "async_scheduling": sc.async_scheduling,
            "max_model_len": int(cfg.max_model_len),
            **_speculative(sched.vllm_config.speculative_config),
        },
        "requests": [],
    }


def _speculative(spec: Any) -> dict:
    """The header's ``speculative_config`` (vLLM's ``--speculative-config``: method, draft count, n-gram sizes);
    empty without speculative decoding."""
    if spec is None or not getattr(spec, "num_speculative_tokens", 0):
        return {}
    out = {"method": str(spec.method), "num_speculative_tokens": int(spec.num_speculative_tokens)}
    for name in ("prompt_lookup_min", "prompt_lookup_max"):
        if getattr(spec, name, None):  # n-gram methods only
            out[name] = int(getattr(spec, name))
    return {"speculative_config": out}


def _decoder(vllm_config: Any):
    """A lazy token decoder for ``BATCHSCOPE_TRACE_TEXT=1`` (the tokenizer loads on first use, in the writer)."""
    state: dict[str, Any] = {}

    def decode(ids: list[int]) -> str:
        if "tok" not in state:
            from vllm.tokenizers import cached_tokenizer_from_config

            state["tok"] = cached_tokenizer_from_config(vllm_config.model_config)
        return state["tok"].decode(ids)

    return decode


class _AllocationProbe:
    """What the last ``allocate_slots`` call counted and, if it failed, what it failed on."""

    __slots__ = ("counted", "failed")

    def __init__(self) -> None:
        self.counted: tuple[bool, int] | None = None  # (full-sequence admission check?, blocks to allocate)
        self.failed: tuple[Any, dict, tuple[bool, int] | None, int] | None = None  # (request, kwargs, counted, free)


def _install_allocation_probe(kvm: Any) -> _AllocationProbe:
    """Wrap ``kvm.allocate_slots`` and ``kvm.coordinator.get_num_blocks_to_allocate`` on the instances, so a
    failed allocation leaves its request, the blocks the failing check counted and the free blocks in the probe.
    The free count is read right after ``allocate_slots`` returns None: nothing changes the pool between its
    failing comparison and that return. The wrappers only pass values through; they never raise of their own."""
    probe = _AllocationProbe()
    coordinator, pool = kvm.coordinator, kvm.block_pool
    count, allocate = coordinator.get_num_blocks_to_allocate, kvm.allocate_slots

    def get_num_blocks_to_allocate(*args: Any, **kwargs: Any) -> int:
        n = count(*args, **kwargs)
        probe.counted = (bool(kwargs.get("apply_admission_cap", False)), n)  # set only by the full-sequence check
        return n

    def allocate_slots(request: Any, *args: Any, **kwargs: Any) -> Any:
        probe.counted = probe.failed = None
        blocks = allocate(request, *args, **kwargs)
        if blocks is None:
            try:
                probe.failed = (request, kwargs, probe.counted, int(pool.get_num_free_blocks()))
            except Exception:
                probe.failed = None
        return blocks

    coordinator.get_num_blocks_to_allocate = get_num_blocks_to_allocate
    kvm.allocate_slots = allocate_slots
    return probe


class TracingMixin:
    """The tracing hooks; mixed into vLLM's ``Scheduler`` and ``AsyncScheduler`` below."""

    _book: TraceBook | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # vLLM's scheduler, unchanged
        try:
            self._start_tracing()
        except Exception as exc:
            self._book = None
            logger.warning("batchscope: tracing disabled: could not start: %r", exc)

    def _start_tracing(self: Any) -> None:
        path = os.environ.get("BATCHSCOPE_TRACE")
        if not path:
            return
        is_async = isinstance(self, AsyncScheduler)
        if bool(self.scheduler_config.async_scheduling) != is_async:
            logger.warning(
                "batchscope: %s with async scheduling %s: %s",
                type(self).__name__,
                "on" if self.scheduler_config.async_scheduling else "off",
                "start vLLM with --no-async-scheduling (vLLM leaves every other step of a synchronous scheduler "
                "empty when async scheduling is on), or use --scheduler-cls "
                "batchscope_vllm.tracer.TracingAsyncScheduler"
                if not is_async
                else "use batchscope_vllm.tracer.TracingScheduler when async scheduling is off",
            )
        record_text = os.environ.get("BATCHSCOPE_TRACE_TEXT", "") not in ("", "0")
        max_mb = float(os.environ.get("BATCHSCOPE_TRACE_MAX_MB") or DEFAULT_MAX_MB)
        out = trace_path(path, _rank(self.vllm_config))
        writer = TraceWriter(
            out, int(max_mb * 2**20), logger.warning, _decoder(self.vllm_config) if record_text else None
        )
        prompt_ids = os.environ.get("BATCHSCOPE_TRACE_PROMPT_IDS", "") not in ("", "0")
        self._book = TraceBook(self, writer, _header(self, record_text), prompt_ids)
        try:
            self._book.probe = _install_allocation_probe(self.kv_cache_manager)
        except Exception as exc:  # another vLLM: decisions without the numbers of failed allocations
            logger.warning("batchscope: no block counts in the decisions: %r", exc)
        atexit.register(self._stop_tracing)
        logger.info("batchscope: tracing every scheduler step to %s (cap %s MB)", out, max_mb)

    def _trace(self, method: str, *args: Any) -> None:
        book = self._book
        if book is None or not book.active:
            return
        try:
            getattr(book, method)(*args)
        except Exception as exc:  # never into vLLM's loop
            self._book = None
            logger.warning("batchscope: tracing stopped after an error in %s: %r", method, exc)
            with contextlib.suppress(Exception):
                book.writer.close(None, timeout=5.0)

    def _stop_tracing(self) -> None:
        book, self._book = self._book, None
        atexit.unregister(self._stop_tracing)  # the hook holds the scheduler: let a stopped one be collected
        if book is not None:
            try:
                book.close()
            except Exception as exc:
                logger.warning("batchscope: could not finish the trace: %r", exc)

    def add_request(self, request: Any) -> None:
        super().add_request(request)  # type: ignore[misc]
        self._trace("arrival", request)

    def _preempt_request(self, request: Any, *args: Any, **kwargs: Any) -> None:
        self._trace("preempted_now", request)  # before the parent drops its computed tokens
        super()._preempt_request(request, *args, **kwargs)  # type: ignore[misc]

    def _get_local_prefix_cache_hit(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        hit = super()._get_local_prefix_cache_hit(request, *args, **kwargs)  # type: ignore[misc]
        # the hit is what the admission computes from, unless a connector adds external tokens or a replay
        # window takes some back (then the decisions leave the whole-prompt check's numbers out)
        if (
            self._book is not None
            and getattr(self, "connector", None) is None
            and not getattr(self, "prefix_replay_tokens", 0)
        ):
            self._trace("prefix_lookup", request, hit[1])
        return hit

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        t_start = time.perf_counter()
        throttled = bool(args[0] if args else kwargs.get("throttle_prefills", False))
        self._trace("scheduling", throttled or int(getattr(self, "local_prefill_interval", 1) or 1) > 1)
        out = super().schedule(*args, **kwargs)  # type: ignore[misc]
        self._trace("scheduled", out, t_start)
        return out

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        self._trace("before_update", scheduler_output, time.perf_counter())
        result = super().update_from_output(scheduler_output, model_runner_output)  # type: ignore[misc]
        self._trace("updated", scheduler_output)
        return result

    def finish_requests(self, request_ids: Any, finished_status: Any) -> Any:
        if request_ids is not None and not isinstance(request_ids, str):
            request_ids = list(request_ids)  # read twice: by the tracer, then by vLLM
        self._trace("aborting", request_ids)  # before vLLM sets the status and frees the blocks
        finished = super().finish_requests(request_ids, finished_status)  # type: ignore[misc]
        self._trace("aborted_now", finished or [])
        return finished

    def shutdown(self) -> None:
        try:
            super().shutdown()  # type: ignore[misc]
        finally:
            self._stop_tracing()


class TracingScheduler(TracingMixin, Scheduler):
    """vLLM's synchronous V1 scheduler, tracing every step (use with ``--no-async-scheduling``)."""


class TracingAsyncScheduler(TracingMixin, AsyncScheduler):
    """vLLM's asynchronous V1 scheduler, tracing every step (vLLM's default async scheduling)."""
