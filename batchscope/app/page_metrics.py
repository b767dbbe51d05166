"""Metrics: latency and throughput of static and continuous batching, or of the Playground's last pair of runs
(vLLM's definitions, the prefix-cache hit rate among them), and the output-length variance sweep."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from batchscope.app.common import POLICIES, gpu_records, md, recorded_records
from batchscope.app.state import live_runs, presenting
from batchscope.app.web_player import chart_frame, chart_html
from batchscope.compare.runs import config_diff
from batchscope.figures.metrics import (
    REQUEST_METRICS,
    kv_utilisation,
    latency_cdf,
    request_latency,
    sweep_ratio,
    sweep_throughput,
)
from batchscope.figures.step_cost import device_sentence, step_cost_figure, step_cost_sentence
from batchscope.inputs.workload import list_scenarios
from batchscope.steplog.frames import summary_frame
from batchscope.steplog.metrics import LATENCY_METRICS, summarize
from batchscope.steplog.view import TraceView

SWEEP = Path(__file__).resolve().parent.parent / "assets" / "sweep.json"
STEP_COST_TITLE = "What a step costs"  # the step-cost frame's title (its charts' label for a screen reader)
TPOT_HELP = (
    "TPOT = (E2E - TTFT) / (output tokens - 1). Continuous batching can show a higher TPOT than static batching: "
    "it keeps more rows busy in every step (and mixes prefill chunks into decode steps), so each step, and with it "
    "each token of a running request, takes a little longer, while requests wait far less to start and finish."
)


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _fig(key: str | tuple[str, str], unit: str = "") -> Callable[[dict], str]:
    """A figure of ``summarize`` (``key``, or ``(metric, stat)`` of a distribution) with its unit; "n/a" if none."""

    def get(s: dict) -> str:
        value = s[key[0]][key[1]] if isinstance(key, tuple) else s[key]
        return f"{_fmt(value)} {unit}".strip() if value is not None else "n/a"

    return get


def _hits(prefix: str) -> Callable[[dict], str]:
    """Prefix-cache hit tokens of queried tokens, "136 / 310 tok"; "n/a" for a trace that records no hit counts."""

    def get(s: dict) -> str:
        hits, queries = s[f"{prefix}prefix_cache_hits"], s[f"{prefix}prefix_cache_queries"]
        return "n/a" if hits is None or queries is None else f"{hits} / {queries} tok"

    return get


def _rate(s: dict) -> str:
    rate = s["prefix_cache_hit_rate"]
    return "n/a" if rate is None else f"{rate:.1%}"


# short labels (they must not be cut off at 1280 px in a third of half the page); the unit goes in the value
HEADLINE: list[tuple[str, Callable[[dict], str], str]] = [
    ("throughput", _fig("output_throughput_tok_s", "tok/s"), "output tokens per second (wall clock)"),
    ("throughput/step", _fig("output_throughput_tok_step", "tok/step"), "output tokens per engine step"),
    ("mean TTFT", _fig(("ttft_s", "mean"), "s"), "time to first token: first token - arrival"),
    ("mean TPOT", _fig(("tpot_s", "mean"), "s"), TPOT_HELP),
    ("p90 E2E", _fig(("e2e_s", "p90"), "s"), "90th percentile of last token - arrival (wall clock)"),
    ("p90 E2E steps", _fig(("e2e_steps", "p90"), "steps"), "the same on the step clock (reproducible)"),
    ("slot use", _fig("slot_utilisation"), "useful rows / max_num_seqs, averaged over steps (0-1)"),
    ("padding", _fig("padding_slot_steps", "slot\u2011steps"), "rows that ran for an already finished static member"),
    ("preemptions", _fig("num_preemptions"), "requests preempted (their K/V dropped)"),
    ("K/V dropped", _fig("num_dropped_tokens", "tok"), "tokens of K/V the preemptions dropped"),
    (
        "recomputed",
        _fig("num_recomputed_tokens", "tok"),
        "dropped tokens computed again (the rest were found in the prefix cache)",
    ),
    (
        "prefix hit rate",
        _rate,
        "vLLM's prefix-cache hit rate: prompt tokens found in the cache / tokens looked up, at first admissions "
        "(n/a: the trace records no hit counts)",
    ),
    ("prefix hits", _hits(""), "tokens found in the prefix cache / tokens looked up, at first admissions"),
    (
        "hits on resume",
        _hits("preempted_"),
        "the same at re-admissions after a preemption (counted apart, as vLLM does: a resumed request mostly finds "
        "its own blocks again)",
    ),
]


# Streamlit cuts a metric's value that is wider than its column ("1.44 t…" at 1280 px, two runs of three cards):
# the headline cards' values wrap at their spaces and hyphens ("3123 slot-" / "steps") in slightly smaller type.
METRIC_CSS = """<style>
[data-testid='stMetricValue'], [data-testid='stMetricValue'] * {white-space: normal !important;
  overflow: visible !important; text-overflow: clip !important; font-size: 1.75rem; line-height: 1.2}
</style>"""
# Presenter mode's type is 1.3x (batchscope.app.main): the values at 1.4rem (29 px) keep "1.44 tok/step" on one line of
# a card at 1280x720; the unit's hyphen does not break (slot\u2011steps: a non-breaking hyphen)
METRIC_CSS_PRESENT = METRIC_CSS.replace("font-size: 1.75rem", "font-size: 1.4rem")


def with_n_a(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with what a trace cannot tell (``None``) shown as "n/a", as the CLI and the README print it; a
    column holding one is shown as text (6 significant digits); ``frame`` itself when none is missing."""
    if not frame.isna().any().any():
        return frame
    shown = frame.astype(object)
    for col in frame.columns[frame.isna().any()]:
        shown[col] = ["n/a" if pd.isna(v) else f"{v:.6g}" if isinstance(v, float) else str(v) for v in frame[col]]
    return shown


def headline(sums: dict[str, dict]) -> None:
    """The headline cards of each run's ``summarize``."""
    st.html(METRIC_CSS_PRESENT if presenting() else METRIC_CSS)
    for run, col in zip(sums, st.columns(len(sums))):
        with col:
            st.subheader(run[:1].upper() + run[1:])
            cells = st.columns(3)
            for i, (label, get, help_text) in enumerate(HEADLINE):
                cells[i % 3].metric(label, get(sums[run]), help=help_text)
    st.caption(TPOT_HELP)


def intro(runs: dict[str, list[dict]]) -> str:
    """What the page compares: static and continuous batching, or the two runs picked (an A-vs-B pair of the
    Playground, which may well be two continuous runs) and what differs between them."""
    if set(runs) == set(POLICIES):
        what = "the same requests under static and continuous batching"
    else:
        a, b = (TraceView(r) for r in runs.values())
        diff = config_diff(a, b)
        what = f"the same requests in {' and '.join(md(label) for label in runs)} of the Playground" + (
            f" (what differs: {md('; '.join(diff))})" if diff else ""
        )
    return (
        f"Latency and throughput of {what}, computed from the traces with vLLM's definitions: **TTFT** = first "
        "token − arrival, **TPOT** = (E2E − TTFT) / (tokens − 1), **ITL** = every gap between tokens, **E2E** = "
        "last token − arrival, and the **prefix-cache hit rate** = tokens found in the cache / tokens looked up. "
        "Figures in **s** are wall clock on the recording machine; figures in **steps** count engine steps and are "
        "reproducible."
    )


def summary_parts(runs: dict[str, list[dict]]) -> tuple[str, str, dict[str, dict]]:
    """What the page says of ``runs`` before its charts: ``(intro, provenance caption, summaries)``."""
    views = {p: TraceView(r) for p, r in runs.items()}
    caption = " | ".join(
        f"{p}: {md(v.provenance())}" + (" (partial: stopped early)" if v.partial else "") for p, v in views.items()
    )
    return intro(runs), caption, {p: summarize(r) for p, r in runs.items()}


@st.cache_resource(show_spinner=False)
def recorded_summary(scenario: str) -> tuple[str, str, dict[str, dict]]:
    """``summary_parts`` of a shipped scenario, built once per server and shared read-only."""
    return summary_parts({p: recorded_records(scenario, p) for p in POLICIES})


def latency_html(runs: dict[str, list[dict]], metric: str) -> str:
    """The frame of per-request ``metric``, the E2E CDF and the KV-cache use of ``runs``."""
    rows = [[request_latency(runs, metric), latency_cdf(runs, "e2e_steps")], [kv_utilisation(runs)]]
    return chart_html(rows, "Per-request latency and KV-cache use")


@st.cache_resource(show_spinner=False, max_entries=64)
def recorded_latency_html(scenario: str, metric: str) -> str:
    """``latency_html`` of a shipped scenario, built once per server (its figures and their JSON took 0.06-0.1 s of
    every visit, measured on sixteen)."""
    return latency_html({p: recorded_records(scenario, p) for p in POLICIES}, metric)


