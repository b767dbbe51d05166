"""Launch an SGLang 0.5.23 server whose scheduler writes a Batchscope trace (the one command):

    BATCHSCOPE_TRACE=/tmp/server.jsonl.gz python -m batchscope_sglang.serve --model-path MODEL [SGLang's options]

The options are ``python -m sglang.launch_server``'s, unchanged (HTTP server; ``--grpc-mode``, ``--encoder-only`` and
``--use-ray`` are refused in one line). SGLang has no scheduler-class option, so this launcher does what
``sglang.launch_server`` does with one difference: it hands SGLang's ``launch_server`` its documented
``run_scheduler_process_func`` argument, ``run_traced_scheduler_process``, which each scheduler process (and a
data-parallel controller's) runs in place of SGLang's ``run_scheduler_process``. That function registers
``batchscope_sglang.tracer.TracingScheduler`` with SGLang's own plugin hook registry (a class ``REPLACE`` on
``sglang.srt.managers.scheduler.Scheduler``), which the ``load_plugins()`` call opening ``run_scheduler_process``
applies before the scheduler is built; nothing else of SGLang changes.

When the server stops (Ctrl-C, SIGTERM), the launcher asks each scheduler process to end through SGLang's graceful
exit (SIGTERM, which ``TracingScheduler`` turns into SGLang's ``gracefully_exit``) and waits for them (up to
``BATCHSCOPE_STOP_SECONDS``, default 30), so each trace gets its summary line; then SGLang's own clean-up kills what is
left. Standard library and SGLang only.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

TARGET = "sglang.srt.managers.scheduler.Scheduler"
SCHEDULER_TITLE = "sglang::scheduler"  # setproctitle of SGLang's scheduler processes (configure_scheduler_process)


def run_traced_scheduler_process(*args: Any, **kwargs: Any) -> Any:
    """SGLang's ``run_scheduler_process`` (same arguments) with ``TracingScheduler`` as its scheduler class."""
    import sglang.srt.plugins as plugins
    from sglang.srt.managers.scheduler import run_scheduler_process
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from batchscope_sglang.tracer import TracingScheduler

    HookRegistry.register(TARGET, TracingScheduler, HookType.REPLACE)
    if getattr(plugins, "_plugins_loaded", False):  # plugins already loaded here: run_scheduler_process will not
        HookRegistry.apply_hooks()
    return run_scheduler_process(*args, **kwargs)


def _children(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux: read from /proc, standard library only)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def stop_schedulers(timeout: float) -> None:
    """SIGTERM every scheduler process below this one, then wait up to ``timeout`` seconds for them to exit."""
    found = []
    for child in _children(os.getpid()):
        if _cmdline(child).startswith(SCHEDULER_TITLE):
            try:
                os.kill(child, signal.SIGTERM)
                found.append(child)
            except OSError:
                pass
    deadline = time.monotonic() + timeout
    while found and time.monotonic() < deadline:
        found = [pid for pid in found if Path(f"/proc/{pid}").exists() and _state(pid) != "Z"]
        time.sleep(0.1)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def main(argv: list[str]) -> int:
    if not os.environ.get("BATCHSCOPE_TRACE"):
        print("batchscope_sglang.serve: set BATCHSCOPE_TRACE to the trace file to write (.jsonl or .jsonl.gz)")
        return 2
    from sglang.srt.arg_groups.overrides import resolving_view
    from sglang.srt.entrypoints.http_server import launch_server
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    load_plugins()
    server_args = prepare_server_args(argv)
    server_args.resolve_once()  # as sglang.launch_server.run_server does before dispatching on the mode
    cfg = resolving_view(server_args)
    for flag in ("encoder_only", "smg_grpc_mode", "grpc_mode", "use_ray"):
        if getattr(cfg, flag, False):
            print(f"batchscope_sglang.serve: --{flag.replace('_', '-')} is not traced; use the HTTP server")
            return 2
    try:
        launch_server(server_args, run_scheduler_process_func=run_traced_scheduler_process)
    finally:
        stop_schedulers(float(os.environ.get("BATCHSCOPE_STOP_SECONDS") or 30))
        kill_process_tree(os.getpid(), include_parent=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
