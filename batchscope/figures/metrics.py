"""Pure functions from metrics (``batchscope.steplog.metrics``) and sweep results (``batchscope.bench.sweep``) to plotly
figures.

Every function takes plain data and returns a ``plotly.graph_objects.Figure``; nothing here touches Streamlit.
``runs`` arguments map a label to a trace's records, e.g. ``{"static": static_records, "continuous": cont_records}``;
the labels become legend entries in the given order. Axis titles carry the unit: ``s`` (wall clock) or ``steps``
(the step clock of ``batchscope.steplog.metrics``: reproducible).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from batchscope.figures.safe import esc
from batchscope.steplog.finishes import in_aggregate
from batchscope.steplog.metrics import LATENCY_METRICS, request_metrics, steps_frame
from batchscope.steplog.view import OKABE_ITO

# per-request scalar metrics (ITL is a list per request: see ``latency_cdf``)
REQUEST_METRICS = [m for m in LATENCY_METRICS if not m.startswith("itl_")]
# One colour per policy in every chart (Okabe-Ito vermillion and blue); other run labels take the palette in order.
POLICY_COLORS = {"static": OKABE_ITO[5], "continuous": OKABE_ITO[4]}


def run_color(label: str, i: int) -> str:
    """The colour of run ``label`` (the ``i``-th run of a chart): its policy's colour, else the palette's."""
    return POLICY_COLORS.get(label, OKABE_ITO[i % len(OKABE_ITO)])


def _unit(metric: str) -> str:
    return "s" if metric.endswith("_s") else "steps"


def _label(metric: str) -> str:
    return f"{LATENCY_METRICS[metric][1].split(':')[0]} ({_unit(metric)})"


def _check(metric: str, allowed: list[str]) -> None:
    if metric not in allowed:
        raise ValueError(f"metric={metric!r} must be one of {', '.join(allowed)}")


def request_latency(runs: dict[str, list[dict]], metric: str = "ttft_s") -> go.Figure:
    """Grouped bars: ``metric`` of every request (x, in arrival order), one bar colour per run.

    Args:
        runs: label -> trace records.
        metric: one of ``REQUEST_METRICS`` (``ttft_s``, ``e2e_steps``, ...). A request without the figure (TPOT of a
            one-token answer; E2E, TPOT and queue time of an aborted request, which vLLM reports to no
            finished-request figure: ``batchscope.steplog.finishes``) has no bar; an aborted one is labelled so.
    Raises:
        ValueError: unknown ``metric``.
    """
    _check(metric, REQUEST_METRICS)
    fig = go.Figure()
    for i, (label, records) in enumerate(runs.items()):
        reqs = request_metrics(records)
        fig.add_bar(  # an aborted request has no finished-request figure (E2E, TPOT, queue time), as in the summary
            x=[esc(r["request_id"]) + (" (aborted)" if r.get("finish_reason") == "abort" else "") for r in reqs],
            y=[r[metric] if in_aggregate(metric, r) else None for r in reqs],
            name=label,
            marker_color=run_color(label, i),
            hovertemplate=f"%{{x}} ({esc(label)}): %{{y:.3g}} {_unit(metric)}<extra></extra>",
        )
    fig.update_layout(
        barmode="group",
        title=f"{_label(metric)} per request",
        xaxis=dict(type="category", title="request"),
        yaxis=dict(title=_label(metric)),
        margin=dict(l=10, r=10, t=40, b=30),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def latency_cdf(runs: dict[str, list[dict]], metric: str = "e2e_s") -> go.Figure:
    """Empirical CDF of ``metric`` per run (fraction of requests, or of token gaps for ``itl_*``, at or below x).

    Args:
        metric: any of ``batchscope.steplog.metrics.LATENCY_METRICS``; ``itl_*`` pools every gap of every request;
            aborted requests are left out of the finished-request figures, as in the summary.
    Raises:
        ValueError: unknown ``metric``.
    """
    _check(metric, list(LATENCY_METRICS))
    fig = go.Figure()
    for i, (label, records) in enumerate(runs.items()):
        reqs = request_metrics(records)
        if metric.startswith("itl_"):
            values = sorted(g for r in reqs for g in r[metric])
        else:
            values = sorted(r[metric] for r in reqs if r[metric] is not None and in_aggregate(metric, r))
        share = (np.arange(1, len(values) + 1) / len(values)).tolist() if values else []
        fig.add_scatter(
            x=values,
            y=share,
            mode="lines",
            line_shape="hv",
            name=label,
            line=dict(color=run_color(label, i), width=2),
        )
    fig.update_layout(
        title=f"{_label(metric)}: distribution",
        xaxis=dict(title=_label(metric)),
        yaxis=dict(title="fraction at or below", range=[0, 1.02]),
        margin=dict(l=10, r=10, t=40, b=30),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def kv_utilisation(runs: dict[str, list[dict]], clock: str = "steps") -> go.Figure:
    """KV-cache utilisation (used blocks / pool, 0..1) over time, one line per run.

    Args:
        clock: ``"steps"`` (x = step index) or ``"s"`` (x = end of the step, seconds from the start of the run).
    Raises:
        ValueError: unknown ``clock``.
    """
    if clock not in ("steps", "s"):
        raise ValueError(f"clock={clock!r} must be 'steps' or 's'")
    fig = go.Figure()
    for i, (label, records) in enumerate(runs.items()):
        frame = steps_frame(records)
        fig.add_scatter(
            x=frame["step"] if clock == "steps" else frame["t_end_s"],
            y=frame["kv_utilisation"],
            mode="lines",
            line_shape="hv",
            name=label,
            line=dict(color=run_color(label, i)),
        )
    fig.update_layout(
        title="KV-cache utilisation",
        xaxis=dict(title="step" if clock == "steps" else "time (s)"),
        yaxis=dict(title="used blocks / pool", range=[0, 1.05], tickformat=".0%"),
        margin=dict(l=10, r=10, t=40, b=30),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def sweep_ratio(result: dict) -> go.Figure:
    """The variance sweep: throughput ratio continuous / static (y, log scale) against the spread of output lengths
    (x: coefficient of variation, std / mean), in wall-clock seconds and on the step clock, with the published
    numbers for context.

    The reference lines are Anyscale's, from "How continuous batching enables 23x throughput in LLM inference while
    reducing p50 latency" (2023, https://www.anyscale.com/blog/continuous-batching-llm-inference): up to 8x for
    continuous batching alone and 23x for vLLM against naive Hugging Face serving, OPT-13B on an A100; a different
    scale (13B parameters, outputs up to 1536 tokens, a GPU), shown for orientation, not as a like-for-like target.

    Args:
        result: the dict of ``batchscope.bench.sweep.run_sweep`` (``batchscope/assets/sweep.json``).
    """
    levels = result["levels"]
    cv = [lv["spread"]["cv"] for lv in levels]
    fig = go.Figure()
    for key, name, color, dash, pos in (
        ("ratio_s", "tokens/s (wall clock)", OKABE_ITO[2], "solid", "top center"),
        ("ratio_steps", "tokens/step", OKABE_ITO[0], "dash", "bottom center"),
    ):
        y = [lv[key] for lv in levels]
        fig.add_scatter(
            x=cv,
            y=y,
            mode="lines+markers+text",
            name=name,
            text=[f"{v:.2f}×" for v in y],
            textposition=pos,
            customdata=[f"sigma {lv['sigma']:g}, longest {lv['spread']['max']} tokens" for lv in levels],
            line=dict(color=color, width=3 if dash == "solid" else 2, dash=dash),
            hovertemplate="CV %{x:.2f} (%{customdata}): %{y:.2f}×<extra>" + name + "</extra>",
        )
    fig.add_hline(y=1, line=dict(color="#777", width=1))
    _anyscale_lines(fig, result.get("anyscale", {}))
    prov = result.get("provenance", {})
    fig.update_layout(
        title=f"continuous / static throughput vs output-length spread<br><sup>{_workload(result)}; "
        f"{prov.get('model', '?')} on {prov.get('device', '?')}</sup>",
        xaxis=dict(title="spread of output lengths (coefficient of variation, same mean)"),
        yaxis=dict(
            title="throughput ratio continuous / static (log scale)",
            type="log",
            range=[np.log10(0.8), np.log10(30)],
            tickvals=[1, 1.5, 2, 3, 4, 8, 16, 23],
            ticktext=["1×", "1.5×", "2×", "3×", "4×", "8×", "16×", "23×"],
        ),
        margin=dict(l=10, r=10, t=50, b=30),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def _workload(result: dict) -> str:
    """The sweep's workload in words: requests, mean output length, slots."""
    cfg = result.get("config", {})
    return (
        f"{cfg.get('num_requests', '?')} requests, mean output {cfg.get('mean_output_tokens', '?')} tokens, "
        f"max_num_seqs {cfg.get('max_num_seqs', '?')}"
    )