def step_cost_parts(
    runs: dict[str, list[dict]], gpu: dict[str, list[dict]] | None = None
) -> tuple[str, str | None, str]:
    """The seed's central claim, measured on these runs: ``(text, GPU text or None, chart frame's page)`` of a
    step's time against the tokens it computed; and, where the scenario was also recorded on a GPU (``gpu``: the
    same batching modes), the same steps there."""
    views = {label: TraceView(r) for label, r in runs.items()}
    text = (
        "Each dot is one step of the runs above: its wall time against the tokens it computed. A decode step reads "
        "every weight once however many requests decode in it, so its time grows slowly with the batch and the "
        "time per token falls. The dotted lines fit time = fixed + per token × tokens; the dashed line is the "
        "weight-streaming floor of the device the runs used, where it was measured (a step cannot be faster). "
        + md(step_cost_sentence(views))
    )
    if not gpu:
        return text, None, chart_html([[step_cost_figure(views)]], STEP_COST_TITLE)
    gpu_views = {label: TraceView(r) for label, r in gpu.items()}
    there = gpu_views.get("continuous") or next(iter(gpu_views.values()))
    here = views.get("continuous") or next(iter(views.values()))
    name = there.header.get("device_name") or there.header["device"]
    gpu_text = f"**The same steps on a GPU** (the lower chart). {md(device_sentence(here, there))}"
    rows = [
        [step_cost_figure(views, title="On this CPU" if here.header["device"] == "cpu" else "")],
        [step_cost_figure(gpu_views, title=f"The same steps on an {name}")],
    ]
    return text, gpu_text, chart_html(rows, STEP_COST_TITLE)


@st.cache_resource(show_spinner=False)
def recorded_step_cost(scenario: str) -> tuple[str, str | None, str]:
    """``step_cost_parts`` of a shipped scenario and its GPU runs, built once per server and shared read-only: its
    figures took about 0.15 s of every visit (sixteen, measured)."""
    gpu = {p: r for p in POLICIES if (r := gpu_records(scenario, p))}
    return step_cost_parts({p: recorded_records(scenario, p) for p in POLICIES}, gpu)


def step_cost(parts: tuple[str, str | None, str]) -> None:
    """Draw ``step_cost_parts``: the heading, the texts, the charts in one frame."""
    text, gpu_text, html = parts
    st.subheader("What a step costs: reading the weights, whatever the batch")
    st.markdown(text)
    if gpu_text:
        st.markdown(gpu_text)
    chart_frame(html)


def page() -> None:
    st.title("Metrics")
    names = list(list_scenarios())
    live = live_runs()
    options = names + (["last playground run"] if len(live) == 2 else [])
    wanted = st.query_params.get("scenario", "sixteen")
    choice = st.selectbox(
        "Runs", options, index=options.index(wanted) if wanted in options else 0, key="metrics:scenario"
    )
    if choice in names:
        st.query_params["scenario"] = choice
        runs = {p: recorded_records(choice, p) for p in POLICIES}
    else:
        runs = live
    text, caption, sums = recorded_summary(choice) if choice in names else summary_parts(runs)
    if not presenting():  # presenter mode: the figures on the screen, the definitions left to the lecturer
        st.markdown(text)
        st.caption(caption)
    headline(sums)
    metric = st.selectbox(
        "Per-request figure",
        REQUEST_METRICS,
        index=REQUEST_METRICS.index("e2e_steps"),
        format_func=lambda m: f"{m}: {LATENCY_METRICS[m][1]}",
        key="metrics:metric",
    )
    chart_frame(recorded_latency_html(choice, metric) if choice in names else latency_html(runs, metric))
    step_cost(recorded_step_cost(choice) if choice in names else step_cost_parts(runs))
    # built only when opened: folded, the table's grid still cost the browser 0.1-0.2 s of every visit
    table = st.expander("All figures (mean, p50, p90, p99)", key="metrics:all-figures", on_change="rerun")
    if table.open:
        table.dataframe(with_n_a(summary_frame(runs)), hide_index=True, width="stretch")

    st.header("Variance sweep: when does continuous batching pay?")
    st.markdown(
        "Same prompts, same mean output length, growing spread (EOS ignored so lengths are exactly what the "
        "seeded distribution says). With equal lengths static and continuous batching come out about level; "
        "as the spread grows, a static batch waits for its longest member while its other rows idle. "
        "Measured on this engine; reproduce with `python -m batchscope sweep`."
    )
    if not SWEEP.exists():
        st.info("No sweep result yet: run `python -m batchscope sweep`.")
        return
    chart_frame(sweep_html(SWEEP.stat().st_mtime_ns))


@st.cache_resource(show_spinner=False, max_entries=4)
def sweep_html(version: int) -> str:
    """The sweep's frame, from ``SWEEP`` as of its modification time ``version`` (a new sweep: a new frame)."""
    result = json.loads(SWEEP.read_text())
    return chart_html([[sweep_ratio(result)], [sweep_throughput(result, "steps")]], "Variance sweep")
