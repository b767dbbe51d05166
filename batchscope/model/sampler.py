"""Per-request sampling from the logits of one step.

Each row follows its own request's settings, so a greedy request batched next to a sampled one is still greedy,
and a sampled request draws from its own ``torch.Generator`` (seeded by ``SamplingParams.seed``). Its tokens
therefore do not depend on who else shares the step, nor on preemption (recompute never re-samples).

Order of operations, as in transformers' logits processors: temperature, top-k, top-p (the most likely token is
always kept, so ``top_p = 0`` degenerates to greedy instead of an empty set), then a multinomial draw.
"""

from __future__ import annotations

import torch

from batchscope.engine.request import SamplingParams


def make_generator(seed: int) -> torch.Generator:
    """CPU generator for one request (draws happen on CPU so results match across devices)."""
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    return g


def sample(logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator | None]) -> list[int]:
    """Pick one token per row.

    Args:
        logits: ``[num_rows, vocab_size]``, any float dtype (computed in float32).
        params: one ``SamplingParams`` per row.
        generators: one generator per row (``None`` allowed for greedy rows).
    Returns:
        token ids, one per row.
    """
    logits = logits.float()
    greedy = logits.argmax(dim=-1).tolist()
    tokens = []
    for row, (p, g) in enumerate(zip(params, generators)):
        if p.temperature == 0.0:
            tokens.append(greedy[row])
            continue
        tokens.append(_sample_row(logits[row].cpu(), p, g))
    return tokens


def probabilities(logits: torch.Tensor, p: SamplingParams) -> torch.Tensor:
    """The distribution a sampled request draws from: ``logits`` ``[vocab_size]`` after temperature, top-k and top-p,
    softmaxed (float32, on CPU)."""
    logits = logits.float().cpu() / p.temperature
    if p.top_k > 0 and p.top_k < logits.numel():
        kth = torch.topk(logits, p.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if p.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) >= p.top_p  # mass before this token already reaches top_p
        drop[0] = False  # always keep the most likely token
        logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    return logits.softmax(-1)


def sample_excluding(probs: torch.Tensor, token: int, generator: torch.Generator | None) -> int:
    """A draw from ``probs`` ``[vocab_size]`` with ``token`` removed (renormalized): the token a speculative step
    yields where it rejects the draft ``token`` (``batchscope.engine.spec_decode.verify``). ``token < 0`` removes
    nothing."""
    if token >= 0 and float(probs[token]) < 1.0:
        probs = probs.clone()
        probs[token] = 0.0
    return int(torch.multinomial(probs, 1, generator=generator).item())


def _sample_row(logits: torch.Tensor, p: SamplingParams, generator: torch.Generator | None) -> int:
    return int(torch.multinomial(probabilities(logits, p), 1, generator=generator).item())
