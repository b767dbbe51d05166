"""Engine settings: one small dataclass, validated with errors that carry the field and its allowed range."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from batchscope.scheduling.request_queue import QUEUES
from batchscope.steplog.checks import V1_LIMITS

# Waiting-queue orders (``batchscope.scheduling.request_queue.QUEUES``) and batching modes
# (``batchscope.engine.batching.SCHEDULERS``) are registered where they are implemented. The queues sit below this
# module, so ``validate`` asks their registry; the schedulers take a config, so their registry sits above it and checks
# the mode's name (``batching.validate_config``).

# Allowed ranges, shared by the CLI, the app's knobs and validation: the limits a version 1 trace (what this engine
# writes) is checked against, so the engine accepts exactly what its traces may say.
LIMITS = V1_LIMITS
# Speculative decoding's integer settings (``EngineConfig.validate_speculation``): vLLM allows more drafts; past 16
# a picture of one decode row stops being readable, and prompt lookup past 64 tokens matches almost nothing.
SPEC_LIMITS = {"num_speculative_tokens": (0, 16), "prompt_lookup_min": (1, 64), "prompt_lookup_max": (1, 64)}
# The TGI and TensorRT-LLM families' own knobs, under their engines' names, each recorded in a trace header only
# under its family (``FAMILY_FIELDS``). Ranges: TGI's launcher takes any ``max_waiting_tokens`` (a usize; past 4,096
# decode steps the limit never acts in a run of this size) and a ``waiting_served_ratio`` float (past 8 no running
# batch of 256 rows leaves a minimum of 2,048 waiting requests to meet); TensorRT-LLM's chunk unit is a token count
# (past ``max_num_batched_tokens``' range it could never be met).
TGI_LIMITS = {"max_waiting_tokens": (0, 4096)}
TRTLLM_LIMITS = {"chunk_unit_size": (1, 65536)}
WAITING_SERVED_RATIO = (0.0, 8.0)
CAPACITY_POLICIES = ("guaranteed_no_evict", "max_utilization", "static_batch")  # TensorRT-LLM's CapacitySchedulerPolicy
CONTEXT_CHUNKING = ("fcfs", "equal_progress")  # ContextChunkingPolicy FIRST_COME_FIRST_SERVED, EQUAL_PROGRESS
FAMILY_FIELDS = {
    "tgi": ("waiting_served_ratio", "max_waiting_tokens"),
    "trtllm": ("capacity_policy", "context_chunking", "chunk_unit_size"),
}


class ConfigError(ValueError):
    """A setting out of its range. ``field``, ``value`` and ``allowed`` say which, what, and what would do."""

    def __init__(self, field: str, value: object, allowed: str):
        super().__init__(f"{field}={value!r} is out of range: {allowed}")
        self.field, self.value, self.allowed = field, value, allowed


def check_name(config: EngineConfig, field: str, registry: Iterable[str]) -> None:
    """Raise ``ConfigError`` unless ``config``'s ``field`` is a name of ``registry`` (a batching mode's, a queue's)."""
    names = list(registry)
    if getattr(config, field) not in names:
        raise ConfigError(field, getattr(config, field), "one of " + ", ".join(names))