def _anyscale_lines(fig: go.Figure, ref: dict) -> None:
    """Anyscale's published ratios as dotted reference lines, labelled on the log axis."""
    for key, label in (
        ("continuous_batching_alone_max_ratio", "Anyscale: continuous batching alone, up to"),
        ("vllm_vs_naive_hf_ratio", "Anyscale: vLLM vs naive HF"),
    ):
        if key in ref:  # on a log axis an annotation's y is log10 of the value
            fig.add_hline(y=ref[key], line=dict(color="#999", width=1, dash="dot"))
            fig.add_annotation(
                x=0,
                xref="paper",
                y=float(np.log10(ref[key])),
                yref="y",
                showarrow=False,
                xanchor="left",
                yanchor="bottom",
                text=f"{label} {ref[key]:g}x (OPT-13B, A100)",
                font=dict(color="#666", size=11),
            )


def sweep_throughput(result: dict, clock: str = "s") -> go.Figure:
    """Output throughput of static and continuous batching per spread level (grouped bars).

    Args:
        clock: ``"s"`` (tokens per second, wall clock) or ``"steps"`` (tokens per step).
    Raises:
        ValueError: unknown ``clock``.
    """
    if clock not in ("s", "steps"):
        raise ValueError(f"clock={clock!r} must be 's' or 'steps'")
    key = "tok_per_s" if clock == "s" else "tok_per_step"
    x = [f"CV {lv['spread']['cv']:.2f}" for lv in result["levels"]]
    fig = go.Figure()
    for policy in ("static", "continuous"):
        y = [lv[policy][key] for lv in result["levels"]]
        fig.add_bar(
            x=x,
            y=y,
            name=policy,
            marker_color=POLICY_COLORS[policy],
            text=[f"{v:.3g}" for v in y],
            textposition="outside",
        )
    fig.update_layout(
        barmode="group",
        title=f"output throughput per spread level ({_workload(result)})",
        yaxis=dict(title="output tokens / s" if clock == "s" else "output tokens / step"),
        xaxis=dict(title="spread of output lengths", type="category"),
        margin=dict(l=10, r=10, t=40, b=30),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig
