"""Draft proposals for speculative decoding with n-gram drafts (prompt lookup), as vLLM configures it with
``method: "ngram"``: which tokens a running request proposes before its next step (``batchscope.engine.spec_decode``
verifies them after the forward pass).

The proposer looks for the longest n-gram (``prompt_lookup_min`` <= n <= ``prompt_lookup_max``) that ends the
request's tokens and also occurs earlier in them (prompt and output), at its earliest place, and proposes the up to
``num_speculative_tokens`` tokens that followed it there::

    tokens:  the cat sat on the mat . the cat ?       suffix "the cat" (n = 2) occurs at 0
    drafts:                                 sat on    the 2 tokens after that occurrence (k = 2)

No tensor here: the scheduler, which decides who runs with how many tokens, imports it without PyTorch.

Source: vLLM 0.33 ``vllm/v1/spec_decode/ngram_proposer.py`` (``_find_longest_matched_ngram_and_propose_tokens``:
longest match, earliest position, drafts capped by the end of the tokens and by ``max_model_len``); checked against
vLLM's own function in ``tests_vllm``.
"""

from __future__ import annotations

from batchscope.engine.config import EngineConfig

PLACEHOLDER = -1  # a draft slot with no draft (vLLM pads an admitted one-token decode with these): always rejected


class NgramProposer:
    """The drafts of one engine (``num_speculative_tokens`` = ``k`` at most, n-grams of ``min_n`` to ``max_n``)."""

    def __init__(self, k: int, min_n: int, max_n: int):
        self.k, self.min_n, self.max_n = k, min_n, max_n

    @classmethod
    def from_config(cls, config: EngineConfig) -> NgramProposer | None:
        """The proposer of ``config``, or None when speculative decoding is off."""
        if not config.num_speculative_tokens:
            return None
        return cls(config.num_speculative_tokens, config.prompt_lookup_min, config.prompt_lookup_max)

    def propose(self, tokens: list[int], max_model_len: int | None = None) -> list[int]:
        """``propose_ngram`` with this proposer's settings."""
        return propose_ngram(tokens, self.min_n, self.max_n, self.k, max_model_len)


def propose_ngram(tokens: list[int], min_n: int, max_n: int, k: int, max_model_len: int | None = None) -> list[int]:
    """The drafts for a request whose known tokens are ``tokens`` (prompt + output): the up to ``k`` tokens that
    follow the earliest earlier occurrence of the longest suffix n-gram, ``min_n <= n <= max_n``; ``[]`` if none
    (or when ``max_model_len`` leaves no room). The occurrence may overlap the suffix but not be the suffix itself.
    Cost: O(max_n * len(tokens)) comparisons per call."""
    total = len(tokens)
    if max_model_len is not None:
        k = min(k, max_model_len - total)
    if total < min_n or k <= 0:
        return []
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        suffix = tokens[total - n :]
        for start in range(total - n):  # earliest first; start + n <= total - 1: at least one token follows
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + k]
    return []
