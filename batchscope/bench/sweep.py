"""The variance sweep (``python -m batchscope sweep``): static vs continuous batching as output lengths spread out.

The experiment of Anyscale's post "How continuous batching enables 23x throughput in LLM inference while reducing
p50 latency" (Cade Daniel et al., Anyscale, 2023; https://www.anyscale.com/blog/continuous-batching-llm-inference), at
toy scale on the real engine: fixed prompts, output lengths drawn (seeded) from distributions with the **same mean** and
a growing spread, EOS ignored so that every request produces exactly its drawn length, and the output throughput of
static and continuous batching at the same ``max_num_seqs``. Expected: a ratio of about 1 when all lengths are equal,
rising with the spread (a static batch waits for its longest member while the others pad).

Length distributions (``batchscope.inputs.workload.output_lengths``): for a spread level ``sigma >= 0`` the lengths
follow a log-normal distribution of shape ``sigma``, cut to ``[1, cap_factor * mean]`` and scaled so that its mean is
``mean`` (``sigma = 0``: every length equals ``mean``; larger ``sigma``: many short answers and a few very long ones; a
capped exponential was tried first, but its coefficient of variation never exceeds 1, too little spread for 16
requests). Draws are stratified (one uniform per ``1/n`` quantile band, then a seeded shuffle of which request gets
which length) and rounded so that the sample mean is exactly ``mean``: every level has the same total work, only
its spread differs.

Each level reports throughput in output tokens per second (wall clock) and per step (reproducible), and the ratio
continuous / static of each. Units: tokens, seconds, steps.
"""

from __future__ import annotations

import statistics

from batchscope.bench.names import DEFAULT_SIGMAS
from batchscope.bench.report import provenance
from batchscope.bench.workload import Workload, engine_config, run_engine
from batchscope.inputs.workload import output_lengths, render_prompt
from batchscope.model.models import LoadedModel

# Published numbers for context (not comparable in scale): OPT-13B on one NVIDIA A100 40 GB, the post's Figure.
ANYSCALE = {
    "source": 'Anyscale, "How continuous batching enables 23x throughput in LLM inference while reducing p50 '
    'latency" (2023), https://www.anyscale.com/blog/continuous-batching-llm-inference',
    "setup": "OPT-13B on an NVIDIA A100 40GB, generation lengths up to 1536 tokens",
    "continuous_batching_alone_max_ratio": 8.0,
    "vllm_vs_naive_hf_ratio": 23.0,
}


def sweep_workloads(
    prompt_specs: list[dict], n: int, mean: int, sigmas=DEFAULT_SIGMAS, seed: int = 0, cap_factor: float = 8.0
) -> list[tuple[float, list[dict]]]:
    """(sigma, request specs) per spread level: ``n`` requests on the given prompts (cycled), greedy, EOS ignored,
    ``max_tokens`` = the drawn length (so each request produces exactly that many tokens)."""
    out = []
    for sigma in sigmas:
        lengths = output_lengths(n, mean, sigma, seed, cap_factor)
        specs = []
        for i, length in enumerate(lengths):
            base = {
                k: v
                for k, v in prompt_specs[i % len(prompt_specs)].items()
                if k in ("prompt", "messages", "prompt_token_ids")
            }
            specs.append(
                {
                    **base,
                    "request_id": f"q{i:02d}",
                    "max_tokens": length,
                    "temperature": 0.0,
                    "ignore_eos": True,
                    "arrival_time": 0.0,
                }
            )
        out.append((sigma, specs))
    return out


def spread_stats(lengths: list[int]) -> dict:
    """``mean``, ``std`` (population), ``cv`` (std / mean), ``min``, ``max`` of output lengths (tokens)."""
    mean = statistics.fmean(lengths)
    std = statistics.pstdev(lengths)
    return {"mean": mean, "std": std, "cv": std / mean, "min": min(lengths), "max": max(lengths)}


def _one_run(loaded: LoadedModel, specs: list[dict], config) -> dict:
    """One Batchscope run's figures: seconds, steps, output tokens, tokens per second and per step, padding."""
    from batchscope.steplog.metrics import summarize

    records, _ = run_engine(loaded, specs, config)
    s = summarize(records)
    return {
        "seconds": s["duration_s"],
        "num_steps": s["num_steps"],
        "output_tokens": s["total_output_tokens"],
        "tok_per_s": s["output_throughput_tok_s"],
        "tok_per_step": s["output_throughput_tok_step"],
        "padding_slot_steps": s["padding_slot_steps"],
    }


