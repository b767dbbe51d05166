"""The Metrics page's step-cost chart: each step's time against the tokens it computed (decode-only steps apart from
steps with a prompt chunk), the fitted fixed cost per step, and the cost per token as the decode batch grows.

The weight-streaming floor (``batchscope.figures.weight_floor``: weight bytes / read bandwidth, as ``python -m
batchscope bench`` measured them) is drawn where the trace ran on the model, dtype and device the benchmark measured.
"""

from __future__ import annotations

import statistics

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from batchscope.figures.metrics import run_color
from batchscope.figures.packing import figure_json
from batchscope.figures.weight_floor import floor_ms_text, floor_of, rate_text
from batchscope.steplog.step_cost import StepCost, decode_by_batch, fit, step_costs
from batchscope.steplog.view import TraceView


def step_cost_figure(views: dict[str, TraceView], title: str = "") -> go.Figure:
    """Left: step time (ms) against tokens computed, per run, decode-only steps as dots and steps with a prompt
    chunk as crosses, with each run's fitted line and the floor where known. Right: the median decode-only step's
    time per token (ms) against the requests decoding in it. ``title`` heads the figure ("On an NVIDIA H200").

    The left panel's ms axis ends just above every step but the fits' outliers (over 3 x the time their run's line
    predicts, ``batchscope.steplog.step_cost.fit``): the rare far slower step (a GPU's first, warm-up step; a step that
    waited for a busy CPU) would otherwise squash every other point into the bottom of the chart. A note in the corner
    counts the steps above it and gives the slowest."""
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.62, 0.38],
        subplot_titles=("step time against tokens computed", "decode: time per token as the batch grows"),
    )
    runs = [_add_run(fig, label, view, run_color(label, i)) for i, (label, view) in enumerate(views.items())]
    floor = _floor(fig, next(iter(views.values())))
    fig.update_layout(
        height=440 if title else 420,
        barmode="group",
        margin={"t": 70 if title else 40, "b": 40},
        legend={"orientation": "h", "y": -0.2},
        **({"title": {"text": title, "x": 0, "font": {"size": 15}}} if title else {}),
    )
    fig.update_xaxes(title_text="tokens computed in the step", row=1, col=1)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    _clip_slow_steps(fig, runs, floor)
    fig.update_xaxes(title_text="requests decoding (decode-only steps)", type="category", row=1, col=2)
    fig.update_yaxes(title_text="ms per token (median step)", rangemode="tozero", row=1, col=2)
    return fig


def _clip_slow_steps(fig: go.Figure, runs: list[tuple[list[StepCost], dict | None]], floor_ms: float | None) -> None:
    """End the left panel's ms axis above every step but the fits' outliers (and above the floor), and count those
    outliers above it in a corner note. ``runs``: each run's costs and fitted line (``_add_run``)."""
    inside: list[float] = []
    above: list[float] = []
    for costs, line in runs:
        outliers = set(line["outliers"]) if line else set()
        for c in costs:
            (above if c["step"] in outliers else inside).append(c["seconds"] * 1e3)
    top = 1.1 * max([*inside, floor_ms or 0])
    above = sorted(t for t in above if t > top)
    if not inside or not above:
        return
    fig.update_yaxes(range=[0, top], row=1, col=1)
    fig.add_annotation(
        text=f"{len(above)} outlier step{'s' * (len(above) > 1)} above (slowest {above[-1]:.0f} ms)",
        xref="x domain",
        yref="y domain",
        x=1,
        y=1,
        xanchor="right",
        yanchor="top",
        showarrow=False,
        font={"size": 11, "color": "#555"},
    )


