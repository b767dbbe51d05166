"""Per-request state and K/V bookkeeping of the SGLang-style scheduler (``batchscope.sglang_family.scheduler``).

A request's K/V lives in two places: the part that is in the radix cache (``batchscope.sglang_family.radix_cache``; it
locks that path) and its own tokens not yet inserted. Units: tokens (page_size 1). Rules of SGLang 0.5.23:
``RadixCache.checkpoint`` (insert computed tokens, split them at the prompt's end, free the copies of tokens
already cached, refresh the path, move the lock; sglang/srt/mem_cache/radix_cache.py), ``release_kv_cache``
(sglang/srt/mem_cache/common.py), ``release_req`` (retraction: free what is not cached, unlock, evict 20 tokens
per request kept) and ``check_decode_capacity`` (evict the unlocked cache, then the free slots must hold one token
per request). Eviction asks the cache for the shortfall (tokens needed minus free) and frees what it evicts, which
may be more (whole nodes, ``batchscope.sglang_family.radix_cache``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from batchscope.sglang_family.radix_cache import Node, RadixCache


@dataclass(eq=False)
class SglRequest:
    """A request: prompt, output budget, EOS ids, and where its K/V is."""

    request_id: str
    prompt_token_ids: list[int]
    max_new_tokens: int
    eos_token_ids: frozenset[int] = frozenset()
    ignore_eos: bool = False
    output_token_ids: list[int] = field(default_factory=list)
    finished: bool = False
    prefix_len: int = 0  # tokens with K/V when its current extend starts (a prefix hit, or earlier chunks)
    kv_len: int = 0  # tokens it holds K/V for
    cached_len: int = 0  # of those, tokens in the radix cache (the path it locks)
    node: Node | None = None  # the last node of its locked path
    num_retractions: int = 0
    to_finish: bool = False  # SGLang's ``Req.to_finish``: an abort waits for its next sample (``check_finished``)
    error: str | None = None  # why its request handling refused it (``batchscope.sglang_family.request_handling``)
    finish_reason: str | None = None  # "stop", "length" or "abort", once finished

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def check_finished(self) -> bool:
        """SGLang's ``Req.update_finish_state`` for token ids, after each sample: an abort marked ``to_finish`` first
        (the token it just sampled is kept), then EOS (unless ``ignore_eos``), then the length cap."""
        last = self.output_token_ids[-1]
        if self.to_finish:
            self.finish_reason = "abort"
        elif last in self.eos_token_ids and not self.ignore_eos:
            self.finish_reason = "stop"
        elif len(self.output_token_ids) >= self.max_new_tokens:
            self.finish_reason = "length"
        self.finished = self.finish_reason is not None
        return self.finished


class Memory:
    """The token pool: free slots, the radix cache, and every request's share of it."""

    def __init__(self, pool_tokens: int, prefix_cache: bool):
        self.pool_tokens = pool_tokens
        self.free = pool_tokens
        self.cache = RadixCache(prefix_cache)

    def capacity(self) -> int:
        """Free plus evictable tokens: what admission may hand out (``PrefillBudget._available_and_evictable``)."""
        return self.free + self.cache.evictable

    def _evict_for(self, num_tokens: int) -> None:
        if self.free < num_tokens:
            self.free += self.cache.evict(num_tokens - self.free)

    def match(self, req: SglRequest) -> None:
        """A waiting request's prefix hit (at most all its known tokens but one)."""
        req.prefix_len, req.node = self.cache.match(req.all_token_ids, req.num_tokens - 1)
        req.kv_len = req.cached_len = req.prefix_len

    def lock(self, req: SglRequest) -> None:
        assert req.node is not None
        self.cache.lock(req.node)

    def unlock(self, req: SglRequest) -> None:
        assert req.node is not None
        self.cache.unlock(req.node)

    def extend(self, req: SglRequest, n: int) -> None:
        """``req`` computes ``n`` more tokens: ``n`` slots are allocated (evicting the cache if needed)."""
        self._evict_for(n)
        assert self.free >= n, "the pool ran out (admission must prevent this)"
        self.free -= n
        req.kv_len += n

    def checkpoint(self, req: SglRequest) -> None:
        """Insert ``req``'s computed tokens into the cache and lock them instead of its old path."""
        self._insert(req)

    def _insert(self, req: SglRequest) -> int:
        """SGLang's ``RadixCache.checkpoint``: insert the computed tokens; if they run past the prompt, insert the
        prompt again, which splits the node at the prompt's end (``split_prompt``, so eviction can drop the output
        without the prompt); match them all (refreshing the path's access time); lock the new path instead of the
        old. Returns how many of them were cached already."""
        tokens = req.all_token_ids[: req.kv_len]
        existing, node = self.cache.insert(tokens, self._values(req))
        if self.cache.enabled:
            if 0 < req.num_prompt_tokens < len(tokens):
                self.cache.insert(tokens[: req.num_prompt_tokens])
            self.cache.match(tokens, len(tokens))
            self.free += max(0, existing - req.cached_len)  # its copies of tokens someone else cached first
            self.cache.lock(node)
            if req.node is not None:
                self.cache.unlock(req.node)
            req.node, req.cached_len = node, req.kv_len
        return existing

    def _values(self, req: SglRequest) -> list[int] | None:
        """The slots of ``req``'s computed tokens, for the cache to keep (None: this memory tracks no slots)."""
        return None

    def release(self, req: SglRequest) -> None:
        """A finished request: its K/V (all but the last sampled token, which has none) enters the cache."""
        if not self.cache.enabled:
            self.free += req.kv_len
        else:
            self._insert(req)
            assert req.node is not None
            self.cache.unlock(req.node)
        req.node, req.kv_len, req.cached_len = None, 0, 0

    def discard(self, req: SglRequest) -> None:
        """An aborted chunked request (``release_kv_cache(checkpoint=False)``): the tokens it computed since its last
        checkpoint are freed, not cached; the cached path it locked (its earlier chunks) stays, unlocked."""
        self.free += req.kv_len - req.cached_len
        if req.node is not None and self.cache.enabled:
            self.cache.unlock(req.node)
        req.node, req.kv_len, req.cached_len = None, 0, 0

    def retract(self, req: SglRequest, evict_tokens: int) -> None:
        """Retraction: free what is not cached, unlock, then evict so ``evict_tokens`` are free; the request will
        compute its prompt and outputs again, minus its cache hit then."""
        self.free += req.kv_len - req.cached_len
        if req.node is not None and self.cache.enabled:
            self.cache.unlock(req.node)
        if self.cache.enabled:
            self._evict_for(evict_tokens)
        req.node, req.kv_len, req.cached_len, req.prefix_len = None, 0, 0, 0
        req.num_retractions += 1

    def decode_fits(self, num_requests: int) -> bool:
        """One slot per request after evicting the unlocked cache (``check_decode_capacity``)."""
        self._evict_for(num_requests)
        return self.free >= num_requests
