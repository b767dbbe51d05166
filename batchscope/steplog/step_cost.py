"""What a step costs, from the trace itself: each step's wall time against the tokens it computed.

The seed's central claim is that a decode step reads every weight once whatever the number of rows, so the time
of a step grows slowly with its batch and the cost per token falls. ``step_costs`` gives each step's figures,
``decode_by_batch`` the median decode-only step per number of decoding requests, and ``fit`` a robust line
time = fixed + per_token × tokens over all steps: ``fixed`` is what a step costs before it computes anything (the
weights read, the scheduler, the framework), ``per_token`` the price of one more token in the step. Units: seconds
and tokens.
"""

from __future__ import annotations

import statistics
from typing import Any, TypedDict


class StepCost(TypedDict):
    step: int  # position in the trace
    tokens: int  # tokens computed (num_batched_tokens)
    rows: int  # batch rows in the forward: scheduled requests plus a static batch's padding rows
    seconds: float  # wall time of the step (t_end - t_start)
    decode_only: bool  # every scheduled request decodes one token (no prompt chunk)


def step_costs(view: Any) -> list[StepCost]:
    """One entry per step of ``view`` that computed tokens and has a duration (a server's trace with asynchronous
    scheduling may record none)."""
    out: list[StepCost] = []
    for k, st in enumerate(view.steps):
        seconds = st["t_end"] - st["t_start"]
        if not st["scheduled"] or seconds <= 0:
            continue
        out.append(
            {
                "step": k,
                "tokens": st["num_batched_tokens"],
                "rows": len(st["scheduled"]) + len(st.get("padding_slots", [])),
                "seconds": seconds,
                "decode_only": all(s["kind"] == "decode" for s in st["scheduled"]),
            }
        )
    return out


def decode_by_batch(costs: list[StepCost]) -> dict[int, dict[str, float]]:
    """Decode-only steps grouped by the requests decoding (one token each; a static batch's padding rows ride along
    and produce nothing): ``{n: {"steps", "median_s", "per_token_s"}}``, the median step time and that time / n.
    The steps ``fit`` marks as outliers (over 3 x its line: a warm-up step, a step that waited for a busy CPU) are
    left out, so one such step never stands for a whole batch size (``seed-abcd``'s static run: its one decode step
    of two requests took 876 ms, 8 x the others); a batch size with only such steps is absent."""
    line = fit(costs)
    outliers = set(line["outliers"]) if line else set()
    groups: dict[int, list[float]] = {}
    for c in costs:
        if c["decode_only"] and c["step"] not in outliers:
            groups.setdefault(c["tokens"], []).append(c["seconds"])
    out = {}
    for n, times in sorted(groups.items()):
        median = statistics.median(times)
        out[n] = {"steps": len(times), "median_s": median, "per_token_s": median / n}
    return out


def fit(costs: list[StepCost]) -> dict | None:
    """The line ``seconds = fixed_s + per_token_s * tokens`` through ``costs``, robust to the rare far slower step:
    the median step time of each token count, then the Theil-Sen line through those points (the slope is the median
    of the slopes between every two of them, the intercept the median of ``y - slope * x``; Theil 1950, Sen 1968).
    A GPU's first, warm-up step or a step that waited for a busy CPU tilts a least-squares line; this one holds
    while fewer than about 29 % of the points are off it. ``{"fixed_s", "per_token_s", "outliers"}``: the line and
    the ``step`` numbers of steps over 3 x the time the line predicts for them; None with fewer than two distinct
    token counts (no slope can be told)."""
    groups: dict[int, list[float]] = {}
    for c in costs:
        groups.setdefault(c["tokens"], []).append(c["seconds"])
    if len(groups) < 2:
        return None
    points = [(x, statistics.median(ys)) for x, ys in sorted(groups.items())]
    slope = statistics.median(
        [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1 :]]
    )
    intercept = statistics.median([y - slope * x for x, y in points])
    outliers = [c["step"] for c in costs if c["seconds"] > 3 * (intercept + slope * c["tokens"])]
    return {"fixed_s": intercept, "per_token_s": slope, "outliers": outliers}
