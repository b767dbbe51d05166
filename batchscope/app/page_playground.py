"""Playground: choose a workload and the scheduler's knobs, run it live on the real model, watch the result.

Three kinds of run: static vs continuous side by side, one batching mode alone, or "A vs B": the same workload
under two sets of scheduler settings (e.g. chunked prefill on vs off, 4 vs 8 slots, prefix caching on vs off), shown
on one step clock with what differs and a metrics strip, and one click away on the Compare runs page.
"""

from __future__ import annotations

import json

import streamlit as st

from batchscope.app import playground_run, state
from batchscope.app.common import md, model_and_lock
from batchscope.app.compare import compare, compare_pair
from batchscope.app.links import page_link
from batchscope.app.playground_spec import (
    ARRIVALS,
    LENGTHS,
    PROMPT_SETS,
    RUN_A,
    RUN_B,
    RUN_MODES,
    b_differs,
    run_configs,
)
from batchscope.app.playground_spec import validate as validate_settings
from batchscope.app.state import live_runs, live_settings
from batchscope.app.web_player import web_player
from batchscope.engine.batching import SCHEDULERS
from batchscope.engine.config import CAPACITY_POLICIES, CONTEXT_CHUNKING
from batchscope.steplog.view import TraceView

Slots = dict[str, "st.delta_generator.DeltaGenerator"]
BATCHING_MODES = tuple(SCHEDULERS)  # continuous first: the default
KNOBS_PREFIX = "pg:"  # every knob's widget key starts with it
# widgets with that prefix that are not knobs (no value to keep); a live run's controls are keyed "live:"
BUTTONS = ("pg:run", "pg:b:copy")


def workload_knobs(s: dict, slots: Slots) -> None:
    st.markdown("**Workload**")
    s["prompt_set"] = st.selectbox("Prompt set", list(PROMPT_SETS), key="pg:prompts")
    s["num_requests"] = st.slider("Number of requests", 1, 32, 6, key="pg:n")
    s["lengths"] = st.selectbox("Output lengths", LENGTHS, index=2, key="pg:lengths")
    s["max_tokens"] = st.slider(
        "Max / mean output tokens",
        1,
        400,
        24,
        key="pg:maxtok",
        help="natural: the cap (max_tokens); forced: the mean of the forced lengths",
    )
    s["spread"] = st.slider(
        "Length spread (0 = equal, 1 = very uneven)",
        0.0,
        1.0,
        0.7,
        key="pg:spread",
        disabled=s["lengths"] != LENGTHS[2],
        help="forced, variable: lengths drawn (seeded) around the mean, up to 4x it",
    )
    slots["max_tokens"] = st.empty()
    s["arrivals"] = st.selectbox("Arrivals", ARRIVALS, key="pg:arrivals")
    s["rate"] = st.slider(
        "Arrival rate (per step or per second)", 0.05, 4.0, 0.5, key="pg:rate", disabled=s["arrivals"] == ARRIVALS[0]
    )


def speculation_knobs(prefix: str, d: dict, k: dict, slots: Slots) -> None:
    """n-gram speculative decoding's knobs (``num_speculative_tokens``, the n-gram sizes) into ``k``."""
    k["num_speculative_tokens"] = st.number_input(
        "Draft tokens per decode (speculative)",
        0,
        16,
        d.get("num_speculative_tokens", 0),
        key=f"{prefix}:drafts",
        help="vLLM's n-gram speculative decoding (num_speculative_tokens; 0: off; continuous batching only): "
        "each decode also verifies up to this many tokens copied from where its last tokens occurred before",
    )
    lo, hi = st.slider(
        "n-gram size matched for drafts",
        1,
        8,
        (d.get("prompt_lookup_min", 1), d.get("prompt_lookup_max", 3)),
        key=f"{prefix}:ngram",
        disabled=not k["num_speculative_tokens"],
        help="prompt_lookup_min .. prompt_lookup_max (vLLM's default is 5 .. 5, which short answers rarely repeat)",
    )
    k["prompt_lookup_min"], k["prompt_lookup_max"] = lo, hi
    slots["num_speculative_tokens"] = st.empty()


