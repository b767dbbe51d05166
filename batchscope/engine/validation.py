"""Up-front validation: a request that could never run is refused before any step, with one line that names the
request, the field, the offending value and the range that would do (no hang, no crash at step 0, no silent
truncation). ``LLMEngine.run`` calls it for every request; the CLI and the Playground call it before a run starts.
"""

from __future__ import annotations

import warnings

from batchscope.engine.config import EngineConfig
from batchscope.engine.request import INT_RANGES, FieldError, Request, is_int, range_text
from batchscope.scheduling.block_manager import blocks_needed
from batchscope.sglang_family.prefill_adder import min_pool_tokens
from batchscope.sglang_family.request_handling import STAND_IN_PROMPT, RequestLimits, handle
from batchscope.steplog.checks import WORKLOAD_ID_CHARS, request_id_problem


class RequestError(ValueError):
    """A request that can never run under this configuration.

    Attributes: ``request_id``; ``field``, the setting that has to change (a request field such as ``max_tokens``
    or an engine knob such as ``num_kv_blocks``); ``value``; ``allowed``, the range that would do; ``minimum``, the
    smallest value of ``field`` that would do, where there is one. The message says all of it in one line.
    """

    def __init__(
        self,
        message: str,
        request_id: str | None = None,
        field: str | None = None,
        value: object = None,
        allowed: str | None = None,
        minimum: int | None = None,
    ):
        super().__init__(message)
        self.request_id, self.field, self.value, self.allowed = request_id, field, value, allowed
        self.minimum = minimum


def validate_request(
    req: Request, config: EngineConfig, max_model_len: int | None, vocab_size: int | None = None
) -> None:
    """Reject up front what could never finish (no hang, no crash at step 0, no silent truncation).

    Args:
        max_model_len: the model's context in tokens (``None``: unchecked).
        vocab_size: the model's vocabulary (``None``: token ids unchecked); ids must be in ``[0, vocab_size - 1]``.
    Raises:
        RequestError: a bad request id, an empty prompt, a token id outside the vocabulary, a bad sampling field,
            a prompt or prompt + max_tokens beyond the model's context, a request whose K/V could not fit even alone
            in the whole pool, or (chunked prefill off) a prompt longer than the token budget. The message says the
            allowed range.
    """
    rid = req.request_id
    problem = request_id_problem(rid, WORKLOAD_ID_CHARS)
    if problem:
        raise RequestError(
            f"request_id {str(rid)[:80]!r} {problem}", str(rid), "request_id", rid, f"1-{WORKLOAD_ID_CHARS} printable"
        )
    where = f"request {rid!r}"
    if req.num_prompt_tokens == 0:
        raise RequestError(f"{where}: the prompt is empty; give at least one token", rid, "prompt", "", ">= 1 token")
    _check_token_ids(req, vocab_size)
    try:
        req.sampling.validate(where)
    except FieldError as exc:
        raise RequestError(str(exc), rid, exc.field, exc.value, exc.allowed) from None
    _check_arrival_and_priority(req, where)
    _check_context(req, max_model_len)
    _check_pool_and_budget(req, config, max_model_len)


class PriorityIgnoredWarning(UserWarning):
    """Requests carry a priority but the waiting queue is FCFS: the priorities change nothing."""


def _check_arrival_and_priority(req: Request, where: str) -> None:
    """The priority (vLLM's: 64-bit signed), the arrival step and the abort step within ``INT_RANGES`` (a request
    built in Python, not read from a workload file, is checked here first)."""
    values: tuple[tuple[str, object], ...] = (
        ("priority", req.priority),
        ("arrival_step", req.arrival_step),
        ("abort_step", req.abort_step),
    )
    for name, value in values:
        if value is None and name != "priority":
            continue
        lo, hi = INT_RANGES[name]
        if not (isinstance(value, int) and is_int(value) and lo <= value <= hi):
            allowed = f"an integer in {range_text(lo, hi)}"
            raise RequestError(
                f"{where}: {name}={value!r} is out of range: {allowed}", req.request_id, name, value, allowed
            )


