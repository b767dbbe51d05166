"""Command line: ``python -m batchscope run|scenarios|metrics|perfetto`` here, and the tools' commands (``bench``, ...).

    python -m batchscope scenarios
    python -m batchscope run --scenario seed-abcd --batching continuous --out t.jsonl
    python -m batchscope run --workload my.jsonl --max-num-seqs 2 --num-kv-blocks 32 --out t.jsonl
    python -m batchscope metrics t.jsonl [other.jsonl]
    python -m batchscope perfetto t.jsonl --out t.perfetto.json     (Chrome trace-event JSON for ui.perfetto.dev)
    python -m batchscope bench [--num-requests 4 --max-tokens 32 --rounds 2 --max-num-seqs 4]   (package bench)
    python -m batchscope sweep [--num-requests 32 --mean-tokens 32 --sigmas 0 0.5 1 1.5 2]       (package bench)

Tools beside the engine add their commands through the ``batchscope.commands`` entry points (see ``pyproject.toml``):
each entry point is a function ``add_parser(subparsers)`` that adds one sub-command and sets its ``handler(args) ->
int``. The engine never imports them by name.

Bad input exits with status 2 and one line on stderr that names the field and the allowed range; results go to
stdout, progress to stderr. Ctrl-C stops a run after its current step and writes the partial trace (exit 130).
A run whose step times show CPU contention (``batchscope.steplog.timing``) warns in one line on stderr; with
``--strict-timing`` it writes no trace and exits with status 3.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from importlib.metadata import entry_points

from batchscope.cli.common import HelpFormatter, check_device, check_out_path, stop_on_ctrl_c, version
from batchscope.cli.flags import add_engine_flags, config_from_args
from batchscope.steplog.records import StepRecord

TIMING_REFUSED = 3  # exit status of `run --strict-timing` when the step times show contention

RUN_EXAMPLE = """example:
  python -m batchscope run --scenario seed-abcd --out t.jsonl
  python -m batchscope run --workload my.jsonl --batching static --max-num-seqs 2 --out t.jsonl --force

A workload is JSON Lines, one request per line (format: docs/trace-format.md, "Workload"). Threads: one fewer than
the available cores (at least 1), so that a busy neighbour does not stall the run; --threads overrides it."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m batchscope",
        description="Batchscope: a small, real LLM serving engine.",
        formatter_class=HelpFormatter,
        epilog="examples:\n  python -m batchscope run --scenario seed-abcd --out t.jsonl\n"
        "  python -m batchscope metrics t.jsonl",
    )
    p.add_argument("--version", action="version", version=f"batchscope {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser(
        "scenarios",
        help="list the shipped scenarios",
        epilog="example:\n  python -m batchscope scenarios",
        formatter_class=HelpFormatter,
    )
    _add_run(sub)
    m = sub.add_parser(
        "metrics",
        help="validate traces and print their latency and throughput (vLLM's definitions)",
        formatter_class=HelpFormatter,
        epilog="example:\n  python -m batchscope metrics batchscope/assets/traces/seed-abcd-static.jsonl "
        "batchscope/assets/traces/seed-abcd-continuous.jsonl",
    )
    m.add_argument("traces", nargs="+", metavar="TRACE", help="one or two trace files (JSON Lines)")
    _add_perfetto(sub)
    for ep in entry_points(group="batchscope.commands"):
        if ep.name not in sub.choices:  # an editable and a plain install of the same tools list them twice
            ep.load()(sub)
    return p


def _add_run(sub) -> None:
    run = sub.add_parser(
        "run",
        help="run a scenario or workload and write its trace (JSON Lines)",
        formatter_class=HelpFormatter,
        epilog=RUN_EXAMPLE,
    )
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", help="a shipped scenario (see `python -m batchscope scenarios`)")
    src.add_argument("--workload", help="JSON Lines file, one request per line (docs/trace-format.md, Workload)")
    run.add_argument("--out", required=True, help="trace file to write (refused if it exists, unless --force)")
    run.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    add_engine_flags(run)  # --batching, the limits, chunked prefill, prefix caching, admission, queue, model, device
    run.add_argument("--num-requests", type=int, help="run only the first N requests of the scenario or workload")
    run.add_argument("--max-tokens", type=int, help="set every request's max_tokens to M")
    run.add_argument("--seed", type=int, help="seed for unseeded sampled requests (default: a fresh one, recorded)")
    run.add_argument("--threads", type=int, default=None, help="CPU threads (default: available cores - 1, >= 1)")
    run.add_argument(
        "--strict-timing",
        action="store_true",
        help="refuse (exit 3, no trace written) when the step times show CPU contention, instead of warning",
    )


