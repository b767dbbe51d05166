"""SGLang 0.5.23's ``Scheduler`` without its constructor: CPU pools and the plain attributes its ``__init__`` sets.

``Scheduler.__init__`` (sglang/srt/managers/scheduler.py) loads a model, binds sockets and starts threads. The
scheduling methods (``get_next_batch_to_run``, ``get_new_batch_prefill``, ``update_running_batch``) read only the
attributes set here, with the values ``__init__`` gives them on one CPU rank with overlap, speculation, LoRA,
hierarchical cache, disaggregation, DP attention and metrics off. The values come from that version: pin it.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.managers.schedule_policy import SchedulePolicy
from sglang.srt.managers.scheduler import Scheduler
from sglang.srt.managers.scheduler_components.new_token_ratio_tracker import NewTokenRatioTracker
from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator
from sglang.srt.mem_cache.cache_init_params import CacheInitParams
from sglang.srt.mem_cache.memory_pool import ReqToTokenPool
from sglang.srt.mem_cache.radix_cache import RadixCache

VOCAB_SIZE = 1 << 20  # token ids the workload may use
MAX_CONTEXT = 1 << 14  # tokens a request may hold (prompt + output); the rows of ReqToTokenPool are this long


class NoKVPool:
    """The K/V pool the allocator hands slots of: it stores nothing (no model writes to it)."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


class NoBeams:
    """Stands in for ``BeamCoordinator`` with no beam-search group alive (its answers in that state)."""

    def pending_member_rows(self, batch: Any) -> int:
        return 0

    def retire_group(self, req: Any) -> None:
        """A request ended outside the commit path: it has no beam group (``retire_group`` then returns)."""


class Outbox:
    """Stands in for the scheduler's socket to the tokenizer manager: keeps the ids of the requests SGLang reports
    as aborted outside the output stream (``Scheduler.send_abort_output``: popped from the queue, the chunked request
    dropped), in order, until the driver takes them."""

    def __init__(self) -> None:
        self.aborted: list[str] = []

    def send_output(self, output: Any, req: Any) -> None:
        self.aborted.append(req.rid)

    def take(self) -> list[str]:
        out, self.aborted = self.aborted, []
        return out


def build_scheduler(cfg: dict[str, Any]) -> Scheduler:
    """A ``Scheduler`` for ``cfg`` (see ``batchscope_sglang.driver.DEFAULT_CONFIG``), inside ``published_topology``."""
    s = object.__new__(Scheduler)
    # one row per running request (KVCacheConfigurator: size=max_running_requests)
    s.req_to_token_pool = ReqToTokenPool(cfg["max_running_requests"], MAX_CONTEXT, "cpu", False)
    # no dtype: the pool stores no K/V
    s.token_to_kv_pool_allocator = TokenToKVPoolAllocator(cfg["pool_tokens"], None, "cpu", NoKVPool(), False)
    params = CacheInitParams(
        disable=not cfg["enable_prefix_cache"],
        req_to_token_pool=s.req_to_token_pool,
        token_to_kv_pool_allocator=s.token_to_kv_pool_allocator,
        page_size=1,
    )
    s.tree_cache = RadixCache(params)
    s.page_size = 1
    s.schedule_policy = cfg["schedule_policy"]
    s.enable_hierarchical_cache = False
    s.enable_priority_scheduling = False
    s.schedule_low_priority_values_first = False
    s.policy = SchedulePolicy(s.schedule_policy, s.tree_cache, False, False, False)
    s.new_token_ratio_tracker = NewTokenRatioTracker.from_config()
    s.waiting_queue = []
    s.running_batch = ScheduleBatch(reqs=[], batch_is_full=False)
    s.last_batch = None
    s.chunked_req = None
    s.chunked_prefill_size = cfg["chunked_prefill_size"]
    s.max_running_requests = cfg["max_running_requests"]
    _set_plain_attributes(s)
    _set_request_handling(s, cfg)
    return s


