"""The glossary: each term in a few sentences of our own, its formula where there is one, and a "see it" link to a
scenario and step where it happens, found in the recorded traces (``glossary_finders``), never hard-coded.
The latency terms come with a worked example on one real request (``worked_example``). Pure; no Streamlit."""

from __future__ import annotations

from dataclasses import dataclass

from batchscope.glossary.finders import example_request
from batchscope.glossary.terms import TERMS, Key, Term
from batchscope.quiz.types import Target, fmt_number, show_me
from batchscope.steplog.metrics import request_metrics
from batchscope.steplog.view import TraceView


@dataclass(frozen=True)
class SeeIt:
    scenario: str
    policy: str
    step: int
    what: str
    target: Target


def _batching(views: dict[Key, TraceView]) -> SeeIt | None:
    """The first step where continuous batching admits a request while the static batch keeps it waiting."""
    for scenario in dict.fromkeys(sc for sc, _ in views):
        s, c = views.get((scenario, "static")), views.get((scenario, "continuous"))
        if s is None or c is None:
            continue
        for k in range(1, min(s.num_steps, c.num_steps)):
            if c.steps[k]["admitted"] and not s.steps[k]["admitted"] and s.steps[k]["waiting"]:
                what = f"continuous admits {', '.join(c.steps[k]['admitted'])}; static keeps the queue waiting"
                return SeeIt(scenario, "continuous", k, what, Target("compare", {"scenario": scenario, "step": str(k)}))
    return None


def see_it(term: Term, views: dict[Key, TraceView]) -> SeeIt | None:
    """Where ``term`` happens: the first trace (its home ones first) where its finder finds a step."""
    if term.key == "batching":
        return _batching(views)
    for key in dict.fromkeys([*term.home, *views]):
        view = views.get(key)
        if view is None:
            continue
        found = term.find(view)
        if found is not None:
            return SeeIt(key[0], key[1], found[0], found[1], show_me(view, found[0]))
    return None


def entries(views: dict[Key, TraceView]) -> list[tuple[Term, SeeIt | None]]:
    """Every term with its "see it" place (``None`` where no trace shows it, e.g. prefix caching in traces that
    do not record cache hits)."""
    return [(t, see_it(t, views)) for t in TERMS]


def _steps(x: float) -> str:
    return f"{fmt_number(x)} step" + ("" if x == 1 else "s")


def _runs(values: list) -> list[tuple]:
    """Run-length groups ``[(value, count), ...]``: 25 gaps of 1 read "1 × 25"."""
    out: list[list] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return [tuple(r) for r in out]


def worked_example(view: TraceView, request_id: str | None = None) -> dict | None:
    """TTFT, TPOT, ITL and E2E of one request with the arithmetic, on the step clock (step k starts at time k and
    ends at k + 1) and in seconds: ``request_id``, ``arrival_step``, ``first_token_step``, ``finish_step``,
    ``num_output_tokens`` and ``lines`` (one sentence per metric)."""
    ms = {m["request_id"]: m for m in request_metrics(view.records)}
    m = ms.get(request_id) if request_id else example_request(view)
    if m is None or m["ttft_steps"] is None:
        return None
    a, f, last, n = m["arrival_step"], m["first_token_step"], m["finish_step"], m["num_output_tokens"]
    lines = [
        f"TTFT = first token − arrival = (end of step {f}) − (start of step {a}) = {f + 1} − {a} = "
        f"{_steps(m['ttft_steps'])} ({m['ttft_s']:.3f} s on the wall clock).",
        f"E2E = last token − arrival = {last + 1} − {a} = {_steps(m['e2e_steps'])} ({m['e2e_s']:.3f} s).",
    ]
    if n >= 2:
        itl = m["itl_steps"]
        lines.append(
            f"TPOT = (E2E − TTFT) / (n − 1) = ({m['e2e_steps']} − {m['ttft_steps']}) / ({n} − 1) = "
            f"{_steps(m['tpot_steps'])} per output token ({m['tpot_s'] * 1000:.1f} ms)."
        )
        shown = ", ".join(f"{g} × {n}" if n > 1 else str(g) for g, n in _runs(itl))
        lines.append(
            f"ITL = the {len(itl)} gaps between its tokens, in steps: {shown}; their mean is the TPOT, "
            f"{fmt_number(sum(itl) / len(itl))}."
        )
    else:
        lines.append("TPOT and ITL are undefined: the request has a single output token.")
    keys = ("request_id", "arrival_step", "first_token_step", "finish_step", "num_output_tokens")
    return {**{k: m[k] for k in keys}, "lines": lines}
