"""Key moments of a trace, and tours: the few steps a talk follows, each with one sentence.

A moment is ``{"step": k, "kind": ..., "note": ...}`` with ``k`` a position of the player's clock. ``found_moments``
finds every candidate in a trace from its records (the scheduler's decision records via
``batchscope.steplog.decisions``, the step's scheduled work, finishes and padding rows), in step order:

- ``first_chunk``: a prompt longer than the step's budget gets its first chunk (chunked prefill);
- ``mixed``: one forward computes prompt tokens of one request and the next tokens of others;
- ``handoff``: a request finishes and at the very next step a waiting request takes its batch row;
- ``next_batch``: every running request finishes and only newly admitted ones run at the next step (under static
  batching, the next batch);
- ``padding``: static batching keeps a finished request's row until the slowest member ends;
- ``prefix_hit``: an admission finds prompt tokens in the prefix cache;
- ``preemption``: the KV pool ran out and the queue's victim rule gave a running request's blocks back;
- ``recompute``: a preempted request is admitted again and computes its dropped tokens a second time;
- ``pause``: TensorRT-LLM's MAX_UTILIZATION policy pauses the last started request (its eviction, the family's word
  from ``batchscope.facts.vocabulary``);
- ``late_admission``: a request held back at the head of the queue by the KV pool is admitted at last;
- ``reservation``: an admission sets KV blocks aside for the request's future tokens (TGI: its whole lifetime,
  TensorRT-LLM: to completion);
- ``held``: the head of the queue starts waiting for the KV pool (the first step of each hold; SGLang's output
  estimate has its own, ``reserved_output``);
- ``drafts`` / ``drafts_rejected``: a decode verifies n-gram draft tokens and keeps them all / rejects some;
- ``abort``: a request is aborted;
- ``end``: the last request finishes;
- SGLang's ``prefill_first``, ``reserved_output`` and ``retraction``, TGI's ``stall`` (a new batch prefilled alone
  while the running requests' decodes wait: prefill chunking off) (``batchscope.explain.moments_sglang``).

Which of these a trace holds is the fact model's (``batchscope.facts.occurrences``); tests check that every
shipped tour stops at each of them and that each note says what its step's facts say.

A scenario's tour (``tour`` in ``batchscope/inputs/scenarios/NAME.json``) picks moments by kind, batching policy and
request (``{"kind", "policy"?, "request"?, "note"?}``); ``tour_of`` resolves it against the traces, so its steps always
match the run. A teacher's own tour (``?tour=`` in the URL, ``html --tour FILE``) gives steps and notes directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from batchscope.explain.moments_sglang import RETRACT, sglang_moments
from batchscope.explain.words import join
from batchscope.facts import eviction, facts
from batchscope.facts.occurrences import kv_held_steps, occurrences
from batchscope.steplog.decisions import decisions
from batchscope.steplog.reasons import BATCHING_NAMES, LIMIT_SHORT, LIMIT_WHY, cache_name, policy_heading, run_name
from batchscope.steplog.view import TraceView

MAX_NOTE = 300  # characters of a teacher's note
MAX_MOMENTS = 50


class Moment(TypedDict):
    step: int  # position of the player's clock
    kind: str
    note: str
    policy: str
    request: str


def _m(view: TraceView, k: int, kind: str, request: str, note: str) -> Moment:
    return {"step": k, "kind": kind, "note": note, "policy": view.policy, "request": request}


def _prompt_len(view: TraceView, rid: str) -> int | None:
    info = view.request_info.get(rid)
    return info["num_prompt_tokens"] if info else None


def _work_moments(view: TraceView, k: int) -> list[Moment]:
    """first_chunk, mixed and prefix_hit moments of step position ``k``."""
    st, out = view.steps[k], []
    admitted = {a["request_id"]: a for a in decisions(view, k).get("admissions", [])}
    decodes = [s["request_id"] for s in st["scheduled"] if s["kind"] == "decode"]
    for s in st["scheduled"]:
        rid, plen = s["request_id"], _prompt_len(view, s["request_id"])
        if s["kind"] != "prefill":
            continue
        if s["num_computed_tokens"] == 0 and plen is not None and s["num_tokens"] < plen:
            note = (
                f"{view.label(rid)}'s prompt ({plen} tokens) does not fit one step's token budget: its first chunk "
                f"computes {s['num_tokens']}, the rest follows in the next steps (chunked prefill)."
            )
            out.append(_m(view, k, "first_chunk", rid, note))
        a = admitted.get(rid)
        if a and a["num_prefix_hit_tokens"] and not a["resumed"]:
            hit = a["num_prefix_hit_tokens"]
            known = hit + a["num_recompute_tokens"] + a["num_new_tokens"]
            note = (
                f"{view.label(rid)} finds {hit} of its {known} prompt tokens in the {cache_name(view.header)} and "
                f"computes only "
                f"{known - hit}."
            )
            out.append(_m(view, k, "prefix_hit", rid, note))
        if decodes and not s.get("recompute"):
            names = ", ".join(view.label(r) for r in decodes)
            note = f"One forward computes {view.label(rid)}'s prompt tokens and the next token of {names}."
            out.append(_m(view, k, "mixed", rid, note))
    return out


def _handoffs(view: TraceView, k: int) -> list[Moment]:
    """A request finishing in step ``k`` whose batch row a waiting request takes at ``k + 1`` while others run on
    (``handoff``), or a whole batch ending at ``k`` and a new one starting (``next_batch``)."""
    if k + 1 >= view.num_steps or not view.steps[k]["finished"]:
        return []
    st, nxt = view.steps[k], view.steps[k + 1]
    done = {f["request_id"] for f in st["finished"]}
    new = [s for s in nxt["scheduled"] if s["request_id"] in nxt["admitted"]]
    if not new:
        return []
    if len(new) == len(nxt["scheduled"]) and all(s["request_id"] in done for s in st["scheduled"]):
        names = join([view.label(s["request_id"]) for s in new])
        last = join([view.label(f["request_id"]) for f in st["finished"]])
        note = (
            f"{last} finishes, the last of its batch: the batch ends here, and at the next step a new one starts: "
            f"{names} {'are' if len(new) > 1 else 'is'} admitted."
        )
        return [_m(view, k, "next_batch", new[0]["request_id"], note)]
    rows = {s["slot"]: s["request_id"] for s in st["scheduled"] if s["request_id"] in done}
    out = []
    for s in new:
        if s["slot"] in rows:
            left, came = view.label(rows[s["slot"]]), view.label(s["request_id"])
            note = (
                f"{left} finishes; at the very next step {came} takes its batch row while the others run on "
                f"(continuous batching)."
            )
            out.append(_m(view, k, "handoff", s["request_id"], note))
    return out


def _kv_moments(view: TraceView, k: int) -> list[Moment]:
    """preemption and recompute moments of step position ``k`` (the decision records)."""
    out, d, words = [], decisions(view, k), eviction(view.header)
    for p in d.get("preemptions", []):
        if p["rule"] == RETRACT:  # SGLang's retraction: its own moment (``moments_sglang``)
            continue
        victim, req = view.label(p["request_id"]), p.get("requester")
        cause = f"{view.label(req)} needed a KV block and none was free" if req else "the KV pool ran out"
        note = (
            f"{victim} {words.verb}: {cause}; its {p['num_dropped_blocks']} KV blocks are given back and it "
            f"waits again."
        )
        out.append(_m(view, k, words.noun, p["request_id"], note))
    for a in d.get("admissions", []):
        if a["resumed"] and a["num_recompute_tokens"]:
            hit = a["num_prefix_hit_tokens"]
            found = f" ({hit} found in the {cache_name(view.header)})" if hit else ""
            note = (
                f"{view.label(a['request_id'])} is admitted again and computes {a['num_recompute_tokens']} tokens a "
                f"second time{found}: the cost of its {_sent_back(view, k, a['request_id'])}."
            )
            out.append(_m(view, k, "recompute", a["request_id"], note))
    return out


def _sent_back(view: TraceView, k: int, rid: str) -> str:
    """How ``rid`` last left the batch before step ``k``, in its engine's word: "retraction" (SGLang), "pause"
    (TensorRT-LLM), else "preemption"."""
    rules = [p["rule"] for j in range(k) for p in decisions(view, j).get("preemptions", []) if p["request_id"] == rid]
    return "retraction" if rules and rules[-1] == RETRACT else eviction(view.header).noun


def _kv_waits(view: TraceView, k: int) -> list[Moment]:
    """late_admission, reservation and held moments of step position ``k``: where the fact model has them
    (``batchscope.facts.occurrences``), told with the decision records' numbers."""
    d, out = decisions(view, k), []
    held = kv_held_steps(view)
    found = {(o.kind, o.request_id) for o in occurrences(facts(view), k)}
    for a in d.get("admissions", []):
        rid = a["request_id"]
        if ("late_admission", rid) in found:
            first = held[rid][0]
            note = (
                f"{view.label(rid)} is admitted at last, {k - first} steps after it first waited at the head of the "
                f"queue: {LIMIT_SHORT[decisions(view, first)['head']['limit']]}."
            )
            out.append(_m(view, k, "late_admission", rid, note))
        if ("reservation", rid) in found:
            n, extra, label = a["num_blocks"], a["num_reserved_blocks"], view.label(rid)
            if view.policy == "tgi":  # TGI's blocks are its whole lifetime, all in its table from the start
                note = (
                    f"{label} is admitted with {n} KV blocks, its whole lifetime (prompt + max_tokens - 1 tokens): "
                    f"{extra} of them for tokens it has not written yet; TGI never preempts."
                )
            else:  # TensorRT-LLM's GUARANTEED_NO_EVICT: set aside, not yet in its table
                note = (
                    f"{label} is admitted holding {n} KV blocks, and {extra} more are set aside to its completion: "
                    f"nobody admitted later can take them, so it is never paused."
                )
            out.append(_m(view, k, "reservation", rid, note))
    head = d.get("head")
    if head and ("kv_hold", head["request_id"]) in found and head["limit"] != "sglang_reserved_output":
        rid = head["request_id"]
        if k - 1 not in held.get(rid, ()):  # the first step of each hold
            note = f"{view.label(rid)} waits at the head of the queue: {LIMIT_WHY[head['limit']]}."
            out.append(_m(view, k, "held", rid, note))
    return out