def _set_request_handling(s: Scheduler, cfg: dict[str, Any]) -> None:
    """What ``handle_generate_request`` and ``abort_request`` read: the request limits ``TpModelWorker.get_worker_info``
    computes from the pool and the model's context (``cfg["context_len"]``, default ``MAX_CONTEXT``):
    ``max_req_len = min(context_len - 1, pool - 1)``, ``max_req_input_len = max_req_len - 5``; no sessions, grammar,
    multimodal receiver, KV events or ``SGLANG_MAX_NEW_TOKENS_LIMIT``; and the socket to the tokenizer manager, an
    ``Outbox`` (no Rust server)."""
    from sglang.srt.mem_cache.allocator.page_interleave import page_interleave_shard_size

    pool, context_len = cfg["pool_tokens"], cfg.get("context_len") or MAX_CONTEXT
    s.max_total_num_tokens = pool
    s.max_req_len = min(context_len - 1, pool - 1)
    s.max_req_input_len = s.max_req_len - 5
    s.max_new_tokens_limit = None
    s.kv_shard_widening = page_interleave_shard_size(s.token_to_kv_pool_allocator)
    s.sliding_window_size = None
    s.enable_session_radix_cache = False
    s.session_controller = {}  # no session: handle_generate_request only asks whether an id is in it
    s.tokenizer = None  # skip_tokenizer_init
    s.metrics_collector = None
    s.kv_events_publisher = SimpleNamespace(enable_kv_cache_events=False)
    s.grammar_manager.grammar_backend = None  # GrammarManager.__init__ with skip_tokenizer_init
    s.grammar_manager._enable_strict_thinking = False
    s.mm_receiver = None
    s.enable_continuous_input_polling = False
    s.rust_server = None
    s.ipc_channels = SimpleNamespace(send_to_tokenizer=Outbox())


def _set_plain_attributes(s: Scheduler) -> None:
    """The flags and counters ``Scheduler.__init__`` sets, at their values with every optional feature off."""
    from sglang.srt.constrained.grammar_manager import GrammarManager
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.managers.scheduler_components.dp_attn import SchedulerDPAttnAdapter
    from sglang.srt.model_executor.model_runner_components.ngram_embedding_manager import NgramEmbeddingManager
    from sglang.srt.runtime_context import get_context, get_schedule
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    s.disaggregation_mode = DisaggregationMode.NULL
    s.max_queued_requests = None
    s.enable_hicache_storage = False
    s.enable_lmcache = False
    s.processed_tokens_counter = 0
    s.scheduler_stage_metrics = None
    s._pending_chunked_abort_req = None
    s.enable_unified_cache_external_linker = False
    s.dllm_config = None
    s.enable_hisparse = False
    s.prefill_decode_interval = 0
    s._prefill_decode_interval_remaining = 0
    s.prefill_decode_interval_min_bs = 0
    s.prefill_delayer = None
    s.grammar_manager = object.__new__(GrammarManager)  # no constrained decoding: an empty grammar queue
    s.grammar_manager.grammar_queue = []
    s.enable_priority_preemption = False
    s.is_hybrid_swa = False
    s.min_free_slots_delayer = None
    s.max_prefill_tokens = get_schedule().max_prefill_tokens
    s.beam_coordinator = NoBeams()
    # no model: a runner whose attention backend has no tile size (PrefillAdder's fallback, 64) and no SWA
    s.tp_worker = SimpleNamespace(model_runner=SimpleNamespace(attn_backend=object(), prefill_aware_swa=False))
    s.dynamic_chunk_sizer = None
    s.enable_lora = False
    s.truncation_align_size = None
    # as Scheduler.init_chunked_prefill: mixed chunks need chunked prefill (always on here) and the server argument
    s.is_mixed_chunk = s.chunked_prefill_size is not None and get_schedule().enable_mixed_chunk
    s.priority_scheduling_preemption_threshold = get_schedule().priority_scheduling_preemption_threshold
    s.max_prefill_bs = 0
    s.enable_overlap = False
    s.enable_skip_finishing_decode = False  # event_loop_normal (overlap off)
    s.hisparse_coordinator = None
    s.decode_offload_manager = None
    s.metrics_reporter = SimpleNamespace(num_retracted_reqs=0, enable_metrics=False)  # metrics off
    s.require_mlp_sync = False  # no DP attention
    s.dp_attn_adapter = object.__new__(SchedulerDPAttnAdapter)
    object.__setattr__(s.dp_attn_adapter, "get_require_mlp_sync", lambda: False)  # a frozen dataclass
    s.ngram_embedding_manager = object.__new__(NgramEmbeddingManager)  # n-gram embeddings off
    for name, value in (("engram_hasher", None), ("engram_stager", None), ("enabled", False)):
        object.__setattr__(s.ngram_embedding_manager, name, value)  # a frozen dataclass
    s.load_inquirer = SimpleNamespace(_get_num_pending_tokens=lambda chunk_deduct=0: 0)  # read for log stats only
    s.spec_algorithm = SpeculativeAlgorithm.NONE
    # the EOS ids handle_generate_request gives each request: the driver sets the workload's
    s.model_config = SimpleNamespace(vocab_size=VOCAB_SIZE, is_encoder_decoder=False, hf_eos_token_id=None)
    # what Scheduler.init_model_worker publishes: one micro-batch of max_running_requests rows
    get_context().override(
        "scheduler.pp_max_micro_batch_size_default", pp_max_micro_batch_size=max(s.max_running_requests, 1)
    )
