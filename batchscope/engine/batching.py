"""The batching modes by name: the one place a new mode is registered (``--batching``, the app's lists).

Continuous batching is ``batchscope.scheduling.scheduler.Scheduler``; static batching overrides its batch-formation
hooks in ``batchscope.scheduling.static_scheduler``; ``sglang`` is SGLang's scheduling family (prefill-first, admission
by estimated output, retraction, a radix cache) adapted to the step loop in ``batchscope.sglang_family.batching``;
``tgi`` (TGI v3's router: whole-lifetime reservation, no preemption) and ``trtllm`` (TensorRT-LLM's capacity and
micro-batch schedulers) are model-free cores run by ``batchscope.scheduling.plan_batching``. The
order of the waiting queue is a second, independent seam (``batchscope.scheduling.request_queue.QUEUES``, chosen by
``EngineConfig.scheduling_policy``, vLLM's ``policy``; the SGLang family's orders are
``batchscope.sglang_family.policy.POLICIES``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from batchscope.engine.config import EngineConfig, check_name
from batchscope.scheduling.plan_batching import PlanBatching
from batchscope.scheduling.scheduler import Scheduler
from batchscope.scheduling.static_scheduler import StaticScheduler
from batchscope.sglang_family.batching import SGLangBatching, page_size_one, validate_sglang
from batchscope.tgi_family.batching import TgiBatching, validate_tgi
from batchscope.trtllm_family.batching import TrtllmBatching, validate_trtllm

EngineScheduler = Scheduler | SGLangBatching | PlanBatching  # what ``batchscope.engine.engine.LLMEngine`` drives

SCHEDULERS: dict[str, Callable[[EngineConfig, frozenset[int]], EngineScheduler]] = {
    "continuous": Scheduler,
    "static": StaticScheduler,
    "sglang": SGLangBatching,
    "tgi": TgiBatching,
    "trtllm": TrtllmBatching,
}
VALIDATORS: dict[str, Callable[[EngineConfig], None]] = {
    "sglang": validate_sglang,
    "tgi": validate_tgi,
    "trtllm": validate_trtllm,
}


def validate_config(config: EngineConfig) -> None:
    """Raise ``ConfigError`` naming the first bad field of ``config``: its batching mode (a name of ``SCHEDULERS``,
    checked here because the schedulers take a config, so ``batchscope.engine.config`` cannot ask this registry), then
    the rest (``EngineConfig.validate``; the SGLang family's own checks,
    ``batchscope.sglang_family.batching.validate_sglang``)."""
    check_name(config, "batching", SCHEDULERS)
    VALIDATORS.get(config.batching, EngineConfig.validate)(config)


def make_scheduler(config: EngineConfig, eos_token_ids: Iterable[int] = ()) -> EngineScheduler:
    """The scheduler of ``config.batching``. Raises ``ConfigError`` for an unknown batching mode or a setting out of
    range."""
    validate_config(config)
    return SCHEDULERS[config.batching](config, frozenset(eos_token_ids))


def mode_config(config: EngineConfig) -> EngineConfig:
    """``config`` in its batching mode's own terms: under ``sglang`` the same KV pool as token slots (SGLang's
    page_size 1: ``num_kv_blocks`` x ``block_size`` blocks of 1 token,
    ``batchscope.sglang_family.batching.page_size_one``); any other mode unchanged. The command line and the Playground
    both pass their configs through it."""
    return page_size_one(config) if config.batching == "sglang" else config