def _drafts(view: TraceView, k: int) -> list[Moment]:
    """drafts and drafts_rejected moments of step position ``k`` (the fact model's draft figures)."""
    out: list[Moment] = []
    if not view.header.get("config", {}).get("speculative_config"):
        return out
    for r in facts(view).requests(k).values():
        if not r.num_drafts or r.num_accepted is None:
            continue
        kept, got = r.num_accepted, r.num_sampled
        tokens = f"{got} token{'s' if got != 1 else ''}"
        ends = r.request_id in facts(view).step(k).finished and got < kept + 1  # it ends inside what it verified
        end = " (it ends there: the tokens after its end are dropped)" if ends else ""
        if kept == r.num_drafts:
            note = (
                f"{view.label(r.request_id)} verifies {r.num_drafts} draft tokens in one forward and keeps all "
                f"{kept}: {tokens} in one step{end} ({DRAFT_WORDS})."
            )
            out.append(_m(view, k, "drafts", r.request_id, note))
        else:
            note = (
                f"{view.label(r.request_id)} verifies {r.num_drafts} draft tokens and keeps {kept}: from the first "
                f"draft the model disagrees with, its own token is taken instead; {tokens} in this step{end}."
            )
            out.append(_m(view, k, "drafts_rejected", r.request_id, note))
    return out


