"""A trace's figures as a plain-text table (``python -m batchscope metrics TRACE [TRACE2]``): one row per figure, one
column per trace, "n/a" where a figure cannot be computed (TPOT of one-token requests, a run without steps)."""

from __future__ import annotations

import math

from batchscope.steplog.frames import summary_frame


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def metrics_table(runs: dict[str, list[dict]]) -> str:
    """Aggregates of each run (``batchscope.steplog.frames.summary_frame``) as aligned text columns."""
    frame = summary_frame(runs)
    labels = list(runs)
    header = ["metric", "stat", "unit", *labels]
    rows = [header] + [
        [str(r["metric"]), str(r["stat"]), str(r["unit"]), *(_cell(r[label]) for label in labels)]
        for r in frame.to_dict("records")
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows)