def _add_run(fig: go.Figure, label: str, view: TraceView, color: str) -> tuple[list[StepCost], dict | None]:
    """One run's steps (decode-only dots, prompt-chunk crosses), its fitted line and its per-token bars; returns
    its costs and its line."""
    costs = step_costs(view)
    line = _add_points(fig, label, view, color, costs)
    by_batch = decode_by_batch(costs)
    fig.add_trace(
        go.Bar(
            x=[str(r) for r in by_batch],
            y=[g["per_token_s"] * 1e3 for g in by_batch.values()],
            marker_color=color,
            name=f"{label}: ms per token",
            hovertemplate="%{x} decoding: %{y:.1f} ms per token<extra></extra>",
            showlegend=False,
        ),
        row=1,
        col=2,
    )
    return costs, line


def _add_points(fig: go.Figure, label: str, view: TraceView, color: str, costs: list[StepCost]) -> dict | None:
    """The steps as points (ms against tokens computed: decode-only dots, prompt-chunk crosses) and the fitted line,
    in the figure's first panel; returns the line (``batchscope.steplog.step_cost.fit``)."""
    prefix = f"{label}: " if label else ""
    for decode, symbol, name in ((True, "circle", "decode only"), (False, "x", "with a prompt chunk")):
        pts = [c for c in costs if c["decode_only"] == decode]
        fig.add_trace(
            go.Scatter(
                x=[c["tokens"] for c in pts],
                y=[c["seconds"] * 1e3 for c in pts],
                mode="markers",
                marker={"color": color, "symbol": symbol, "size": 6, "opacity": 0.6},
                name=f"{prefix}{name}",
                hovertemplate="step %{customdata}: %{x} tokens, %{y:.1f} ms<extra></extra>",
                customdata=[view.step_number(c["step"]) for c in pts],
            ),
            row=1,
            col=1,
        )
    line = fit(costs)
    if line:
        top = max(c["tokens"] for c in costs)
        fig.add_trace(
            go.Scatter(
                x=[0, top],
                y=[line["fixed_s"] * 1e3, (line["fixed_s"] + line["per_token_s"] * top) * 1e3],
                mode="lines",
                line={"color": color, "dash": "dot"},
                name=f"{prefix}{line['fixed_s'] * 1e3:.0f} ms + {line['per_token_s'] * 1e3:.2f} ms/token",
            ),
            row=1,
            col=1,
        )
    return line


def _floor(fig: go.Figure, view: TraceView) -> float | None:
    """The weight-streaming floor of ``view``'s device as a dashed line with a short label (its source is told in
    the page's text): the floor in ms, or None where it was not measured."""
    floor = floor_of(view.header)
    if floor is None:
        return None
    fig.add_hline(
        y=floor["seconds"] * 1e3,
        line={"color": "#555", "dash": "dash", "width": 1},
        row=1,
        col=1,
        annotation_text=f"weight-streaming floor {floor_ms_text(floor['seconds'])} "
        f"({floor['weight_bytes'] / 1e6:.0f} MB at {rate_text(floor['bandwidth_Bps'])})",
        annotation_position="top left",
        annotation_font_size=11,
    )
    return floor["seconds"] * 1e3


def step_cost_sentence(views: dict[str, TraceView]) -> str:
    """One sentence per run from the measured figures: one decode row against the most rows, per token."""
    parts = []
    for label, view in views.items():
        by_batch = decode_by_batch(step_costs(view))
        if len(by_batch) < 2:
            continue
        few, many = min(by_batch), max(by_batch)
        a, b = by_batch[few], by_batch[many]
        parts.append(
            f"{label}: a decode step of {few} request{'s' * (few > 1)} took {a['median_s'] * 1e3:.0f} ms (median of "
            f"{a['steps']}), one of {many} {b['median_s'] * 1e3:.0f} ms: a token cost "
            f"{a['per_token_s'] * 1e3:.0f} ms then and {b['per_token_s'] * 1e3:.0f} ms with {many} in the batch"
        )
    return "; ".join(parts) + "." if parts else ""


