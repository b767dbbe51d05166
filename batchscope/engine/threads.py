"""How many CPU threads PyTorch uses for a run, chosen so that a busy neighbour does not stall it.

PyTorch's CPU kernels split each operation over OpenMP threads that wait for each other at the end of it. When
another process keeps one of those cores busy (a browser playing an animation, a second run, a compile), the thread
on that core is descheduled and every other thread waits for it at every operation: on a 2-core machine a decode step
took 110 ms quiet and 326 ms with one busy core at 2 threads, while at 1 thread it stayed at 115 ms
(``python -m batchscope bench --contention`` measures this; the figures are in ``docs/measurements/engine.md``). So a
live run leaves one core free: ``available cores - 1`` threads, at least 1. ``--threads N`` (CLI) or
``$BATCHSCOPE_THREADS`` override it.
"""

from __future__ import annotations

import os
import sys

MAX_THREADS = 256


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """``$BATCHSCOPE_THREADS`` if set, else one thread fewer than the available cores (at least 1)."""
    env = os.environ.get("BATCHSCOPE_THREADS", "").strip()
    if env:
        return check_threads(env, "$BATCHSCOPE_THREADS")
    return max(1, available_cores() - 1)


def check_threads(value: object, name: str = "--threads") -> int:
    """``value`` as a thread count in [1, 256]. Raises ``ValueError`` naming ``name`` and the range."""
    try:
        n = int(str(value))
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(f"{name}={value!r} is out of range: an integer in [1, {MAX_THREADS}]")
    return n


def use_threads(n: int | None = None) -> int:
    """Set PyTorch's intra-op threads to ``n`` (``None``: ``default_threads()``); returns the count set."""
    import torch

    n = default_threads() if n is None else check_threads(n)
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n


def torch_threads() -> int:
    """PyTorch's intra-op thread count now; 1 where torch is not loaded (a model-free run computes on one thread)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else 1
