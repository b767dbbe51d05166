"""Trace: load a trace file (validated, size-capped, plain JSON only), export the current one, read it raw."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from batchscope.app.common import (
    POLICIES,
    SOME_SCENARIOS,
    badge,
    gpu_records,
    md,
    query_int,
    recorded_policies,
    recorded_records,
)
from batchscope.app.state import live_runs
from batchscope.app.web_player import web_player
from batchscope.figures.gauges import series
from batchscope.figures.packing import span_size, spans
from batchscope.figures.steps_table import CAPTION, columns, step_row
from batchscope.inputs.workload import list_scenarios
from batchscope.steplog import trace
from batchscope.steplog.metric_names import FAMILIES, TITLES, family
from batchscope.steplog.reasons import run_name
from batchscope.steplog.view import TraceView

# the upload cap, in MB (MiB, as Streamlit counts): one fact, batchscope.steplog.trace.MAX_TRACE_BYTES;
# .streamlit/config.toml's server.maxUploadSize (what the server accepts) must say the same, and a test checks that it
# does
UPLOAD_MB = trace.MAX_TRACE_BYTES // 2**20


def steps_table(records: list[dict], view: TraceView | None = None) -> pd.DataFrame:
    """Every step's row (``batchscope.figures.steps_table.step_row``), for the sortable table of the whole trace."""
    view = view or TraceView(records)
    return pd.DataFrame([step_row(view, k) for k in range(view.num_steps)], columns=list(columns(view)))


GPU = "recorded on a GPU"  # the options of batchscope/assets/traces/gpu/ (?device=gpu), beside "recorded" (this CPU's)


# The whole trace's table: shorter headings than the player's table (the full name on hover) and fixed widths in px
# that add up to the 784 px the page has at 1280x720 (a static trace's ten columns needed 921 px as the player's table
# names them, and the grid then scrolled sideways). A longer cell is cut; clicking it shows it whole.
SHORT = {
    "t_end (s)": "end (s)",
    "batched tokens": "tokens",
    "padding rows": "padding",
    "KV blocks used": "blocks",
    "token slots used": "slots",
}
WIDTH = {
    "step": 50,
    "t_end (s)": 64,
    "batched tokens": 58,
    "scheduled": 204,
    "admitted": 72,
    "finished": 64,
    "preempted": 82,
    "waiting": 62,
    "padding rows": 68,
    "KV blocks used": 56,
    "token slots used": 52,
}


def column_config(table: pd.DataFrame) -> dict:
    """``st.dataframe``'s column_config for the whole trace's table: the short headings and the widths above."""
    return {
        c: st.column_config.Column(SHORT.get(c, c), help=c if c in SHORT else None, width=WIDTH.get(c))
        for c in table.columns
    }


def _linked_option(options: list[str]) -> int:
    """The option a link asked for (``?scenario=..&policy=..``, ``&device=gpu``, or ``?live=policy``), else the
    first."""
    q = st.query_params
    where = GPU if q.get("device") == "gpu" else "recorded"
    wanted = f"live run: {q['live']}" if "live" in q else f"{where}: {q.get('scenario')} / {q.get('policy')}"
    return options.index(wanted) if wanted in options else 0


def choose_trace(prefix: str = "trace", follow_url: bool = True) -> tuple[list[dict], str, str]:
    """(records, source, name) of the trace the user picked: recorded, the last live run, or an uploaded file.

    ``prefix`` keys the widgets (other pages reuse this picker); with ``follow_url`` the URL's ``scenario`` and
    ``policy`` (or ``live``) choose the default and the choice is written back, so the page can be linked to."""
    names = sorted(list_scenarios(), key=lambda n: n != "seed-abcd")  # the walkthrough's story first
    order = ("continuous", "static", *SOME_SCENARIOS)
    options = [f"recorded: {sc} / {p}" for sc in names for p in sorted(recorded_policies(sc), key=order.index)]
    options += [f"{GPU}: {sc} / {p}" for sc in names for p in POLICIES[::-1] if gpu_records(sc, p)]
    live = live_runs()
    options += [f"live run: {p}" for p in live]
    options.append("upload a file…")
    index = _linked_option(options) if follow_url else 0
    choice = st.selectbox("Trace", options, index=index, key=f"{prefix}:choice")
    if follow_url:
        for name in ("scenario", "policy", "live", "device"):
            st.query_params.pop(name, None)
    if choice.startswith("recorded"):
        sc, p = choice.split(": ", 1)[1].split(" / ")
        on_gpu = choice.startswith(GPU)
        if follow_url:
            st.query_params.update(scenario=sc, policy=p, **({"device": "gpu"} if on_gpu else {}))
        if on_gpu:
            return gpu_records(sc, p) or [], "recorded", f"{sc}-{p}-gpu.jsonl"
        return recorded_records(sc, p), "recorded", f"{sc}-{p}.jsonl"
    if choice.startswith("live"):
        if follow_url:
            st.query_params["live"] = choice.split(": ", 1)[1]
        label = choice.split(": ", 1)[1]
        return live[label], "live", label
    uploaded = upload_trace(prefix)
    if uploaded is None:
        st.stop()
    return uploaded[0], "imported", uploaded[1]


