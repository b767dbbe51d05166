"""The words of a scheduling decision: the limits that keep a waiting request out and the rules that pick a victim.

A step record may carry ``decisions`` (``batchscope.steplog.records.DecisionsRecord``), written by the scheduler at the
line where it decides (``batchscope.scheduling.scheduler``, ``batchscope.scheduling.static_scheduler``, and vLLM's own
scheduler through ``batchscope_vllm.tracebook``). Each decision names a *limit* or a *rule* from the small vocabularies
below, plus the numbers it compared. Everything that explains a step (narration, checklist, quiz, glossary) turns these
names into sentences through the two tables here, so a new scheduler or queue order brings its own words by adding an
entry, not by a branch on a policy name somewhere in the visuals.

Limits (``head.limit``: why the head of the waiting queue was not admitted in a step); ``need`` and ``left`` are in
the limit's unit (``LIMIT_UNITS``), and each limit's meaning is ``LIMIT_WHY``. vLLM-style ones in the order its
scheduler checks them (``preempted_this_step``, ``static_batch_running``, ``max_num_seqs``, ``token_budget``,
``chunked_prefill_off``, ``kv_blocks``, ``kv_blocks_full_prompt``, ``kv_blocks_reserved``), then SGLang's
(``sglang_*``), TGI's router (``tgi_*``) and TensorRT-LLM's capacity scheduler (``trtllm_*``).

Victim rules (``preemptions[].rule``), named by the waiting queue that applies them
(``batchscope.scheduling.request_queue``):
``newest`` (FCFS: the most recently admitted running request; vLLM ``self.running.pop()``) and ``lowest_priority`` (the
priority queue: the running request with the largest ``(priority, arrival)``); ``sglang_retract`` (SGLang's retraction
when the pool cannot hold a decode batch: fewest output tokens, then longest prompt); ``trtllm_pause`` (TensorRT-LLM's
``MAX_UTILIZATION``: the last started request of the list is paused). SGLang's ``lpm`` queue order is
``longest_prefix``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

LIMIT_UNITS: dict[str, str] = {
    "preempted_this_step": "",
    "static_batch_running": "",
    "max_num_seqs": "row",
    "token_budget": "token",
    "chunked_prefill_off": "token",
    "kv_blocks": "block",
    "kv_blocks_full_prompt": "block",
    "kv_blocks_reserved": "block",
    "sglang_batch_full": "",
    "sglang_reserved_output": "token",
    "sglang_fixed_length_run": "token",
    "tgi_kv_blocks_lifetime": "block",
    "tgi_prefill_budget": "token",
    "tgi_batch_closed": "",
    "tgi_token_budget": "token",
    "tgi_min_size": "request",
    "tgi_max_batch_size": "request",
    "tgi_decode_step": "",
    "trtllm_kv_blocks_to_completion": "block",
    "trtllm_kv_blocks_next_step": "block",
    "trtllm_reuse_wait": "",
    "trtllm_max_num_tokens": "token",
}

# Short names for a checklist or a quiz option, and one clause saying why the limit holds the head back.
LIMIT_NAMES: dict[str, str] = {
    "preempted_this_step": "no preemption this step",
    "static_batch_running": "static batch",
    "max_num_seqs": "max_num_seqs",
    "token_budget": "token budget",
    "chunked_prefill_off": "whole prompt in the budget (chunked prefill off)",
    "kv_blocks": "KV blocks",
    "kv_blocks_full_prompt": "KV blocks (whole prompt must fit)",
    "kv_blocks_reserved": "KV blocks (worst case reserved)",
    "sglang_batch_full": "batch marked full (SGLang)",
    "sglang_reserved_output": "memory for its output estimate (SGLang)",
    "sglang_fixed_length_run": "memory for a fixed-length run (SGLang, ignore_eos)",
    "tgi_kv_blocks_lifetime": "KV blocks for its whole lifetime (TGI)",
    "tgi_prefill_budget": "whole prompt in max_batch_prefill_tokens (TGI)",
    "tgi_batch_closed": "batch closed after a chunk (TGI)",
    "tgi_token_budget": "max_batch_total_tokens (TGI)",
    "tgi_min_size": "waiting_served_ratio minimum (TGI)",
    "tgi_max_batch_size": "max_batch_size (TGI)",
    "tgi_decode_step": "decode forward after a prefill (TGI)",
    "trtllm_kv_blocks_to_completion": "KV blocks to completion (TensorRT-LLM)",
    "trtllm_kv_blocks_next_step": "KV blocks for the next step (TensorRT-LLM)",
    "trtllm_reuse_wait": "waits to reuse a block (TensorRT-LLM)",
    "trtllm_max_num_tokens": "max_num_tokens (TensorRT-LLM)",
}

# As a quiz option: "nobody: <short>".
LIMIT_SHORT: dict[str, str] = {
    "preempted_this_step": "a preemption in this step stops admissions",
    "static_batch_running": "the static batch has not finished",
    "max_num_seqs": "all slots are busy (max_num_seqs)",
    "token_budget": "the token budget is used up",
    "chunked_prefill_off": "the head's prompt does not fit the budget left (chunked prefill off)",
    "kv_blocks": "not enough free KV blocks for the head's next chunk",
    "kv_blocks_full_prompt": "not enough free KV blocks for the head's whole sequence",
    "kv_blocks_reserved": "the head's worst-case blocks do not fit the pool",
    "sglang_batch_full": "SGLang marked the batch full (rows or memory ran out) until a request leaves it",
    "sglang_reserved_output": "the pool cannot hold the head's prompt and estimated output",
    "sglang_fixed_length_run": "the pool cannot hold the batch's simulated fixed-length run",
    "tgi_kv_blocks_lifetime": "the head's blocks for prompt + max_tokens - 1 do not fit the free blocks",
    "tgi_prefill_budget": "the head's whole prompt does not fit the prefill budget left (chunking off)",
    "tgi_batch_closed": "the new batch closed after a chunk took the rest of the prefill budget",
    "tgi_token_budget": "the running requests' blocks use all of max_batch_total_tokens",
    "tgi_min_size": "fewer requests wait than waiting_served_ratio x running",
    "tgi_max_batch_size": "the batch has max_batch_size requests",
    "tgi_decode_step": "TGI runs a decode forward after every prefill forward without scheduling",
    "trtllm_kv_blocks_to_completion": "the head's blocks to completion do not fit beside the others' reservations",
    "trtllm_kv_blocks_next_step": "the pool lacks the head's next-step blocks, and nobody started can be paused",
    "trtllm_reuse_wait": "the head waits one step to reuse a block another request is computing now",
    "trtllm_max_num_tokens": "the head's next chunk does not fit what the step leaves of max_num_tokens",
}

LIMIT_WHY: dict[str, str] = {
    "preempted_this_step": "a running request was preempted in this step, so memory is tight and nobody is admitted",
    "static_batch_running": "a static batch takes new requests only when every member of the current batch has "
    "finished",
    "max_num_seqs": "every batch row (max_num_seqs) is taken by a running request",
    "token_budget": "the running requests use the whole token budget (max_num_batched_tokens)",
    "chunked_prefill_off": "with chunked prefill off a prompt runs whole or waits, and it is longer than the budget "
    "left",
    "kv_blocks": "there are not enough free KV blocks for the tokens it would compute now",
    "kv_blocks_full_prompt": "there are not enough free KV blocks for its whole known sequence (the full-prompt "
    "admission rule)",
    "kv_blocks_reserved": "its worst-case KV blocks do not fit beside the blocks reserved for the new static batch",
    "sglang_batch_full": "SGLang marked the running batch full (every row taken, or an admission ran out of "
    "memory), and tries no prefill until a running request leaves it",
    "sglang_reserved_output": "SGLang charges its prompt plus its whole output budget, and the running requests "
    "their remaining output times new_token_ratio, and the pool left cannot hold that",
    "sglang_fixed_length_run": "with the prefix cache off SGLang admits an ignore_eos request only if a simulated "
    "run of the batch, each request finishing its remaining output shortest first, keeps more than 1 token per "
    "request free, and it would not",
    "tgi_kv_blocks_lifetime": "TGI allocates a request's blocks for its whole lifetime (prompt + max_tokens - 1 "
    "tokens, less its cached prefix) when it admits it, and the free blocks cannot hold them; it never preempts, and "
    "nobody behind the head is admitted first",
    "tgi_prefill_budget": "TGI's prefill budget (max_batch_prefill_tokens, less the running batch's tokens when "
    "prefill chunking is on) has no room for the head's prompt: without chunking a prompt runs whole or waits",
    "tgi_batch_closed": "a prompt cut to the last of the prefill budget closes TGI's new batch: nobody joins after it",
    "tgi_token_budget": "TGI's max_batch_total_tokens counts every running request's blocks (a shared prefix block "
    "once per request), and they use it all, so the queue is not consulted",
    "tgi_min_size": "without prefill chunking TGI forms a new batch beside a running one only if at least "
    "waiting_served_ratio x running requests can join, until max_waiting_tokens decode steps have passed",
    "tgi_max_batch_size": "the batch already holds max_batch_size requests",
    "tgi_decode_step": "after every prefill forward TGI runs one decode forward of the whole batch without looking at "
    "the queue, so a request can join at most every other step",
    "trtllm_kv_blocks_to_completion": "TensorRT-LLM's capacity scheduler sets every running request's blocks to "
    "completion aside and admits the head only if its own blocks to completion fit the rest; the first that does not "
    "fit ends the walk (GUARANTEED_NO_EVICT)",
    "trtllm_kv_blocks_next_step": "under MAX_UTILIZATION TensorRT-LLM admits the head if the pool holds its next "
    "step's blocks, pausing the last started request to make room, and nobody is left to pause",
    "trtllm_reuse_wait": "TensorRT-LLM holds a prompt back one step when its first uncached block is being computed by "
    "another request in this pass, so that it can reuse that block next step",
    "trtllm_max_num_tokens": "TensorRT-LLM's micro-batch scheduler takes the decodes first and cuts a prompt chunk to "
    "a multiple of chunk_unit_size (or, without chunking, takes the prompt whole): what the step leaves of "
    "max_num_tokens has no room for the head's",
}

VICTIM_RULES: dict[str, str] = {
    "newest": "the most recently admitted running request",
    "lowest_priority": "the running request with the lowest priority (largest priority value, then latest arrival)",
    "sglang_retract": "SGLang's retraction order: the fewest output tokens, then the longest prompt",
    "trtllm_pause": "the last started request of TensorRT-LLM's list (MAX_UTILIZATION pauses it)",
}

# SGLang's batch rules in words (``decisions.batch``, retractions), for the narration.
PREFILL_FIRST = "SGLang runs a prefill batch alone when it can form one"
RETRACTION_CAUSE = "the pool could not hold the decode batch"
RESERVED_OUTPUT = "min(max_tokens, 4096) for a new request, each running one's remaining output × new_token_ratio"
RADIX_HIT = "a token-by-token match in SGLang's radix cache (page_size 1), not whole blocks"
FIXED_LENGTH = "it ignores EOS, so its length is fixed and gains nothing from the early-EOS estimate"
MIXED_CHUNK = "SGLang's --enable-mixed-chunk appends the running requests' decodes to it, one chunk token each"


# Header config fields recorded only when on (``batchscope.engine.config.EngineConfig.header_dict``): an absent one
# means this value, not "not recorded"
RECORDED_WHEN_ON: dict[str, object] = {"enable_mixed_chunk": False, "speculative_config": "off"}


def pool_unit(header: Mapping[str, Any]) -> str:
    """What one unit of the trace's KV pool is called: ``token slot`` for an SGLang trace whose header gives the pool
    as ``num_kv_blocks`` blocks of ``block_size`` 1 (SGLang's page_size 1: a block is one token's slot), else
    ``KV block``."""
    sglang = header.get("policy") == "sglang" and header["config"].get("block_size") == 1
    return "token slot" if sglang else "KV block"


def cache_name(header: Mapping[str, Any]) -> str:
    """What the trace's prefix cache is called: SGLang's ``radix cache`` (a tree of token spans) for the SGLang
    family, else vLLM's ``prefix cache`` (hashed full blocks)."""
    return "radix cache" if header.get("policy") == "sglang" else "prefix cache"


