"""Speculative decoding with n-gram drafts (prompt lookup), as vLLM configures it with ``method: "ngram"``.

After a step in which a request sampled, ``batchscope.engine.ngram_proposer`` proposes the up to
``num_speculative_tokens`` tokens that followed the earliest earlier occurrence of the longest n-gram ending its tokens.
The next step schedules the request with ``1 + len(drafts)`` tokens (its last sampled token and the drafts), under the
token budget like any other tokens; one forward computes logits at all of them, and verification keeps the drafts the
model itself would have produced (``verify``); the first token the model disagrees with is replaced by the model's
own token, and when every draft is kept the model's next token comes free (the "bonus" token). So a step yields 1 to
``1 + len(drafts)`` tokens, and greedy outputs are exactly those of decoding one token at a time. The K/V written
for rejected positions is rolled back (``num_computed_tokens`` steps back; the blocks stay).

Source: vLLM 0.33 ``vllm/v1/sample/rejection_sampler.py`` (with no draft probabilities a draft ``d`` is accepted
with the target's probability ``p(d)``, greedy: iff it is the argmax; a rejected position draws from ``p`` with
``d`` removed).
"""

from __future__ import annotations

import torch

from batchscope.engine.ngram_proposer import PLACEHOLDER
from batchscope.engine.request import SamplingParams
from batchscope.model.sampler import probabilities, sample, sample_excluding


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
            with the probability the request's own sampling gives it (``batchscope.model.sampler.probabilities``).
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
