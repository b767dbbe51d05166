"""Per-request timeline: for each request, the steps it spent waiting, prefilling, decoding (and preempted)."""

from __future__ import annotations

import itertools

import plotly.graph_objects as go

from batchscope.facts import facts
from batchscope.figures.safe import esc
from batchscope.steplog.view import TraceView

PHASE_COLORS = {
    "waiting": "#D9D9D9",
    "prefill": "#E69F00",
    "recompute": "#D55E00",
    "decode": "#0072B2",
    "reserved": "#F5E6B8",
}
PHASE_PATTERN = {"waiting": ".", "prefill": "/", "recompute": "+", "decode": "", "reserved": ""}


def request_phases(view: TraceView) -> dict[str, list[str | None]]:
    """request_id -> phase at each step: waiting, prefill, recompute (after a preemption), decode, reserved
    (admitted, no tokens this step), or None."""
    phases: dict[str, list[str | None]] = {rid: [None] * view.num_steps for rid in view.request_ids}
    for i, st in enumerate(view.steps):
        for rid in st["waiting"]:
            phases[rid][i] = "waiting"
        for rid in st["running"]:
            phases[rid][i] = "reserved"
        for s in st["scheduled"]:
            phases[s["request_id"]][i] = "recompute" if s.get("recompute") else s["kind"]
        for rid in st["preempted"]:
            phases[rid][i] = "waiting"
    return phases


def plot_left(view: TraceView) -> int:
    """The left margin (px) of every figure drawn on the step axis over the request timeline (the timeline, the
    gauges): wide enough for the longest request label (12 px type) and for the gauges' tick labels and titles, and
    the same for both, with the y axes' automargin off, so their step axes line up to the pixel."""
    longest = max((len(view.label(r)) for r in view.request_ids), default=1)
    return max(84, 8 * longest + 24)


def _end_marks(fig: go.Figure, view: TraceView) -> None:
    """A marker at each ended request's last step, by how it ended (its facts): a bar for a finish, a cross for an
    abort."""
    f = facts(view)
    for word, symbol in (("finished", "line-ns"), ("aborted", "x-thin")):  # how each request ended (its facts)
        ends = [
            (rid, s) for rid in view.request_ids if (s := view.finish_step(rid)) is not None and f.end_word(rid) == word
        ]
        if ends or word == "finished":
            fig.add_scatter(
                x=[s + 0.5 for _, s in ends],
                y=[esc(view.label(rid)) for rid, _ in ends],
                mode="markers",
                name=word,
                marker=dict(symbol=symbol, size=14, line=dict(width=3, color="#000")),
                customdata=[view.step_number(s) for _, s in ends],
                hovertemplate=f"%{{y}} {word} at the end of step %{{customdata}}<extra></extra>",
            )


def timeline(view: TraceView, step: int | None = None, num_steps: int | None = None) -> go.Figure:
    """Horizontal bars, one row per request; a request that ended has a marker at its last step: a bar for a
    finish, a cross for an abort."""
    fig = go.Figure()
    runs: dict[str, tuple[list, list, list]] = {phase: ([], [], []) for phase in PHASE_COLORS}
    for rid, row in request_phases(view).items():  # each run of one phase: a bar from its first step
        i = 0
        for phase, group in itertools.groupby(row):
            n = sum(1 for _ in group)
            if phase is not None:
                ys, xs, bases = runs[phase]
                ys.append(esc(view.label(rid)))
                xs.append(n)
                bases.append(i - 0.5)
            i += n
    for phase, (ys, xs, bases) in runs.items():
        if ys:
            fig.add_bar(
                orientation="h",
                y=ys,
                x=xs,
                base=bases,
                name=phase,
                marker=dict(
                    color=PHASE_COLORS[phase],
                    pattern=dict(shape=PHASE_PATTERN[phase], size=5, fillmode="overlay", fgcolor="rgba(0,0,0,0.4)"),
                ),
                hovertemplate=f"%{{y}} {phase}: %{{x}} steps from %{{base}}<extra></extra>",
            )
    _end_marks(fig, view)
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        height=190 + 22 * len(view.request_ids),
        margin=dict(l=plot_left(view), r=10, t=40, b=70),
        title=f"{esc(view.policy)}: request timeline",
        xaxis=dict(
            title="step",
            range=[-0.5, (num_steps or view.num_steps) - 0.5],
            **view.step_ticks(0, (num_steps or view.num_steps) - 1),
        ),
        yaxis=dict(
            automargin=False,  # ``plot_left``: the gauges' step axis lines up with this one
            type="category",
            categoryorder="array",
            categoryarray=[esc(view.label(r)) for r in view.request_ids[::-1]],
        ),
        # under the step axis, where wrapping to a second row in a narrow column (two sides) covers nothing
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom", x=0, xanchor="left", font=dict(size=10)),
    )
    if step is not None:
        fig.add_vline(x=step, line=dict(color="#D00", width=2, dash="dot"))
    return fig