def run_sweep(
    loaded: LoadedModel,
    prompt_specs: list[dict],
    n: int = 32,
    mean: int = 32,
    sigmas=DEFAULT_SIGMAS,
    max_num_seqs: int = 4,
    max_num_batched_tokens: int = 128,
    block_size: int = 16,
    seed: int = 0,
    cap_factor: float = 8.0,
    rounds: int = 1,
    progress=None,
) -> dict:
    """Run static and continuous batching on every spread level (interleaved: S C, then C S, ...), ``rounds`` times
    each; a mode's figures are those of its fastest round (interference only adds time; every round's seconds are
    kept under ``<batching>_seconds_per_round``).

    Returns the dict saved as ``batchscope/assets/sweep.json``: ``provenance``, ``config``, ``anyscale`` (the published
    numbers) and ``levels``, one per ``sigma`` with ``lengths``, their ``spread`` (``spread_stats``), and per
    batching mode ``seconds``, ``num_steps``, ``output_tokens``, ``tok_per_s``, ``tok_per_step``; plus
    ``ratio_s`` and ``ratio_steps`` (continuous / static). Ctrl-C or an error stops cleanly: the levels finished
    so far are returned, with ``"partial": true`` (and ``"error"``: what failed).
    """
    say = progress or (lambda msg: None)
    settings = {
        "num_requests": n,
        "mean_output_tokens": mean,
        "sigmas": list(sigmas),
        "seed": seed,
        "cap_factor": cap_factor,
        "rounds": rounds,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": max_num_batched_tokens,
        "block_size": block_size,
    }
    levels: list[dict] = []
    partial, failure = False, None
    try:
        _run_levels(loaded, prompt_specs, settings, say, levels)
    except KeyboardInterrupt:
        partial = True
    except Exception as exc:  # keep the finished levels; the CLI reports the error
        partial, failure = True, f"{type(exc).__name__}: {exc}"
    return {
        "provenance": provenance(loaded),
        "config": _describe(settings, prompt_specs),
        "anyscale": ANYSCALE,
        "levels": levels,
        **({"partial": True} if partial else {}),
        **({"error": failure} if failure else {}),
    }


def _run_levels(loaded: LoadedModel, prompt_specs: list[dict], c: dict, say, levels: list[dict]) -> None:
    """Append each spread level to ``levels`` once both modes ran on it (see ``run_sweep``; ``c``: settings)."""
    workloads = sweep_workloads(
        prompt_specs, c["num_requests"], c["mean_output_tokens"], c["sigmas"], c["seed"], c["cap_factor"]
    )
    rounds = c["rounds"]
    for k, (sigma, specs) in enumerate(workloads):
        prompts = [render_prompt(s, loaded.tokenizer)[1] for s in specs]
        work = Workload(specs, prompts, max(s["max_tokens"] for s in specs), True)
        lengths = [s["max_tokens"] for s in specs]
        level: dict = {"sigma": sigma, "lengths": lengths, "spread": spread_stats(lengths)}
        for r in range(rounds):
            for batching in ("static", "continuous") if (k + r) % 2 == 0 else ("continuous", "static"):
                say(f"sigma {sigma:g}: {batching}" + (f" (round {r + 1}/{rounds})" if rounds > 1 else ""))
                config = engine_config(work, batching, c["max_num_seqs"], c["max_num_batched_tokens"], c["block_size"])
                run = _one_run(loaded, specs, config)
                best: dict | None = level.get(batching)
                level[batching] = run if best is None or run["seconds"] < best["seconds"] else best
                level.setdefault(f"{batching}_seconds_per_round", []).append(run["seconds"])
        level["ratio_s"] = level["continuous"]["tok_per_s"] / level["static"]["tok_per_s"]
        level["ratio_steps"] = level["continuous"]["tok_per_step"] / level["static"]["tok_per_step"]
        levels.append(level)


def _describe(config: dict, prompt_specs: list[dict]) -> dict:
    """The sweep's settings plus the words that say what its workload is."""
    chat = bool(prompt_specs) and "messages" in prompt_specs[0]
    return {
        **config,
        "distribution": "log-normal(sigma) cut to [1, cap_factor * mean], scaled to the mean; stratified draws, "
        "sample mean exact",
        "ignore_eos": True,
        "prompts": "the sixteen scenario's chat prompts, cycled" if chat else "given prompts, cycled",
    }


def to_markdown(result: dict) -> str:
    """The sweep as a Markdown table (one row per spread level)."""
    p, c = result["provenance"], result["config"]
    lines = [
        f"Model {p['model']} ({p['dtype']}) on {p['device']}, {p['created']}; {c['num_requests']} requests, "
        f"mean output {c['mean_output_tokens']} tokens, max_num_seqs {c['max_num_seqs']}, seed {c['seed']}.",
        "",
        *(["**PARTIAL: stopped early (Ctrl-C); the levels finished so far.**", ""] if result.get("partial") else []),
        "| sigma | max length | CV of lengths | static tok/s | continuous tok/s | ratio (s) | "
        "static steps | continuous steps | ratio (steps) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for lv in result["levels"]:
        s, k = lv["static"], lv["continuous"]
        lines.append(
            f"| {lv['sigma']:g} | {lv['spread']['max']} | {lv['spread']['cv']:.2f} | "
            f"{s['tok_per_s']:.1f} | {k['tok_per_s']:.1f} | {lv['ratio_s']:.2f} | {s['num_steps']} | "
            f"{k['num_steps']} | {lv['ratio_steps']:.2f} |"
        )
    return "\n".join(lines) + "\n"