# Which cached entries an eviction drops first. SGLang: ``--radix-eviction-policy`` (default ``lru``; Batchscope's
# radix cache implements LRU, ``batchscope.sglang_family.radix_cache``); vLLM: its free queue hands out the least
# recently used cached block first (``batchscope.scheduling.block_pool``).
EVICTION_ORDERS: dict[str, str] = {"lru": "least recently used first", "lfu": "least frequently used first"}


def eviction_order(header: Mapping[str, Any]) -> str:
    """How the trace's cache picks what to evict (``EVICTION_ORDERS``): the header's ``radix_eviction_policy`` for
    an SGLang trace that records one, else LRU (SGLang's default, and vLLM's free-queue order); SGLang's in whole
    unlocked leaves."""
    if header.get("policy") != "sglang":
        return EVICTION_ORDERS["lru"]
    # SGLang frees a leaf of its radix tree whole, even past the tokens it asked for (its RadixCache.evict)
    policy = header["config"].get("radix_eviction_policy", "lru")
    return "whole unlocked leaves, " + EVICTION_ORDERS.get(policy, policy)


def pool_words(header: Mapping[str, Any]) -> str:
    """The KV pool in its unit: "KV pool 64 blocks × 16 tokens", or "KV pool 1,024 token slots" for an SGLang trace
    (``pool_unit``: blocks of 1 token)."""
    c = header["config"]
    if pool_unit(header) == "token slot":
        return f"KV pool {c['num_kv_blocks']:,} token slots"
    return f"KV pool {c['num_kv_blocks']} blocks × {c['block_size']} tokens"


