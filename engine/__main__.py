"""Command line: ``python -m engine run|scenarios|bench|sweep``.

    python -m engine scenarios
    python -m engine run --scenario seed-abcd --policy continuous --out t.jsonl
    python -m engine run --workload my.jsonl --max-num-seqs 2 --num-kv-blocks 32 --out t.jsonl
    python -m engine bench [--num-requests 4 --max-tokens 32 --rounds 2 --max-num-seqs 4]   (engine.bench)
    python -m engine sweep [--num-requests 32 --mean-tokens 32 --sigmas 0 0.5 1 1.5 2]       (engine.sweep)

Bad input exits with status 2 and one line on stderr that names the field and the allowed range.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from engine.config import LIMITS, POLICIES, EngineConfig
from engine.models import DEFAULT_MODEL


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m engine", description="Batchscope: a small, real LLM serving engine.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("scenarios", help="list the shipped scenarios")
    run = sub.add_parser("run", help="run a scenario or workload and write its trace (JSON Lines)")
    src = run.add_mutually_exclusive_group(required=True)
    src.add_argument("--scenario", help="a shipped scenario (see `python -m engine scenarios`)")
    src.add_argument("--workload", help="JSON Lines file, one request per line (see docs/trace-format.md)")
    run.add_argument("--policy", choices=POLICIES, default="continuous")
    run.add_argument("--out", required=True, help="trace file to write")
    for name, (lo, hi) in LIMITS.items():
        run.add_argument("--" + name.replace("_", "-"), type=int, default=None, help=f"integer in [{lo}, {hi}]")
    run.add_argument("--no-chunked-prefill", action="store_true", help="never split a prompt across steps")
    run.add_argument("--model", default=DEFAULT_MODEL, help="HF causal-LM id (in the local cache) or local folder")
    run.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    _add_bench(sub)
    _add_sweep(sub)
    return p


# -- bench and sweep -----------------------------------------------------------------------------------------------

BENCH_RANGES = {"num_requests": (1, 10_000), "max_tokens": (1, 100_000), "rounds": (1, 20),
                "step_tokens": (2, 4096), "max_num_batched_tokens": LIMITS["max_num_batched_tokens"],
                "block_size": LIMITS["block_size"], "max_num_seqs": LIMITS["max_num_seqs"],
                "step_batches": LIMITS["max_num_seqs"], "mean_tokens": (1, 100_000), "seed": (0, 2**31 - 1)}


def _add_bench(sub) -> None:
    from engine.bench import ROW_TITLES

    b = sub.add_parser("bench", help="Batchscope vs transformers on one workload (tokens/s, decode step, parity)")
    src = b.add_mutually_exclusive_group()
    src.add_argument("--scenario", default="sixteen", help="shipped scenario (default: sixteen)")
    src.add_argument("--workload", help="JSON Lines workload instead of a scenario")
    b.add_argument("--num-requests", type=int, help="use only the first N requests; integer in [1, 10000]")
    b.add_argument("--max-tokens", type=int, help="override every request's max_tokens; integer in [1, 100000]")
    b.add_argument("--rounds", type=int, default=2, help="interleaved rounds (A..E, E..A, ...); integer in [1, 20]")
    b.add_argument("--max-num-seqs", type=int, nargs="+", default=[4, 16], help="slot counts to compare (4 16)")
    b.add_argument("--max-num-batched-tokens", type=int, default=None, help="token budget (default: the scenario's)")
    b.add_argument("--block-size", type=int, default=16, help="Batchscope KV block size in tokens")
    b.add_argument("--step-batches", type=int, nargs="+", default=[1, 4, 16], help="batches for the decode-step time")
    b.add_argument("--step-tokens", type=int, default=32, help="tokens per request in the decode-step runs")
    b.add_argument("--rows", nargs="+", choices=list(ROW_TITLES), default=list(ROW_TITLES), help="rows to run")
    b.add_argument("--parity", choices=["auto", "strict", "report"], default="auto",
                   help="strict: differing greedy outputs fail the run; auto: strict unless 16-bit floats")
    b.add_argument("--model", default=DEFAULT_MODEL)
    b.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    b.add_argument("--out-json", default="assets/bench.json")
    b.add_argument("--out-md", default="assets/bench.md")


def _add_sweep(sub) -> None:
    from engine.sweep import DEFAULT_SIGMAS

    w = sub.add_parser("sweep", help="static vs continuous throughput as output lengths spread (same mean)")
    w.add_argument("--num-requests", type=int, default=32, help="integer in [1, 10000]")
    w.add_argument("--mean-tokens", type=int, default=32, help="mean output length; integer in [1, 100000]")
    w.add_argument("--sigmas", type=float, nargs="+", default=list(DEFAULT_SIGMAS),
                   help="spread levels (log-normal shape, >= 0; 0 = all lengths equal)")
    w.add_argument("--cap-factor", type=float, default=8.0, help="longest output <= cap-factor x mean; >= 1")
    w.add_argument("--max-num-seqs", type=int, default=4)
    w.add_argument("--max-num-batched-tokens", type=int, default=128)
    w.add_argument("--block-size", type=int, default=16)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--rounds", type=int, default=1, help="runs per level and policy (the fastest counts); [1, 20]")
    w.add_argument("--model", default=DEFAULT_MODEL)
    w.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    w.add_argument("--out", default="assets/sweep.json")


def _check(name: str, value) -> None:
    lo, hi = BENCH_RANGES[name]
    for v in value if isinstance(value, list) else [value]:
        if v is not None and not lo <= v <= hi:
            raise ValueError(f"--{name.replace('_', '-')}={v} is out of range: an integer in [{lo}, {hi}]")


def _progress(desc: str):
    from tqdm import tqdm

    bar = tqdm(desc=desc, bar_format="{desc}: {elapsed} {postfix}", file=sys.stderr)
    return bar, (lambda msg: (bar.set_postfix_str(msg), bar.update(0)))


def _bench(args) -> int:
    from engine import bench
    from engine.models import load_model
    from engine.workload import load_scenario, read_workload

    for name in ("num_requests", "max_tokens", "rounds", "step_tokens", "max_num_batched_tokens", "block_size",
                 "max_num_seqs", "step_batches"):
        _check(name, getattr(args, name))
    if args.workload:
        specs, budget = read_workload(args.workload), 128
    else:
        scenario = load_scenario(args.scenario)
        specs, budget = scenario["requests"], scenario.get("config", {}).get("max_num_batched_tokens", 128)
    loaded = load_model(args.model, args.device)
    work = bench.make_workload(loaded, specs, args.num_requests, args.max_tokens)
    opts = bench.BenchOptions(max_num_seqs=args.max_num_seqs, rounds=args.rounds,
                              max_num_batched_tokens=args.max_num_batched_tokens or budget,
                              block_size=args.block_size, step_batches=args.step_batches,
                              step_tokens=args.step_tokens, parity=args.parity, rows=args.rows)
    bar, say = _progress("bench")
    try:
        result = bench.run_bench(loaded, work, opts, progress=say)
    finally:
        bar.close()
    result["workload"]["source"] = args.workload or f"scenario {args.scenario}"
    bench.write(result, args.out_json, args.out_md)
    print(bench.to_markdown(result))
    print(f"wrote {args.out_json} and {args.out_md}", file=sys.stderr)
    if not result["parity"]["identical"]:
        print(f"warning: greedy outputs differ across rows ({result['parity']['error']})", file=sys.stderr)
    return 0


def _sweep(args) -> int:
    import json
    from pathlib import Path

    from engine import sweep
    from engine.models import load_model
    from engine.workload import load_scenario

    for name in ("num_requests", "mean_tokens", "max_num_seqs", "max_num_batched_tokens", "block_size", "seed",
                 "rounds"):
        _check(name, getattr(args, name))
    if any(s < 0 or s > 4 for s in args.sigmas):
        raise ValueError(f"--sigmas={args.sigmas} is out of range: numbers in [0, 4]")
    if not 1 <= args.cap_factor <= 1000:
        raise ValueError(f"--cap-factor={args.cap_factor} is out of range: a number in [1, 1000]")
    loaded = load_model(args.model, args.device)
    bar, say = _progress("sweep")
    try:
        result = sweep.run_sweep(loaded, load_scenario("sixteen")["requests"], n=args.num_requests,
                                 mean=args.mean_tokens, sigmas=args.sigmas, max_num_seqs=args.max_num_seqs,
                                 max_num_batched_tokens=args.max_num_batched_tokens, block_size=args.block_size,
                                 seed=args.seed, cap_factor=args.cap_factor, rounds=args.rounds, progress=say)
    finally:
        bar.close()
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(sweep.to_markdown(result))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _config(args, overrides: dict) -> EngineConfig:
    cfg = {f.name: f.default for f in fields(EngineConfig)}
    cfg.update(overrides)
    for name in LIMITS:
        if getattr(args, name) is not None:
            cfg[name] = getattr(args, name)
    if args.no_chunked_prefill:
        cfg["enable_chunked_prefill"] = False
    cfg["policy"] = args.policy
    config = EngineConfig(**cfg)
    config.validate()
    return config


def _run(args) -> None:
    from tqdm import tqdm

    from engine import trace
    from engine.engine import validate_request
    from engine.llm import generate_trace
    from engine.models import load_model
    from engine.workload import load_scenario, read_workload, to_requests

    if args.scenario:
        scenario = load_scenario(args.scenario)
        specs, overrides = scenario["requests"], scenario.get("config", {})
    else:
        specs, overrides = read_workload(args.workload), {}
    config = _config(args, overrides)
    loaded = load_model(args.model, args.device)
    max_len = getattr(loaded.model.config, "max_position_embeddings", None)
    for req in to_requests(specs, loaded.tokenizer):  # fail in seconds, before any step runs
        validate_request(req, config, max_len)
    bar = tqdm(desc=f"{args.policy} steps", unit="step", file=sys.stderr)
    finished = 0

    def on_step(record: dict) -> None:
        nonlocal finished
        finished += len(record["finished"])
        bar.set_postfix(finished=f"{finished}/{len(specs)}", tokens=record["num_batched_tokens"])
        bar.update(1)

    records = generate_trace(loaded, specs, config, scenario=args.scenario, on_step=on_step)
    bar.close()
    trace.write(records, args.out)
    print(f"wrote {args.out}: {len(records) - 2} steps, {len(specs)} requests ({args.policy})", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "scenarios":
        from engine.workload import list_scenarios

        for name, desc in list_scenarios().items():
            print(f"{name:12s} {desc}")
        return 0
    from engine.bench import ParityError

    try:
        if args.command == "bench":
            return _bench(args)
        if args.command == "sweep":
            return _sweep(args)
        _run(args)
    except ParityError as exc:  # not bad input: the engines disagree, which the benchmark must not hide
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:  # RequestError, WorkloadError, ModelLoadError, TraceError, config errors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
