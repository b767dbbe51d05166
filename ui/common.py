"""Shared glue: loading traces, the provenance badge, request chips, and the step state of a page."""

from __future__ import annotations

import html
import os
import threading
from pathlib import Path

import streamlit as st

from steplog import trace
from steplog.view import TraceView, text_color

TRACE_DIR = Path(__file__).resolve().parent.parent / "assets" / "traces"
POLICIES = ("static", "continuous")


@st.cache_data(show_spinner=False)
def recorded_records(scenario: str, policy: str) -> list[dict]:
    """A trace shipped in assets/traces/ (recorded by this engine on the default model)."""
    return trace.read(TRACE_DIR / f"{scenario}-{policy}.jsonl")


def recorded_view(scenario: str, policy: str) -> TraceView:
    view = TraceView(recorded_records(scenario, policy))
    view.source = "recorded"
    return view


@st.cache_resource(show_spinner="Loading the model (SmolLM2 the first time: ~20 s to convert its GGUF file)...")
def model_and_lock():
    """The model for live runs, loaded once per process and shared read-only by every session; the lock
    serialises live runs (one forward at a time on this machine's cores), so two users each get their own correct
    trace. ``$BATCHSCOPE_MODEL`` picks another model (a local folder or a cached Hugging Face id)."""
    from engine.models import DEFAULT_MODEL, load_model

    return load_model(os.environ.get("BATCHSCOPE_MODEL", DEFAULT_MODEL)), threading.Lock()


def badge(view: TraceView) -> None:
    """Where the picture comes from: a live run, a recorded trace (model, device, date) or an imported file; for a
    trace written by the vLLM tracer, "vLLM 0.33.0 server, MODEL, DEVICE" first."""
    source = getattr(view, "source", "recorded")
    label = {"recorded": "Recorded trace", "live": "Live run", "imported": "Imported file"}.get(source, source)
    name = getattr(view, "filename", "")
    c = view.header["config"]
    origin = f"**{label}**{' ' + name if name else ''} · {view.policy} · {view.provenance()}"
    if view.engine == "vllm":
        h = view.header
        origin = (
            f"**vLLM {h.get('vllm_version', '?')} server, {h['model']}, {h['device']}** · {label}"
            f"{' ' + name if name else ''} · {h['dtype']} · {(h.get('created') or '')[:10] or 'unknown date'}"
        )
    st.caption(
        f":material/verified: {origin} · "
        f"{c['max_num_seqs']} slots (max_num_seqs), token budget {c['max_num_batched_tokens']} "
        f"(max_num_batched_tokens), KV pool {c['num_kv_blocks']} blocks × {c['block_size']} tokens, "
        f"chunked prefill {'on' if c['enable_chunked_prefill'] else 'off'}"
    )


MAX_CHIPS = 40  # a server's queues hold hundreds of requests: show the first ones and count the rest


def chips(view: TraceView, request_ids: list[str], empty: str = "none") -> str:
    """HTML chips in each request's colour (its id, or a short label of a long id, written on it, so colour is never
    the only cue; the full id on hover)."""
    if not request_ids:
        return f"<span style='opacity:0.6'>{empty}</span>"
    more = len(request_ids) - MAX_CHIPS
    shown = request_ids[:MAX_CHIPS] if more > 0 else request_ids
    return " ".join(
        f"<span title='{html.escape(r, quote=True)}' style='background:{view.colors[r]};"
        f"color:{text_color(view.colors[r])};padding:1px 7px;border-radius:4px;margin-right:3px;"
        f"font-family:monospace'>{html.escape(view.label(r))}</span>"
        for r in shown
    ) + (f" <span style='opacity:0.7'>and {more} more</span>" if more > 0 else "")


def query_int(name: str, default: int, lo: int, hi: int) -> int:
    """An integer from the URL (``?step=14``), clamped to [lo, hi]; ``default`` if absent or malformed."""
    try:
        return min(max(int(st.query_params.get(name, default)), lo), hi)
    except (TypeError, ValueError):
        return default
