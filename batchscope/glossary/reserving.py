"""The glossary's terms of the engines that reserve KV memory when they admit a request: TGI's whole-lifetime
allocation and the two knobs that decide when it stalls running requests for a new prompt, TensorRT-LLM's in-flight
batching, its capacity policies, its pause and its max_num_tokens. Each is found in the ``four-engines`` traces by a
rule over their decision records (admissions with the blocks they were given, the head's limit, pauses, the router's
own call), never by a step number."""

from __future__ import annotations

from batchscope.glossary.term import Found, Term
from batchscope.steplog.decisions import decisions
from batchscope.steplog.view import TraceView

TGI_HOME = (("four-engines", "tgi"),)
TRTLLM_HOME = (("four-engines", "trtllm"),)
PAUSE_HOME = (("four-engines", "trtllm_max_utilization"),)
STALL_HOME = (("four-engines", "tgi_no_chunking"),)


def _first(view: TraceView, test) -> Found:
    for k in range(view.num_steps):
        if view.steps[k].get("idle"):
            continue
        what = test(k, decisions(view, k))
        if what:
            return view.steps[k]["step"], what
    return None


def lifetime(view: TraceView) -> Found:
    """The first TGI admission: the blocks of its whole lifetime."""
    if view.policy != "tgi":
        return None

    def test(k: int, d: dict) -> str | None:
        a = next((a for a in d.get("admissions", []) if "num_blocks" in a), None)
        return a and f"{a['request_id']} is given {a['num_blocks']} blocks at once"

    return _first(view, test)


def in_flight(view: TraceView) -> Found:
    """The first TensorRT-LLM step that starts a prompt beside running decodes."""
    if view.policy != "trtllm":
        return None

    def test(k: int, d: dict) -> str | None:
        st = view.steps[k]
        decoding = [s["request_id"] for s in st["scheduled"] if s["kind"] == "decode"]
        if not st["admitted"] or not decoding:
            return None
        return f"{st['admitted'][0]} starts while {', '.join(decoding)} decode"

    return _first(view, test)


def to_completion(view: TraceView) -> Found:
    """The first TensorRT-LLM step whose head waits for blocks to completion."""

    def test(k: int, d: dict) -> str | None:
        head = d.get("head", {})
        if head.get("limit") != "trtllm_kv_blocks_to_completion":
            return None
        return f"{head['request_id']} waits: its blocks to completion do not fit beside the others'"

    return _first(view, test)


def pause(view: TraceView) -> Found:
    def test(k: int, d: dict) -> str | None:
        p = next((p for p in d.get("preemptions", []) if p["rule"] == "trtllm_pause"), None)
        return p and f"{p['request_id']} is paused"

    return _first(view, test)


def min_size(view: TraceView) -> Found:
    """The first TGI step without chunking where the router computed a minimum size for a new batch."""

    def test(k: int, d: dict) -> str | None:
        call = d.get("scheduling_call", {})
        if view.policy != "tgi" or call.get("min_size") is None or not call.get("queue"):
            return None
        ratio, running = view.header["config"].get("waiting_served_ratio"), call["batch_size"]
        size = call["min_size"]
        rule = f"⌊{running} running × {ratio}⌋ = {size}"
        if size == 0:
            return f"{rule}: any new batch may stall the running one"
        return f"{rule}: {call['queue'][0]} may start only in a batch of at least {size}"

    return _first(view, test)


def waited_enough(view: TraceView) -> Found:
    """The first TGI step whose new batch stalls the running requests because they had waited max_waiting_tokens."""

    def test(k: int, d: dict) -> str | None:
        call, stalled = d.get("scheduling_call", {}), d.get("batch", {}).get("decodes_waiting")
        if view.policy != "tgi" or not stalled or call.get("min_size", 0) is not None:
            return None
        return (
            f"{', '.join(a['request_id'] for a in d.get('admissions', []))} is prefilled alone after "
            f"{call['waiting_tokens']} decode steps: {', '.join(stalled)} "
            f"{'waits' if len(stalled) == 1 else 'wait'} this step"
        )

    return _first(view, test)


def token_cap(view: TraceView) -> Found:
    """The first TensorRT-LLM step whose micro-batch stops at max_num_tokens."""

    def test(k: int, d: dict) -> str | None:
        head = d.get("head", {})
        if head.get("limit") != "trtllm_max_num_tokens":
            return None
        return f"{head['request_id']} may hold blocks but its chunk does not fit this forward's max_num_tokens"

    return _first(view, test)


RESERVING_TERMS = (
    Term(
        "lifetime_reservation",
        "Whole-lifetime reservation (TGI)",
        (
            "TGI's router gives a request, when it admits it, the blocks of its whole lifetime: its prompt plus "
            "max_tokens − 1 tokens, less what the prefix cache already holds. It never asks for another block and is "
            "never preempted; the price is memory held for tokens that may never come (an early EOS), so fewer "
            "requests run at once. The block map marks such blocks 'res' beside their owner until they are written."
        ),
        "blocks = ⌈(prompt + max_tokens − 1) / block_size⌉ − cached prefix blocks",
        lifetime,
        TGI_HOME,
    ),
    Term(
        "in_flight_batching",
        "In-flight batching (TensorRT-LLM)",
        (
            "NVIDIA's name for continuous batching: a new request's prompt runs in the same forward as the running "
            "requests' decodes, and a finished request's place is taken at the next step. TensorRT-LLM decides in two "
            "stages: a capacity scheduler picks who may hold KV memory, then a micro-batch scheduler picks who runs "
            "this forward under max_batch_size and max_num_tokens, decodes first, prompts in chunks."
        ),
        "forward tokens = decodes + prompt chunks ≤ max_num_tokens; requests ≤ max_batch_size",
        in_flight,
        TRTLLM_HOME,
    ),
    Term(
        "capacity_policy",
        "Capacity policies and reserve-to-completion (TensorRT-LLM)",
        (
            "GUARANTEED_NO_EVICT (the default) sets every running request's blocks to completion aside and admits the "
            "next only if its own fit the rest: the first that does not fit ends the walk, and nobody is ever "
            "evicted. MAX_UTILIZATION admits on the next step's blocks and pauses a request when they run out. "
            "STATIC_BATCH starts a new batch only when the old one has drained."
        ),
        "no-evict: admit if ⌈(prompt + max_tokens) / block⌉ − held ≤ free − Σ running (blocks to completion − held)",
        to_completion,
        TRTLLM_HOME,
    ),
    Term(
        "pause",
        "Pause (TensorRT-LLM)",
        (
            "Under MAX_UTILIZATION, when the pool cannot give the requests their next step's blocks, TensorRT-LLM "
            "pauses the last started request in its list: its K/V is dropped, its output so far is folded into its "
            "prompt, and when it resumes it computes all of it again. vLLM's counterpart is preemption by recompute, "
            "SGLang's retraction."
        ),
        "resumed prompt = prompt + generated; max_tokens left = max_tokens − generated",
        pause,
        PAUSE_HOME,
    ),
    Term(
        "waiting_served_ratio",
        "waiting_served_ratio (TGI)",
        (
            "Without prefill chunking TGI prefills a new batch alone, and every running request waits that step (a "
            "stall). So that a lone late request does not stall a big batch, the router asks for a new batch of at "
            "least ⌊running × waiting_served_ratio⌋ requests (its min_size; default ratio 0.3), unless the running "
            "batch has waited max_waiting_tokens steps. With chunking on, a new batch joins the running one instead "
            "and nothing stalls."
        ),
        "min_size = ⌊running requests × waiting_served_ratio⌋",
        min_size,
        STALL_HOME,
    ),
    Term(
        "max_waiting_tokens",
        "max_waiting_tokens (TGI)",
        (
            "The steps TGI's running batch decodes before the router drops min_size and prefills whatever waits, "
            "stalling the running requests for that step (default 20). The router counts one per decode forward "
            "since the last new batch: a small value admits sooner and stalls more often, a large one lets waiting "
            "requests' TTFT grow."
        ),
        "decode steps since the last new batch ≥ max_waiting_tokens → min_size dropped",
        waited_enough,
        STALL_HOME,
    ),
    Term(
        "max_num_tokens",
        "max_num_tokens (TensorRT-LLM)",
        (
            "The most tokens one TensorRT-LLM forward computes: decodes first, then prompt chunks in multiples of "
            "chunk_unit_size until the next would pass it. A request the capacity scheduler let hold blocks can still "
            "wait a step for room in the forward. vLLM's counterpart is max_num_batched_tokens."
        ),
        "decodes + Σ chunks ≤ max_num_tokens, chunks in multiples of chunk_unit_size",
        token_cap,
        PAUSE_HOME,
    ),
)
