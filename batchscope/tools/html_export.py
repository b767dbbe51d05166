"""``python -m batchscope html TRACE [TRACE2 ...] --out FILE.html``: one self-contained HTML file that plays a trace (or
2 to 4 of one workload on one step clock, sides A, B, C, D in the order given) with the browser player: plotly.js
and the data inlined, no network request when opened from ``file://``; it takes ``?step=``, ``?speed=``,
``?present=1`` and ``?tour=``; ``--tour FILE`` puts a teacher's own key moments in it
(``batchscope.explain.moments.read_tour``). For slides and course pages. A busy server's long trace is written one
span of steps at a time (``packing.span_of``): the one holding ``--step``."""

from __future__ import annotations

import sys
from pathlib import Path


def add_html(sub) -> None:
    """Entry point: the ``html`` command."""
    h = sub.add_parser(
        "html",
        help="write one self-contained HTML file that plays 1 to 4 traces of one workload (for slides, offline)",
        epilog="examples:\n  python -m batchscope html batchscope/assets/traces/sixteen-static.jsonl "
        "batchscope/assets/traces/sixteen-continuous.jsonl --out sixteen.html\n"
        "  python -m batchscope html batchscope/assets/traces/sixteen-{static,continuous,sglang}.jsonl "
        "--out sixteen-3.html",
    )
    h.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE",
        help="1 to 4 trace files of one workload: sides A, B, C, D in this order, on one step clock",
    )
    h.add_argument("--out", required=True, help="the HTML file to write (refused if it exists, unless --force)")
    h.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    h.add_argument(
        "--step",
        type=int,
        default=0,
        help="the step it opens at (a busy server's long trace: the span of steps around it)",
    )
    h.add_argument("--speed", type=float, default=8.0, help="steps per second, in [1, 120]")
    h.add_argument(
        "--tour",
        metavar="FILE",
        help='your own key moments, a JSON list of {"step": K, "note": "..."} (default: the scenario\'s tour, '
        "or the moments found in the traces); PageDown / PageUp jump between them",
    )
    h.set_defaults(handler=_html)


def player_page(paths: list[str], step: int = 0, speed: float = 8.0, tour_file: str | None = None):
    """The exported player of the traces at ``paths`` (one, or 2 to 4 of one workload on one step clock) as
    ``(html, num_steps, span)``: counters (``counters_for``), the tour
    (``tour_file``'s, else the scenario's, ``batchscope.explain.moments``), the span of a long trace holding ``step``.
    Raises ``ValueError`` naming the bad argument (a trace, --step, --speed, --tour)."""
    from batchscope.compare.runs import MAX_RUNS, same_workloads
    from batchscope.explain.moments import read_tour, tour_for
    from batchscope.figures.packing import span_of
    from batchscope.inputs.workload import scenario_tour
    from batchscope.player.export import player_html
    from batchscope.steplog import trace
    from batchscope.steplog.reasons import run_name
    from batchscope.steplog.view import TraceView

    if not 1 <= len(paths) <= MAX_RUNS:
        raise ValueError(f"give 1 to {MAX_RUNS} traces, got {len(paths)}")
    if not 1 <= speed <= 120:
        raise ValueError(f"--speed={speed} is out of range: a number in [1, 120] steps per second")
    views = [TraceView(trace.read(p), source="imported", filename=Path(p).name) for p in paths]
    for v in views:
        if v.cut_short:
            print(f"{v.filename}: {v.cut_short}", file=sys.stderr)
    if len(views) > 1:
        ok, why = same_workloads(views)
        if not ok:
            raise ValueError(f"the {'two' if len(views) == 2 else len(views)} traces are not of one workload: {why}")
    counters = counters_for(views)
    num_steps = max(v.num_steps for v in views)
    if not 0 <= step < num_steps:
        raise ValueError(f"--step={step} is out of range: an integer in [0, {num_steps - 1}]")
    tour = (
        read_tour(tour_file, num_steps)
        if tour_file
        else tour_for(views, scenario_tour(views[0].header.get("scenario")))
    )
    title = " vs ".join(f"{v.header.get('scenario') or v.filename} ({run_name(v.header)})" for v in views)
    span = span_of(views, step)  # a busy server's long trace: the span holding --step
    html = player_html(views, title, initial_step=step, speed=speed, counters=counters, span=span, tour=tour)
    return html, num_steps, span


def counters_for(views: list) -> list[dict] | None:
    """The cards above the player: none for one trace; for a static/continuous pair and for vLLM's scheduler against
    SGLang's, their own counters (``batchscope.compare.lockstep``); for any other 2 to 4 runs, ``runs_counters``
    (two runs that are neither pair get none, as before)."""
    from batchscope.compare.lockstep import family_counters, lockstep_counters, runs_counters
    from batchscope.compare.runs import family_pair

    by_policy = {v.policy: v for v in views}
    if len(views) == 2 and set(by_policy) == {"static", "continuous"}:
        return lockstep_counters(by_policy["static"], by_policy["continuous"])
    if len(views) == 2 and family_pair(*views):  # vLLM's scheduler and SGLang's: from their decision records
        return family_counters(by_policy["continuous"], by_policy["sglang"])
    return runs_counters(views) if len(views) > 2 else None


def _html(args) -> int:
    from batchscope.cli.common import check_out_path
    from batchscope.steplog import trace

    if len(args.traces) > 4:
        raise ValueError(f"html takes 1 to 4 traces, got {len(args.traces)}")
    out = check_out_path(args.out, "--out", inputs=tuple(args.traces), force=args.force)
    html, num_steps, span = player_page(args.traces, args.step, args.speed, args.tour)
    trace.write_text_atomic(html, out)
    part = f" (steps {span[0]}-{span[1]}: pick others with --step)" if span != (0, num_steps - 1) else ""
    print(f"wrote {out}: {len(html) / 1e6:.1f} MB, {num_steps} steps{part}", file=sys.stderr)
    return 0
