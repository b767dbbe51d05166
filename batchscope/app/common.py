"""Shared glue: loading traces, the provenance badge, request chips, and the step state of a page.

Text that comes from a trace or a workload (request ids, file names, the header's model and policy, error messages
that quote them) is escaped before it joins Markdown (``md``: backslash escapes) or HTML that Streamlit renders as
Markdown (``html_text``: character references): an id such as ``<img src=https://example.com/x.png>`` or
``![x](https://example.com/x.png)`` then shows as those characters and never makes the browser fetch anything.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pandas as pd
import streamlit as st

from batchscope.player.export import url_step
from batchscope.steplog import trace
from batchscope.steplog.reasons import PROOF, pool_words, run_name
from batchscope.steplog.view import TraceView, text_color

TRACE_DIR = Path(__file__).resolve().parent.parent / "assets" / "traces"
POLICIES = ("static", "continuous")  # every scenario ships these two traces
FAMILIES = ("continuous", "sglang")  # vLLM's scheduler and SGLang's: the scenarios that ship an sglang trace


# Runs shipped only for some scenarios (a family's scheduler does not take every scenario's settings, e.g. the priority
# queue): a batching mode, or a mode and one of its settings (TensorRT-LLM's MAX_UTILIZATION policy, TGI without
# prefill chunking): batchscope.steplog.reasons.run_name names them
SOME_SCENARIOS = ("sglang", "tgi", "tgi_no_chunking", "trtllm", "trtllm_max_utilization", "speculative")


def recorded_policies(scenario: str) -> tuple[str, ...]:
    """The runs shipped for ``scenario`` in batchscope/assets/traces/: static and continuous always, the others of
    ``SOME_SCENARIOS`` where they were recorded."""
    return tuple(
        p for p in (*POLICIES, *SOME_SCENARIOS) if p in POLICIES or (TRACE_DIR / f"{scenario}-{p}.jsonl").exists()
    )


@st.cache_resource(show_spinner=False)
def recorded_records(scenario: str, policy: str) -> list[dict]:
    """A trace shipped in batchscope/assets/traces/ (recorded by this engine on the default model): one list shared by
    every session, read-only (``st.cache_data`` would unpickle a copy per call: the Compare page lists all 17 shipped
    traces, 0.15-0.3 s of every visit)."""
    return trace.read(TRACE_DIR / f"{scenario}-{policy}.jsonl")


@st.cache_resource(show_spinner=False)
def gpu_records(scenario: str, policy: str) -> list[dict] | None:
    """The same scenario recorded on a GPU (batchscope/assets/traces/gpu/, by scripts/gpu-engine-check.sh), or None
    where none was recorded. Shared by every session, read-only."""
    path = TRACE_DIR / "gpu" / f"{scenario}-{policy}.jsonl"
    return trace.read(path) if path.exists() else None


@st.cache_resource(show_spinner=False)
def recorded_view(scenario: str, policy: str) -> TraceView:
    """The ``TraceView`` of a shipped trace, shared by every session: what the visuals derive from it (cells, block
    tables, moments) is built once per server, not per visit. Read-only: a page that needs its own ``source`` or
    ``filename`` makes its own view of ``recorded_records``."""
    return TraceView(recorded_records(scenario, policy), source="recorded")


@st.cache_resource(show_spinner="Loading the model (SmolLM2 the first time: ~20 s to convert its GGUF file)...")
def model_and_lock():
    """The model for live runs, loaded once per process and shared read-only by every session; the lock
    serialises live runs (one forward at a time on this machine's cores), so two users each get their own correct
    trace. ``$BATCHSCOPE_MODEL`` picks another model (a local folder or a cached Hugging Face id)."""
    from batchscope.engine.threads import use_threads
    from batchscope.model.models import DEFAULT_MODEL, load_model
    from batchscope.model.runner import pack_now

    use_threads()  # one core left for the browser and other neighbours (batchscope/engine/threads.py)
    loaded = load_model(os.environ.get("BATCHSCOPE_MODEL", DEFAULT_MODEL))
    pack_now(loaded.model)
    return loaded, threading.Lock()


_MD_SPECIAL = re.compile(r"([\\`*\[\]<>&$~|])")


def md(text: object) -> str:
    """``text`` as literal characters in Streamlit Markdown: no links, images, HTML, code, LaTeX or emphasis."""
    return _MD_SPECIAL.sub(r"\\\1", str(text))


# HTML's own characters, then Markdown's syntax characters, each as a numeric character reference
_HTML_MD_ENTITIES = {ord(c): f"&#{ord(c)};" for c in "&<>\"'" + "\\`*_[]()!$~|:{}#+-"}


def html_text(text: object) -> str:
    """``text`` as literal characters inside HTML that Streamlit renders as Markdown (``unsafe_allow_html``): HTML
    escaped, and Markdown's syntax characters as numeric character references, which Markdown shows but never
    parses (a backslash would not do: it is not an escape in HTML)."""
    return str(text).translate(_HTML_MD_ENTITIES)


def badge(view: TraceView, prefix: str = "") -> None:
    """Where the picture comes from: a live run, a recorded trace (model, device, date) or an imported file; for a
    trace written by the vLLM tracer, "vLLM 0.33.0 server, MODEL, DEVICE" first. ``prefix`` names the run ("A")."""
    source = getattr(view, "source", "recorded")
    label = {"recorded": "Recorded trace", "live": "Live run", "imported": "Imported file"}.get(source, source)
    name = md(getattr(view, "filename", ""))
    partial = " · :orange-badge[partial: stopped early]" if view.partial else ""
    if view.cut_short:  # "cut short at step 6" or "truncated at step 6"
        partial = f" · :orange-badge[{view.cut_short.split(':')[0]}]"
    c = view.header["config"]
    origin = f"**{label}**{' ' + name if name else ''} · {md(run_name(view.header))} · {md(view.provenance())}"
    if view.policy in PROOF and view.engine != "vllm":
        origin += f" · {md(PROOF[view.policy])}"
    if view.engine == "vllm":
        h = view.header
        origin = (
            f"**vLLM {md(h.get('vllm_version', '?'))} server, {md(h['model'])}, {md(h['device'])}** · {label}"
            f"{' ' + name if name else ''} · {md(h['dtype'])} · {(h.get('created') or '')[:10] or 'unknown date'}"
        )
    st.caption(
        f":material/verified: {f'**{md(prefix)}** · ' if prefix else ''}{origin}{partial} · "
        f"{c['max_num_seqs']} slots (max_num_seqs), token budget {c['max_num_batched_tokens']} "
        f"(max_num_batched_tokens), {pool_words(view.header)}, "
        f"chunked prefill {'on' if c['enable_chunked_prefill'] else 'off'}"
    )
    if view.cut_short:  # a crashed server's trace opens, and says so on every page: never as a complete one
        st.warning(
            f"{f'{md(prefix)}: ' if prefix else ''}{name or 'This trace'}: {md(view.cut_short)}",
            icon=":material/warning:",
        )


# A small table's look: Streamlit's type, a line between rows, the header's line stronger; colours from the theme's text
TABLE_CSS = """<style>
table.bs-table {border-collapse: collapse; font-size: 0.875rem; margin: 0 0 0.5rem 0; color: inherit}
table.bs-table th {text-align: left; font-weight: 600; border-bottom: 1px solid rgba(128, 128, 128, 0.55)}
table.bs-table td {border-bottom: 1px solid rgba(128, 128, 128, 0.2)}
table.bs-table th, table.bs-table td {padding: 0.25rem 1rem 0.25rem 0.5rem; vertical-align: top}
</style>"""


def small_table(frame: pd.DataFrame) -> None:
    """A table of a few rows (a metrics strip, the settings that differ) drawn as plain HTML, its text escaped
    (``pandas.DataFrame.to_html``), without the index. ``st.dataframe``'s grid (and ``st.table``: both pass the
    frame as Arrow) held the player's frame under it back by about 0.1 s on every visit of the four-way Compare
    page (scripts/measure_page_load.py, 2026-12-06): the page's Arrow and grid scripts loaded and ran first."""
    st.html(TABLE_CSS + frame.to_html(index=False, border=0, classes="bs-table", escape=True))