def _add_perfetto(sub) -> None:
    pf = sub.add_parser(
        "perfetto",
        help="write a trace as Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing)",
        formatter_class=HelpFormatter,
        epilog="example:\n  python -m batchscope perfetto batchscope/assets/traces/seed-abcd-continuous.jsonl \\\n"
        "      --out seed.json\n\n"
        "A track per batch row with a slice per request per step (prefill / decode / recompute / padding),\n"
        "counters per step (KV blocks used, waiting, running, tokens scheduled) and instants for admissions,\n"
        "preemptions, finishes and aborts; on the trace's step times, or 1 ms per step where it has none.",
    )
    pf.add_argument("trace", metavar="TRACE", help="a trace file (.jsonl or .jsonl.gz)")
    pf.add_argument("--out", required=True, help="the JSON file to write (refused if it exists, unless --force)")
    pf.add_argument("--force", action="store_true", help="overwrite an existing --out file")


def _specs(args) -> tuple[list[dict], dict]:
    """The run's request specs (shrunk by --num-requests / --max-tokens) and the scenario's config overrides."""
    from batchscope.cli.common import CLIError
    from batchscope.engine.threads import check_threads
    from batchscope.inputs.workload import load_scenario, read_workload

    if args.scenario:
        scenario = load_scenario(args.scenario)
        specs, overrides = scenario["requests"], scenario.get("config", {})
    else:
        specs, overrides = read_workload(args.workload), {}
    if args.num_requests is not None:
        if not 1 <= args.num_requests <= len(specs):
            raise CLIError(f"--num-requests={args.num_requests} is out of range: an integer in [1, {len(specs)}]")
        specs = specs[: args.num_requests]
    if args.max_tokens is not None:
        if not 1 <= args.max_tokens <= 1_000_000:
            raise CLIError(f"--max-tokens={args.max_tokens} is out of range: an integer in [1, 1000000]")
        specs = [dict(s, max_tokens=args.max_tokens) for s in specs]
    if args.seed is not None and not 0 <= args.seed < 2**63:
        raise CLIError(f"--seed={args.seed} is out of range: an integer in [0, 2**63)")
    if args.threads is not None:
        check_threads(args.threads)
    return specs, overrides


def _run(args) -> int:
    specs, overrides = _specs(args)  # every input checked before torch and the model load (seconds)
    config = config_from_args(args, overrides)
    out = check_out_path(args.out, "--out", inputs=(args.workload,), force=args.force)
    check_device(args.device)
    from batchscope.cli.progress import Ends, Progress
    from batchscope.engine.llm import generate_trace, validate_requests
    from batchscope.engine.threads import use_threads
    from batchscope.engine.validation import PriorityIgnoredWarning, priority_ignored_message
    from batchscope.inputs.workload import to_requests
    from batchscope.model.models import check_model_name, load_model
    from batchscope.steplog import trace

    check_model_name(args.model)
    use_threads(args.threads)
    loaded = load_model(args.model, args.device, args.dtype)
    requests = to_requests(specs, loaded.tokenizer)
    validate_requests(loaded, requests, config)  # fail in seconds, before any step
    ignored = priority_ignored_message(requests, config)
    if ignored:
        print(f"warning: {ignored}", file=sys.stderr)
    bar = Progress(f"{args.batching}", total=len(specs))
    ends = Ends()

    def on_step(record: StepRecord) -> None:
        ends.add(record)
        bar.update(1, done=ends.done, note=f"step {record['step']}, {ends.note(len(specs))}")

    with stop_on_ctrl_c() as stop, warnings.catch_warnings():
        warnings.simplefilter("ignore", PriorityIgnoredWarning)  # said once above
        records = generate_trace(
            loaded, specs, config, scenario=args.scenario, on_step=on_step, seed=args.seed, should_stop=lambda: stop[0]
        )
    bar.close()
    if len(records) == 2:  # stopped before the first step: nothing to keep
        print("stopped by Ctrl-C before the first step: no trace written", file=sys.stderr)
        return 130
    if not _timing_ok(records, out, strict=args.strict_timing):
        return TIMING_REFUSED
    trace.write(records, out)
    partial = records[-1].get("partial", False)
    print(
        f"wrote {out}: {len(records) - 2} steps, {len(specs)} requests ({args.batching})"
        + (", PARTIAL: stopped by Ctrl-C" if partial else "")
    )
    return 130 if partial else 0