def upload_trace(prefix: str) -> tuple[list[dict], str] | None:
    """A file uploader for a trace (keyed by ``prefix``): ``(records, file name)`` once a valid file is given, None
    before. A file too large or not a valid trace is refused with the reason and the page stops there."""
    up = st.file_uploader(
        f"Batchscope or vLLM-tracer trace (.jsonl or .jsonl.gz, at most {UPLOAD_MB} MB of uncompressed text)",
        type=["jsonl", "json", "gz"],
        key=f"{prefix}:upload",
        max_upload_size=UPLOAD_MB,  # the widget's own "Limit ... per file" says the same figure as the label
    )
    if up is None:
        return None
    if up.size > trace.MAX_TRACE_BYTES:
        st.error(f"{md(up.name)} is {up.size / 2**20:.1f} MB; the limit is {UPLOAD_MB} MB.")
        st.stop()
    cached = st.session_state.get(f"{prefix}:parsed")
    if cached and cached[0] == up.file_id:  # parsed once per upload, not at every rerun
        return cached[1], up.name
    try:
        records = trace.loads(up.getvalue())
    except trace.TraceError as exc:
        st.error(f"{md(up.name)} is not a valid Batchscope trace: {md(exc)}", icon=":material/error:")
        st.stop()
    st.session_state[f"{prefix}:parsed"] = (up.file_id, records)
    return records, up.name


def _view(records: list[dict], source: str, name: str) -> TraceView:
    """One ``TraceView`` per trace per session: its derived data (cells, block-table checkpoints, labels) is built
    once, not at every rerun."""
    cached = st.session_state.get("trace:view")
    if cached is None or cached.records is not records:
        cached = TraceView(records)
        st.session_state["trace:view"] = cached
    cached.source, cached.filename = source, name
    return cached


def pick_span(view: TraceView) -> tuple[int, int] | None:
    """A long trace of a busy server plays a span of steps at a time (``packing.span_size``): the one holding the
    URL's ``?step=`` first, any other from a select box (the player's clock, scrubber and events stay in it)."""
    size = span_size(view.header["config"]["max_num_seqs"])
    if view.num_steps <= size:
        return None
    options = spans(view.num_steps, size)
    step = query_int("step", 0, 0, view.num_steps - 1)
    chosen = st.selectbox(
        f"Steps in the player ({view.num_steps} in all, {size} at a time)",
        options,
        index=step // size,
        format_func=lambda s: f"steps {view.step_number(s[0])}–{view.step_number(s[1])}",
        key=f"trace:span:{view.num_steps}",
        help="a long trace is packed for the browser a span of steps at a time, so it opens in seconds",
    )
    if not chosen[0] <= step <= chosen[1]:
        st.query_params["step"] = str(chosen[0])
    return chosen


EAGER_EXPORT_RECORDS = 300  # ~0.3 MB, ~30 ms to serialize (the shipped preemption trace: 83 records, 9 ms)


def page() -> None:
    st.title("Trace")
    st.markdown(
        "The step log behind every picture: JSON Lines, one header, one line per step, one summary "
        "(documented in `docs/trace-format.md`, schema in `batchscope/steplog/trace.schema.json`)."
    )
    records, source, name = choose_trace()
    view = _view(records, source, name)
    badge(view)
    st.download_button(
        "Export this trace (.jsonl)",
        # a short trace is built now, so the click needs no round trip to a busy server; a long one (a server's
        # trace is tens of MB) only when clicked
        trace.dumps(records) if len(records) <= EAGER_EXPORT_RECORDS else lambda: trace.dumps(records),
        file_name=f"playground-{name.replace(' ', '-')}.jsonl"
        if source == "live"
        else (name or "trace.jsonl").removesuffix(".gz"),
        mime="application/jsonl",
        key="trace:export",
    )
    # The header and a step's raw record are built only when opened: a JSON viewer costs the browser ~0.1 s each on
    # every visit even folded (scripts/measure_page_load.py), before the player's frame appears.
    header = st.expander("Header", expanded=False, key="trace:header", on_change="rerun")
    if header.open:
        header.json(records[0])
    title = f"{view.header.get('scenario') or name or 'trace'} ({name if source == 'live' else run_name(view.header)})"
    web_player([view], title, key=f"trace-{source}", window=20, span=pick_span(view), gauges=True, table=True)
    st.caption(
        "The steps table under the views follows the player (its row is the current step; click a row to go to "
        "that step). Every step of the whole trace, sortable:"
    )
    # Built only when opened, as the Header is: folded, the table's grid still cost the browser 0.1-0.2 s of the thread
    # that draws the player's first frame (scripts/measure_page_load.py)
    steps = st.expander("All steps", expanded=False, key="trace:all-steps", on_change="rerun")
    if steps.open:
        table = steps_table(records, view)
        steps.dataframe(table, hide_index=True, width="stretch", height=260, column_config=column_config(table))
        steps.caption(CAPTION)
    st.caption(
        f"Under the request timeline, the player draws {TITLES[family(view.header)]} (`batchscope/steplog/gauges.py`: "
        + ", ".join(f"`{FAMILIES[family(view.header)][key][0]}`" for key, *_ in series(view))
        + "), with the player's cursor on the current step."
    )
    raw = st.expander("Raw record of a step", key="trace:raw-open", on_change="rerun")
    if raw.open:
        with raw:
            last = view.num_steps - 1
            k = st.number_input("step", 0, last, query_int("step", 0, 0, last), key="trace:raw")
            st.json(view.steps[int(k)])