MAX_CHIPS = 40  # a server's queues hold hundreds of requests: show the first ones and count the rest


def chips(view: TraceView, request_ids: list[str], empty: str = "none") -> str:
    """HTML chips in each request's colour (its id, or a short label of a long id, written on it, so colour is never
    the only cue; the full id on hover)."""
    if not request_ids:
        return f"<span style='opacity:0.6'>{empty}</span>"
    more = len(request_ids) - MAX_CHIPS
    shown = request_ids[:MAX_CHIPS] if more > 0 else request_ids
    return " ".join(
        f"<span title='{html_text(r)}' style='background:{view.colors[r]};"
        f"color:{text_color(view.colors[r])};padding:1px 7px;border-radius:4px;margin-right:3px;"
        f"font-family:monospace'>{html_text(view.label(r))}</span>"
        for r in shown
    ) + (f" <span style='opacity:0.7'>and {more} more</span>" if more > 0 else "")


def query_int(name: str, default: int, lo: int, hi: int) -> int:
    """An integer from the URL (``?step=14``), as the exported player reads its own
    (``batchscope.player.export.url_step``): a number rounded half up and clamped to [lo, hi]; ``default`` (clamped) if
    absent or not a plain number."""
    return url_step(st.query_params.get(name), default, lo, hi)
