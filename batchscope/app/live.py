"""A live run in a background thread: queued behind the machine's lock, cancellable between engine steps.

The Streamlit script must stay free while the engine runs, so that its Cancel button can be pressed: the run goes to
a thread, and the page polls it. One lock per process serialises live runs (one forward at a time on these cores);
a queued run takes the lock the moment the running one ends or is cancelled (it polls every ``POLL_S``), and a queued
run can be cancelled before it starts. Nothing here imports Streamlit, so the queueing can be tested alone.

    work(should_stop, report) -> {run label: records}  # runs in the thread, holding the lock
      should_stop(): True once Cancel was pressed       (the engine asks it between steps)
      report(fraction, text): progress for the page

While it runs, one request can be cancelled (``cancel_request``): the work hands the engine it runs over
(``attach``) and the request is aborted before the engine's next step (``LLMEngine.abort``), as a server aborts a
request whose client went away; the run goes on with the others.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

POLL_S = 0.05
Work = Callable[[Callable[[], bool], Callable[[float, str], None]], dict[str, list[dict]]]


class LiveRun:
    """One user's live run. ``status``: queued, running, done, cancelled or error."""

    def __init__(self, work: Work, lock: threading.Lock, settings_key: str = ""):
        self.work, self.lock, self.settings_key = work, lock, settings_key
        self.cancelled = threading.Event()
        self.status = "queued"
        self.fraction, self.text = 0.0, "queued: another user's live run is in progress on this machine"
        self.result: dict[str, list[dict]] = {}
        self.error = ""
        self.started_at: float | None = None
        self.engine: Any = None  # the engine running now (``attach``), for ``cancel_request``
        self.unfinished: list[str] = []  # its requests not finished yet, in arrival order
        self.cancelled_requests: list[str] = []  # requests cancelled one by one (their runs are not cached)
        self._thread = threading.Thread(target=self._main, name="batchscope-live-run", daemon=True)

    def start(self) -> LiveRun:
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Stop after the current engine step (or before starting, if still queued); the partial trace is kept."""
        self.cancelled.set()

    def attach(self, engine: Any, request_ids: list[str]) -> None:
        """The work's engine (an ``batchscope.engine.engine.LLMEngine``) and its requests, before it runs."""
        self.engine, self.unfinished = engine, list(request_ids)

    def mark_finished(self, request_ids: list[str]) -> None:
        self.unfinished = [r for r in self.unfinished if r not in set(request_ids)]

    def cancel_request(self, request_id: str) -> None:
        """Abort ``request_id`` before the engine's next step (its blocks are freed, the trace lists the abort)."""
        if self.engine is not None and request_id in self.unfinished:
            self.cancelled_requests.append(request_id)
            self.engine.abort(request_id)

    @property
    def finished(self) -> bool:
        return self.status in ("done", "cancelled", "error")

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _report(self, fraction: float, text: str) -> None:
        self.fraction, self.text = min(max(fraction, 0.0), 1.0), text

    def _main(self) -> None:
        while not self.lock.acquire(timeout=POLL_S):
            if self.cancelled.is_set():
                self.status = "cancelled"
                return
        try:
            if self.cancelled.is_set():
                self.status = "cancelled"
                return
            self.status, self.started_at = "running", time.monotonic()
            self._report(0.0, "starting")
            self.result = self.work(self.cancelled.is_set, self._report)
            self.status = "cancelled" if self.cancelled.is_set() else "done"
        except Exception as exc:  # shown on the page; the lock is released below either way
            self.status, self.error = "error", f"{type(exc).__name__}: {exc}"
        finally:
            self.lock.release()
