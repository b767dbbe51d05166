"""Runs of one workload on one step clock: the shared stage of the lockstep and playground pages.

The traces play in the browser player (``batchscope.app.web_player``): one step clock (the longest run's), a side
that finishes first holds its final state and says so, and the counters (static vs continuous: steps of each batching
mode, steps saved, padding wasted so far; vLLM vs SGLang: the families' counters; 3 or 4 runs: each run's figures)
follow the step.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from batchscope.app.common import badge, md, small_table
from batchscope.app.web_player import content_key, web_player
from batchscope.compare.lockstep import family_counters, lockstep_counters, runs_counters
from batchscope.compare.runs import SIDES, config_diff, metrics_strip, metrics_table, pool_tokens, settings_diff
from batchscope.steplog.reasons import policy_heading, run_name
from batchscope.steplog.view import TraceView

FAMILY_LABELS = {"continuous": "vLLM's scheduler (continuous)", "sglang": "SGLang's scheduler (sglang)"}


def compare(views: dict[str, TraceView], key: str, initial: int | None = None) -> None:
    """Static and continuous side by side, driven by one step; same colour per request on both sides. The sides
    keep the order of ``views`` (run A, the first, on the left: static is not always left). ``initial``: the first
    step (default: the URL's ``?step=``)."""
    for v in views.values():
        badge(v)
    pair = list(views.values())
    scenario = pair[0].header.get("scenario") or "trace"
    web_player(
        pair,
        f"{scenario}: {pair[0].policy} vs {pair[1].policy} batching",
        key=key.replace(":", "-"),
        counters=lambda: lockstep_counters(views["static"], views["continuous"]),
        window=8,
        initial=initial,
    )


def compare_families(a: TraceView, b: TraceView, key: str, initial: int | None = None) -> None:
    """vLLM's scheduler and SGLang's on one workload (``batchscope.compare.runs.family_pair``), run A left: the pool
    each counts in its own unit, a metrics strip, both on one step clock with counters read from the decision
    records (``batchscope.compare.lockstep.family_counters``); each side's narration says what its scheduler decided."""
    c = {v.policy: v.header["config"] for v in (a, b)}
    st.markdown(
        f"**Same requests, same settings, two schedulers.** The same KV pool of {pool_tokens(a)} token slots: "
        f"{c['continuous']['num_kv_blocks']} blocks of {c['continuous']['block_size']} tokens for vLLM, "
        f"{c['sglang']['num_kv_blocks']} slots of 1 token for SGLang (its `page_size` 1)."
    )
    small_table(cached_pair_strip(content_key([a, b]), a, b))
    badge(a, "A")
    badge(b, "B")
    by = {v.policy: v for v in (a, b)}
    web_player(
        [a, b],
        f"{a.header.get('scenario') or 'trace'}: vLLM vs SGLang scheduling",
        key=key.replace(":", "-").replace(" ", "").replace("/", "-"),
        counters=lambda: family_counters(by["continuous"], by["sglang"]),
        window=8,
        initial=initial,
        labels=[f"{side} · {FAMILY_LABELS[v.policy]}" for side, v in zip("AB", (a, b))],
    )


def compare_pair(a: TraceView, b: TraceView, key: str, initial: int | None = None) -> None:
    """Two runs of one workload: what differs between their settings (A → B), a metrics strip, then both on one
    step clock (``compare_any``)."""
    diff = config_diff(a, b)
    st.markdown("**What differs (A → B):** " + (md("; ".join(diff)) if diff else "nothing but the run itself"))
    small_table(cached_pair_strip(content_key([a, b]), a, b))
    compare_any(a, b, key=key, initial=initial)


def compare_any(a: TraceView, b: TraceView, key: str, initial: int | None = None) -> None:
    """Any two runs of one workload on one step clock (run A left, run B right), without the static/continuous
    counters; the page above states what differs and compares their metrics."""
    names = [run_name(v.header) for v in (a, b)]
    badge(a, "A")
    badge(b, "B")
    web_player(
        [a, b],
        "run A vs run B",
        key=key.replace(":", "-").replace(" ", "").replace("/", "-"),
        window=8,
        initial=initial,
        labels=[f"{side} · {policy_heading(run_name(v.header), names)}" for side, v in zip("AB", (a, b))],
    )


def _fmt_value(value: float | None) -> str:
    """A figure of the metrics table as the page shows it: ``n/a`` where a trace cannot tell it, 3 significant
    decimals at most."""
    if value is None:
        return "n/a"
    return str(value) if isinstance(value, int) else f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"


def runs_tables(views: list[TraceView]) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """The page's two tables for 2 to 4 runs: each setting that differs among them with each run's value (``None``
    when none differs; ``batchscope.compare.runs.settings_diff``) and the metrics strip, a column per run and the
    best side(s) (``metrics_table``)."""
    sides = list(SIDES[: len(views)])
    diff = settings_diff(views)
    settings = (
        pd.DataFrame([{"setting": r["setting"], **dict(zip(sides, r["values"]))} for r in diff]) if diff else None
    )
    rows = [
        {
            "metric": r["metric"],
            "unit": r["unit"],
            **{s: _fmt_value(x) for s, x in zip(sides, r["values"])},
            "best": ", ".join(r["best"]) or "tie",
        }
        for r in metrics_table(views)
    ]
    return settings, pd.DataFrame(rows)


def pair_strip(a: TraceView, b: TraceView) -> pd.DataFrame:
    """The metrics strip of two runs as the page shows it (``batchscope.compare.runs.metrics_strip``): A, B, B − A
    (``n/a`` where a trace cannot tell) and the better side ("tie" on a tie)."""
    rows = [
        {
            "metric": r["metric"],
            "unit": r["unit"],
            "A": _fmt_value(r["a"]),
            "B": _fmt_value(r["b"]),
            "B − A": _fmt_value(r["delta"]),
            "better": {"a": "A", "b": "B"}.get(r["better"] or "", "tie"),
        }
        for r in metrics_strip(a, b)
    ]
    return pd.DataFrame(rows)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_pair_strip(key: str, _a: TraceView, _b: TraceView) -> pd.DataFrame:
    """``pair_strip``, built once per ``key`` (``batchscope.app.web_player.content_key`` of both runs)."""
    return pair_strip(_a, _b)


@st.cache_data(show_spinner=False, max_entries=16)
def cached_runs_tables(key: str, _views: list[TraceView]) -> tuple[pd.DataFrame | None, pd.DataFrame]:
    """``runs_tables`` of ``_views``, built once per ``key`` (``batchscope.app.web_player.content_key``): about 35 ms a
    visit of the four-way page on this 2-core machine (every run's metrics), which the player's frame waited for."""
    return runs_tables(_views)


def compare_runs(views: list[TraceView], key: str, initial: int | None = None) -> None:
    """Three or four runs of one workload (sides A, B, C, D in the order given): what differs among their settings,
    a metrics strip with a column per run, a badge per side, then all of them on one step clock (the longest run's;
    a run that ended holds its final state) with each run's counters (``batchscope.compare.lockstep.runs_counters``)."""
    settings, strip = cached_runs_tables(content_key(views), views)
    if settings is None:
        st.markdown("**What differs:** nothing but the runs themselves")
    else:
        st.markdown("**What differs** (each setting that is not the same in every run, with each run's value):")
        small_table(settings)
    small_table(strip)
    for side, v in zip(SIDES, views):
        badge(v, side)
    scenario = views[0].header.get("scenario") or "trace"
    web_player(
        views,
        f"{scenario}: " + " vs ".join(f"{side} ({run_name(v.header)})" for side, v in zip(SIDES, views)),
        key=key.replace(":", "-").replace(" ", "").replace("/", "-"),
        counters=lambda: runs_counters(views),
        window=8,
        initial=initial,
    )
