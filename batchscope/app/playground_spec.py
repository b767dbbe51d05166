"""The Playground's settings as plain data: the workload it builds, the engine configs of each run, and the checks
made before anything runs. No Streamlit here, so all of it is testable on its own.

A settings dict ``s`` holds the workload and sampling knobs, run A's scheduler knobs (``SCHEDULER_KNOBS``) and
``runs`` (one of ``RUN_MODES``). In the "A vs B" mode ``s["b"]`` holds run B's scheduler knobs: the same workload
under other settings, e.g. chunked prefill on vs off or 4 vs 8 slots.
"""

from __future__ import annotations

from dataclasses import asdict

from batchscope.engine.batching import mode_config
from batchscope.engine.batching import validate_config as check_engine_config
from batchscope.engine.config import LIMITS, ConfigError, EngineConfig
from batchscope.engine.engine import RequestError, validate_request
from batchscope.inputs.workload import output_lengths, poisson_arrivals, to_requests

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
RUN_MODES = ("static vs continuous", "continuous only", "static only", "A vs B (two settings, one workload)")
# the knobs that make one run's EngineConfig (names as in EngineConfig and vLLM)
SCHEDULER_KNOBS = (
    "batching",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "num_kv_blocks",
    "block_size",
    "enable_prefix_caching",
    "reserve_full_prompt",
    "enable_mixed_chunk",
    "num_speculative_tokens",
    "prompt_lookup_min",
    "prompt_lookup_max",
    "waiting_served_ratio",
    "max_waiting_tokens",
    "capacity_policy",
    "context_chunking",
    "chunk_unit_size",
)
RUN_A, RUN_B = "run A", "run B"


def build_specs(s: dict) -> list[dict]:
    """The workload's request specs (``batchscope.inputs.spec`` format): ids R01.., prompts cycled from the prompt
    set."""
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
        if s["prompt_set"] == "chat questions":
            spec["messages"] = [{"role": "user", "content": text}]
        else:
            spec["prompt"] = text
        specs.append(spec)
    if s["arrivals"] == ARRIVALS[0]:
        return specs
    clock = "steps" if s["arrivals"] == ARRIVALS[1] else "s"
    return poisson_arrivals(specs, s["rate"], seed=s["seed"] + 1, clock=clock)


def engine_config(knobs: dict, batching: str | None = None) -> EngineConfig:
    """The EngineConfig of one run from its scheduler knobs (``batching`` overrides the knobs' own), in its batching
    mode's own terms (``batchscope.engine.batching.mode_config``: under sglang, the pool as token slots)."""
    values = {k: knobs[k] for k in SCHEDULER_KNOBS if k in knobs}
    if batching is not None:
        values["batching"] = batching
    return mode_config(EngineConfig(**values))


def run_configs(s: dict) -> dict[str, EngineConfig]:
    """``{run label: config}`` in the order the runs are made: both batching modes (static first), one mode, or run
    A and run B."""
    mode = s["runs"]
    if mode == RUN_MODES[0]:
        return {p: engine_config(s, p) for p in ("static", "continuous")}
    if mode in RUN_MODES[1:3]:
        batching = mode.split()[0]
        return {batching: engine_config(s, batching)}
    return {RUN_A: engine_config(s), RUN_B: engine_config(s["b"])}


def b_differs(s: dict) -> list[str]:
    """Run B's settings that differ from run A's, ``"name: A → B"`` (empty outside the A vs B mode)."""
    if s["runs"] != RUN_MODES[3]:
        return []
    a, b = (_flat(engine_config(x)) for x in (s, s["b"]))

    def fmt(v: object) -> str:
        return ("on" if v else "off") if isinstance(v, bool) else str(v)

    # the lines and order of batchscope.compare.runs.config_diff, which heads the result: the batching mode, then the
    # config by name
    a_mode, b_mode = s["batching"], s["b"]["batching"]
    batching = [f"batching: {a_mode} → {b_mode}"] if a_mode != b_mode else []
    return batching + [f"{k}: {fmt(a[k])} → {fmt(b[k])}" for k in sorted(a) if a[k] != b[k]]


def _flat(config: EngineConfig) -> dict:
    """A run's settings by name (the header's config, with speculative decoding's as plain fields)."""
    return {k: v for k, v in asdict(config).items() if k != "batching"}


def validate_config(
    cfg: EngineConfig, specs: list[dict], tokenizer, max_model_len: int | None, vocab_size: int | None = None
) -> dict[str, list[str]]:
    """Messages per knob (field name) for one run: limits out of range, and requests that could never run under
    ``cfg`` (one message per knob: the worst request, and how many are affected). Empty if it can run."""
    msgs: dict[str, list[str]] = {}
    for name in LIMITS:
        try:
            EngineConfig(**{name: getattr(cfg, name)}).validate()
        except ConfigError as exc:
            msgs.setdefault(exc.field, []).append(str(exc))
    try:
        cfg.validate_speculation()
        if not msgs:  # the rules between fields, as the engine checks them (its batching mode's own included)
            check_engine_config(cfg)
    except ConfigError as exc:
        msgs.setdefault(exc.field, []).append(str(exc))
    bad: dict[str, list[RequestError]] = {}
    for req in to_requests(specs, tokenizer):
        try:
            validate_request(req, cfg, max_model_len, vocab_size)
        except RequestError as exc:
            bad.setdefault(exc.field or "max_tokens", []).append(exc)
    for field, errors in bad.items():
        worst = max(errors, key=lambda e: e.minimum or 0)
        more = f" ({len(errors)} of {len(specs)} requests are affected.)" if len(errors) > 1 else ""
        msgs.setdefault(field, []).append(str(worst) + more)
    return msgs


def validate(
    s: dict, tokenizer, max_model_len: int | None, vocab_size: int | None = None
) -> tuple[dict[str, list[str]], dict[str, list[str]], list[dict]]:
    """Messages per knob for run A (the main knobs) and for run B (its own knobs; empty outside A vs B), and the
    request specs. The settings can run when both message dicts are empty."""
    specs = build_specs(s)
    ab = s["runs"] == RUN_MODES[3]
    msgs: dict[str, list[str]] = {}
    for cfg in [engine_config(s)] if ab else run_configs(s).values():  # each run the main knobs make
        for field, lines in playground_words(cfg, validate_config(cfg, specs, tokenizer, max_model_len, vocab_size)):
            msgs.setdefault(field, []).extend(x for x in lines if x not in msgs.get(field, []))
    msgs_b: dict[str, list[str]] = {}
    if ab:
        cfg_b = engine_config(s["b"])
        msgs_b = dict(playground_words(cfg_b, validate_config(cfg_b, specs, tokenizer, max_model_len, vocab_size)))
    return msgs, msgs_b, specs


def playground_words(cfg: EngineConfig, msgs: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """``msgs`` with the engine's command-line wording of a knob another batching mode needs replaced by what to do
    on this page (which Runs setting takes it)."""
    own = {  # knob -> (the batching mode it needs, what to do here)
        "num_speculative_tokens": (
            "continuous",
            f"num_speculative_tokens={cfg.num_speculative_tokens} needs continuous batching: set it to 0, or pick "
            f"Runs = {RUN_MODES[1]!r} or {RUN_MODES[3]!r}",
        ),
        "enable_mixed_chunk": (
            "sglang",
            "Mixed chunks are SGLang's --enable-mixed-chunk and need SGLang's scheduler: turn them off, or pick "
            f"Runs = {RUN_MODES[3]!r} with batching sglang",
        ),
    }
    return [(f, [own[f][1]] if f in own and cfg.batching != own[f][0] else lines) for f, lines in msgs.items()]
