"""The engine's knobs as command-line flags, shared by ``python -m batchscope run`` and the tools' commands."""

from __future__ import annotations

import argparse
from dataclasses import fields

from batchscope.cli.common import add_device_flags
from batchscope.engine.batching import SCHEDULERS, mode_config, validate_config
from batchscope.engine.config import (
    CAPACITY_POLICIES,
    CONTEXT_CHUNKING,
    LIMITS,
    SPEC_LIMITS,
    TGI_LIMITS,
    TRTLLM_LIMITS,
    WAITING_SERVED_RATIO,
    EngineConfig,
)
from batchscope.scheduling.request_queue import QUEUES
from batchscope.sglang_family.policy import POLICIES


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """The engine's knobs as flags (``run`` and the tools' commands share them); read back by ``config_from_args``."""
    parser.add_argument(
        "--batching",
        choices=list(SCHEDULERS),
        default="continuous",
        help="batching mode, recorded as the trace's policy",
    )
    parser.add_argument(  # the same dest; no default of its own, so --batching's shows once
        "--policy",
        dest="batching",
        choices=list(SCHEDULERS),
        default=argparse.SUPPRESS,
        help="alias of --batching, kept for old command lines",
    )
    for name, (lo, hi) in LIMITS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=None, help=f"integer in [{lo}, {hi}]")
    parser.add_argument("--no-chunked-prefill", action="store_true", help="never split a prompt across steps")
    parser.add_argument(
        "--scheduling-policy",
        choices=list(dict.fromkeys([*QUEUES, *POLICIES])),
        default=None,
        help="waiting-queue order (default fcfs; lpm under --batching sglang)",
    )
    parser.add_argument(
        "--no-prefix-caching", action="store_true", help="turn automatic prefix caching off (vLLM: on by default)"
    )
    parser.add_argument(
        "--no-reserve-full-prompt",
        action="store_true",
        help="admit a request when its first chunk fits, not its whole prompt (vLLM's scheduler_reserve_full_isl)",
    )
    parser.add_argument(
        "--enable-mixed-chunk",
        action="store_true",
        help="--batching sglang: running requests decode inside a prefill batch (SGLang's --enable-mixed-chunk)",
    )
    spec_help = {
        "num_speculative_tokens": "n-gram (prompt-lookup) drafts per decode step, vLLM's speculative decoding; 0: off",
        "prompt_lookup_min": "shortest n-gram matched for drafts (default 5, vLLM's)",
        "prompt_lookup_max": "longest n-gram matched for drafts (default 5, vLLM's)",
    }
    for name, (lo, hi) in SPEC_LIMITS.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=int, default=None, help=f"integer in [{lo}, {hi}]: {spec_help[name]}")
    _add_family_flags(parser)
    add_device_flags(parser)  # --model, --device, --dtype


FAMILY_FLAGS = ("waiting_served_ratio", "max_waiting_tokens", "capacity_policy", "context_chunking", "chunk_unit_size")


def _add_family_flags(parser: argparse.ArgumentParser) -> None:
    """TGI's and TensorRT-LLM's own knobs, under their engines' names (``EngineConfig``'s docstring)."""
    lo, hi = WAITING_SERVED_RATIO
    parser.add_argument(
        "--waiting-served-ratio",
        type=float,
        default=None,
        help=f"--batching tgi, number in [{lo:g}, {hi:g}] (default 0.3): without prefill chunking a new batch joins "
        "a running one only if this ratio x running requests wait",
    )
    lo_w, hi_w = TGI_LIMITS["max_waiting_tokens"]
    parser.add_argument(
        "--max-waiting-tokens",
        type=int,
        default=None,
        help=f"--batching tgi, integer in [{lo_w}, {hi_w}] (default 20): decode steps after which that minimum goes",
    )
    parser.add_argument(
        "--capacity-policy",
        choices=CAPACITY_POLICIES,
        default=None,
        help="--batching trtllm: reserve blocks to completion (guaranteed_no_evict, default), only for the next step "
        "and pause when they run out (max_utilization), or run one batch to its end (static_batch)",
    )
    parser.add_argument(
        "--context-chunking",
        choices=CONTEXT_CHUNKING,
        default=None,
        help="--batching trtllm: how prompt chunks share the token budget (default fcfs)",
    )
    lo_u, hi_u = TRTLLM_LIMITS["chunk_unit_size"]
    parser.add_argument(
        "--chunk-unit-size",
        type=int,
        default=None,
        help=f"--batching trtllm, integer in [{lo_u}, {hi_u}]: prompt chunks are multiples of it (default: block size)",
    )


def config_from_args(args, overrides: dict) -> EngineConfig:
    """The ``EngineConfig`` of a scenario's or workload's ``overrides`` with the command's flags on top."""
    cfg: dict = {f.name: f.default for f in fields(EngineConfig)}
    cfg.update(overrides)
    for name in [*LIMITS, *SPEC_LIMITS]:
        if getattr(args, name, None) is not None:
            cfg[name] = getattr(args, name)
    flags = {
        "enable_chunked_prefill": args.no_chunked_prefill,
        "enable_prefix_caching": args.no_prefix_caching,
        "reserve_full_prompt": args.no_reserve_full_prompt,
    }
    cfg.update({name: False for name, off in flags.items() if off})
    if getattr(args, "enable_mixed_chunk", False):
        cfg["enable_mixed_chunk"] = True
    for name in FAMILY_FLAGS:
        if getattr(args, name, None) is not None:
            cfg[name] = getattr(args, name)
    if args.scheduling_policy is not None:
        cfg["scheduling_policy"] = args.scheduling_policy
    cfg["batching"] = args.batching
    config = EngineConfig(**cfg)
    config = mode_config(config)  # under sglang: the same pool as token slots (SGLang's page_size 1)
    validate_config(config)
    return config
