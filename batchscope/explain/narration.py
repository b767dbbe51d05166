"""One or two sentences per step, generated from the step log (no per-scenario text).

Example: "Step 3: B and A decode 1 token each; D is admitted with a 7-token prefill. B hit max_tokens and
released 1 KV block. 9 of 32 budget tokens used; 11/32 KV blocks in use."

The teaching moments called out beside it are ``batchscope.explain.beats``.
"""

from __future__ import annotations

from batchscope.explain import narration_reserve, narration_sglang
from batchscope.explain.checklist import binding_reason
from batchscope.explain.narration_cache import eviction
from batchscope.explain.narration_finish import comeback_clause, ending_sentences, handed_on_sentence
from batchscope.explain.narration_spec import draft_phrase
from batchscope.explain.words import article, join, plural
from batchscope.facts.blocks import freed_blocks, held_after
from batchscope.facts.vocabulary import eviction as engine_words
from batchscope.steplog.decisions import decisions, kv_high_before, resumption
from batchscope.steplog.reasons import VICTIM_RULES, cache_name, pool_unit, queue_order
from batchscope.steplog.records import AdmissionRecord, PreemptionRecord, ScheduledRecord
from batchscope.steplog.spec_decode import num_drafts
from batchscope.steplog.view import TraceView

MAX_NAMED = 8  # longer lists name the first few and count the rest (a server runs hundreds of requests)


def _join(items: list[str]) -> str:
    return join(items, MAX_NAMED)


def narrate(view: TraceView, step: int) -> str:
    """The narration of ``step`` (plain text, a few sentences), from the step's record and its decisions
    (``batchscope.steplog.decisions``: recorded by the scheduler, or inferred from the log for traces without them)."""
    st = view.steps[step]
    cfg = view.header["config"]
    parts = _work(view, step)
    number = st["step"]
    if st.get("idle"):
        n = st.get("idle_steps", 1)
        which = f"Step {number}" if n == 1 else f"Steps {number}–{number + n - 1}"
        return f"{which}: idle. Nothing to run until the next request arrives; no model forward."
    sentences = [f"Step {number}: " + ("; ".join(parts) if parts else "nothing is scheduled") + "."]
    sentences += _events(view, step)
    if st["waiting"]:
        why = binding_reason(view, step)
        sentences.append(f"Waiting: {_join(st['waiting'])}." + (f" {why}." if why else ""))
    kv = st["kv"]
    released = len(
        {b for blocks in freed_blocks(view, step)["finished"].values() for b in blocks} - held_after(view, step)
    )
    after = f", {kv['num_used_blocks'] - released} after the release" if released else ""
    sentences.append(
        f"{st['num_batched_tokens']} of {cfg['max_num_batched_tokens']} budget tokens used; "
        f"{kv['num_used_blocks']}/{kv['num_blocks']} {pool_unit(view.header)}s in use during the step{after}."
    )
    return _short_ids(view, " ".join(sentences))


def _short_ids(view: TraceView, text: str) -> str:
    """Long request ids (a server's UUIDs) replaced by their display labels."""
    if all(view.label(r) == r for r in view.request_ids):
        return text
    for rid in sorted(view.request_ids, key=len, reverse=True):
        if rid in text:
            text = text.replace(rid, view.label(rid))
    return text


def _work(view: TraceView, step: int) -> list[str]:
    """One phrase per kind of work in ``step``: the decodes together, then each prefill chunk or recompute."""
    st = view.steps[step]
    admissions = {a["request_id"]: a for a in decisions(view, step).get("admissions", [])}
    parts = []
    plain = [s for s in st["scheduled"] if s["kind"] == "decode" and not num_drafts(s)]
    decodes = [s["request_id"] for s in plain if s["num_tokens"] == 1]
    if decodes:
        parts.append(
            f"{_join(decodes)} decode{'s' if len(decodes) == 1 else ''} 1 token" + (" each" if len(decodes) > 1 else "")
        )
    parts += [  # a server's speculative decode whose trace names no drafts: what it scheduled, no more
        f"{s['request_id']} decodes {s['num_tokens']} tokens (its next token and {s['num_tokens'] - 1} speculative "
        f"positions the trace does not name){_samples(view, step, s['request_id'])}"
        for s in plain
        if s["num_tokens"] > 1
    ]
    parts += [draft_phrase(view, step, s) for s in st["scheduled"] if num_drafts(s) and s["kind"] == "decode"]
    for s in st["scheduled"]:
        if s["kind"] != "prefill":
            continue
        rid = s["request_id"]
        if rid in admissions:
            parts.append(_admitted(view, step, s, admissions[rid]))
        elif s.get("recompute") or kv_high_before(view, step, rid):
            parts.append(_resumed_chunk(view, step, s))
        else:
            parts.append(f"{rid} prefills {_span(view, step, s)}{_samples(view, step, rid)}")
    return parts


