"""Packing helpers of the browser player's payload (``visuals.playback``): a table of distinct values, figures as
plain JSON, rows as deltas, the spans a long trace is packed in, and string lengths as JavaScript counts them."""

from __future__ import annotations

import itertools
import json
from typing import Any

import plotly.graph_objects as go

from steplog.view import TraceView

MAX_SPAN = 1000  # steps packed at once: a longer trace is played a span at a time (``spans``)


class Interner:
    """A table of distinct JSON values: ``intern(v)`` returns v's index, equal values share one index."""

    def __init__(self) -> None:
        self.table: list[Any] = []
        self._index: dict[str, int] = {}

    def __call__(self, value: Any) -> int:
        key = json.dumps(value, sort_keys=True, ensure_ascii=False)
        if key not in self._index:
            self._index[key] = len(self.table)
            self.table.append(value)
        return self._index[key]


def figure_json(fig: go.Figure) -> dict:
    """A figure as plain JSON (numpy arrays become lists), without its theme template (sent once per payload)."""
    d = json.loads(fig.to_json())
    d["layout"].pop("template", None)
    return d


def delta_rows(rows: list[list[int]]) -> dict[str, list]:
    """Equal-length rows, one per step, as the first row plus each step's changes ``[i, v, i, v, ...]``
    (empty for step 0)."""
    changes: list[list[int]] = [[]]
    for prev, row in itertools.pairwise(rows):
        changes.append([x for i, (a, b) in enumerate(zip(prev, row)) if a != b for x in (i, b)])
    return {"first": rows[0] if rows else [], "changes": changes}


def spans(num_steps: int, size: int = MAX_SPAN) -> list[tuple[int, int]]:
    """The clock cut into spans of ``size`` steps (the last one shorter): ``[(0, 999), (1000, 1999), ...]``."""
    return [(lo, min(lo + size, num_steps) - 1) for lo in range(0, max(num_steps, 1), size)]


def loaded(view: TraceView, span: tuple[int, int]) -> range:
    """The positions of ``view`` the payload computes for the clock's ``span``: its steps in the span, or its last
    step once it has finished (the side that finishes first holds its final state)."""
    last = view.num_steps - 1
    return range(min(span[0], last), min(span[1], last) + 1)


def fill(view: TraceView, ks: range, make) -> list:
    """``make(k)`` for each position ``k`` in ``ks``, as a list over every position of the trace: a position
    outside ``ks`` repeats the nearest one computed (the player never shows it: its clock stays in the span)."""
    values = [make(k) for k in ks]
    return [values[min(max(k, ks[0]), ks[-1]) - ks[0]] for k in range(view.num_steps)]


def utf16_len(text: str) -> int:
    """Length as JavaScript counts it (UTF-16 code units), so the client can slice the final text."""
    return len(text.encode("utf-16-le")) // 2
