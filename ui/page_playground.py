"""Playground: choose a workload and the scheduler's knobs, run it live on the real model, watch the result."""

from __future__ import annotations

import json

import streamlit as st

from engine.config import LIMITS, ConfigError, EngineConfig
from engine.engine import RequestError, validate_request
from engine.workload import output_lengths, poisson_arrivals, to_requests
from steplog.view import TraceView
from ui import playground_run, state
from ui.common import md, model_and_lock
from ui.compare import compare
from ui.state import live_runs, live_settings
from ui.web_player import web_player

PROMPT_SETS = {
    "chat questions": [
        "What is the capital of France?",
        "Give two facts about the Moon.",
        "What does a compiler do?",
        "Suggest a name for a cat.",
        "Explain rain to a child in one sentence.",
        "How do vaccines work?",
        "Write a poem about the ocean.",
        "What is 2+2?",
        "Describe the water cycle in detail.",
        "Give me a synonym for happy.",
        "Explain photosynthesis to a high school student.",
        "Name a primary color.",
    ],
    "short completions": [
        "The capital of France is",
        "Water boils at",
        "Once upon a time",
        "The best way to learn is",
        "In 1969, astronauts",
        "My favourite fruit is",
    ],
    "long documents (chunked prefill)": [
        "Summarize in one sentence: "
        + " ".join(["The printing press spread books and ideas across Europe faster than ever before."] * k)
        for k in (4, 8, 12, 16)
    ],
}
LENGTHS = ("natural (EOS, capped)", "forced, equal", "forced, variable")
ARRIVALS = ("all at once", "Poisson, in steps (reproducible)", "Poisson, in seconds")


def build_specs(s: dict) -> list[dict]:
    prompts = PROMPT_SETS[s["prompt_set"]]
    n = s["num_requests"]
    natural = s["lengths"] == LENGTHS[0]
    # forced lengths: the sweep's seeded log-normal with an exact mean (spread 1 = sigma 1.5), capped at 4x the mean
    sigma = 1.5 * s["spread"] if s["lengths"] == LENGTHS[2] else 0.0
    lens = [s["max_tokens"]] * n if natural else output_lengths(n, s["max_tokens"], sigma, s["seed"], cap_factor=4)
    specs = []
    for i in range(n):
        text = prompts[i % len(prompts)]
        spec = {
            "request_id": f"R{i + 1:02d}",
            "max_tokens": lens[i],
            "ignore_eos": not natural,
            "temperature": s["temperature"],
            "top_p": s["top_p"],
            "top_k": s["top_k"],
            "seed": s["seed"] + i,
            "arrival_time": 0.0,
        }
        spec["messages" if s["prompt_set"] == "chat questions" else "prompt"] = (
            [{"role": "user", "content": text}] if s["prompt_set"] == "chat questions" else text
        )
        specs.append(spec)
    if s["arrivals"] == ARRIVALS[0]:
        return specs
    clock = "steps" if s["arrivals"] == ARRIVALS[1] else "s"
    return poisson_arrivals(specs, s["rate"], seed=s["seed"] + 1, clock=clock)


def knobs() -> tuple[dict, dict]:
    """Draw the knobs; returns the settings and, per knob, the messages to show next to it."""
    slots: dict[str, st.delta_generator.DeltaGenerator] = {}
    s: dict = {}
    c = st.columns(3)
    with c[0]:
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
            "Arrival rate (per step or per second)",
            0.05,
            4.0,
            0.5,
            key="pg:rate",
            disabled=s["arrivals"] == ARRIVALS[0],
        )
    with c[1]:
        st.markdown("**Scheduler and KV cache**")
        s["policy"] = st.selectbox("Policy", ["both (side by side)", "continuous", "static"], key="pg:policy")
        s["max_num_seqs"] = st.slider("max_num_seqs (slots)", 1, 16, 4, key="pg:seqs")
        slots["max_num_seqs"] = st.empty()
        s["max_num_batched_tokens"] = st.number_input(
            "max_num_batched_tokens (token budget)", 1, 4096, 64, key="pg:budget"
        )
        s["enable_chunked_prefill"] = st.toggle("Chunked prefill", True, key="pg:chunked")
        slots["max_num_batched_tokens"] = st.empty()
        s["num_kv_blocks"] = st.number_input("num_kv_blocks", 1, 4096, 64, key="pg:blocks")
        s["block_size"] = st.select_slider("block_size (tokens per block)", [1, 2, 4, 8, 16, 32], 16, key="pg:bs")
        slots["num_kv_blocks"] = st.empty()
    with c[2]:
        st.markdown("**Sampling**")
        s["temperature"] = st.slider("temperature (0 = greedy)", 0.0, 2.0, 0.0, key="pg:temp")
        s["top_p"] = st.slider("top_p", 0.0, 1.0, 1.0, key="pg:topp")
        s["top_k"] = st.number_input("top_k (0 = off)", 0, 1000, 0, key="pg:topk")
        s["seed"] = st.number_input("seed", 0, 2**31 - 1, 0, key="pg:seed")
    return s, slots


def engine_config(s: dict, policy: str = "continuous") -> EngineConfig:
    return EngineConfig(
        policy=policy,
        **{
            k: s[k]
            for k in ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_kv_blocks", "enable_chunked_prefill")
        },
    )


def validate(
    s: dict, tokenizer, max_model_len: int | None, vocab_size: int | None = None
) -> tuple[dict[str, list[str]], list[dict]]:
    """Messages per knob (empty if the settings can run) and the request specs."""
    msgs: dict[str, list[str]] = {}
    cfg = engine_config(s)
    for name in LIMITS:
        try:
            EngineConfig(**{name: getattr(cfg, name)}).validate()
        except ConfigError as exc:
            msgs.setdefault(exc.field, []).append(str(exc))
    specs = build_specs(s)
    bad: dict[str, list[RequestError]] = {}
    for req in to_requests(specs, tokenizer):
        try:
            validate_request(req, cfg, max_model_len, vocab_size)
        except RequestError as exc:
            bad.setdefault(exc.field or "max_tokens", []).append(exc)
    for field, errors in bad.items():  # one message per knob: the worst request, and how many are affected
        worst = max(errors, key=lambda e: e.minimum or 0)
        more = f" ({len(errors)} of {len(specs)} requests are affected.)" if len(errors) > 1 else ""
        msgs.setdefault(field, []).append(str(worst) + more)
    return msgs, specs


def policies(s: dict) -> list[str]:
    return ["static", "continuous"] if s["policy"].startswith("both") else [s["policy"]]


def page() -> None:
    st.title("Playground")
    loaded, _ = model_and_lock()
    st.markdown(
        f"Pick a workload and the scheduler's limits, then run it live on **{loaded.name}** on this "
        "machine. Knobs keep their values; a setting that cannot run is explained next to its knob before "
        "anything runs. Runs are cached by their settings."
    )
    s, slots = knobs()
    from engine.llm import model_limits

    msgs, specs = validate(s, loaded.tokenizer, *model_limits(loaded))
    for field, box in slots.items():
        if msgs.get(field):
            box.error("\n\n".join(msgs[field]), icon=":material/error:")
    leftovers = [m for f, ms in msgs.items() if f not in slots for m in ms]
    if leftovers:
        st.error("\n\n".join(leftovers))
    settings_key = json.dumps(s, sort_keys=True)
    job = playground_run.collect()
    busy = job is not None and not job.finished
    if st.button("Run live", type="primary", disabled=bool(msgs) or busy, key="pg:run"):
        playground_run.start(settings_key, specs, {p: engine_config(s, p) for p in policies(s)})
        job = state.live_job()
    if job is not None and job.status == "error":
        st.error(f"The live run failed: {md(job.error)}", icon=":material/error:")
    elif job is not None:
        playground_run.watch()
        return
    result = live_runs()
    if not result:
        return
    if live_settings() != settings_key:
        st.info(
            "The knobs changed since the last run: press **Run live** to see these settings. (The last run "
            "stays available on the Trace and Metrics pages.)",
            icon=":material/info:",
        )
        return
    views = {}
    for policy, records in result.items():
        views[policy] = TraceView(records)
        views[policy].source = "live"
    if any(v.partial for v in views.values()):
        st.warning(
            "Cancelled: the partial trace is kept (unfinished requests have no finish) and is on the Trace and "
            "Metrics pages too." + (" The second policy never ran." if len(views) < len(policies(s)) else ""),
            icon=":material/cancel:",
        )
    if len(views) == 2:
        compare(views, key="pg:compare")
    else:
        (view,) = views.values()
        web_player([view], f"playground ({view.policy})", key="pg-single", window=20)
