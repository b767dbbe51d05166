"""The glossary's terms of SGLang's scheduler (radix cache, prefill first, admission by estimated output,
retraction, new-token ratio) and of the metrics an SGLang server exports, each found in a trace by a rule over its
decision records (``decisions.batch``, admissions with their reserved output, retractions), never by a step number."""

from __future__ import annotations

from batchscope.glossary.term import Found, Term
from batchscope.steplog.decisions import decisions
from batchscope.steplog.gauges import KV_USAGE, PREEMPTIONS, RUNNING, WAITING, gauges
from batchscope.steplog.metric_names import SGLANG, family
from batchscope.steplog.view import TraceView

HOME = (("vllm-vs-sglang", "sglang"),)


def _first(view: TraceView, test) -> Found:
    for k in range(view.num_steps):
        what = test(k, decisions(view, k))
        if what:
            return view.steps[k]["step"], what
    return None


def radix_hit(view: TraceView) -> Found:
    def test(k: int, d: dict) -> str | None:
        if "batch" not in d:
            return None
        hit = next((a for a in d.get("admissions", []) if a["num_prefix_hit_tokens"]), None)
        return hit and f"{hit['request_id']} finds {hit['num_prefix_hit_tokens']} tokens in the radix cache"

    return _first(view, test)


def prefill_first(view: TraceView) -> Found:
    def test(k: int, d: dict) -> str | None:
        waits = d.get("batch", {}).get("decodes_waiting", [])
        return waits and f"{', '.join(waits)} skip their decode while the prefill batch runs alone"

    return _first(view, test)


def reserved_output(view: TraceView) -> Found:
    def test(k: int, d: dict) -> str | None:
        head = d.get("head", {})
        if head.get("limit") != "sglang_reserved_output":
            return None
        return f"{head['request_id']} waits: it needs {head.get('need')} tokens, {head.get('left')} are left"

    return _first(view, test)


def retraction(view: TraceView) -> Found:
    def test(k: int, d: dict) -> str | None:
        p = next((p for p in d.get("preemptions", []) if p["rule"] == "sglang_retract"), None)
        return p and f"{p['request_id']} is retracted to the waiting queue"

    return _first(view, test)


def ratio_jump(view: TraceView) -> Found:
    """The first step whose new_token_ratio is above the step before's: the re-estimate after a retraction."""

    def test(k: int, d: dict) -> str | None:
        now, before = d.get("batch", {}).get("new_token_ratio"), k and decisions(view, k - 1).get("batch", {})
        was = before.get("new_token_ratio") if before else None
        if now is None or was is None or now <= was:
            return None
        return f"new_token_ratio goes from {was:.3f} to {now:.3f}"

    return _first(view, test)


def sglang_metrics(view: TraceView) -> Found:
    """The first retraction, read as SGLang's scheduler reports its metrics after the step
    (``batchscope.steplog.gauges_sglang``: the running batch, the waiting queue with the retracted request in it, token
    usage, the retraction counter); only in a trace of SGLang's family."""
    k = next((k for k, st in enumerate(view.steps) if st["preempted"]), None)
    if k is None or family(view.header) != "sglang":
        return None
    g = gauges(view)
    name = {key: SGLANG[key][0] for key in (RUNNING, WAITING, KV_USAGE, PREEMPTIONS)}
    return view.steps[k]["step"], (
        f"{view.steps[k]['preempted'][0]} is retracted; after this step {name[RUNNING]} = {g[RUNNING][k]}, "
        f"{name[WAITING]} = {g[WAITING][k]}, {name[KV_USAGE]} = {g[KV_USAGE][k]:.2f} and "
        f"{name[PREEMPTIONS]} = {g[PREEMPTIONS][k]}"
    )


SGLANG_TERMS = (
    Term(
        "radix_cache",
        "Radix cache (SGLang)",
        (
            "SGLang keeps the K/V of computed prompts in a tree keyed by their tokens. A new request walks the tree "
            "and reuses its longest cached prefix, token by token (page_size 1), not in whole blocks as vLLM's "
            "prefix caching does; running requests lock their path, and unlocked leaves are evicted least recently "
            "used first."
        ),
        "hit = longest common prefix with the cached tokens (at most known tokens − 1)",
        radix_hit,
        HOME,
    ),
    Term(
        "prefill_first",
        "Prefill first (SGLang)",
        (
            "When SGLang can form a prefill (EXTEND) batch, it runs alone and the running requests skip their decode "
            "for that step; otherwise one DECODE batch of every running request runs. vLLM instead computes prompt "
            "chunks and decodes in one forward under one token budget. The prefill batch has the step to itself, "
            "but running requests see a longer gap between two tokens, and a new prompt starts no sooner: vLLM "
            "starts it in the same step as the decodes (in every shipped scenario vLLM's mean TTFT is the lower, "
            "see Metrics)."
        ),
        "",
        prefill_first,
        HOME,
    ),
    Term(
        "reserved_output",
        "Admission by estimated output (SGLang)",
        (
            "SGLang admits a request only if the pool can hold the tokens it computes plus its whole output budget, "
            "beside what the running requests are expected to still write: their remaining output times the "
            "new-token ratio. vLLM admits as soon as the prompt fits, and preempts later if the pool runs out."
        ),
        "extend + min(max_tokens, 4096) + 1 < free + evictable − Σ running min(remaining, 4096) × new_token_ratio",
        reserved_output,
        HOME,
    ),
    Term(
        "retraction",
        "Retraction (SGLang)",
        (
            "When a decode batch no longer fits the pool, SGLang sends running requests back to the waiting queue, "
            "the one with the fewest output tokens first (then the longest prompt), until the rest fit. What the "
            "radix cache keeps of a retracted request's tokens it does not compute again when it returns. vLLM's "
            "counterpart is preemption by recompute."
        ),
        "retract while free tokens < 20 × requests kept (SGLang's retract_decode_steps)",
        retraction,
        HOME,
    ),
    Term(
        "new_token_ratio",
        "New-token ratio (SGLang)",
        (
            "The share of their remaining output that SGLang expects running requests to still write, used by "
            "admission. It starts at 0.7, falls a little at every decode step towards a floor (so admission grows "
            "bolder while nothing goes wrong), and after a retraction jumps back to what the kept requests really "
            "need."
        ),
        "0.7, − 0.7 × 0.86 / 600 per decode step, ≥ 0.098; after a retraction min(1, (decoded + 20 × kept) / "
        "(Σ max_tokens + 1))",
        ratio_jump,
        HOME,
    ),
    Term(
        "sglang_metrics",
        "SGLang's production metrics",
        (
            "What an SGLang server exports for Prometheus (the names of SGLang 0.5.23, "
            "sglang/srt/observability/metrics_collector.py), what each observes, and the figure Batchscope computes "
            "from a trace of SGLang's scheduler (the gauges under the Trace page's timeline). SGLang counts its "
            "pool in token slots, not blocks; token_usage counts cached tokens no running request holds as free; "
            "the hit rate is the last prefill batch's; and it reports at each prefill batch but only every 40th "
            "decode batch, so a dashboard sees fewer points than the trace has steps."
        ),
        "\n".join(f"{name}: {what} → {ours}" for name, what, ours in SGLANG.values()),
        sglang_metrics,
        HOME,
    ),
)
