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
from visuals.stepinfo import freed_blocks

REASONS = {"stop": "emitted EOS", "length": "hit max_tokens"}


def _join(items: list[str]) -> str:
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
        sentences.append(f"Waiting: {_join(st['waiting'])} ({_why_waiting(view, step)}).")
    sentences.append(
        f"{st['num_batched_tokens']} of {cfg['max_num_batched_tokens']} budget tokens used; "
        f"{st['kv']['num_used_blocks']}/{st['kv']['num_blocks']} KV blocks in use."
    )
    return " ".join(sentences)


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
            what = f"{n} tokens" if rid in sampled and c == 0 else f"a {n}-token chunk"
            nxt = " and samples its next token" if rid in sampled else ""
            lead = (
                f"{rid} resumes after its preemption: it recomputes {what} whose K/V were dropped"
                + (f" ({all_left})" if all_left else "")
                + nxt
            )
            parts.append(lead if rid not in admitted else lead.replace(f"{rid} resumes", f"{rid} is admitted again"))
            continue
        span = (
            f"a {n}-token chunk ({c}→{c + n} of {plen} prompt tokens{': ' + all_left if all_left else ''})"
            if c or c + n < plen
            else f"{n} tokens"
        )
        first = " and samples its first token" if rid in sampled else ""
        lead = f"{rid} is admitted and prefills" if rid in admitted else f"{rid} prefills"
        parts.append(f"{lead} {span}{first}")
    return parts


def _events(view: TraceView, step: int) -> list[str]:
    """Sentences for the step's preemptions, finishes and padding rows."""
    st = view.steps[step]
    sentences = []
    freed = freed_blocks(view, step)
    for rid, blocks in freed["preempted"].items():
        sentences.append(
            f"{rid} was preempted: its {_plural(len(blocks), 'KV block')} were freed and it went back "
            f"to the head of the waiting queue (its tokens will be recomputed)."
        )
    for f in st["finished"]:
        blocks = freed["finished"].get(f["request_id"], [])
        sentences.append(
            f"{f['request_id']} {REASONS[f['reason']]} and finished, releasing {_plural(len(blocks), 'KV block')}."
        )
    if st["padding_slots"]:
        pads = [p["request_id"] for p in st["padding_slots"]]
        sentences.append(
            f"Static batch: {_join(pads)} {'is' if len(pads) == 1 else 'are'} done but still "
            f"{'occupies a row' if len(pads) == 1 else 'occupy rows'} as padding."
        )
    return sentences


def _why_waiting(view: TraceView, step: int) -> str:
    """Why the head of the waiting queue was not admitted in ``step`` (from the log and the config)."""
    st, cfg = view.steps[step], view.header["config"]
    head = st["waiting"][0]
    behind = "; the others wait behind it, first come first served" if len(st["waiting"]) > 1 else ""
    if view.policy == "static":
        kv = st["kv"]
        if st["admitted"] and len(st["running"]) < cfg["max_num_seqs"] and "num_reserved_blocks" in kv:
            return (
                f"the new static batch took {len(st['running'])} of {cfg['max_num_seqs']} slots: each member "
                f"reserves its worst-case KV blocks, {kv['num_reserved_blocks']} of {kv['num_blocks']} reserved"
            )
        return "a static batch takes new requests only when the whole batch has finished"
    if st["preempted"]:
        return "no admissions in a step that preempted"
    if len(st["running"]) >= cfg["max_num_seqs"]:
        return f"all {cfg['max_num_seqs']} slots are busy{behind}"
    left = cfg["max_num_batched_tokens"] - st["num_batched_tokens"]
    if left <= 0:
        return f"the token budget is used up{behind}"
    done = sum(1 for s in view.steps[:step] for t in s["sampled"] if t["request_id"] == head)
    tokens = next(r["num_prompt_tokens"] for r in view.header["requests"] if r["request_id"] == head) + done
    chunk = min(tokens, left) if cfg["enable_chunked_prefill"] else tokens
    if not cfg["enable_chunked_prefill"] and tokens > left:
        return f"its {tokens} tokens do not fit the {left} budget tokens left (chunked prefill is off){behind}"
    need = -(-chunk // cfg["block_size"])
    free = st["kv"]["num_blocks"] - st["kv"]["num_used_blocks"]
    what = f"a {chunk}-token chunk" if chunk < tokens else f"its {tokens} tokens"
    return f"{head} needs {need} KV blocks for {what} and {free} are free{behind}"


def story_beats(view: TraceView) -> dict[int, list[str]]:
    """step -> names of the teaching moments at that step (see the module docstring)."""
    beats: dict[int, list[str]] = {}
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
