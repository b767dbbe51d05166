"""A model of the prefix cache rebuilt from a trace, for the one question the log leaves open: how many tokens a
request that was *not* admitted would have found in the cache (``batchscope.steplog.inference`` needs it to name the
limit that held it back in traces that did not record their decisions).

Rule (vLLM V1's automatic prefix caching, as ``batchscope.scheduling.block_manager`` implements it): every full block of
a request's known tokens is registered in the cache once it is computed, keyed by a hash chained over the token ids of
that block and every block before it; a freed block keeps its key (cached, free) until it is handed out for other
tokens (evicted). A lookup takes the longest run of leading blocks whose keys are cached, never reaching the last
known token. Keys here are SHA-256 digests of the token ids, like the engine's, but computed independently.

Needs the prompts' token ids (``prompt_token_ids`` in the header); without them ``hit_blocks`` returns ``None``.
"""

from __future__ import annotations

import hashlib


def block_keys(token_ids: list[int], block_size: int) -> list[bytes]:
    """The chained key of each full block of ``token_ids``."""
    keys: list[bytes] = []
    for i in range(len(token_ids) // block_size):
        chunk = ",".join(map(str, token_ids[i * block_size : (i + 1) * block_size]))
        keys.append(hashlib.sha256((keys[-1] if keys else b"") + b"/" + chunk.encode()).digest())
    return keys


class CacheModel:
    """Which block holds which cached key, updated step by step from the block tables."""

    def __init__(self, block_size: int):
        self.block_size = block_size
        self.key_of: dict[int, bytes] = {}  # block -> key it holds
        self.blocks_of: dict[bytes, list[int]] = {}  # key -> blocks holding it, oldest first (a lookup takes it)

    def drop(self, blocks) -> None:
        """``blocks`` were handed out for new tokens: their cached keys are gone."""
        for b in blocks:
            key = self.key_of.pop(b, None)
            if key is not None:
                self.blocks_of[key].remove(b)
                if not self.blocks_of[key]:
                    del self.blocks_of[key]

    def register(self, table: list[int], token_ids: list[int], num_computed: int) -> None:
        """The full blocks of ``table`` whose tokens (``token_ids``, the request's known tokens) are computed (a
        block keeps the key it got first, as the engine's pool does)."""
        keys = block_keys(token_ids[:num_computed], self.block_size)
        for b, key in zip(table, keys):
            if b not in self.key_of:
                self.key_of[b] = key
                self.blocks_of.setdefault(key, []).append(b)

    def hit_blocks(self, token_ids: list[int] | None) -> list[int] | None:
        """The blocks a lookup of ``token_ids`` (a request's known tokens) would hit; ``None`` without token ids."""
        if token_ids is None:
            return None
        hits = []
        for key in block_keys(token_ids, self.block_size)[: (len(token_ids) - 1) // self.block_size]:
            blocks = self.blocks_of.get(key)
            if not blocks:
                break
            hits.append(blocks[0])
        return hits