# Speculative decoding (n-gram drafts, ``batchscope.engine.spec_decode``): what a draft is and why an admission has
# placeholders.
DRAFT_SOURCE = "n-gram drafts: the tokens that followed the last few tokens where they occurred before"
PLACEHOLDER_DRAFTS = (
    "vLLM pads a one-token admission to the decode batch's uniform 1 + num_speculative_tokens; a placeholder is"
    " never accepted"
)

# Each batching mode (the trace header's ``policy``) by name, as a sentence starts.
BATCHING_NAMES = {
    "static": "Static batching",
    "continuous": "Continuous batching",
    "sglang": "SGLang's scheduler",
    "tgi": "TGI's router",
    "trtllm": "TensorRT-LLM's in-flight batching",
    "speculative": "Continuous batching with speculative decoding",
}
# How each batching mode's schedules are proven (the app's provenance badge, the README's "How each is proven"): what
# they were checked against, and no more.
PROOF = {
    "continuous": "schedules equal to vLLM 0.33's own scheduler, run in every CI",
    "sglang": "schedules equal to SGLang 0.5.23's own scheduler, run in every CI",
    "tgi": "schedules equal to 14 that TGI's own router code produced (TGI cannot run here)",
    "trtllm": "schedules equal to NVIDIA's TensorRT-LLM scheduler test expectations (its code cannot run here)",
    "static": "schedules checked against hand-computed ones",
}
POLICY_HEADINGS = {
    "sglang": "SGLang",
    "tgi": "TGI",
    "trtllm": "TensorRT-LLM",
    "speculative": "continuous + speculative decoding",
    "tgi_no_chunking": "TGI, no chunked prefill",
    "trtllm_max_utilization": "TensorRT-LLM, max utilization",
}  # a run as a heading names it ("sglang" capitalised read "Sglang"; a variant of a setting in words)


