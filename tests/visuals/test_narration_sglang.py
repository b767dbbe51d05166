"""The narration of SGLang traces against schedules worked by hand (fake runner, ``--batching sglang``, a pool of
token slots: block_size 1): its batch sentences (the decodes that wait behind a prefill batch or run inside it), what
an admission reserved (an ignore_eos request's output counted whole), a retraction with its rule and its comeback,
and the pool in token slots, not KV blocks."""

from __future__ import annotations

from fakes import make_request, run_fake

from batchscope.explain.narration import narrate
from batchscope.steplog.view import TraceView

ESTIMATE = "min(max_tokens, 4096) for a new request, each running one's remaining output × new_token_ratio 0.700"
FIXED = (
    "while it runs, SGLang counts its remaining output whole (ratio 1.0): it ignores EOS, so its length is fixed and "
    "gains nothing from the early-EOS estimate"
)


def _view(mixed: bool) -> TraceView:
    """A (3-token prompt, 2 tokens, ignore_eos) at step 0, B (4 tokens, 2) at step 1; a 20-slot pool, no cache."""
    reqs = [make_request("A", 3, 2, ignore_eos=True), make_request("B", 4, 2, arrival_step=1)]
    config = dict(batching="sglang", block_size=1, num_kv_blocks=20, max_num_seqs=2, max_num_batched_tokens=16)
    *_, records = run_fake(reqs, enable_prefix_caching=False, enable_mixed_chunk=mixed, **config)
    return TraceView(records)


def test_prefill_first_and_an_ignore_eos_admission():
    """Step 0: A's admission (the simulated fixed-length run: 20 - 4 - 2 > 1) reserves its 2 tokens; step 1: B's
    prefill runs alone (B: 4 + 2 + 1 < 20 - 3 - A's 1 left at ratio 1.0) while A waits; step 2: both decode, finish
    and give back their 3 + 1 and 4 + 1 slots."""
    view = _view(mixed=False)
    assert [narrate(view, k) for k in range(3)] == [
        "Step 0: A is admitted and prefills 3 tokens and samples its first token. SGLang's admission reserves 2 "
        f"output tokens for A (its estimate: {ESTIMATE}); {FIXED}. 3 of 16 budget tokens used; 3/20 token slots in "
        "use during the step.",
        "Step 1: B is admitted and prefills 4 tokens and samples its first token. The decode of A waits this step: "
        "SGLang runs a prefill batch alone when it can form one. SGLang's admission reserves 2 output tokens for B "
        f"(its estimate: {ESTIMATE}). 4 of 16 budget tokens used; 7/20 token slots in use during the step.",
        "Step 2: A and B decode 1 token each. A hit max_tokens and finished, releasing 4 token slots. B hit "
        "max_tokens and finished, releasing 5 token slots. 2 of 16 budget tokens used; 9/20 token slots in use "
        "during the step, 0 after the release.",
    ]


def test_a_mixed_decode():
    """With --enable-mixed-chunk A's last decode runs inside B's prefill batch at step 1 (1 + 4 chunk tokens), so A
    finishes there; B decodes alone at step 2."""
    view = _view(mixed=True)
    assert [narrate(view, k) for k in (1, 2)] == [
        "Step 1: A decodes 1 token; B is admitted and prefills 4 tokens and samples its first token. The decode of A "
        "runs inside the prefill batch: SGLang's --enable-mixed-chunk appends the running requests' decodes to it, "
        "one chunk token each. SGLang's admission reserves 2 output tokens for B (its estimate: "
        f"{ESTIMATE}). A hit max_tokens and finished, releasing 4 token slots. 5 of 16 budget tokens used; 8/20 "
        "token slots in use during the step, 4 after the release.",
        "Step 2: B decodes 1 token. B hit max_tokens and finished, releasing 5 token slots. 1 of 16 budget tokens "
        "used; 5/20 token slots in use during the step, 0 after the release.",
    ]


def test_a_retraction_with_its_rule_and_its_comeback():
    """A and B (2-token prompts, 40 tokens) at step 0, C (the same) at step 1, 3 rows, a 103-slot pool, no cache:
    from step 2 all three decode, 3 slots a step, and hold 3 x (s + 1) after step s; at step 34 one slot is free
    for 3 decodes. All have 33 tokens and 2-token prompts, so the keep order is the batch's (A, B, C) and C, last,
    is retracted with its 2 + 32 slots. The new ratio is 1.0 ((33 + 33 + 2 x 20) / 81, capped), so C's 35 known +
    7 left + 1 does not fit until A and B finish at step 40: C comes back at step 41 and recomputes them all."""
    reqs = [make_request("A", 2, 40), make_request("B", 2, 40), make_request("C", 2, 40, arrival_step=1)]
    config = dict(batching="sglang", block_size=1, num_kv_blocks=103, max_num_seqs=3, enable_prefix_caching=False)
    *_, records = run_fake(reqs, **config)
    view = TraceView(records)
    k = next(k for k, st in enumerate(view.steps) if st["preempted"])
    assert view.step_number(k) == 34
    assert (
        "C is retracted: the pool could not hold the decode batch (3 tokens needed, 1 free), so it goes back to the "
        "waiting queue (34 tokens of K/V); when it is admitted again at step 41, all 34 are recomputed. C was picked "
        "by SGLang's retraction order: the fewest output tokens, then the longest prompt." in narrate(view, k)
    )
