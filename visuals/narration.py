"""One or two sentences per step, generated from the step log (no per-scenario text).

Example: "Step 3: B and A decode 1 token each; D is admitted with a 7-token prefill. B hit max_tokens and
released 1 KV block. 9 of 32 budget tokens used; 11/32 KV blocks in use."

``story_beats`` names the moments that explain continuous batching, found by rules over the log:
``mixed`` (prefill and decode of different requests in one forward), ``handoff`` (a request finishes and the
very next step a waiting request is admitted into its slot), ``preemption``, ``padding`` (static batching keeps
a finished row), ``drain`` (the batch shrinks because nobody is waiting).
"""

from __future__ import annotations

from steplog.view import TraceView
from visuals.checklist import binding_reason
from visuals.stepinfo import freed_blocks

REASONS = {
    "stop": "emitted EOS",
    "length": "hit max_tokens",
    "abort": "was aborted (its client went away)",
    "error": "failed with an error",
    "repetition": "was stopped for repetition",
}
MAX_NAMED = 8  # longer lists name the first few and count the rest (a server runs hundreds of requests)


def _join(items: list[str]) -> str:
    if len(items) > MAX_NAMED:
        items = [*items[: MAX_NAMED - 2], f"{len(items) - MAX_NAMED + 2} more"]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def narrate(view: TraceView, step: int) -> str:
    """The narration of ``step`` (plain text, a few sentences)."""
    st = view.steps[step]
    cfg = view.header["config"]
    parts = _work(view, step)
    number, idle = st["step"], st.get("idle_steps_before", 0)
    gap = f"Step {number - 1} was" if idle == 1 else f"Steps {number - idle}–{number - 1} were"
    sentences = [f"{gap} idle: nothing to run until the next arrival."] if idle else []
    sentences.append(f"Step {number}: " + ("; ".join(parts) if parts else "nothing is scheduled") + ".")
    sentences += _events(view, step)
    if st["waiting"]:
        sentences.append(f"Waiting: {_join(st['waiting'])} ({binding_reason(view, step)}).")
    sentences.append(
        f"{st['num_batched_tokens']} of {cfg['max_num_batched_tokens']} budget tokens used; "
        f"{st['kv']['num_used_blocks']}/{st['kv']['num_blocks']} KV blocks in use."
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
    cfg = view.header["config"]
    prompt_len = {r["request_id"]: r["num_prompt_tokens"] for r in view.header["requests"]}
    admitted = set(st["admitted"])
    sampled = {s["request_id"] for s in st["sampled"]}
    parts = []
    decodes = [s["request_id"] for s in st["scheduled"] if s["kind"] == "decode"]
    if decodes:
        parts.append(
            f"{_join(decodes)} decode{'s' if len(decodes) == 1 else ''} 1 token" + (" each" if len(decodes) > 1 else "")
        )
    budget = cfg["max_num_batched_tokens"]
    for i, s in enumerate(st["scheduled"]):
        if s["kind"] != "prefill":
            continue
        rid, n, c = s["request_id"], s["num_tokens"], s["num_computed_tokens"]
        plen = prompt_len.get(rid, c + n)
        is_last = i == len(st["scheduled"]) - 1
        all_left = (
            "all the budget left" if is_last and st["num_batched_tokens"] == budget and rid not in sampled else ""
        )
        if s.get("recompute"):
            lead = _resume(view, step, rid, n, c, rid in sampled) + (f" ({all_left})" if all_left else "")
            parts.append(lead if rid not in admitted else lead.replace(f"{rid} resumes", f"{rid} is admitted again"))
            continue
        hit = st.get("num_prefix_hit_tokens", {}).get(rid, 0) if rid in admitted else 0
        span = (
            f"a {n}-token chunk ({c}→{c + n} of {plen} prompt tokens{': ' + all_left if all_left else ''})"
            if (c and not hit) or c + n < plen
            else f"{n} tokens"
        )
        first = " and samples its first token" if rid in sampled else ""
        if hit:  # vLLM's automatic prefix caching: the leading blocks were already in the pool
            rest = "the other" if c + n == plen else "the next"
            parts.append(
                f"{rid} is admitted: it found {hit} of its {plen} prompt tokens in the prefix cache (shared KV blocks, "
                f"not computed again) and prefills {rest} {n}{first}"
            )
            continue
        lead = f"{rid} is admitted and prefills" if rid in admitted else f"{rid} prefills"
        parts.append(f"{lead} {span}{first}")
    return parts


def _events(view: TraceView, step: int) -> list[str]:
    """Sentences for the step's preemptions, finishes and padding rows."""
    st = view.steps[step]
    sentences = []
    freed = freed_blocks(view, step)
    for rid, blocks in freed["preempted"].items():
        dropped = _kv_tokens_before(view, step, rid)
        why = (
            f"{rid} had the lowest priority among the running (largest priority value, then latest arrival)"
            if view.header["config"].get("scheduling_policy") == "priority"
            else f"{rid} was the most recently admitted running request (the FCFS victim rule: it has done the least "
            f"work)"
        )
        sentences.append(
            f"{rid} was preempted: a running request needed a KV block and none was free, and {why}. Its "
            f"{_plural(len(blocks), 'KV block')} ({_plural(dropped, 'token')} of K/V) were freed and it went back "
            f"to the head of the waiting queue; those {dropped} tokens will be recomputed."
        )
    together = _arrived_together(view, st["admitted"])
    if together:
        sentences.append(
            f"{_join(together)} arrived together, so they are admitted in arrival order, ties in the order of the "
            f"workload file."
        )
    for f in st["finished"]:
        blocks = freed["finished"].get(f["request_id"], [])
        sentences.append(
            f"{f['request_id']} {REASONS.get(f['reason'], f['reason'])} and finished, releasing "
            f"{_plural(len(blocks), 'KV block')}."
        )
    if st["padding_slots"]:
        pads = [p["request_id"] for p in st["padding_slots"]]
        sentences.append(
            f"Static batch: {_join(pads)} {'is' if len(pads) == 1 else 'are'} done but still "
            f"{'occupies a row' if len(pads) == 1 else 'occupy rows'} as padding."
        )
    return sentences


def _kv_tokens_before(view: TraceView, step: int, rid: str) -> int:
    """Tokens of ``rid`` that had K/V before ``step``: what a preemption in ``step`` drops."""
    for st in reversed(view.steps[:step]):
        for s in st["scheduled"]:
            if s["request_id"] == rid:
                return s["num_computed_tokens"] + s["num_tokens"]
    return 0


def _resume(view: TraceView, step: int, rid: str, n: int, c: int, samples: bool) -> str:
    """How a preempted request resumes: the dropped tokens it recomputes, plus the ones that never had K/V.

    Example: C had 31 tokens of K/V when preempted; on resume it computes 32: the 31 dropped and its last sampled
    token, which is never fed back before the next step and so never had K/V. The metrics count 31 recomputed.
    """
    start = next(k for k in range(step, -1, -1) if any(p == rid for p in view.steps[k]["admitted"]))
    preempted_at = max(k for k in range(start + 1) if rid in view.steps[k]["preempted"])
    dropped = _kv_tokens_before(view, preempted_at, rid)
    known = c + n if samples else None
    verb = "resumes after its preemption" if start < step else "is admitted again after its preemption"
    if known is not None and c == 0:
        fresh = known - dropped
        return (
            f"{rid} {verb}: it computes {n} tokens, the {dropped} whose K/V the preemption dropped (recomputed) "
            f"plus {_plural(fresh, 'token')} that never had K/V (its last sampled token), and samples its next token"
        )
    tail = " and samples its next token" if samples else ""
    return (
        f"{rid} {verb}: it recomputes a {n}-token chunk ({c}→{c + n}) of the {dropped} tokens whose K/V the "
        f"preemption dropped{tail}"
    )


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


def story_beats(view: TraceView) -> dict[int, list[str]]:
    """step -> names of the teaching moments at that step (see the module docstring); computed once per view."""
    if "story_beats" in view.memo:
        return view.memo["story_beats"]
    beats: dict[int, list[str]] = view.memo.setdefault("story_beats", {})
    for i, st in enumerate(view.steps):
        kinds = {s["kind"] for s in st["scheduled"]}
        if kinds == {"prefill", "decode"}:
            beats.setdefault(i, []).append("mixed")
        if st["preempted"]:
            beats.setdefault(i, []).append("preemption")
        if st["padding_slots"] and not view.steps[i - 1]["padding_slots"] if i else False:
            beats.setdefault(i, []).append("padding")
        if i + 1 < len(view.steps) and st["finished"] and view.steps[i + 1]["admitted"]:
            freed_slots = {
                s["slot"] for s in st["scheduled"] if s["request_id"] in {f["request_id"] for f in st["finished"]}
            }
            new_slots = {
                s["slot"]
                for s in view.steps[i + 1]["scheduled"]
                if s["request_id"] in set(view.steps[i + 1]["admitted"])
            }
            if freed_slots & new_slots:
                beats.setdefault(i, []).append("handoff")
        if (
            i
            and len(st["running"]) < len(view.steps[i - 1]["running"])
            and not st["waiting"]
            and not view.steps[i - 1]["waiting"]
            and not st["padding_slots"]
        ):
            beats.setdefault(i, []).append("drain")
    return beats


BEAT_TEXT = {
    "mixed": "Prefill and decode share one forward pass: a prompt chunk and other requests' next tokens are "
    "computed together, within one token budget.",
    "handoff": "A request finishes at the end of this step; at the very next step a waiting request takes its slot "
    "and its KV blocks. That iteration-level replacement is continuous batching.",
    "preemption": "The KV pool ran out: the most recently admitted request gave back all its blocks and will "
    "recompute its tokens later (preemption by recompute, as vLLM V1 does; no swapping to CPU).",
    "padding": "Static batching: a finished request keeps its row until the slowest member of the batch ends; "
    "the row is padding, yet the weights are still read for it every step.",
    "drain": "Nobody is waiting, so the batch shrinks: fewer rows share each read of the weights.",
}
