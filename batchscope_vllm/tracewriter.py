"""Write a trace off vLLM's hot path: a background thread serializes records and writes them, buffered.

Standard library only. ``TraceWriter.put(record)`` only enqueues (a bounded queue: if the thread ever falls 4,096
records behind, tracing stops rather than slow the server or grow without bound); the thread turns records into
JSON Lines, adds token text when asked (``decode``), and writes in chunks of about 1 MB, at least every
``flush_every`` seconds; ``.gz`` paths are gzip-compressed. The size cap counts uncompressed text: when the next
step record (plus room for the summary, ``reserve``) would pass it, step records stop, with one log line; the
summary is still written by ``close``. Any failure (disk full, a value JSON cannot hold) stops the writer with one
log line; nothing is ever raised to the caller.
"""

from __future__ import annotations

import gzip
import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

QUEUE_LIMIT = 4096
CHUNK_BYTES = 1 << 20
_STOP = object()


def trace_path(path: str, rank: int | None) -> str:
    """``path`` with the data-parallel rank before its extension (``t.jsonl.gz`` -> ``t.dp1.jsonl.gz``)."""
    if rank is None:
        return path
    for suffix in (".jsonl.gz", ".json.gz", ".jsonl", ".json", ".gz"):
        if path.endswith(suffix):
            return f"{path[: -len(suffix)]}.dp{rank}{suffix}"
    return f"{path}.dp{rank}"


class TraceWriter:
    """Owns the file and the thread. ``log(message)`` reports problems (vLLM's logger in the tracer)."""

    def __init__(
        self,
        path: str,
        max_bytes: int,
        log: Callable[[str], None],
        decode: Callable[[list[int]], str] | None = None,
        flush_every: float = 2.0,
    ):
        self.path, self.max_bytes, self.log, self.decode = path, max_bytes, log, decode
        self.flush_every = flush_every
        self.written = 0  # uncompressed bytes, header included
        self.capped_at: int | None = None  # step of the first record refused by the cap
        self.failed = False
        # closed by the writer thread when it stops (``close``), not by a with block
        self._file: Any = (
            gzip.open(path, "wb", compresslevel=4) if path.endswith(".gz") else open(path, "wb")  # noqa: SIM115
        )
        self._buffer: list[bytes] = []
        self._buffered = 0
        self._last_flush = time.monotonic()
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_LIMIT)
        self._thread = threading.Thread(target=self._run, name="batchscope-trace-writer", daemon=True)
        self._thread.start()

    @property
    def accepting(self) -> bool:
        """False once the cap was reached or the writer failed: callers stop building step records."""
        return not self.failed and self.capped_at is None

    def put(self, record: dict, reserve: int = 0) -> None:
        """Queue ``record``; ``reserve``: bytes to keep free for the summary (checked against the cap)."""
        if not self.accepting:
            return
        try:
            self._queue.put_nowait((record, reserve))
        except queue.Full:
            self._fail(f"the writer fell {QUEUE_LIMIT} records behind the engine")

    def close(self, summary: dict | None, timeout: float = 60.0) -> None:
        """Write ``summary`` (whatever the cap), flush, close the file and stop the thread. Idempotent."""
        if not self._thread.is_alive():
            return
        try:
            self._queue.put((summary, None), timeout=timeout)
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            self._fail("the writer did not drain at shutdown")
        self._thread.join(timeout)

    def _fail(self, why: str) -> None:
        if not self.failed:
            self.failed = True
            self.log(f"batchscope: tracing to {self.path} stopped: {why}. The file is incomplete.")

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self.flush_every)
            except queue.Empty:
                item = None
            try:
                if item is _STOP:
                    break
                if item is not None and not self.failed:
                    self._write(*item)
                if time.monotonic() - self._last_flush >= self.flush_every or self._buffered >= CHUNK_BYTES:
                    self._flush()
            except Exception as exc:  # never let the thread die silently, never raise into vLLM
                self._fail(f"{type(exc).__name__}: {exc}")
        try:
            self._flush()
            self._file.close()
        except Exception as exc:
            self._fail(f"closing the file: {type(exc).__name__}: {exc}")

    def _write(self, record: dict | None, reserve: int | None) -> None:
        if record is None:
            return
        if self.decode is not None:
            self._add_text(record)
        line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n").encode()
        summary = reserve is None
        if not summary and self.written + len(line) + (reserve or 0) > self.max_bytes:
            if self.capped_at is None:
                self.capped_at = record.get("step", -1)
                self.log(
                    f"batchscope: trace {self.path} reached its size cap of {self.max_bytes // 2**20} MB "
                    f"(BATCHSCOPE_TRACE_MAX_MB) at step {self.capped_at}: step records stop here; the summary "
                    "is written at shutdown."
                )
            return
        if self.capped_at is not None and not summary:
            return
        self._buffer.append(line)
        self._buffered += len(line)
        self.written += len(line)

    def _flush(self) -> None:
        if self._buffer:
            self._file.write(b"".join(self._buffer))
            self._buffer, self._buffered = [], 0
        self._file.flush()
        self._last_flush = time.monotonic()

    def _add_text(self, record: dict) -> None:
        """Token text, only with ``BATCHSCOPE_TRACE_TEXT=1`` (decoded here, off the engine's thread)."""
        assert self.decode is not None
        for s in record.get("sampled", ()):
            s["text"] = self.decode([s["token_id"]])
        for r in record.get("arrived", ()):
            r["prompt"] = self.decode(r.get("prompt_token_ids", []))
        if record.get("type") == "summary":
            for r in record["requests"]:
                r["output_text"] = self.decode(r["output_token_ids"])