def _samples(view: TraceView, step: int, rid: str) -> str:
    """`` and samples its first token`` / ``... its next token`` when ``rid`` samples in ``step``."""
    if not any(x["request_id"] == rid for x in view.steps[step]["sampled"]):
        return ""
    return " and samples its " + ("first" if view.num_sampled_before(rid, step) == 0 else "next") + " token"


def _span(view: TraceView, step: int, s: ScheduledRecord) -> str:
    """``a 17-token chunk (54→71 of 71 prompt tokens)`` or ``7 tokens`` (the whole prompt in one go)."""
    st, budget = view.steps[step], view.header["config"]["max_num_batched_tokens"]
    rid, n, c = s["request_id"], s["num_tokens"], s["num_computed_tokens"]
    plen = view.request_info[rid]["num_prompt_tokens"] if rid in view.request_info else c + n
    if c == 0 and c + n >= plen:
        return f"{n} tokens"
    last = s is st["scheduled"][-1] and st["num_batched_tokens"] == budget and c + n < plen
    rest = ": all the budget left" if last else ""
    return f"{article(n)} {n}-token chunk ({c}→{c + n} of {plen} prompt tokens{rest})"


def _admitted(view: TraceView, step: int, s: ScheduledRecord, a: AdmissionRecord) -> str:
    """An admission, with how its known tokens get their K/V (the admission record)."""
    rid, n = s["request_id"], s["num_tokens"]
    hit, redo, new = a["num_prefix_hit_tokens"], a["num_recompute_tokens"], a["num_new_tokens"]
    known = hit + redo + new
    samples = _samples(view, step, rid)
    if a["resumed"]:
        found = f"{hit} of its {known} known tokens are in the {cache_name(view.header)}, so it" if hit else "it"
        if redo:
            plan = f"recomputes {plural(redo, 'token')} whose K/V the {engine_words(view.header).noun} dropped"
            plan += f", plus {new} that never had K/V" if new else ""
        else:
            plan = f"computes {plural(new, 'token')} that never had K/V"
        now = (
            ""
            if n == redo + new
            else f"; this step computes {n} of them ({s['num_computed_tokens']}→{s['num_computed_tokens'] + n})"
        )
        again = f"{rid} is admitted again after its {engine_words(view.header).noun}"
        return f"{again}: {found} {plan}{now}{',' if samples else ''}{samples}"
    if hit:
        plen = view.request_info[rid]["num_prompt_tokens"] if rid in view.request_info else known
        rest = "the other" if n == new else "the next"
        return (
            f"{rid} is admitted: it found {hit} of its {plen} prompt tokens in the prefix cache (shared "
            f"{pool_unit(view.header)}s, "
            f"not computed again) and prefills {rest} {n}{samples}"
        )
    if narration_sglang.stand_in(view, step, rid):
        return f"{rid} is admitted with the one-token prompt SGLang put in place of its refused one{samples}"
    return f"{rid} is admitted and prefills {_span(view, step, s)}{samples}"


def _resumed_chunk(view: TraceView, step: int, s: ScheduledRecord) -> str:
    """A later chunk of a resumed request, counted against its comeback's admission record (``resumption``): the
    tokens past its prefix-cache hit that the admission said it recomputes (the K/V the preemption dropped and the
    cache did not hold), then those that never had K/V. A trace without that record: below the request's
    high-water mark it recomputes, above it computes for the first time."""
    rid, n, c = s["request_id"], s["num_tokens"], s["num_computed_tokens"]
    back = resumption(view, step, rid)
    if back is None:
        high = kv_high_before(view, step, rid)
        redo = max(0, min(c + n, high) - c)
        done, left, of = 0, 0, f"the {high} whose K/V the {engine_words(view.header).noun} dropped"
    else:
        hit, total = back["num_prefix_hit_tokens"], back["num_recompute_tokens"]
        redo = max(0, min(c + n, hit + total) - max(c, hit))
        done = max(0, min(c, hit + total) - hit)
        left = total - done - redo
        of = (
            f"the {total} dropped tokens the {cache_name(view.header)} did not hold"
            if hit
            else f"the {total} tokens whose K/V the {engine_words(view.header).noun} dropped"
        )
    if not done:
        part = f"{plural(redo, 'token')} of {of}"
    else:
        part = f"{redo} more of {of}" if left else f"the last {redo} of {of}"
    what = _join(
        ([f"recomputes {part}" + (f" ({left} still to recompute)" if left else "")] if redo else [])
        + ([f"computes {plural(n - redo, 'token')} for the first time"] if n - redo else [])
    )
    chunk = f"{article(n)} {n}-token chunk ({c}→{c + n})"
    noun = engine_words(view.header).noun
    return f"{rid} continues after its {noun}: {chunk} that {what}{_samples(view, step, rid)}"


