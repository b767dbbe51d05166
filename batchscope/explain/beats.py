"""The teaching moments of a trace: the steps that explain continuous batching, found by rules over the log.

``story_beats`` names them: ``mixed`` (prefill and decode of different requests in one forward), ``handoff`` (a
request finishes and the very next step a waiting request is admitted into its slot), ``preemption``, ``padding``
(static batching keeps a finished row), ``drain`` (the batch shrinks because nobody is waiting), and SGLang's
``prefill_first`` (a prefill batch runs alone while decodes wait) and ``retraction`` (read from the decision
records). ``BEAT_TEXT`` says each in two sentences; the step's narration (``batchscope.explain.narration``) says what
happened.
"""

from __future__ import annotations

from batchscope.steplog.decisions import decisions
from batchscope.steplog.view import TraceView


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
            rules = {p["rule"] for p in decisions(view, i).get("preemptions", [])}
            beats.setdefault(i, []).append("retraction" if rules == {"sglang_retract"} else "preemption")
        if decisions(view, i).get("batch", {}).get("decodes_waiting"):
            beats.setdefault(i, []).append("prefill_first")
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
            and st["scheduled"]  # a step that runs nobody (idle, or a trace's empty last step) shows no smaller batch
        ):
            beats.setdefault(i, []).append("drain")
    return beats


BEAT_TEXT = {
    "mixed": "Prefill and decode share one forward pass: a prompt chunk and other requests' next tokens are "
    "computed together, within one token budget.",
    "handoff": "A request finishes at the end of this step; at the very next step a waiting request takes its slot "
    "and its KV blocks. That iteration-level replacement is continuous batching.",
    "preemption": "The KV pool ran out: the waiting queue's victim rule picked a running request to give back all "
    "its blocks. It will compute those tokens again when it is admitted again, minus what it then finds in the prefix "
    "cache (preemption by recompute, as vLLM V1 does; no swapping to CPU).",
    "padding": "Static batching: a finished request keeps its row until the slowest member of the batch ends; "
    "the row is padding, yet the weights are still read for it every step.",
    "prefill_first": "Prefill first (SGLang): when a prefill batch can be formed it runs alone, and the running "
    "requests skip their decode for a step; vLLM would compute the prompt and their next tokens in one forward.",
    "retraction": "Retraction (SGLang): the decode batch no longer fits the pool, because admission counted only "
    "part of the running requests' remaining output (new_token_ratio). A request goes back to the queue; what the "
    "radix cache keeps of its prompt it will not compute again, and the ratio jumps back up.",
    "drain": "Nobody is waiting, so the batch shrinks: fewer rows share each read of the weights.",
}

# Each moment in a few words: the callout presenter mode shows beside two or four runs (the player shows BEAT_TEXT
# one key away, with the whole narration).
BEAT_NAME = {
    "mixed": "Prefill and decode in one forward",
    "handoff": "Handoff: a freed slot is taken at once",
    "preemption": "Preemption by recompute",
    "padding": "Padding: a finished row stays",
    "prefill_first": "Prefill first (SGLang)",
    "retraction": "Retraction (SGLang)",
    "drain": "Drain: the batch shrinks",
}