def family_knobs(prefix: str, d: dict, k: dict) -> None:
    """TGI's and TensorRT-LLM's own knobs into ``k``, under their engines' names (used only by their batching
    modes: ``batchscope.engine.config.EngineConfig``)."""
    with st.expander("TGI and TensorRT-LLM knobs"):
        k["waiting_served_ratio"] = st.number_input(
            "waiting_served_ratio (TGI)",
            0.0,
            8.0,
            float(d.get("waiting_served_ratio", 0.3)),
            0.1,
            key=f"{prefix}:wsr",
            help="TGI without prefill chunking forms a new batch beside a running one only if this ratio × running "
            "requests wait (default 0.3)",
        )
        k["max_waiting_tokens"] = st.number_input(
            "max_waiting_tokens (TGI)",
            0,
            4096,
            d.get("max_waiting_tokens", 20),
            key=f"{prefix}:mwt",
            help="TGI: decode steps after which that minimum no longer holds (default 20)",
        )
        k["capacity_policy"] = st.selectbox(
            "capacity policy (TensorRT-LLM)",
            CAPACITY_POLICIES,
            CAPACITY_POLICIES.index(d.get("capacity_policy", CAPACITY_POLICIES[0])),
            key=f"{prefix}:cap",
            help="guaranteed_no_evict (default): reserve blocks to completion; max_utilization: only the next step's, "
            "pausing the last started request when they run out; static_batch: one batch to its end",
        )
        k["context_chunking"] = st.selectbox(
            "context chunking (TensorRT-LLM)",
            CONTEXT_CHUNKING,
            CONTEXT_CHUNKING.index(d.get("context_chunking", CONTEXT_CHUNKING[0])),
            key=f"{prefix}:chunking",
            help="fcfs: the first prompt takes what it can; equal_progress: prompts grow one chunk unit each in turn",
        )
        unit = st.number_input(
            "chunk_unit_size (TensorRT-LLM; 0 = block size)",
            0,
            4096,
            d.get("chunk_unit_size") or 0,
            key=f"{prefix}:unit",
        )
        k["chunk_unit_size"] = unit or None


def scheduler_knobs(prefix: str, like: dict | None = None, places: list | None = None) -> tuple[dict, Slots]:
    """The scheduler and KV-cache knobs of one run (widget keys ``prefix:...``), drawn in ``places`` (columns, in
    turn; default: here); ``like``: the first values (run B starts as a copy of run A). Returns the knobs and,
    per field, the place for its messages."""
    d = like or {}
    k: dict = {}
    slots: Slots = {}
    places = places or [st.container()]
    with places[0]:
        k["max_num_seqs"] = st.slider("max_num_seqs (slots)", 1, 16, d.get("max_num_seqs", 4), key=f"{prefix}:seqs")
        slots["max_num_seqs"] = st.empty()
    with places[1 % len(places)]:
        k["max_num_batched_tokens"] = st.number_input(
            "max_num_batched_tokens (token budget)",
            1,
            4096,
            d.get("max_num_batched_tokens", 64),
            key=f"{prefix}:budget",
        )
        k["enable_chunked_prefill"] = st.toggle(
            "Chunked prefill", d.get("enable_chunked_prefill", True), key=f"{prefix}:chunked"
        )
        slots["max_num_batched_tokens"] = st.empty()
    with places[2 % len(places)]:
        k["num_kv_blocks"] = st.number_input(
            "num_kv_blocks", 1, 4096, d.get("num_kv_blocks", 64), key=f"{prefix}:blocks"
        )
        k["block_size"] = st.select_slider(
            "block_size (tokens per block)", [1, 2, 4, 8, 16, 32], d.get("block_size", 16), key=f"{prefix}:bs"
        )
        slots["num_kv_blocks"] = st.empty()
    with places[3 % len(places)]:
        k["enable_prefix_caching"] = st.toggle(
            "Prefix caching",
            d.get("enable_prefix_caching", True),
            key=f"{prefix}:prefix",
            help="vLLM's automatic prefix caching (default on): full KV blocks of a prompt already in the pool "
            "are shared, not recomputed (the chat prompts share their system prompt)",
        )
        k["reserve_full_prompt"] = st.toggle(
            "Full-prompt admission",
            d.get("reserve_full_prompt", True),
            key=f"{prefix}:fullprompt",
            help="vLLM 0.33's default: admit a request only if the free blocks hold its whole prompt; off: only "
            "its first chunk must fit (the older rule, which can thrash)",
        )
        k["enable_mixed_chunk"] = st.toggle(
            "Mixed chunks (SGLang)",
            d.get("enable_mixed_chunk", False),
            key=f"{prefix}:mixed",
            help="SGLang's --enable-mixed-chunk (off by default; SGLang's scheduler only): the running decodes join "
            "a prefill batch instead of waiting that step",
        )
        slots["enable_mixed_chunk"] = st.empty()
        speculation_knobs(prefix, d, k, slots)
        family_knobs(prefix, d, k)
    return k, slots


def knobs() -> tuple[dict, Slots, Slots]:
    """Draw the knobs; returns the settings and the places for run A's and run B's messages, per field."""
    state.restore_knobs(KNOBS_PREFIX)  # their values after a visit to another page (Streamlit dropped them)
    s: dict = {}
    slots: Slots = {}
    c = st.columns(3)
    with c[0]:
        workload_knobs(s, slots)
    with c[1]:
        st.markdown("**Scheduler and KV cache**")
        s["runs"] = st.selectbox("Runs", RUN_MODES, key="pg:runs", help="A vs B: run B's settings appear below")
        ab = s["runs"] == RUN_MODES[3]
        s["batching"] = st.selectbox("Batching (run A)", BATCHING_MODES, key="pg:batching") if ab else "continuous"
        knobs_a, slots_a = scheduler_knobs("pg")
        s.update(knobs_a)
        slots.update(slots_a)
    with c[2]:
        st.markdown("**Sampling**")
        s["temperature"] = st.slider("temperature (0 = greedy)", 0.0, 2.0, 0.0, key="pg:temp")
        s["top_p"] = st.slider("top_p", 0.0, 1.0, 1.0, key="pg:topp")
        s["top_k"] = st.number_input("top_k (0 = off)", 0, 1000, 0, key="pg:topk")
        s["seed"] = st.number_input("seed", 0, 2**31 - 1, 0, key="pg:seed")
    slots_b = run_b_knobs(s) if ab else {}
    state.save_knobs(KNOBS_PREFIX, exclude=BUTTONS)
    return s, slots, slots_b


def copy_a_to_b() -> None:
    """Run B's knobs take run A's current values (every ``pg:b:NAME`` from ``pg:NAME``): the button's callback, run
    before the page is drawn, so the widgets show the copied values."""
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith("pg:b:") and k not in BUTTONS]:
        if (a_key := "pg:" + key.removeprefix("pg:b:")) in st.session_state:
            st.session_state[key] = st.session_state[a_key]


def run_b_knobs(s: dict) -> Slots:
    """Run B's box: its knobs (a copy of run A's when A vs B is first chosen; after that B keeps its own values, and
    the box says so and offers to copy A again), and what differs. Sets ``s["b"]``; returns the places for B's
    messages."""
    with st.container(border=True):
        st.markdown(
            "**Run B**: the same requests under other settings. It starts as a copy of run A; after that it keeps "
            "its own values, so **a later change to run A does not change B** (copy A again to start over)."
        )
        st.button(
            "Copy run A's settings to B",
            key="pg:b:copy",
            on_click=copy_a_to_b,
            icon=":material/content_copy:",
            help="set every knob of run B to run A's current value",
        )
        cb = st.columns([1, 1, 1, 1.5])  # the last holds the toggles: their labels do not wrap (at 1280x720)
        with cb[0]:
            b = {"batching": st.selectbox("Batching (run B)", BATCHING_MODES, key="pg:b:batching")}
        knobs_b, slots_b = scheduler_knobs("pg:b", like=s, places=list(cb))
        b.update(knobs_b)
        s["b"] = b
        diff = b_differs(s)
        st.markdown("**B differs from A in:** " + (md("; ".join(diff)) if diff else "nothing yet"))
    return slots_b


def show_messages(msgs: dict[str, list[str]], slots: Slots, run: str = "") -> list[str]:
    """Each message next to its knob; returns those with no knob (shown together by the caller)."""
    for field, box in slots.items():
        if msgs.get(field):
            box.error("\n\n".join(run + m for m in msgs[field]), icon=":material/error:")
    return [run + m for f, ms in msgs.items() if f not in slots for m in ms]


def page() -> None:
    st.title("Playground")
    loaded, _ = model_and_lock()
    st.markdown(
        f"Pick a workload and the scheduler's limits, then run it live on **{loaded.name}** on this "
        "machine: static vs continuous, one batching mode, or **A vs B** (the same requests under two settings). Knobs "
        "keep their values, also when you visit another page and come back; a setting that cannot run is explained "
        "next to its knob before anything runs. Runs are cached by their settings."
    )
    s, slots, slots_b = knobs()
    from batchscope.engine.llm import model_limits

    msgs, msgs_b, specs = validate_settings(s, loaded.tokenizer, *model_limits(loaded))
    leftovers = show_messages(msgs, slots) + show_messages(msgs_b, slots_b, "Run B: ")
    same = s["runs"] == RUN_MODES[3] and not b_differs(s)
    if leftovers:
        st.error("\n\n".join(leftovers))
    settings_key = json.dumps(s, sort_keys=True)
    job = playground_run.collect()
    busy = job is not None and not job.finished
    if st.button("Run live", type="primary", disabled=bool(msgs or msgs_b) or busy or same, key="pg:run"):
        playground_run.start(settings_key, specs, run_configs(s))
        job = state.live_job()
    if same:
        st.info("Run B has the same settings as run A: change at least one of B's knobs.", icon=":material/info:")
    if job is not None and job.status == "error":
        st.error(f"The live run failed: {md(job.error)}", icon=":material/error:")
    elif job is not None:
        playground_run.watch()
        return
    show_result(s, settings_key)


def show_result(s: dict, settings_key: str) -> None:
    """The last live run of these settings, or a note that the knobs changed since."""
    result = live_runs()
    if not result:
        return
    if live_settings() != settings_key:
        st.info(
            "The knobs changed since the last run: press **Run live** to see these settings. (The last run "
            "stays available on the Compare runs, Trace and Metrics pages.)",
            icon=":material/info:",
        )
        return
    views = {label: TraceView(records, source="live") for label, records in result.items()}
    if any(v.partial for v in views.values()):
        st.warning(
            "Cancelled: the partial trace is kept (unfinished requests have no finish) and is on the Trace and "
            "Metrics pages too." + (" The second run never ran." if len(views) < len(run_configs(s)) else ""),
            icon=":material/cancel:",
        )
    if set(views) == {RUN_A, RUN_B}:
        page_link(
            "compare",
            "Open this pair on the Compare runs page",
            {"a": f"playground live run / {RUN_A}", "b": f"playground live run / {RUN_B}"},
        )
        compare_pair(views[RUN_A], views[RUN_B], key="pg-ab")
    elif set(views) == {"static", "continuous"}:
        compare(views, key="pg:compare")
    else:
        view = next(iter(views.values()))
        web_player([view], f"playground ({view.policy})", key="pg-single", window=20)
