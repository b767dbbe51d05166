"""What happens in each step of a trace, by kind: the events a talk stops at (a tour, ``batchscope.explain.moments``),
read from the fact model (``batchscope.facts.model``) and the step's decision records, never from a view.

``occurrences(f, k)`` lists the ``Occurrence`` of step position ``k`` of ``Facts`` ``f``; ``kinds_of(f)`` every kind
found in the run, each with the steps it happens at. Kinds:

- ``late_admission``: a request is admitted for the first time after it waited at the head of the queue held back
  by the KV pool (a limit of ``KV_LIMITS``: the pool could not hold what the scheduler charges for it);
- ``reservation``: an admission sets KV blocks aside beyond what its prompt needs now (TGI's whole lifetime,
  TensorRT-LLM's blocks to completion: the admission record's ``num_reserved_blocks``);
- ``kv_hold``: the head of the queue waits because of the KV pool (``KV_LIMITS``);
- the family's eviction noun (``preemption``, ``retraction``, ``pause``: ``batchscope.facts.vocabulary``): a
  running request is sent back to the queue without its K/V;
- ``readmission``: an evicted request is admitted again;
- ``prefix_hit``: a first admission finds prompt tokens in the prefix (radix) cache;
- ``decodes_waiting``: running requests skip their decode behind a prefill batch (SGLang's prefill first, TGI's
  stall without chunking);
- ``padding``: a static batch runs a row for a finished member;
- ``drafts``: a decode verifies speculative draft tokens (``RequestFacts.num_drafts``);
- ``finish`` and ``abort``: a request ends.

Per-request kinds (``PER_REQUEST``): a tour has a stop for each request they happen to (every late admission,
every eviction); for the others one stop of the kind is enough.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchscope.facts.model import Facts
from batchscope.steplog.decisions import decisions
from batchscope.steplog.view import TraceView

# The head-of-queue limits (``batchscope.steplog.reasons.LIMIT_WHY``) that are the KV pool's: the request waits
# because the pool cannot hold what the scheduler charges for it (its next chunk, its whole prompt, a worst case, an
# output estimate, its lifetime, its blocks to completion), not for a batch row, the token budget or a static batch.
KV_LIMITS = frozenset(
    {
        "kv_blocks",
        "kv_blocks_full_prompt",
        "kv_blocks_reserved",
        "sglang_reserved_output",
        "sglang_fixed_length_run",
        "tgi_kv_blocks_lifetime",
        "tgi_token_budget",
        "trtllm_kv_blocks_to_completion",
        "trtllm_kv_blocks_next_step",
    }
)
EVICTION_KINDS = ("preemption", "retraction", "pause")
PER_REQUEST = frozenset({"late_admission", *EVICTION_KINDS})


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One thing that happens in a step: ``kind`` (see the module docstring) and the request it happens to (``""``
    for ``decodes_waiting``' and ``padding``'s first request where several)."""

    kind: str
    request_id: str


def occurrences(f: Facts, k: int) -> list[Occurrence]:
    """The occurrences of step position ``k`` of ``f``, in the order of the module docstring's list."""
    view, step = f.view, f.step(k)
    d = decisions(view, k)
    out: list[Occurrence] = []
    held_before = _held_before(f)
    for a in d.get("admissions", []):
        rid = a["request_id"]
        if not a["resumed"] and k > held_before.get(rid, k):
            out.append(Occurrence("late_admission", rid))
        if a.get("num_reserved_blocks"):
            out.append(Occurrence("reservation", rid))
    head = d.get("head")
    if head and head.get("limit") in KV_LIMITS:
        out.append(Occurrence("kv_hold", head["request_id"]))
    out += [Occurrence(f.words.noun, e.request_id) for e in step.events if e.kind == "evicted"]
    out += [Occurrence("readmission", e.request_id) for e in step.events if e.kind == "readmitted"]
    out += [
        Occurrence("prefix_hit", a["request_id"])
        for a in d.get("admissions", [])
        if not a["resumed"] and a["num_prefix_hit_tokens"]
    ]
    out += [Occurrence("decodes_waiting", r) for r in d.get("batch", {}).get("decodes_waiting", [])]
    out += [Occurrence("padding", p["request_id"]) for p in view.steps[k]["padding_slots"]]
    out += [Occurrence("drafts", r.request_id) for r in f.requests(k).values() if r.num_drafts] if _drafts(f) else []
    out += [Occurrence("finish", e.request_id) for e in step.events if e.kind == "finished"]
    out += [Occurrence("abort", e.request_id) for e in step.events if e.kind == "aborted"]
    return out


def kinds_of(f: Facts) -> dict[tuple[str, str], list[int]]:
    """Every occurrence of the run as ``{(kind, request or ""): [step positions]}``: per request for the kinds of
    ``PER_REQUEST``, else one entry per kind (request ``""``). Built once per ``Facts``."""
    memo = f.view.memo
    if "occurrence_kinds" not in memo:
        out: dict[tuple[str, str], list[int]] = {}
        for k in range(f.view.num_steps):
            for o in occurrences(f, k):
                key = (o.kind, o.request_id if o.kind in PER_REQUEST else "")
                steps = out.setdefault(key, [])
                if not steps or steps[-1] != k:
                    steps.append(k)
        memo["occurrence_kinds"] = out
    return memo["occurrence_kinds"]


def kv_held_steps(view: TraceView) -> dict[str, list[int]]:
    """Request -> the step positions of ``view`` (a ``TraceView``) it waited at the head of the queue held back by
    the KV pool (a ``KV_LIMITS`` limit), in order. Built once per view."""
    if "kv_held" not in view.memo:
        out: dict[str, list[int]] = {}
        for k in range(view.num_steps):
            head = decisions(view, k).get("head")
            if head and head.get("limit") in KV_LIMITS:
                out.setdefault(head["request_id"], []).append(k)
        view.memo["kv_held"] = out
    return view.memo["kv_held"]


def _held_before(f: Facts) -> dict[str, int]:
    """Request -> the first step position it waited at the head held by a ``KV_LIMITS`` limit."""
    return {rid: steps[0] for rid, steps in kv_held_steps(f.view).items()}


def _drafts(f: Facts) -> bool:
    """Whether the run verifies drafts at all (speculative decoding on): only then are requests' facts read. Once
    per view."""
    memo = f.view.memo
    if "verifies_drafts" not in memo:
        memo["verifies_drafts"] = bool(f.view.header.get("config", {}).get("speculative_config")) or any(
            s.get("draft_token_ids") for st in f.view.steps for s in st["scheduled"]
        )
    return memo["verifies_drafts"]