def priority_ignored_message(requests: list[Request], config: EngineConfig) -> str | None:
    """The warning for requests that carry a non-zero priority under the FCFS queue (None if there is none)."""
    given = [r.request_id for r in requests if r.priority != 0]
    if not given or config.scheduling_policy != "fcfs":
        return None
    return (
        f"priority is ignored with scheduling_policy='fcfs' (set on {len(given)} request(s), e.g. {given[0]!r}); "
        "use scheduling_policy='priority' (--scheduling-policy priority) to apply it"
    )


def warn_if_priority_ignored(requests: list[Request], config: EngineConfig) -> None:
    """One ``PriorityIgnoredWarning`` when requests carry a non-zero priority under the FCFS queue."""
    message = priority_ignored_message(requests, config)
    if message:
        warnings.warn(PriorityIgnoredWarning(message), stacklevel=3)


def _check_token_ids(req: Request, vocab_size: int | None) -> None:
    """Every prompt token id in ``[0, vocab_size - 1]`` (an id past the embedding table crashes the forward), or
    without a vocabulary in ``INT_RANGES['prompt_token_ids']`` (what a tokenizer and an int32 tensor hold)."""
    lo, hi = INT_RANGES["prompt_token_ids"]
    if vocab_size is not None:
        hi = min(hi, vocab_size - 1)
    for i, t in enumerate(req.prompt_token_ids):
        if not is_int(t) or not lo <= t <= hi:
            allowed = f"[0, {hi}]" if vocab_size is not None else range_text(lo, hi)
            raise RequestError(
                f"request {req.request_id!r}: prompt_token_ids[{i}] = {t!r} is out of range {allowed}"
                + (f" (the model's vocabulary has {vocab_size} tokens)" if vocab_size is not None else ""),
                req.request_id,
                "prompt_token_ids",
                t,
                allowed,
            )


def _check_context(req: Request, max_model_len: int | None) -> None:
    where, rid = f"request {req.request_id!r}", req.request_id
    if max_model_len is None:
        return
    if req.num_prompt_tokens >= max_model_len:
        raise RequestError(
            f"{where}: the prompt of {req.num_prompt_tokens} tokens leaves no room for output in the model's context "
            f"of {max_model_len} tokens; the prompt must be in [1, {max_model_len - 1}] tokens",
            rid,
            "prompt",
            req.num_prompt_tokens,
            f"[1, {max_model_len - 1}] tokens",
        )
    total = req.num_prompt_tokens + req.sampling.max_tokens
    if total > max_model_len:
        raise RequestError(
            f"{where}: prompt ({req.num_prompt_tokens} tokens) + max_tokens ({req.sampling.max_tokens}) = {total} "
            f"exceeds the model's context of {max_model_len} tokens; max_tokens must be in "
            f"[1, {max_model_len - req.num_prompt_tokens}]",
            rid,
            "max_tokens",
            req.sampling.max_tokens,
            f"[1, {max_model_len - req.num_prompt_tokens}]",
        )


def max_kv_tokens_with_drafts(req: Request, config: EngineConfig, max_model_len: int | None) -> int:
    """Most K/V slots ``req`` can hold at once: prompt + max_tokens - 1, plus, with n-gram drafts, the
    ``num_speculative_tokens`` draft positions a decode (or vLLM's padded admission) may schedule past its last
    token: drafts are capped at the model's context (positions below ``max_model_len - 1``), not at max_tokens."""
    tokens = req.max_kv_tokens
    if config.num_speculative_tokens:
        with_drafts = tokens + config.num_speculative_tokens
        tokens = max(tokens, with_drafts if max_model_len is None else min(with_drafts, max_model_len - 1))
    return tokens