def _timing_ok(records: list, out: object, strict: bool) -> bool:
    """Warn on stderr when the step times show contention; ``False`` (after saying why) if ``strict`` refuses."""
    from batchscope.steplog.timing import check_timing

    report = check_timing(records)
    if not report.contended:
        return True
    if strict:
        print(
            f"error: {report.message}. --strict-timing: {out} NOT written; re-run on a quiet machine (no other "
            "busy processes)",
            file=sys.stderr,
        )
        return False
    print(f"warning: {report.message}; its wall-clock figures are slower than the engine is", file=sys.stderr)
    return True


def _metrics(args) -> int:
    from batchscope.steplog import trace
    from batchscope.steplog.report import metrics_table
    from batchscope.steplog.timing import check_timing
    from batchscope.steplog.view import TraceView

    if len(args.traces) > 2:
        raise ValueError(f"metrics takes one or two traces, got {len(args.traces)}")
    runs = {}
    for path in args.traces:
        records = trace.read(path)
        label = os.path.basename(path) if os.path.basename(path) not in runs else f"{os.path.basename(path)} (2)"
        runs[label] = records
        # a version 2 trace declares its requests in the steps where they arrive: count them as the pages do
        view = TraceView(records)
        n_steps, n_req = len(records) - 2, len(view.request_ids)
        state = view.cut_short or ("PARTIAL (stopped early)" if view.partial else "complete")
        print(f"{path}: valid trace, {records[0]['policy']}, {n_steps} step records, {n_req} requests, {state}")
        timing = check_timing(records)
        if timing.contended:
            print(f"  timing: {timing.message}; wall-clock figures are inflated (step figures are not)")
    print()
    print(metrics_table(runs))
    return 0


def _perfetto(args) -> int:
    from pathlib import Path

    from batchscope.cli.common import CLIError
    from batchscope.steplog import perfetto, trace
    from batchscope.steplog.view import TraceView

    out = check_out_path(args.out, "--out", inputs=(args.trace,), force=args.force)
    if not Path(args.trace).exists():
        raise CLIError(f"TRACE {args.trace!r} does not exist")
    try:
        records = trace.read(args.trace)
    except trace.TraceError as exc:
        raise CLIError(f"{args.trace}: {exc}") from None
    view = TraceView(records, source="imported", filename=Path(args.trace).name)
    doc = perfetto.trace_events(view)
    trace.write_text_atomic(perfetto.dumps(doc), out)
    count = {ph: sum(e["ph"] == ph for e in doc["traceEvents"]) for ph in ("X", "C", "i")}
    rows = sum(e["name"] == "thread_name" and e["pid"] == perfetto.ROWS_PID for e in doc["traceEvents"])
    state = f"; {view.cut_short}" if view.cut_short else ", PARTIAL (stopped early)" if view.partial else ""
    print(
        f"wrote {out}: {view.num_steps} steps, {len(view.request_ids)} requests, {rows} batch rows, {count['X']} "
        f"slices, {count['C']} counter values, {count['i']} instants; time axis: "
        f"{doc['otherData']['time_axis_note']}{state}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        if args.command == "scenarios":
            from batchscope.inputs.workload import list_scenarios

            for name, desc in list_scenarios().items():
                print(f"{name:12s} {desc}")
            return 0
        if args.command == "run":
            return _run(args)
        if args.command == "metrics":
            return _metrics(args)
        if args.command == "perfetto":
            return _perfetto(args)
        return args.handler(args)
    except BrokenPipeError:  # stdout closed early (`| head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (ValueError, OSError) as exc:  # RequestError, WorkloadError, ModelLoadError, TraceError, config errors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def console() -> None:
    """The ``batchscope`` console script: ``main`` with the process's arguments, its status as the exit status."""
    sys.exit(main())


if __name__ == "__main__":
    console()