def run_name(header: Mapping[str, Any]) -> str:
    """The name a shipped run of a scenario goes by (its file ``SCENARIO-NAME.jsonl``, the app's ``?policy=``): the
    batching mode; for TensorRT-LLM a capacity policy other than its default (``trtllm_max_utilization``), for TGI
    prefill chunking turned off (``tgi_no_chunking``: a new batch is prefilled alone while the running ones stall), for
    continuous batching n-gram speculative decoding turned on (``speculative``: vLLM's scheduler with draft tokens)."""
    policy, config = header.get("policy", ""), header.get("config", {})
    capacity = config.get("capacity_policy")
    if policy == "trtllm" and capacity not in (None, "guaranteed_no_evict"):
        return f"{policy}_{capacity}"
    if policy == "tgi" and config.get("enable_chunked_prefill") is False:
        return "tgi_no_chunking"
    if policy == "continuous" and config.get("speculative_config"):
        return "speculative"
    return policy


# Among runs of other engines, vLLM's scheduler is named as the engine it is proven equal to (a side read "continuous"
# beside "SGLang", "TGI" and "TensorRT-LLM", as if the others were not continuous batching)
VLLM_HEADINGS = {"continuous": "vLLM (continuous)", "speculative": "vLLM + speculative decoding"}
OTHER_ENGINES = ("sglang", "tgi", "trtllm")  # a run name of another engine starts with one of these