@dataclass
class EngineConfig:
    """Scheduler and KV-cache limits (names as in vLLM; the defaults of the last three are vLLM's).

    - ``batching``: batching mode, ``continuous``, ``static`` or ``sglang`` (``batchscope.engine.batching``). Not vLLM's
      ``policy``: that is the waiting queue's order, ``scheduling_policy`` here. Traces record it as the header's
      ``policy``.
    - ``max_num_seqs``: most requests running at once (the rows of the batch; "slots" in the pictures).
    - ``max_num_batched_tokens``: the token budget of one step (prefill chunk tokens + decode tokens).
    - ``block_size``: tokens per KV block.
    - ``num_kv_blocks``: blocks in the preallocated KV pool (capacity = num_kv_blocks * block_size tokens).
    - ``enable_chunked_prefill``: split a prompt larger than the budget left across steps.
    - ``scheduling_policy``: order of the waiting queue, as vLLM's ``--scheduling-policy``: ``fcfs`` (arrival
      order) or ``priority`` (smallest request ``priority`` first, ties by arrival;
    ``batchscope.scheduling.request_queue``).
    - ``enable_prefix_caching``: automatic prefix caching (vLLM's ``enable_prefix_caching``): full blocks of a
      prompt already in the pool are shared instead of recomputed (``batchscope.scheduling.block_manager``).
    - ``reserve_full_prompt``: admit a waiting or preempted request only if the free blocks hold its whole known
      sequence, net of prefix-cache hits (vLLM's ``scheduler_reserve_full_isl``); off: only its first chunk must
      fit, the older V1 rule, which can thrash (shared case c01).

    Unlike vLLM, a token budget below ``max_num_seqs`` is allowed. vLLM refuses it so that every running request
    can decode in every step (its batch shapes and CUDA graphs are sized for that); here it shows what a budget
    does: running requests then take turns, the earliest admitted first, and the head of the running list still
    computes every step, so every request still finishes.

    ``enable_mixed_chunk``: SGLang's ``--enable-mixed-chunk`` (off by default; ``--batching sglang`` only): the
    running requests decode inside a prefill (EXTEND) batch instead of waiting that step.

    Speculative decoding with n-gram drafts (``batchscope.engine.spec_decode``; vLLM's ``--speculative-config
    '{"method": "ngram", ...}'``): ``num_speculative_tokens`` drafts at most per decode step (0: off), from a matched
    n-gram of ``prompt_lookup_min`` to ``prompt_lookup_max`` tokens (vLLM's defaults: 5 and 5). Continuous batching
    only.

    TGI's router (``--batching tgi``, ``batchscope.tgi_family``): ``waiting_served_ratio`` (default 0.3) and
    ``max_waiting_tokens`` (default 20), the launcher's defaults: without prefill chunking a new batch is formed beside
    a running one only if at least ``waiting_served_ratio`` x running requests wait, unless ``max_waiting_tokens``
    decode steps have passed since the last new batch.

    TensorRT-LLM's in-flight batching (``--batching trtllm``, ``batchscope.trtllm_family``): ``capacity_policy``
    (``guaranteed_no_evict``, the default: reserve blocks to completion; ``max_utilization``: only the next step's,
    pausing the last started request when they run out; ``static_batch``), ``context_chunking`` (``fcfs``, the default,
    or ``equal_progress``) and ``chunk_unit_size`` in tokens (``None``: the KV block size).

    Defaults keep the block map readable for a handful of requests: 64 blocks of 16 tokens.
    """

    batching: str = "continuous"
    max_num_seqs: int = 4
    max_num_batched_tokens: int = 64
    block_size: int = 16
    num_kv_blocks: int = 64
    enable_chunked_prefill: bool = True
    scheduling_policy: str = "fcfs"
    enable_prefix_caching: bool = True
    reserve_full_prompt: bool = True
    enable_mixed_chunk: bool = False
    num_speculative_tokens: int = 0
    prompt_lookup_min: int = 5
    prompt_lookup_max: int = 5
    waiting_served_ratio: float = 0.3
    max_waiting_tokens: int = 20
    capacity_policy: str = "guaranteed_no_evict"
    context_chunking: str = "fcfs"
    chunk_unit_size: int | None = None

    def validate(self, queues: Iterable[str] = QUEUES) -> None:
        """Raise ``ConfigError`` naming the first bad field and its allowed range: every field but ``batching``,
        whose names ``batchscope.engine.batching.validate_config`` checks before calling this. ``queues``: the
        waiting-queue orders of the batching mode (the SGLang family has its own,
        ``batchscope.sglang_family.policy.POLICIES``)."""
        check_name(self, "scheduling_policy", queues)
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not (lo <= value <= hi):
                raise ConfigError(name, value, f"an integer in [{lo}, {hi}]")
        for name in ("enable_chunked_prefill", "enable_prefix_caching", "reserve_full_prompt", "enable_mixed_chunk"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "true or false")
        if self.enable_mixed_chunk and self.batching != "sglang":
            allowed = f"false under --batching {self.batching} (SGLang's --enable-mixed-chunk: --batching sglang)"
            raise ConfigError("enable_mixed_chunk", True, allowed)
        self.validate_speculation()
        self.validate_family_knobs()

    def validate_family_knobs(self) -> None:
        """The TGI and TensorRT-LLM knobs in their ranges (``TGI_LIMITS``, ``WAITING_SERVED_RATIO``, ``TRTLLM_LIMITS``,
        the policy names); each family checks whether its engine can take the rest (``batchscope.tgi_family``,
        ``batchscope.trtllm_family``)."""
        lo, hi = WAITING_SERVED_RATIO
        ratio = self.waiting_served_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not lo <= ratio <= hi:
            raise ConfigError("waiting_served_ratio", ratio, f"a number in [{lo:g}, {hi:g}]")
        for name, (lo_i, hi_i) in TGI_LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo_i <= value <= hi_i:
                raise ConfigError(name, value, f"an integer in [{lo_i}, {hi_i}]")
        check_name(self, "capacity_policy", CAPACITY_POLICIES)
        check_name(self, "context_chunking", CONTEXT_CHUNKING)
        lo_u, hi_u = TRTLLM_LIMITS["chunk_unit_size"]
        unit = self.chunk_unit_size
        if unit is not None and (not isinstance(unit, int) or isinstance(unit, bool) or not lo_u <= unit <= hi_u):
            raise ConfigError("chunk_unit_size", unit, f"an integer in [{lo_u}, {hi_u}], or null (the block size)")

    def validate_speculation(self) -> None:
        """``num_speculative_tokens`` in [0, 16] (0: off); ``prompt_lookup_min`` <= ``prompt_lookup_max``, both in
        [1, 64] (vLLM's ``SpeculativeConfig`` refuses min > max); drafts under static batching are refused, and so is
        a token budget below ``1 + num_speculative_tokens`` with prefix caching on (it can never admit a request
        whose prompt is cached but for one token: see below)."""
        for name, (lo, hi) in SPEC_LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not (lo <= value <= hi):
                raise ConfigError(name, value, f"an integer in [{lo}, {hi}]")
        if self.prompt_lookup_min > self.prompt_lookup_max:
            allowed = f"an integer in [1, prompt_lookup_max={self.prompt_lookup_max}]"
            raise ConfigError("prompt_lookup_min", self.prompt_lookup_min, allowed)
        if self.num_speculative_tokens and self.batching != "continuous":
            allowed = f"0 under --batching {self.batching} (speculative decoding runs with continuous batching)"
            raise ConfigError("num_speculative_tokens", self.num_speculative_tokens, allowed)
        padded = 1 + self.num_speculative_tokens
        if self.num_speculative_tokens and self.enable_prefix_caching and self.max_num_batched_tokens < padded:
            # vLLM 0.33 (Scheduler.schedule, "Pad new decode requests to uniform spec decoding size") pads an
            # admission with one token left after a prefix-cache hit to 1 + num_speculative_tokens and would rather
            # not schedule it than schedule it unpadded: under a smaller budget it never runs, and vLLM's own
            # scheduler loops forever on such a workload (tests_vllm/test_vllm_spec_decode.py). Refused up front.
            allowed = (
                f"at least 1 + num_speculative_tokens = {padded} with prefix caching on (an admission after a cache "
                f"hit is padded to {padded} tokens, as in vLLM, and would never fit)"
            )
            raise ConfigError("max_num_batched_tokens", self.max_num_batched_tokens, allowed)

    def header_dict(self) -> dict:
        """The ``config`` object of a trace header (the batching mode is recorded beside it, as ``policy``)."""
        d = asdict(self)
        d.pop("batching")
        spec = {name: d.pop(name) for name in SPEC_LIMITS}
        if not d["enable_mixed_chunk"]:  # SGLang's --enable-mixed-chunk, recorded only when it is on
            d.pop("enable_mixed_chunk")
        for family, names in FAMILY_FIELDS.items():  # a family's own knobs, recorded only under it
            for name in names:
                value = d.pop(name)
                if self.batching == family:
                    d[name] = value if value is not None or name != "chunk_unit_size" else self.block_size
        if spec["num_speculative_tokens"]:  # vLLM's --speculative-config, recorded only when it is on
            d["speculative_config"] = {"method": "ngram", **spec}
        return d