def device_sentence(here: TraceView, there: TraceView) -> str:
    """What the same workload cost on the device of ``there`` (a GPU trace) against ``here`` (this CPU's), from the
    two traces and each device's weight-streaming floor: whether the schedule and outputs match, the median
    decode-only step on each, each against its floor, and a token's cost alone against in the largest batch."""
    h = there.header
    name = h.get("device_name") or h.get("device", "another device")
    same = _schedule(here) == _schedule(there) and _outputs(here) == _outputs(there)
    text = f"Recorded on an {name} in {h.get('dtype')}: " + (
        f"the same {there.num_steps} steps with token-identical outputs, so only the device differs. "
        if same
        else "the same workload (its steps or outputs differ from this CPU's run). "
    )
    there_costs = step_costs(there)
    a, b = _median_decode(step_costs(here)), _median_decode(there_costs)
    if a is None or b is None:
        return text
    text += f"A decode step took a median {b * 1e3:.1f} ms on the GPU against {a * 1e3:.0f} ms on this CPU"
    fa, fb = floor_of(here.header), floor_of(there.header)
    if fa and fb:
        text += (
            f". The {name} streams every weight in {floor_ms_text(fb['seconds'])} ({fb['source'].replace('`', '')}), "
            f"so its step "
            f"takes {b / fb['seconds']:.0f}× its floor, where this CPU's takes {a / fa['seconds']:.1f}×: a model "
            "this small leaves the GPU mostly waiting. Its fixed cost is the CPU issuing the forward's thousands of "
            "small operations one after another (python scripts/count_step_ops.py counts them), which is why vLLM "
            "replays its decode forward as CUDA graphs"
        )
    by_batch = decode_by_batch(there_costs)
    if len(by_batch) >= 2:
        few, many = min(by_batch), max(by_batch)
        text += (
            f". Batching pays on the GPU too: a token cost {by_batch[few]['per_token_s'] * 1e3:.1f} ms with {few} "
            f"request{'s' * (few > 1)} decoding and {by_batch[many]['per_token_s'] * 1e3:.1f} ms with {many}"
        )
    return text + "."


def _schedule(view: TraceView) -> list[list[tuple[str, int]]]:
    return [[(s["request_id"], s["num_tokens"]) for s in step["scheduled"]] for step in view.steps]


def _outputs(view: TraceView) -> dict[str, list[int]]:
    return {r["request_id"]: r.get("output_token_ids") for r in view.summary.get("requests", [])}


def _median_decode(costs: list[StepCost]) -> float | None:
    times = [c["seconds"] for c in costs if c["decode_only"]]
    return statistics.median(times) if times else None


PLAYER_TITLE = "What a step costs: its time against the tokens it computed (ring: this step)"


def step_cost_player(view: TraceView, color: str = "#0072B2") -> dict | None:
    """The step-cost chart for the browser player: ``{figure, points, title}``, the figure drawn once (the steps as
    points, the fitted line ms = fixed + per-token x tokens, the weight-streaming floor where known) and ``points[k]``
    step k's ``[tokens, ms]`` (None for a step that computed nothing or has no duration), where the player puts its
    ring. None when no step has a cost (a trace without durations)."""
    costs = step_costs(view)
    if not costs:
        return None
    fig = make_subplots(rows=1, cols=1)
    _add_points(fig, "", view, color, costs)
    _floor(fig, view)  # the player's chart keeps every point: its ring must find the current step's
    fig.update_layout(height=300, margin={"t": 10, "b": 40, "l": 50, "r": 10}, legend={"orientation": "h", "y": -0.3})
    fig.update_xaxes(title_text="tokens computed in the step", rangemode="tozero")
    fig.update_yaxes(title_text="ms", rangemode="tozero")
    points: list[list[float] | None] = [None] * view.num_steps
    for c in costs:
        points[c["step"]] = [c["tokens"], round(c["seconds"] * 1e3, 3)]
    return {"figure": figure_json(fig), "points": points, "title": PLAYER_TITLE}
