"""Speculative decoding with n-gram drafts (prompt lookup), as vLLM configures it with ``method: "ngram"``.

After a step in which a request sampled, the proposer looks for the longest n-gram (``prompt_lookup_min`` <= n <=
``prompt_lookup_max``) that ends the request's tokens and also occurs earlier in them (prompt and output), at its
earliest place, and proposes the up to ``num_speculative_tokens`` tokens that followed it there::

    tokens:  the cat sat on the mat . the cat ?       suffix "the cat" (n = 2) occurs at 0
    drafts:                                 sat on    the 2 tokens after that occurrence (k = 2)

The next step schedules the request with ``1 + len(drafts)`` tokens (its last sampled token and the drafts), under
the token budget like any other tokens; one forward computes logits at all of them, and verification keeps the
drafts the model itself would have produced (``verify``); the first token the model disagrees with is replaced by
the model's own token, and when every draft is kept the model's next token comes free (the "bonus" token). So a
step yields 1 to ``1 + len(drafts)`` tokens, and greedy outputs are exactly those of decoding one token at a time.
The K/V written for rejected positions is rolled back (``num_computed_tokens`` steps back; the blocks stay).

Sources: vLLM 0.33 ``vllm/v1/spec_decode/ngram_proposer.py`` (``_find_longest_matched_ngram_and_propose_tokens``:
longest match, earliest position, drafts capped by the end of the tokens and by ``max_model_len``) and
``vllm/v1/sample/rejection_sampler.py`` (with no draft probabilities a draft ``d`` is accepted with the target's
probability ``p(d)``, greedy: iff it is the argmax; a rejected position draws from ``p`` with ``d`` removed). The
proposer is checked against vLLM's own function in ``tests_vllm``.
"""

from __future__ import annotations

import torch

from engine.config import EngineConfig
from engine.request import SamplingParams
from engine.sampler import probabilities, sample, sample_excluding

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


def verify(
    logits: torch.Tensor, drafts: list[int], params: SamplingParams, generator: torch.Generator | None
) -> list[int]:
    """The tokens one step yields for a request scheduled with ``drafts``: the accepted drafts, then the model's own
    token at the first rejected position (or the bonus token after the last draft).

    Args:
        logits: ``[len(drafts) + 1, vocab_size]``, row ``i`` the logits after the request's token ``i`` of the step
            (row 0: after its last sampled token).
        drafts: the draft token ids scheduled (``PLACEHOLDER`` slots are always rejected).
        params: the request's sampling settings; greedy accepts a draft iff it is the argmax, sampled accepts it
            with the probability the request's own sampling gives it (``engine.sampler.probabilities``).
        generator: the request's generator (sampled requests only).
    Returns:
        ``num_accepted + 1`` token ids, ``num_accepted = len(result) - 1``.
    """
    out: list[int] = []
    for i, draft in enumerate(drafts):
        if params.temperature == 0.0:
            token = int(logits[i].argmax())
            out.append(token)
            if token != draft:
                return out
            continue
        probs = probabilities(logits[i], params)
        if draft != PLACEHOLDER and float(torch.rand(1, generator=generator)) < float(probs[draft]):
            out.append(draft)
            continue
        out.append(sample_excluding(probs, draft, generator))
        return out
    out += sample(logits[len(drafts) :], [params], [generator])
    return out
