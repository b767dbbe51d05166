"""CPU contention (``python -m batchscope bench --contention``): what a busy neighbour costs a decode step.

On a small machine the engine shares its cores with whatever else runs: the browser animating the app, a second
run, a build. PyTorch's CPU kernels split each operation over OpenMP threads that meet at a barrier when it ends; if
one of those threads' cores is taken by another process, every other thread waits for it, at every operation. This
measures the median decode step (Batchscope continuous, ``batch`` requests all decoding) for each thread count, on a
quiet machine and with one core kept busy by a spinning subprocess, interleaved (quiet, busy, busy, quiet, ...) so
that drift hurts both alike. Each figure is the best (lowest) of its rounds: other processes on a shared machine only
ever add time, so the best round is the one closest to "quiet" and to "exactly one busy neighbour"; every round is
kept in the JSON. The engine's rule (``batchscope.engine.threads``: available cores - 1, at least 1) must keep the
slowdown within ``MAX_SLOWDOWN``.

Units: milliseconds per step (median over the steps of a run); slowdown = busy / quiet - 1 (0.2 = 20 % slower).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

from batchscope.bench.measure import decode_step_times
from batchscope.bench.report import provenance
from batchscope.bench.workload import Workload
from batchscope.engine.threads import available_cores, default_threads, use_threads
from batchscope.model.models import LoadedModel

MAX_SLOWDOWN = 0.20
SPIN = "while True:\n    pass\n"


class BusyCore:
    """A subprocess that keeps one core busy until ``stop()`` (a stand-in for a neighbour such as a browser)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SPIN])
        time.sleep(0.3)  # let the scheduler place it

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def measure_contention(
    loaded: LoadedModel,
    work: Workload,
    threads: tuple[int, ...] = (1, 2),
    batch: int = 4,
    num_tokens: int = 24,
    rounds: int = 2,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Median decode step (ms) per thread count, quiet and with one busy core; the thread count the rule picks.

    Returns ``{"provenance", "batch", "rounds", "available_cores", "chosen_threads", "max_slowdown", "rows": [{
    "threads", "quiet_ms", "busy_ms", "slowdown", "quiet_ms_per_round", "busy_ms_per_round"}], "chosen_ok"}``.
    Ctrl-C keeps what was measured (``"partial": true``).
    """
    import torch

    say = progress or (lambda msg: None)
    before = torch.get_num_threads()
    runs: dict[tuple[int, str], list[float]] = {}
    partial = False
    try:
        for r in range(rounds):
            for n in threads:
                use_threads(n)
                for busy in (False, True) if (r + n) % 2 == 0 else (True, False):
                    say(f"round {r + 1}/{rounds}: {n} thread(s), {'one core busy' if busy else 'quiet'}")
                    ms = _step_ms(loaded, work, batch, num_tokens, busy)
                    if ms is not None:
                        runs.setdefault((n, "busy" if busy else "quiet"), []).append(ms)
    except KeyboardInterrupt:
        partial = True
    finally:
        use_threads(before)
    rows = [_row(n, runs.get((n, "quiet"), []), runs.get((n, "busy"), [])) for n in threads]
    chosen = default_threads()
    row = next((x for x in rows if x["threads"] == chosen), None)
    return {
        "provenance": provenance(loaded),
        "batch": batch,
        "rounds": rounds,
        "available_cores": available_cores(),
        "chosen_threads": chosen,
        "max_slowdown": MAX_SLOWDOWN,
        "rows": rows,
        "chosen_ok": None if not row or row["slowdown"] is None else row["slowdown"] <= MAX_SLOWDOWN,
        **({"partial": True} if partial else {}),
    }


def _row(n: int, quiet: list[float], busy: list[float]) -> dict:
    """One thread count's figures: the best round of each (ms) and the slowdown with a busy core."""
    q = min(quiet) if quiet else None
    b = min(busy) if busy else None
    return {
        "threads": n,
        "quiet_ms": q,
        "busy_ms": b,
        "slowdown": b / q - 1 if q and b else None,
        "quiet_ms_per_round": quiet,
        "busy_ms_per_round": busy,
    }


def _step_ms(loaded: LoadedModel, work: Workload, batch: int, num_tokens: int, busy: bool) -> float | None:
    neighbour = BusyCore() if busy else None
    try:
        m = decode_step_times(loaded, work, batch, num_tokens)
    finally:
        if neighbour:
            neighbour.stop()
    return m["median_ms"]


def to_markdown(result: dict) -> str:
    """The contention table: per thread count, quiet and busy step times and the slowdown."""
    p = result["provenance"]
    lines = [
        f"Model {p['model']} ({p['dtype']}) on {p['device']} ({p['device_name']}), {result['available_cores']} "
        f"available cores, {p['created']}; median decode step at batch {result['batch']}, "
        f"{result['rounds']} interleaved rounds (best round of each).",
        "",
        *(["**PARTIAL: stopped early (Ctrl-C).**", ""] if result.get("partial") else []),
        "| torch threads | quiet step (ms) | one core busy (ms) | slowdown |",
        "|---|---|---|---|",
    ]
    for r in result["rows"]:
        q, b, s = r["quiet_ms"], r["busy_ms"], r["slowdown"]
        lines.append(
            f"| {r['threads']} | {'–' if q is None else f'{q:.1f}'} | {'–' if b is None else f'{b:.1f}'} | "
            f"{'–' if s is None else f'{100 * s:+.0f} %'} |"
        )
    ok = result["chosen_ok"]
    verdict = "unmeasured" if ok is None else ("within" if ok else "**over**")
    lines += [
        "",
        f"The rule (available cores - 1, at least 1) picks {result['chosen_threads']} thread(s) here: {verdict} the "
        f"{100 * result['max_slowdown']:.0f} % budget for a busy neighbour.",
    ]
    return "\n".join(lines) + "\n"