def _check_pool_and_budget(req: Request, config: EngineConfig, max_model_len: int | None = None) -> None:
    """The request fits the whole pool alone (else it would preempt itself forever), and without chunked prefill
    its prompt fits the budget."""
    where, rid = f"request {req.request_id!r}", req.request_id
    if config.batching == "sglang":  # SGLang clips, or refuses with an abort, what does not fit: its own rules
        _check_sglang_pool(req, config, max_model_len)
        return
    tokens = max_kv_tokens_with_drafts(req, config, max_model_len)
    held_back = 1 if config.batching == "tgi" else 0  # TGI keeps block 0 back
    to_completion = config.batching == "trtllm" and config.capacity_policy != "max_utilization"
    tokens += to_completion  # TensorRT-LLM's blocks to completion count prompt + max_tokens (no-evict policies)
    need = blocks_needed(tokens, config.block_size)
    if need > config.num_kv_blocks - held_back:
        drafts = tokens - req.max_kv_tokens - to_completion
        plus = f" + {drafts} draft positions (num_speculative_tokens)" if drafts else ""
        counted = (
            "max_tokens tokens (what TensorRT-LLM reserves to completion)"
            if to_completion
            else "max_tokens - 1 tokens" + plus + " (the last sampled token is never fed back, so it needs no KV slot)"
        )
        at_least = need + held_back
        raise RequestError(
            f"{where}: needs {need} KV blocks of {config.block_size} tokens for prompt {req.num_prompt_tokens} + "
            f"max_tokens {req.sampling.max_tokens}{counted.removeprefix('max_tokens')} but the whole pool has "
            f"num_kv_blocks={config.num_kv_blocks}{pool_note(config)}; raise num_kv_blocks to >= {at_least} or lower "
            "max_tokens",
            rid,
            "num_kv_blocks",
            config.num_kv_blocks,
            f">= {at_least}",
            at_least,
        )
    if not config.enable_chunked_prefill and req.num_prompt_tokens > config.max_num_batched_tokens:
        raise RequestError(
            f"{where}: prompt of {req.num_prompt_tokens} tokens exceeds max_num_batched_tokens="
            f"{config.max_num_batched_tokens} with chunked prefill off; turn chunked prefill on or raise "
            f"max_num_batched_tokens to >= {req.num_prompt_tokens}",
            rid,
            "max_num_batched_tokens",
            config.max_num_batched_tokens,
            f">= {req.num_prompt_tokens}",
            req.num_prompt_tokens,
        )


def pool_note(config: EngineConfig) -> str:
    """What a family's pool check adds to the plain one, in words (TGI's reserved block 0, TensorRT-LLM's count)."""
    if config.batching == "tgi":
        return " (TGI keeps block 0 back)"
    if config.batching == "trtllm" and config.capacity_policy != "max_utilization":
        return " (TensorRT-LLM reserves prompt + max_tokens tokens to completion)"
    return ""


def _check_sglang_pool(req: Request, config: EngineConfig, max_model_len: int | None) -> None:
    """SGLang takes any request whose prompt and max_tokens fit the model's context (``_check_context``): it clips
    the output to the pool, or refuses a prompt too long for it by ending it with an abort
    (``batchscope.sglang_family.request_handling``: the run shows both). One request it accepts can never run: an
    ``ignore_eos`` request without the prefix cache, clipped to the pool, is judged by a simulated run that wants
    more than the clip leaves (``batchscope.sglang_family.prefill_adder.min_pool_tokens``), so it waits forever."""
    if not req.sampling.ignore_eos or config.enable_prefix_caching:
        return
    limits = RequestLimits(config.num_kv_blocks, max_model_len)
    handled = handle(limits, req.num_prompt_tokens, req.sampling.max_tokens)
    prompt = len(STAND_IN_PROMPT) if handled.error else req.num_prompt_tokens
    need = min_pool_tokens(prompt, handled.max_new_tokens, fixed_length_run=True)
    if need <= config.num_kv_blocks:
        return
    at_most = config.num_kv_blocks - prompt - 3
    fix = f"lower max_tokens to <= {at_most}" if at_most >= 1 else f"raise num_kv_blocks to >= {prompt + 4}"
    clip = "" if handled.max_new_tokens == req.sampling.max_tokens else ", its max_tokens clipped by SGLang"
    raise RequestError(
        f"request {req.request_id!r}: SGLang would never admit it: with ignore_eos and the prefix cache off, its "
        f"simulated run needs a pool of >= {need} tokens (prompt {prompt} + max_new_tokens {handled.max_new_tokens}"
        f"{clip} + 3) but num_kv_blocks={config.num_kv_blocks} (block_size 1), so it would wait forever; {fix}, "
        "or turn the prefix cache on",
        req.request_id,
        "max_tokens" if at_most >= 1 else "num_kv_blocks",
        req.sampling.max_tokens if at_most >= 1 else config.num_kv_blocks,
        f"[1, {at_most}]" if at_most >= 1 else f">= {prompt + 4}",
    )