def _events(view: TraceView, step: int) -> list[str]:
    """Sentences for the step's preemptions, finishes and padding rows."""
    st = view.steps[step]
    recorded = decisions(view, step).get("preemptions", [])
    unit = pool_unit(view.header)
    sentences = narration_sglang.batch_sentences(view, step) + narration_reserve.batch_sentences(view, step)
    sentences += [
        narration_sglang.retraction(view, step, p)
        or narration_reserve.pause(view, step, p)
        or _preemption(view, step, p)
        for p in recorded
    ]
    explained = {p["request_id"] for p in recorded}
    sentences += [  # a server's engine may preempt outside the scheduler's step (e.g. resetting the prefix cache)
        f"{rid} was {engine_words(view.header).past} outside the scheduler's decisions: its {unit}s were given back."
        for rid in st["preempted"]
        if rid not in explained
    ]
    sentences += eviction(view, step)
    fresh = [a["request_id"] for a in decisions(view, step).get("admissions", []) if not a["resumed"]]
    together = _arrived_together(view, fresh) if queue_order(view.header) == "arrival" else []
    if together:
        sentences.append(
            f"{_join(together)} arrived together, so they are admitted in arrival order, ties in the order of the "
            f"workload file."
        )
    caching = view.header["config"].get("enable_prefix_caching")
    if caching and "num_reserved_blocks" in st["kv"] and _share_a_block(view, st["admitted"]):  # a static batch
        sentences.append(
            "The static batch is formed before any member computes, so its members find in the prefix cache only "
            "blocks that earlier requests left there, never each other's (continuous batching admits a request "
            "after the blocks computed earlier in the same step are cached)."
        )
    sentences += ending_sentences(view, step)
    if st["padding_slots"]:
        pads = [p["request_id"] for p in st["padding_slots"]]
        sentences.append(
            f"Static batch: {_join(pads)} {'is' if len(pads) == 1 else 'are'} done but still "
            f"{'occupies a row' if len(pads) == 1 else 'occupy rows'} as padding."
        )
    return sentences


def _share_a_block(view: TraceView, ids: list[str]) -> bool:
    """Whether two of ``ids`` start with the same full KV block of prompt tokens (they could share cached K/V);
    False where the trace records no prompt token ids."""
    bs = view.header["config"]["block_size"]
    prompts = [view.request_info[r].get("prompt_token_ids") or [] if r in view.request_info else [] for r in ids]
    firsts = [tuple(p[:bs]) for p in prompts if len(p) >= bs]
    return len(set(firsts)) < len(firsts)


def _preemption(view: TraceView, step: int, p: PreemptionRecord) -> str:
    """One preemption: who needed a block, the victim rule, the K/V dropped, and what its comeback will cost."""
    victim, rule = p["request_id"], VICTIM_RULES.get(p["rule"], p["rule"])
    requester = p.get("requester")
    if requester is None:
        cause = "a running request needed a KV block and none was free"
    else:
        free = p.get("free", 0)
        room = "none was free" if free == 0 else f"only {free} {'was' if free == 1 else 'were'} free"
        need = f"{plural(p['need'], 'more KV block')} and {room}" if "need" in p else "a KV block and none was free"
        cause = f"{requester} needed {need}"
    pick = (
        f"{victim} is itself {rule}, so it preempts itself"
        if requester == victim
        else f"the victim is {rule}: {victim}"
    )
    dropped = p["num_dropped_tokens"]
    text = (
        f"{victim} was preempted: {cause}; {pick}. Its {plural(p['num_dropped_blocks'], 'KV block')} "
        f"({plural(dropped, 'token')} of K/V) were given back and it returned to the waiting queue."
    )
    text += handed_on_sentence(view, step, victim)
    clause = comeback_clause(view, step, victim, dropped, "prefix cache")
    return text + (f" {clause[0].upper()}{clause[1:]}." if clause else "")


def _arrived_together(view: TraceView, admitted: list[str]) -> list[str]:
    """Requests admitted in this step that arrived at the same time (so file order broke the tie), if any."""
    if len(admitted) < 2:
        return []
    arrival = {
        r["request_id"]: (r.get("arrival_step"), r["arrival_time"] if r.get("arrival_step") is None else 0)
        for r in view.header["requests"]
    }
    first = arrival.get(admitted[0])
    return admitted if all(arrival.get(rid) == first for rid in admitted) else []
