"""The glossary's terms: a few sentences of our own each, the formula where there is one, and the rule that finds
where the term happens in a trace (``glossary_finders``). ``home``: the traces searched first. The memory and
serving terms (KV bytes, fragmentation, memory-bound decode, GQA, head-of-line blocking, vLLM's metric names) are
listed in ``glossary_serving`` and come last, after SGLang's scheduler's (``glossary_sglang``)."""

from __future__ import annotations

from batchscope.glossary import finders as gf
from batchscope.glossary.reserving import RESERVING_TERMS
from batchscope.glossary.serving import SERVING_TERMS
from batchscope.glossary.sglang import SGLANG_TERMS
from batchscope.glossary.term import Key, Term

__all__ = ["TERMS", "Key", "Term"]

SIXTEEN_C, SIXTEEN_S = ("sixteen", "continuous"), ("sixteen", "static")
TERMS = (
    Term(
        "request",
        "Request",
        (
            "A prompt plus how to continue it: the maximum number of output tokens and the sampling settings. It "
            "waits in a queue until the scheduler admits it, then holds a batch row and KV blocks until it "
            "finishes."
        ),
        "",
        gf.request,
    ),
    Term(
        "prefill",
        "Prefill",
        (
            "Computing the K/V of a request's prompt tokens. All of them go through the model in one forward "
            "pass, in parallel, and the last one yields the first output token."
        ),
        "",
        gf.prefill,
    ),
    Term(
        "decode",
        "Decode",
        (
            "After prefill, each step computes one token per request: the one it sampled last. Decodes are cheap "
            "in compute and bound by reading the weights, which is why batching many of them pays."
        ),
        "",
        gf.decode,
    ),
    Term(
        "chunked_prefill",
        "Chunked prefill",
        (
            "A long prompt is split across steps, so that it never takes the whole token budget and running "
            "requests keep decoding next to it. A chunk that stops before the end of the prompt samples nothing."
        ),
        "chunk = min(tokens the request lacks, budget left)",
        gf.chunked_prefill,
    ),
    Term(
        "token_budget",
        "Token budget (max_num_batched_tokens)",
        ("The most tokens one step may compute, prefill chunks and decodes together. It bounds how long a step takes."),
        "Σ num_tokens of the step ≤ max_num_batched_tokens",
        gf.token_budget,
    ),
    Term(
        "max_num_seqs",
        "max_num_seqs",
        (
            "The most requests in the batch at once (rows of the batch). When every row is busy, the head of the "
            "queue waits however much budget and memory is left."
        ),
        "len(running) ≤ max_num_seqs",
        gf.max_num_seqs,
    ),
    Term(
        "kv_block",
        "KV block",
        (
            "The KV cache is a pool of fixed-size blocks of block_size token slots. A request gets blocks as its "
            "tokens are computed, one more each time it crosses a block boundary, not its worst case up front."
        ),
        "blocks held = ⌈tokens with K/V / block_size⌉",
        gf.kv_block,
    ),
    Term(
        "block_table",
        "Block table",
        (
            "The list of pool blocks a request owns, in token order. The blocks can be anywhere in the pool, so "
            "memory never needs to be contiguous and frees up block by block."
        ),
        "",
        gf.block_table,
    ),
    Term(
        "slot_mapping",
        "Slot mapping",
        (
            "Where one token's K/V lives in the pool: the block table turns a token position into a slot, which "
            "attention writes to and reads back from."
        ),
        "slot = table[pos // block_size] × block_size + pos % block_size",
        gf.slot_mapping,
    ),
    Term(
        "batching",
        "Continuous vs static batching",
        (
            "Static batching forms a batch, runs it until its slowest member ends, then forms the next. "
            "Continuous batching re-decides the batch every step, so a finished request's row and blocks go to a "
            "waiting request at the very next step."
        ),
        "",
        gf.request,
    ),
    Term(
        "padding",
        "Padding",
        (
            "In a static batch a member that has finished keeps its row until the batch ends. The row is computed"
            " for nothing; the trace counts it as a padding slot-step."
        ),
        "padding slot-steps = Σ over steps of finished rows still in the batch",
        gf.padding,
        (SIXTEEN_S,),
    ),
    Term(
        "preemption",
        "Preemption (recompute vs swap)",
        (
            "When a running request needs a block and none is free, the waiting queue's victim rule picks a running"
            " request (FCFS: the most recently admitted; priority: the lowest priority) to give back all its blocks."
            " vLLM V1 and Batchscope compute its tokens again when it is admitted again, minus what it then finds in"
            " the prefix cache; the older alternative, swapping K/V out to CPU memory and back, is not used."
        ),
        "K/V dropped = prefix-cache hit on return + recomputed (+ tokens of a later preemption)",
        gf.preemption,
        (("preemption", "continuous"),),
    ),
    Term(
        "prefix_caching",
        "Prefix caching",
        (
            "Full KV blocks are kept by a hash of their tokens (chained with the blocks before them), so a "
            "request whose prompt starts like an earlier one reuses those blocks and prefills only the rest. At "
            "least one prompt token is always computed, to sample from."
        ),
        "hit rate = hit tokens / queried prompt tokens",
        gf.prefix_caching,
        (("shared-prefix", "continuous"),),
    ),
    Term(
        "ttft",
        "TTFT (time to first token)",
        "How long a user waits before anything appears: queueing plus the prefill.",
        "TTFT = first token − arrival",
        gf.latency("ttft"),
    ),
    Term(
        "tpot",
        "TPOT (time per output token)",
        "The average pace of a request after its first token. Defined only with at least two output tokens.",
        "TPOT = (E2E − TTFT) / (output tokens − 1)",
        gf.latency("tpot"),
    ),
    Term(
        "itl",
        "ITL (inter-token latency)",
        (
            "Every gap between two consecutive output tokens of a request. Their mean is the TPOT; a preemption "
            "shows up as one long gap."
        ),
        "ITLᵢ = tᵢ₊₁ − tᵢ",
        gf.latency("itl"),
    ),
    Term(
        "e2e",
        "E2E latency",
        "From arrival to the last token: what a user waits for the whole answer.",
        "E2E = last token − arrival",
        gf.latency("e2e"),
    ),
    Term(
        "throughput",
        "Throughput",
        (
            "Work done per unit of time by the whole server: output tokens (or finished requests) per second, or "
            "per step on the step clock."
        ),
        "throughput = output tokens / duration",
        gf.throughput,
        (SIXTEEN_C,),
    ),
    Term(
        "goodput",
        "Goodput",
        (
            f"Throughput that counts only requests meeting a service-level objective (here, as an example: TTFT ≤ "
            f"{gf.SLO_TTFT_STEPS} steps and TPOT ≤ {gf.SLO_TPOT_STEPS} steps). A server can raise throughput while"
            f" goodput falls."
        ),
        "goodput = requests within the SLO / duration",
        gf.goodput,
        (SIXTEEN_C,),
    ),
    *SGLANG_TERMS,  # SGLang's scheduler: radix cache, prefill first, estimated output, retraction, the ratio
    *RESERVING_TERMS,  # TGI's and TensorRT-LLM's: whole-lifetime reservation, in-flight batching, policies, pause
    *SERVING_TERMS,  # the memory and serving terms: KV bytes, fragmentation, memory-bound decode, GQA, ...
)
