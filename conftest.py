"""Bounds on every test of the three suites (main, vLLM's venv, SGLang's venv), so a runaway fails one test with
its example printed instead of taking the machine down (issue 33: a spinning engine grew the vLLM suite to 21 GB
until the kernel killed it, and CI with it).

- **Time**: each test may run ``BATCHSCOPE_TEST_SECONDS`` (default 900) of wall time; each *example* of a
  hypothesis test ``BATCHSCOPE_EXAMPLE_SECONDS`` (default 120). Past it, ``TestBoundExceeded`` is raised in the
  test (hypothesis then shrinks and prints the falsifying example, as for any failure).
- **Memory**: a watchdog thread reads the process's resident memory (``/proc/self/statm``) every 0.2 s; when a test
  (or example) has grown it by more than ``BATCHSCOPE_TEST_MAX_GROWTH_GB`` (default 4) it raises
  ``TestBoundExceeded`` in the test the same way. Growth, not the total: a process that loaded the model holds
  ~2 GB for good, and memory a runaway took may stay with the process (the C allocator keeps it), which must not
  fail the next test.
- **Rerun in one command**: unless ``--hypothesis-seed`` is given, one seed is drawn per session and passed to
  hypothesis (and so to pytest-xdist's workers); the session header prints it, and a failed hypothesis test
  prints the one command that reruns it with the same draws.

Standard library only: this file is loaded in vLLM's and SGLang's venvs too. POSIX signals: the bounds are armed
only in a process's main thread (where pytest and pytest-xdist's workers run tests).
"""

from __future__ import annotations

import os
import random
import shlex
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

TEST_SECONDS = float(os.environ.get("BATCHSCOPE_TEST_SECONDS", "900"))
EXAMPLE_SECONDS = float(os.environ.get("BATCHSCOPE_EXAMPLE_SECONDS", "120"))
MAX_GROWTH_BYTES = int(float(os.environ.get("BATCHSCOPE_TEST_MAX_GROWTH_GB", "4")) * 2**30)
POLL_SECONDS = 0.2


class TestBoundExceeded(Exception):
    """A test (or one hypothesis example) ran past its time bound or its memory bound."""

    __test__ = False  # not a test class


def _rss_bytes() -> int:
    """This process's resident memory in bytes (0 where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


class _Bounds:
    """Arms SIGALRM for a deadline and watches memory; the handler raises ``TestBoundExceeded`` in the main thread."""

    def __init__(self) -> None:
        self.what = ""
        self.generation = 0  # one per armed block, so a late memory signal never hits the next test
        self.pending: tuple[int, str] | None = None
        self.armed = False
        self.rss_at_start = 0
        self.previous: Any = None
        self.watch = threading.Event()
        threading.Thread(target=self._watch_memory, name="test-memory-bound", daemon=True).start()

    def _watch_memory(self) -> None:
        fired = -1  # the generation already signalled (one signal a test; never clear the next test's watch)
        while True:
            self.watch.wait()
            generation, rss = self.generation, _rss_bytes()
            if self.armed and generation != fired and rss - self.rss_at_start > MAX_GROWTH_BYTES:
                reason = (
                    f"{self.what} grew the process by {(rss - self.rss_at_start) / 2**30:.1f} GiB of memory, over "
                    f"the bound of {MAX_GROWTH_BYTES / 2**30:.1f} GiB (BATCHSCOPE_TEST_MAX_GROWTH_GB): a runaway"
                )
                self.pending = (generation, reason)
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGALRM)
                fired = generation
            time.sleep(POLL_SECONDS)

    def _on_alarm(self, signum: int, frame: Any) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:  # the memory watchdog's signal
            generation, reason = pending
            if generation != self.generation or not self.armed:
                return  # it measured a test that has ended since: nothing to stop now
            raise TestBoundExceeded(reason)
        raise TestBoundExceeded(f"{self.what} ran past its time bound: a runaway")

    def __call__(self, what: str, seconds: float) -> _Armed:
        return _Armed(self, what, seconds)


class _Armed:
    """``with BOUNDS(what, seconds):`` the block runs under both bounds (a nested use keeps the outer ones)."""

    def __init__(self, bounds: _Bounds, what: str, seconds: float):
        self.bounds, self.what, self.seconds = bounds, what, seconds
        self.active = False

    def __enter__(self) -> None:
        b = self.bounds
        if b.armed or threading.current_thread() is not threading.main_thread():  # a test's own threads
            return
        self.active = True
        b.generation += 1
        b.what, b.pending, b.rss_at_start, b.armed = self.what, None, _rss_bytes(), True
        b.previous = signal.signal(signal.SIGALRM, b._on_alarm)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        b.watch.set()

    def __exit__(self, *exc: object) -> None:
        if not self.active:
            return
        b = self.bounds
        b.armed = False
        b.watch.clear()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, b.previous or signal.SIG_DFL)


BOUNDS = _Bounds()


def _bounded_examples(inner: Callable[..., Any], nodeid: str) -> Callable[..., Any]:
    """Hypothesis' ``inner_test`` (run once per example), each call under the example bounds."""

    def run_example(*args: Any, **kwargs: Any) -> Any:
        with BOUNDS(f"one example of {nodeid}", EXAMPLE_SECONDS):
            return inner(*args, **kwargs)

    return run_example


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Draw the session's hypothesis seed before hypothesis' own plugin reads the option (workers inherit it)."""
    if hasattr(config.option, "hypothesis_seed") and config.option.hypothesis_seed is None:
        config.option.hypothesis_seed = str(random.SystemRandom().randrange(2**32))


def pytest_report_header(config: pytest.Config) -> str:
    seed = getattr(config.option, "hypothesis_seed", None)
    return (
        f"bounds: {TEST_SECONDS:.0f} s a test, {EXAMPLE_SECONDS:.0f} s an example, "
        f"{MAX_GROWTH_BYTES / 2**30:.1f} GiB of growth a test; hypothesis seed {seed}"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    hypothesis = getattr(getattr(item, "obj", None), "hypothesis", None)
    if hypothesis is not None:  # each example bounded (the test as a whole may run many of them)
        if not getattr(hypothesis, "_bounded", False):
            hypothesis.inner_test = _bounded_examples(hypothesis.inner_test, item.nodeid)
            hypothesis._bounded = True
        yield
        return
    with BOUNDS(item.nodeid, TEST_SECONDS):
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(TestBoundExceeded):
        # the report is text now; drop the runaway's frames (pytest keeps the last traceback in sys.last_traceback),
        # so what it held (memory) goes with it instead of counting against the next test
        traceback.clear_frames(call.excinfo.tb)
    if report.when != "call" or not report.failed:
        return
    if getattr(getattr(item, "obj", None), "hypothesis", None) is None:
        return
    seed = item.config.option.hypothesis_seed
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", item.nodeid, f"--hypothesis-seed={seed}"]
    report.sections.append(("rerun this example", " ".join(shlex.quote(c) for c in command)))
