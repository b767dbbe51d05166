"""TensorRT-LLM's in-flight batching in the engine's step loop (``--batching trtllm``):
``batchscope.trtllm_family.core`` decides (capacity scheduler, then micro-batch scheduler), the shared adapter
``batchscope.scheduling.plan_batching`` runs its plan on the model.

Settings (TensorRT-LLM's name <- ``EngineConfig`` name): ``max_batch_size`` (and the capacity scheduler's
``max_num_requests``) <- ``max_num_seqs``, ``max_num_tokens`` <- ``max_num_batched_tokens``, ``tokens_per_block`` <-
``block_size``, the KV pool <- ``num_kv_blocks``, ``enable_chunked_context`` <- ``enable_chunked_prefill``,
``enable_block_reuse`` <- ``enable_prefix_caching``, ``capacity_scheduler_policy`` <- ``capacity_policy``,
``context_chunking_policy`` <- ``context_chunking``, ``chunk_unit_size`` (default: ``tokens_per_block``). The list
is in arrival order (TensorRT-LLM's default).
"""

from __future__ import annotations

from batchscope.engine.config import ConfigError, EngineConfig
from batchscope.scheduling.plan_batching import Core, PlanBatching
from batchscope.trtllm_family.core import TrtllmCore


def chunk_unit(config: EngineConfig) -> int:
    """The context chunk unit in tokens: ``chunk_unit_size``, or the KV block size when unset."""
    return config.chunk_unit_size if config.chunk_unit_size is not None else config.block_size


def validate_trtllm(config: EngineConfig) -> None:
    """``ConfigError`` for the first setting TensorRT-LLM's scheduler cannot take (after the usual ranges)."""
    config.validate()
    if config.scheduling_policy != "fcfs":
        raise ConfigError("scheduling_policy", config.scheduling_policy, "fcfs under batching trtllm (arrival order)")
    if config.enable_chunked_prefill and chunk_unit(config) > config.max_num_batched_tokens:
        allowed = f"<= max_num_batched_tokens={config.max_num_batched_tokens} (a chunk is a multiple of it)"
        raise ConfigError("chunk_unit_size", chunk_unit(config), allowed)


class TrtllmBatching(PlanBatching):
    """TensorRT-LLM's two-stage scheduler: who may hold KV (capacity), then who runs this forward (micro-batch)."""

    HEAD_LIMITS = {
        "kv_blocks_to_completion": "trtllm_kv_blocks_to_completion",
        "kv_blocks_next_step": "trtllm_kv_blocks_next_step",
        "max_batch_size": "max_num_seqs",
        "max_num_tokens": "trtllm_max_num_tokens",
        "static_batch_running": "static_batch_running",
        "reuse_wait": "trtllm_reuse_wait",
        "paused": "preempted_this_step",  # the head was itself paused in this step
        "never_fits": "trtllm_kv_blocks_to_completion",  # refused up front (``validate_request``); kept for safety
    }
    NUMBERS = {"needed": "need", "available": "left"}

    def __init__(self, config: EngineConfig, eos_token_ids: frozenset[int] = frozenset()):
        validate_trtllm(config)
        super().__init__(config, eos_token_ids)

    def make_core(self, config: EngineConfig) -> Core:
        return TrtllmCore(
            max_batch_size=config.max_num_seqs,
            max_num_tokens=config.max_num_batched_tokens,
            tokens_per_block=config.block_size,
            num_blocks=config.num_kv_blocks,
            capacity_policy=config.capacity_policy,
            enable_chunked_context=config.enable_chunked_prefill,
            context_chunking=config.context_chunking,
            chunk_unit_size=chunk_unit(config),
            enable_block_reuse=config.enable_prefix_caching,
        )
