"""Packing helpers of the browser player's payload (``batchscope.player.playback``): a table of distinct values, figures
as plain JSON, rows as deltas, the spans a long trace is packed in, and string lengths as JavaScript counts them."""

from __future__ import annotations

import itertools
import json
from typing import Any

import plotly.graph_objects as go

from batchscope.steplog.view import TraceView

# How much of a trace the player gets at once: a span of steps whose slot grid holds at most MAX_SPAN_CELLS cells
# (steps x max_num_seqs), and never fewer than MIN_SPAN steps. The 16-on-4 pair (1222 steps, 4 slots) fits whole;
# a busy server's trace (thousands of steps, 64 slots) goes 1000 steps at a time.
MAX_SPAN_CELLS = 64_000
MIN_SPAN = 1000


class Interner:
    """A table of distinct JSON values: ``intern(v)`` returns v's index, equal values share one index."""

    def __init__(self) -> None:
        self.table: list[Any] = []
        self._index: dict[str, int] = {}
        self._flat: dict[tuple, int] = {}

    def __call__(self, value: Any) -> int:
        key = json.dumps(value, sort_keys=True, ensure_ascii=False)
        if key not in self._index:
            self._index[key] = len(self.table)
            self.table.append(value)
        return self._index[key]

    def flat(self, values: tuple) -> int:
        """``intern(list(values))`` for a tuple of strings and numbers, without serializing a tuple seen before (the
        block map interns a look per block per step: a quarter of a million on the 16-request pair). Keyed with each
        value's type, so that ``1``, ``1.0`` and ``True`` (equal in Python, not in JSON) stay apart."""
        key = (values, tuple(map(type, values)))
        index = self._flat.get(key)
        if index is None:
            index = self._flat[key] = self(list(values))
        return index


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


def span_size(max_num_seqs: int) -> int:
    """Steps packed at once for a trace of ``max_num_seqs`` slots (see ``MAX_SPAN_CELLS``)."""
    return max(MIN_SPAN, MAX_SPAN_CELLS // max(1, max_num_seqs))


def spans(num_steps: int, size: int) -> list[tuple[int, int]]:
    """The clock cut into spans of ``size`` steps (the last one shorter): ``[(0, 999), (1000, 1999), ...]``."""
    return [(lo, min(lo + size, num_steps) - 1) for lo in range(0, max(num_steps, 1), size)]


def span_of(views: list[TraceView], step: int) -> tuple[int, int]:
    """The span of ``views`` (one clock) holding ``step``: the whole clock when it fits (``span_size``)."""
    num_steps = max(v.num_steps for v in views)
    size = span_size(max(v.header["config"]["max_num_seqs"] for v in views))
    return next(s for s in spans(num_steps, size) if s[0] <= step <= s[1])


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
