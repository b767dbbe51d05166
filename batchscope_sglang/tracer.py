"""See your own SGLang server: SGLang 0.5.23's scheduler, writing a Batchscope trace of every batch it runs.

    BATCHSCOPE_TRACE=/tmp/server.jsonl.gz python -m batchscope_sglang.serve --model-path MODEL [SGLang's options]

SGLang has no scheduler-class option; its ``launch_server`` takes the function that runs each scheduler process
(``run_scheduler_process_func``), and ``batchscope_sglang.serve`` passes ``run_traced_scheduler_process``: in the
scheduler process it registers ``TracingScheduler`` with SGLang's own hook registry (a class ``REPLACE`` hook on
``sglang.srt.managers.scheduler.Scheduler``, applied by the ``load_plugins()`` call that opens SGLang's
``run_scheduler_process``), then runs SGLang's ``run_scheduler_process`` unchanged.

``TracingScheduler`` is SGLang's own ``Scheduler`` (subclassed, every decision unchanged): around
``_add_request_to_queue``, ``abort_request``, ``get_next_batch_to_run``, ``update_running_batch`` and
``process_batch_result`` it records one step per batch in Batchscope's trace format, schema version 2
(``batchscope_sglang.tracebook`` says what each field is read from), with a header (model, SGLang version, device,
the scheduler's limits) and, at shutdown, a summary. The Batchscope app opens the file.

The overlap scheduler (SGLang's default: batch k+1 is scheduled before batch k's results are processed) is recorded
as it runs: the header's ``config.async_scheduling`` is true and steps overlap in time, as a vLLM trace with
asynchronous scheduling does; ``--disable-overlap-schedule`` gives steps one after the other.

Environment (the vLLM tracer's):
- ``BATCHSCOPE_TRACE``: output path (``.gz``: compressed). Unset: the scheduler only schedules. One file per
  scheduler process: with data parallelism each rank writes its own (``server.dp1.jsonl.gz``), with tensor or
  pipeline parallelism only rank 0 writes (the others schedule the same batches).
- ``BATCHSCOPE_TRACE_MAX_MB`` (default 200): cap on the uncompressed text; step records stop there, with one log
  line, and the summary is still written.
- ``BATCHSCOPE_TRACE_TEXT=1``: also record prompt and output text (decoded off the scheduler's thread).
- ``BATCHSCOPE_TRACE_PROMPT_IDS=1``: also record each prompt's token ids.

A server stopped with Ctrl-C or SIGTERM through ``batchscope_sglang.serve`` ends its scheduler through SGLang's own
graceful exit (``gracefully_exit``), so the summary is written; a scheduler killed outright leaves a trace without
a summary, which Batchscope opens as cut short at its last complete step. Tracing never raises into SGLang's loop:
any failure stops it with one log line.

Imports only the standard library and SGLang.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import logging
import os
import signal
from typing import Any

import sglang
from sglang.srt.managers.scheduler import Scheduler

from batchscope_sglang.tracebook import TraceBook
from batchscope_vllm.tracewriter import TraceWriter, trace_path  # standard library only: one writer, one size cap

logger = logging.getLogger(__name__)
DEFAULT_MAX_MB = 200


def _env_on(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _ranks() -> tuple[int | None, bool]:
    """(this scheduler's data-parallel rank or None without data parallelism, whether it writes: tensor and
    pipeline rank 0 only)."""
    try:
        from sglang.srt.runtime_context import get_parallel

        p = get_parallel()
        dp = getattr(p, "dp_rank", None)
        writes = int(getattr(p, "tp_rank", 0) or 0) == 0 and int(getattr(p, "pp_rank", 0) or 0) == 0
        return (int(dp) if dp is not None and int(getattr(p, "dp_size", 1) or 1) > 1 else None), writes
    except Exception:
        return None, True


def _device(s: Any) -> str:
    args = getattr(s, "server_args", None)  # None: built without its constructor (model-free, on the CPU)
    kind = str(getattr(args, "device", None) or ("cpu" if args is None else "cuda"))
    try:  # SGLang's own name for the device it runs on (None on a CPU)
        from sglang.srt.utils.common import get_device_name

        name = (get_device_name() or "") if kind != "cpu" else ""
    except Exception:
        name = ""
    return f"{kind} ({name})" if name else kind


def header(s: Any, record_text: bool) -> dict:
    """The trace's first line, from the scheduler's own settings (``page_size`` tokens a block)."""
    args = getattr(s, "server_args", None)
    served = getattr(args, "served_model_name", None) or getattr(args, "model_path", None) or "unknown"
    page = int(s.page_size or 1)
    chunk = s.chunked_prefill_size
    config: dict[str, Any] = {
        "max_num_seqs": int(s.max_running_requests),
        "max_num_batched_tokens": int(chunk if chunk and chunk > 0 else s.max_prefill_tokens),
        "block_size": page,
        "num_kv_blocks": max(1, int(s.token_to_kv_pool_allocator.size) // page),
        "enable_chunked_prefill": bool(chunk and chunk > 0),
        "enable_prefix_caching": not bool(getattr(s.tree_cache, "disable", False)),
        "scheduling_policy": str(s.schedule_policy),
        "async_scheduling": bool(s.enable_overlap),
    }
    if s.is_mixed_chunk:
        config["enable_mixed_chunk"] = True
    context = getattr(s.model_config, "context_len", None)
    if context:
        config["max_model_len"] = int(context)
    dtype = getattr(s.model_config, "dtype", None)
    return {
        "type": "header",
        "schema_version": 2,
        "source": "sglang",
        "sglang_version": str(sglang.__version__),
        "model": str(served),
        "device": _device(s),
        "dtype": str(dtype).removeprefix("torch.") if dtype is not None else "unknown",
        "policy": "sglang",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "scenario": None,
        "record_text": record_text,
        "config": config,
        "requests": [],
    }


def _decoder(s: Any):
    """A token decoder for ``BATCHSCOPE_TRACE_TEXT=1`` (the scheduler's tokenizer, used on the writer's thread)."""

    def decode(ids: list[int]) -> str:
        tok = getattr(s, "tokenizer", None)
        return tok.decode(ids) if tok is not None else ""

    return decode


class TracingMixin:
    """The tracing hooks; mixed into SGLang's ``Scheduler`` below."""

    _book: TraceBook | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # SGLang's scheduler, unchanged
        self.start_tracing()
        with contextlib.suppress(ValueError):  # not the main thread: no graceful stop on SIGTERM
            signal.signal(signal.SIGTERM, self._graceful_exit)

    def _graceful_exit(self, signum: int, frame: Any) -> None:
        self.gracefully_exit = True  # SGLang's own flag (handle_shutdown): the event loop ends after this iteration

    def start_tracing(self) -> None:
        """Open the trace if ``BATCHSCOPE_TRACE`` is set (never raises: a failure disables tracing, with one log
        line). Called by ``__init__``; a scheduler built without its constructor calls it itself."""
        try:
            path = os.environ.get("BATCHSCOPE_TRACE")
            rank, writes = _ranks()
            if not path or not writes:
                return
            record_text = _env_on("BATCHSCOPE_TRACE_TEXT")
            max_mb = float(os.environ.get("BATCHSCOPE_TRACE_MAX_MB") or DEFAULT_MAX_MB)
            out = trace_path(path, rank)
            writer = TraceWriter(out, int(max_mb * 2**20), logger.warning, _decoder(self) if record_text else None)
            prompt_ids = _env_on("BATCHSCOPE_TRACE_PROMPT_IDS")
            self._book = TraceBook(self, writer, header(self, record_text), prompt_ids)
            atexit.register(self.stop_tracing)
            logger.info("batchscope: tracing every scheduler step to %s (cap %s MB)", out, max_mb)
        except Exception as exc:
            self._book = None
            logger.warning("batchscope: tracing disabled: could not start: %r", exc)

    def _trace(self, method: str, *args: Any) -> Any:
        book = self._book
        if book is None or not book.active:
            return None
        try:
            return getattr(book, method)(*args)
        except Exception as exc:  # never into SGLang's loop
            self._book = None
            logger.warning("batchscope: tracing stopped after an error in %s: %r", method, exc)
            with contextlib.suppress(Exception):
                book.writer.close(None, timeout=5.0)
            return None

    def stop_tracing(self) -> None:
        """Write the summary and close the file (at exit, or when the event loop ends)."""
        book, self._book = self._book, None
        atexit.unregister(self.stop_tracing)
        if book is not None:
            try:
                book.close()
            except Exception as exc:
                logger.warning("batchscope: could not finish the trace: %r", exc)

    def _add_request_to_queue(self, req: Any, is_retracted: bool = False) -> None:
        super()._add_request_to_queue(req, is_retracted)  # type: ignore[misc]
        if not is_retracted:
            self._trace("arrival", req)

    def abort_request(self, recv_req: Any) -> Any:
        before = self._trace("aborting")
        out = super().abort_request(recv_req)  # type: ignore[misc]
        if before is not None:
            self._trace("aborted", before)
        return out

    def get_next_batch_to_run(self, running_batch: Any, last_batch: Any) -> Any:
        started = self._trace("scheduling")
        plan = super().get_next_batch_to_run(running_batch, last_batch)  # type: ignore[misc]
        if started is not None:
            self._trace("scheduled", plan.batch_to_run, plan.running_batch, *started)
        return plan

    def update_running_batch(self, batch: Any) -> Any:
        traced = self._book is not None
        if traced:
            self._trace("deciding_decode", batch)
        try:
            return super().update_running_batch(batch)  # type: ignore[misc]
        finally:
            if traced:
                self._trace("decided_decode", batch)

    def process_batch_result(self, batch: Any, result: Any) -> Any:
        self._trace("processing", batch)
        out = super().process_batch_result(batch, result)  # type: ignore[misc]
        self._trace("processed", batch)
        return out

    def run_event_loop(self) -> None:
        try:
            super().run_event_loop()  # type: ignore[misc]
        finally:
            self.stop_tracing()


class TracingScheduler(TracingMixin, Scheduler):
    """SGLang 0.5.23's scheduler, tracing every batch (overlap on or off)."""
