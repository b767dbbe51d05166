"""The batching modes by name: the one place a new mode is registered (``--batching``, the app's lists).

Continuous batching is ``engine.scheduler.Scheduler``; static batching overrides its batch-formation hooks in
``engine.static_scheduler``. The order of the waiting queue is a second, independent seam
(``engine.request_queue.QUEUES``, chosen by ``EngineConfig.scheduling_policy``, vLLM's ``policy``).
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.config import EngineConfig, check_name
from engine.scheduler import Scheduler
from engine.static_scheduler import StaticScheduler

SCHEDULERS: dict[str, type[Scheduler]] = {"continuous": Scheduler, "static": StaticScheduler}


def validate_config(config: EngineConfig) -> None:
    """Raise ``ConfigError`` naming the first bad field of ``config``: its batching mode (a name of ``SCHEDULERS``,
    checked here because the schedulers take a config, so ``engine.config`` cannot ask this registry), then the
    rest (``EngineConfig.validate``)."""
    check_name(config, "batching", SCHEDULERS)
    config.validate()


def make_scheduler(config: EngineConfig, eos_token_ids: Iterable[int] = ()) -> Scheduler:
    """The scheduler of ``config.batching``. Raises ``ConfigError`` for an unknown batching mode or a setting out of
    range."""
    validate_config(config)
    return SCHEDULERS[config.batching](config, frozenset(eos_token_ids))