DRAFT_WORDS = "n-gram speculative decoding: the drafts are the tokens that followed the same n-gram earlier"


def _aborts(view: TraceView, k: int) -> list[Moment]:
    """abort moments of step position ``k`` (the fact model's events)."""
    out = []
    for e in facts(view).step(k).events:
        if e.kind == "aborted":
            note = f"{view.label(e.request_id)} is aborted: it leaves without finishing and its KV blocks go back."
            out.append(_m(view, k, "abort", e.request_id, note))
    return out


def _padding(view: TraceView, k: int) -> list[Moment]:
    before = {p["request_id"] for p in view.steps[k - 1]["padding_slots"]} if k else set()
    out = []
    for p in view.steps[k]["padding_slots"]:
        if p["request_id"] not in before:
            note = (
                f"{view.label(p['request_id'])} is done, yet its row stays in the batch as padding until the slowest "
                f"member ends (static batching)."
            )
            out.append(_m(view, k, "padding", p["request_id"], note))
    return out


def found_moments(view: TraceView) -> list[Moment]:
    """Every candidate moment of ``view``, in step order (see the module docstring); computed once per view."""
    if "moments" in view.memo:
        return view.memo["moments"]
    out: list[Moment] = []
    for k in range(view.num_steps):
        out += _work_moments(view, k) + _handoffs(view, k) + _padding(view, k) + _kv_moments(view, k)
        out += _kv_waits(view, k) + _drafts(view, k) + _aborts(view, k)
        out += [_m(view, k, m["kind"], m["request"], m["note"]) for m in sglang_moments(view, k)]
    if view.steps and view.summary.get("requests"):
        k = view.num_steps - 1
        last = view.steps[k]["finished"]
        if last:
            name = BATCHING_NAMES.get(run_name(view.header)) or BATCHING_NAMES.get(
                view.policy, f"{view.policy.capitalize()} batching"
            )
            note = f"{name} finishes its last request at step {view.step_number(k)}."
            out.append(_m(view, k, "end", last[-1]["request_id"], note))
    view.memo["moments"] = out
    return out


