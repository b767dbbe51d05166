"""TGI v3's router in the engine's step loop (``--batching tgi``): ``batchscope.tgi_family.core`` decides, the shared
adapter ``batchscope.scheduling.plan_batching`` runs its plan on the model.

Settings (TGI's launcher name <- ``EngineConfig`` name): ``max_batch_prefill_tokens`` <- ``max_num_batched_tokens``,
``max_batch_total_tokens`` <- ``num_kv_blocks`` x ``block_size`` (the pool; TGI keeps block 0 back, so
``num_kv_blocks`` - 1 blocks are usable), ``max_batch_size`` <- ``max_num_seqs`` (TGI applies it to an idle server's
first batch, and, without prefill chunking, to every new batch), ``block_size``, ``prefix_caching`` <-
``enable_prefix_caching``, ``prefill_chunking`` <- ``enable_chunked_prefill``, ``waiting_served_ratio`` and
``max_waiting_tokens`` under their own names. The queue is first come, first served (TGI has no other).

One difference from TGI, on purpose: the prefix cache keeps only prompt tokens whose K/V were computed
(``cache_written_only``; TGI also caches a prompt given back before it ran, reference case t13, and a later hit reads
blocks nobody wrote: wrong tokens on a real model).
"""

from __future__ import annotations

from batchscope.engine.config import ConfigError, EngineConfig
from batchscope.scheduling.plan_batching import Core, PlanBatching
from batchscope.tgi_family.core import TgiCore


def validate_tgi(config: EngineConfig) -> None:
    """``ConfigError`` for the first setting TGI's router cannot take (after the usual ranges)."""
    config.validate()
    if config.scheduling_policy != "fcfs":
        raise ConfigError("scheduling_policy", config.scheduling_policy, "fcfs under batching tgi (TGI's queue)")
    if config.num_kv_blocks < 2:
        allowed = "an integer >= 2 under batching tgi (TGI keeps block 0 back)"
        raise ConfigError("num_kv_blocks", config.num_kv_blocks, allowed)


class TgiBatching(PlanBatching):
    """TGI's router: admission reserves a request's whole lifetime of blocks, nothing is ever preempted."""

    HEAD_LIMITS = {
        "kv_blocks": "tgi_kv_blocks_lifetime",
        "prefill_budget": "tgi_prefill_budget",
        "prefill_token_budget_zero": "tgi_prefill_budget",
        "batch_closed_after_chunk": "tgi_batch_closed",
        "token_budget_zero": "tgi_token_budget",
        "min_size": "tgi_min_size",
        "min_size_after_allocation": "tgi_min_size",
        "max_size": "tgi_max_batch_size",
        "no_scheduling_call": "tgi_decode_step",
    }
    NUMBERS = {"need_blocks": "need", "free_blocks": "left", "need_tokens": "need", "left_tokens": "left"}

    def __init__(self, config: EngineConfig, eos_token_ids: frozenset[int] = frozenset()):
        validate_tgi(config)
        super().__init__(config, eos_token_ids)

    def make_core(self, config: EngineConfig) -> Core:
        return TgiCore(
            max_batch_prefill_tokens=config.max_num_batched_tokens,
            max_batch_total_tokens=config.num_kv_blocks * config.block_size,
            max_batch_size=config.max_num_seqs,
            block_size=config.block_size,
            waiting_served_ratio=float(config.waiting_served_ratio),
            max_waiting_tokens=config.max_waiting_tokens,
            prefix_caching=config.enable_prefix_caching,
            prefill_chunking=config.enable_chunked_prefill,
            cache_written_only=True,  # real K/V: never cache a prompt that was not computed (``TgiCore``)
        )