def policy_heading(policy: str, among: Sequence[str] = ()) -> str:
    """``policy`` as a side's heading says it: ``SGLang`` for the SGLang family, a variant of a setting in words
    (``POLICY_HEADINGS``), else the policy itself; beside a run of another engine (``among``: every run name of the
    set) vLLM's scheduler by its engine's name (``VLLM_HEADINGS``)."""
    if policy in VLLM_HEADINGS and any(p.startswith(OTHER_ENGINES) for p in among):
        return VLLM_HEADINGS[policy]
    return POLICY_HEADINGS.get(policy, policy)


# How the waiting queue is ordered (``head.order``): who is the head and why nobody overtakes it.
QUEUE_ORDERS: dict[str, str] = {
    "arrival": "first come, first served",
    "priority": "priority order, smallest priority value first, then arrival",
    "longest_prefix": "longest cached prefix first (SGLang's lpm)",
}


def limit_numbers(head: Mapping[str, Any]) -> str:
    """``head``'s numbers in words, e.g. ``needs 3 blocks, 1 free`` (``""`` for limits without numbers, or when the
    numbers were not recorded)."""
    unit = LIMIT_UNITS.get(head.get("limit", ""), "")
    if not unit or "need" not in head or "left" not in head:
        return ""
    need, left = head["need"], head["left"]
    free = {"kv_blocks_reserved": "not yet reserved", "row": "free", "block": "free"}
    word = free.get(head["limit"], free.get(unit, "left"))
    return f"needs {need} {unit}{'' if need == 1 else 's'}, {left} {word}"


def checks(header: Mapping[str, Any]) -> list[str]:
    """The limits a waiting request meets, in the order the trace's scheduler checks them (it stops at the first
    that fails; ``head.limit`` is that one). Static batching forms a batch only when the last one has ended, then
    fills its rows while the worst-case blocks fit; a vLLM-style continuous scheduler admits nobody after a
    preemption, then checks the budget, a row, chunking (when off) and KV blocks (the whole sequence under the
    full-prompt rule).

    SGLang's family (0.5.23, ``Scheduler._get_new_batch_prefill_raw``): no prefill while the running batch is marked
    full, then, before each waiting request, the chunk tokens left (``adder.budget_state()``, scheduler.py:4207), a
    row (``get_num_allocatable_reqs``, :4226), and the memory its output estimate needs (``add_one_req``, :4279).
    Without a continuing chunk the rows are also checked once before any request (:4120), while the whole chunk is
    still left: the budget passes there too. A retraction is no check here: SGLang retracts in the decode batch it
    forms after the prefill attempt, so a head retracted in its step (``preempted_this_step``) met none of these."""
    cfg = header["config"]
    if header.get("policy") == "static":
        return ["static_batch_running", "max_num_seqs", "kv_blocks_reserved"]
    if header.get("policy") == "sglang":
        memory = ["sglang_reserved_output"] + (
            [] if cfg.get("enable_prefix_caching", True) else ["sglang_fixed_length_run"]
        )
        return ["sglang_batch_full", "token_budget", "max_num_seqs", *memory]
    out = ["preempted_this_step", "token_budget", "max_num_seqs"]
    if not cfg.get("enable_chunked_prefill", True):
        out.append("chunked_prefill_off")
    out.append("kv_blocks_full_prompt" if cfg.get("reserve_full_prompt") else "kv_blocks")
    return out