def tour_of(views: list[TraceView], spec: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tour ``spec`` (a scenario's ``tour``) resolved against ``views``: for each entry the first moment of its
    kind (and ``policy``, a run's name ``batchscope.steplog.reasons.run_name`` such as ``trtllm_max_utilization``, and
    ``request`` when given), with the entry's own ``note`` if it has one. Entries that match
    nothing are left out; the result is ``[{"step", "note"}]`` in step order, one per step (notes of a step joined).
    With two views each note says whose it is."""
    picked: dict[int, list[str]] = {}
    for entry in spec:
        for v in views:
            if entry.get("policy") not in (None, run_name(v.header)):
                continue
            m = next(
                (
                    m
                    for m in found_moments(v)
                    if m["kind"] == entry["kind"] and entry.get("request") in (None, m["request"])
                ),
                None,
            )
            if m is not None:
                note = entry.get("note") or m["note"]
                names = [run_name(w.header) for w in views]
                side = policy_heading(run_name(v.header), names)  # the side's own heading: "TGI", not "tgi"
                picked.setdefault(m["step"], []).append(f"{side}: {note}" if len(views) > 1 else note)
                break
    return [{"step": k, "note": " ".join(notes)} for k, notes in sorted(picked.items())]


def tour_for(views: list[TraceView], spec: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The scenario's tour ``spec`` resolved against ``views`` if there is one, else ``default_tour``."""
    return tour_of(views, spec) if spec else default_tour(views)


def default_tour(views: list[TraceView]) -> list[dict[str, Any]]:
    """A tour for traces without a scenario's: the first moment of each kind in each view."""
    kinds = (
        *("first_chunk", "mixed", "prefix_hit", "handoff", "next_batch", "padding", "preemption", "recompute"),
        *("prefill_first", "stall", "reserved_output", "retraction", "pause", "late_admission", "reservation"),
        *("held", "drafts", "drafts_rejected", "abort", "end"),
    )
    return tour_of(views, [{"kind": kind, "policy": run_name(v.header)} for v in views for kind in kinds])


def check_tour(items: Any, num_steps: int, where: str) -> list[dict[str, Any]]:
    """A teacher's tour, ``[{"step": int, "note": str}]``, checked: ``step`` an integer in [0, num_steps - 1],
    ``note`` a string of at most ``MAX_NOTE`` characters, at most ``MAX_MOMENTS`` entries. Raises ``ValueError``
    naming ``where``, the entry and the field."""
    if not isinstance(items, list) or len(items) > MAX_MOMENTS:
        raise ValueError(f"{where}: a tour is a JSON list of at most {MAX_MOMENTS} {{'step', 'note'}} objects")
    out = []
    for i, item in enumerate(items):
        step, note = (item.get("step"), item.get("note")) if isinstance(item, dict) else (None, None)
        if type(step) is not int or not 0 <= step < num_steps:
            raise ValueError(
                f"{where}: entry {i}, field 'step': must be an integer in [0, {num_steps - 1}], got {step!r}"
            )
        if not isinstance(note, str) or not 0 < len(note) <= MAX_NOTE:
            raise ValueError(f"{where}: entry {i}, field 'note': must be a text of 1 to {MAX_NOTE} characters")
        out.append({"step": step, "note": note})
    return sorted(out, key=lambda m: m["step"])


def read_tour(path: str | Path, num_steps: int) -> list[dict[str, Any]]:
    """A teacher's tour from a JSON file (see ``check_tour``). Raises ``ValueError`` (unreadable or invalid)."""
    try:
        items = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"--tour {path}: not a readable JSON file ({e})") from None
    return check_tour(items, num_steps, f"--tour {path}")
