"""The Walkthrough's stories: a shipped scenario told one step at a time, with the batching modes it is shown under
(the first is the default) and what to watch. Data only: the page (``batchscope.app.page_walkthrough``) plays the
scenario's recorded traces, its tour (``batchscope.explain.moments``) and narration come from the step log."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Story:
    scenario: str
    title: str
    intro: str  # Markdown
    policies: tuple[str, ...]  # batching modes it is told under, the default first
    names: tuple[str, ...]  # how the page's toggle names them


CONTINUOUS = Story(
    "seed-abcd",
    "Continuous batching: four requests, three slots",
    """
An LLM server keeps a **queue** of requests and, before every model step, builds the next batch under two
limits: a **token budget** (`max_num_batched_tokens`) and the free **KV-cache blocks**. A new request first
**prefills** (all its prompt tokens in parallel, possibly split into chunks), then **decodes** one token per step.
With **continuous batching**, a request that finishes leaves at once and a waiting one takes its slot at the very
next step. Four requests, A to D, on three slots; press Play or step through. Everything below is read from the step
log of a real run.
""",
    ("continuous", "static"),
    ("continuous", "static"),
)

SCHEDULERS = Story(
    "vllm-vs-sglang",
    "Two schedulers: SGLang's and vLLM's on the same four requests",
    """
The same requests and limits under **SGLang's** scheduler and **vLLM's**. Watch for four differences, each read
from the step log: **prefill first** (SGLang runs C's prefill alone at step 3 and A and B skip their decode; vLLM
computes all three in one forward); **token-granular prefix hits** (B finds 31 cached tokens in SGLang's radix
cache, 24 in vLLM's whole 8-token blocks); **admission by estimated output** (SGLang keeps D waiting because the
pool cannot hold its prompt plus its whole output budget beside what the running requests are expected to still
write; vLLM admits D as soon as its prompt fits and later preempts it); and **retraction** (when the decode batch
outgrows the pool, SGLang sends C, the request with the fewest output tokens, back to the queue; it returns finding
its whole prompt in the radix cache). Switch between the two to compare, or see both side by side on Compare runs.
""",
    ("sglang", "continuous"),
    ("SGLang", "vLLM (continuous)"),
)

RESERVING = Story(
    "four-engines",
    "How much to reserve: four engines, one tight pool",
    """
When an engine admits a request it must decide how much KV cache to set aside for tokens not yet written, and it
pays when the guess is wrong. The same four requests, one pool of 27 blocks of 8 tokens, each engine's own rule:
**vLLM** reserves only the next step's tokens and **preempts** when blocks run out; TensorRT-LLM's
**MAX_UTILIZATION** does the same and **pauses** the last started request; **SGLang** reserves an **estimate** of
the output to come and **retracts** when it was too low; TensorRT-LLM's default **GUARANTEED_NO_EVICT** admits only
if the blocks **to completion** fit, and **TGI** allocates the **whole lifetime** at admission (the block map's
*res*): neither ever evicts, and the head waits longer. Without prefill chunking TGI also **stalls** the running
requests while it prefills a new one. Watch TTFT against the tokens computed again; all four side by side on
[Compare runs](/compare?scenario=four-engines&pair=engines).
""",
    ("continuous", "trtllm_max_utilization", "sglang", "trtllm", "tgi", "tgi_no_chunking"),
    ("vLLM", "TensorRT-LLM max util.", "SGLang", "TensorRT-LLM no evict", "TGI", "TGI no chunking"),
)

STORIES = {s.scenario: s for s in (CONTINUOUS, SCHEDULERS, RESERVING)}

# The two runs a scenario is compared as by default (Compare runs, the course site): static vs continuous batching,
# but vLLM's scheduler vs SGLang's for the scenario made to show them apart.
DEFAULT_PAIRS = {
    "vllm-vs-sglang": ("continuous", "sglang"),
    "four-engines": ("continuous", "sglang"),
    "spec-decode": ("continuous", "speculative"),  # the scenario is about drafts: with and without them
}


def default_pair(scenario: str) -> tuple[str, str]:
    return DEFAULT_PAIRS.get(scenario, ("static", "continuous"))


def default_runs(pair: tuple[str, ...], recorded: tuple[str, ...], count: int) -> list[str]:
    """The ``count`` runs (2 to 4) a scenario is compared as by default: ``pair``, then its other ``recorded`` runs,
    each engine's own scheduler before a variant of one of its settings (``tgi`` before ``tgi_no_chunking``, ``trtllm``
    before ``trtllm_max_utilization``) and static batching last, then the pair's again (four sides of a scenario with
    three runs). For four-engines: vLLM, SGLang, TGI and TensorRT-LLM."""
    rest = sorted((p for p in recorded if p not in pair), key=lambda p: (p == "static", "_" in p))
    return ([*pair, *rest] + list(pair) * count)[:count]
