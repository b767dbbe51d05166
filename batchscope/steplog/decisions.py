"""The decisions of a step, as recorded by the scheduler or, for traces without records, inferred from the log.

Everything that explains a step (narration, checklist, quiz, glossary) asks here, never re-derives a rule:

    d = decisions(view, k)    # {"admissions": [...], "preemptions": [...], "head": {...}} (batchscope.steplog.records)
    if d.get("inferred"): ... # the trace did not record them: say the reason was inferred from the log

Recorded decisions come from the scheduler's own state at the moment it decided (``batchscope.scheduling.scheduler``,
``batchscope_vllm.tracebook``); inferred ones from ``batchscope.steplog.inference``. The words are
``batchscope.steplog.reasons``'. Also here: each request's preemption cost, honestly split (``preemption_cost``).
"""

from __future__ import annotations

from typing import Any

from batchscope.steplog.inference import infer_all
from batchscope.steplog.records import AdmissionRecord, DecisionsRecord
from batchscope.steplog.view import TraceView


def decisions(view: Any, k: int) -> DecisionsRecord:
    """The decisions of step position ``k`` of ``view`` (a ``TraceView``): recorded if the step has them, else
    inferred (then ``inferred`` is True); an idle step decides nothing. Never raises for a valid trace."""
    if view.steps[k].get("idle"):
        return {"preemptions": [], "admissions": []}
    recorded = view.steps[k].get("decisions")
    if recorded is not None:
        return recorded
    if "inferred_decisions" not in view.memo:
        view.memo["inferred_decisions"] = infer_all(view)
    return view.memo["inferred_decisions"][k]


def any_inferred(view: Any) -> bool:
    """True when some step of ``view`` carries no recorded decisions (its reasons are inferred from the log)."""
    return any("decisions" not in st and not st.get("idle") for st in view.steps)


def preemption_cost(view: Any) -> dict[str, dict[str, int]]:
    """Per request that was preempted: ``num_dropped_tokens`` (K/V its preemptions dropped), ``num_cache_hit_tokens``
    (of those, found again in the prefix cache when it resumed), ``num_recomputed_tokens`` (computed again) and
    ``num_new_tokens`` (computed after a resumption for the first time: a prompt cut short, its last sampled token).

    Read from the decision records (recorded or inferred) and the scheduled work: a resumed chunk's tokens below the
    request's high-water mark (the most it ever held K/V for) are recomputed, the rest are new. Units: tokens.
    """
    cost: dict[str, dict[str, int]] = {}
    high: dict[str, int] = {}
    held: dict[str, int] = {}
    for k, st in enumerate(view.steps):
        d = decisions(view, k)
        for p in d.get("preemptions", []):
            c = cost.setdefault(p["request_id"], dict.fromkeys(_COST_FIELDS, 0))
            c["num_dropped_tokens"] += p["num_dropped_tokens"]
            high[p["request_id"]] = max(high.get(p["request_id"], 0), p["num_dropped_tokens"])
        for a in d.get("admissions", []):
            if a["resumed"] and a["request_id"] in cost:
                covered = min(a["num_prefix_hit_tokens"], high.get(a["request_id"], 0))
                cost[a["request_id"]]["num_cache_hit_tokens"] += covered
        for s in st["scheduled"]:
            rid, c0, n = s["request_id"], s["num_computed_tokens"], s["num_tokens"]
            held[rid] = c0 + n
            if rid in cost and s["kind"] == "prefill":
                redo = max(0, min(c0 + n, high.get(rid, 0)) - c0)
                cost[rid]["num_recomputed_tokens"] += redo
                cost[rid]["num_new_tokens"] += n - redo
    return cost


def dropped_and_recomputed(records: list[dict]) -> dict[str, dict[str, int]]:
    """Per request: ``num_dropped_tokens`` (K/V its preemptions dropped) and ``num_recomputed_tokens`` (computed
    again). The summary's, when it records both; older traces counted the dropped tokens as "recomputed", so there
    both come from the log (``preemption_cost``)."""
    summary = records[-1]
    if all("num_dropped_tokens" in r or not r.get("num_preemptions") for r in summary["requests"]):
        return {
            r["request_id"]: {
                "num_dropped_tokens": r.get("num_dropped_tokens", 0),
                "num_recomputed_tokens": r.get("num_recomputed_tokens", 0),
            }
            for r in summary["requests"]
        }
    return {
        rid: {"num_dropped_tokens": c["num_dropped_tokens"], "num_recomputed_tokens": c["num_recomputed_tokens"]}
        for rid, c in preemption_cost(TraceView(records)).items()
    }


_COST_FIELDS = ("num_dropped_tokens", "num_cache_hit_tokens", "num_recomputed_tokens", "num_new_tokens")


def kv_high_before(view: Any, step: int, request_id: str) -> int:
    """The most tokens ``request_id`` held K/V for before a preemption prior to step position ``step`` (0 if it was
    never preempted): a later chunk below this mark recomputes, above it computes for the first time."""
    return max((n for k, n in _drops(view).get(request_id, ()) if k < step), default=0)


def _drops(view: Any) -> dict[str, list[tuple[int, int]]]:
    """request_id -> (step position, K/V tokens dropped) of each of its preemptions; built once per view (the
    narration asks for every prefill chunk of a long trace)."""
    if "kv_drops" not in view.memo:
        drops: dict[str, list[tuple[int, int]]] = {}
        for k, st in enumerate(view.steps):
            if st["preempted"]:
                for p in decisions(view, k).get("preemptions", []):
                    drops.setdefault(p["request_id"], []).append((k, p["num_dropped_tokens"]))
        view.memo["kv_drops"] = drops
    return view.memo["kv_drops"]


def comeback(view: Any, step: int, request_id: str) -> tuple[int, AdmissionRecord] | None:
    """Where ``request_id``, preempted in step position ``step``, is admitted again: ``(position, its admission
    record)``, or ``None`` if the trace ends first."""
    for k in range(step + 1, len(view.steps)):
        if request_id in view.steps[k]["admitted"]:
            return k, next(a for a in decisions(view, k).get("admissions", []) if a["request_id"] == request_id)
    return None


def resumption(view: Any, step: int, request_id: str) -> AdmissionRecord | None:
    """The admission record of ``request_id``'s latest comeback (an admission with ``resumed``) before step position
    ``step``, or ``None``: what its later chunks count against (its ``num_prefix_hit_tokens`` come from the cache,
    the next ``num_recompute_tokens`` are recomputed, the rest are new). Built once per view."""
    if "resumptions" not in view.memo:
        found: dict[str, list[tuple[int, AdmissionRecord]]] = {}
        for k, st in enumerate(view.steps):
            if st["admitted"]:
                for a in decisions(view, k).get("admissions", []):
                    if a["resumed"]:
                        found.setdefault(a["request_id"], []).append((k, a))
        view.memo["resumptions"] = found
    return next((a for k, a in reversed(view.memo["resumptions"].get(request_id, [])) if k < step), None)