def at_the_check(header: Mapping[str, Any], st: Mapping[str, Any], limit: str) -> tuple[int, int]:
    """(rows taken, budget tokens left) when the scheduler checked the head of the queue in step record ``st``,
    whose recorded ``limit`` held it: the admissions before it count, as they come first in queue order. vLLM's
    family preempts before admitting, so that is the step's ``running`` and its batched tokens. SGLang's tries its
    prefill first: the requests its decode batch retracts afterwards still held rows; a decode step spent none of
    the chunk tokens (only an EXTEND batch draws on them), but with mixed chunks an adder (made unless the batch was
    full or had no row, :4098, :4120) sets one aside per running request before any waiting one (``checks``)."""
    budget = int(header["config"]["max_num_batched_tokens"])
    if header.get("policy") != "sglang":
        return len(st["running"]), max(0, budget - int(st["num_batched_tokens"]))
    rows = len(st["running"]) + len(st["preempted"])
    batch = st.get("decisions", {}).get("batch", {})
    mixed = bool(header["config"].get("enable_mixed_chunk"))
    if batch.get("kind") == "extend":
        return rows, max(0, budget - int(st["num_batched_tokens"]) - mixed * len(batch.get("decodes_waiting", [])))
    set_aside = rows if mixed and limit not in ("sglang_batch_full", "max_num_seqs") else 0
    return rows, max(0, budget - set_aside)


def queue_order(header: Mapping[str, Any]) -> str:
    """The waiting queue's order (a key of ``QUEUE_ORDERS``) under the trace's ``scheduling_policy``."""
    orders = {"priority": "priority", "lpm": "longest_prefix"}
    return orders.get(header["config"].get("scheduling_policy", "fcfs"), "arrival")


# Who aborted a request, as far as the trace can know (``finished[]`` with reason ``abort``). A server's trace
# cannot tell a client gone from a timeout or a stop string: vLLM 0.33's frontend ends a stop string by aborting the
# request in the engine core, so its scheduler sees an abort. Batchscope's engine knows its two causes: the
# workload's ``abort_step`` and ``LLMEngine.abort`` (the Playground's Cancel).
ABORT_CAUSES: dict[str, str] = {
    "server": "was aborted by the frontend (client gone, timeout or a stop string: the trace cannot tell which)",
    "workload": "was aborted at step {step} by the workload (its abort_step)",
    "cancel": "was cancelled at step {step} (LLMEngine.abort: a Cancel from outside the engine's loop)",
}
ABORT_STATES: dict[str, str] = {  # ``AbortRecord.state``
    "waiting": "while waiting, never admitted",
    "running": "while running",
    "preempted": "while preempted (back in the waiting queue without its K/V)",
}


def abort_cause(header: Mapping[str, Any], request: Mapping[str, Any], step: int) -> str:
    """The clause of ``ABORT_CAUSES`` for an abort of ``request`` (its header or ``arrived`` entry) listed in step
    number ``step`` of a trace with ``header``: a server's (``source`` ``vllm``), the workload's (the request has an
    ``abort_step`` at or before ``step``: it is aborted then, or on arrival if later), else a Cancel."""
    if header.get("source") == "vllm":
        return ABORT_CAUSES["server"]
    kind = "workload" if request.get("abort_step") is not None and request["abort_step"] <= step else "cancel"
    return ABORT_CAUSES[kind].format(step=step)
