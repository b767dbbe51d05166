"""The block map of a large pool (hundreds or thousands of blocks, e.g. a vLLM trace): one cell per group of
consecutive blocks, labelled with how many of them are used, so the map stays readable and cheap to redraw.

Built on ``pool.block_map_cells``, as ``kv.block_map`` is, so each group counts exactly the blocks the full map would
draw.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from batchscope.figures.pool import block_map_cells, one_step_flags
from batchscope.figures.safe import esc
from batchscope.steplog.reasons import pool_unit
from batchscope.steplog.view import FREE_COLOR, TraceView

AGGREGATE_ABOVE = 400  # pools larger than this are drawn grouped
MAX_CELLS = 128  # at most this many group cells (8 rows of 16, the size of a 128-block pool's map)
COLUMNS = 16
MIXED_COLOR = "#6E6E6E"  # a group shared by several requests


def group_size(num_blocks: int) -> int:
    """Blocks per cell: the smallest group that keeps the map within ``MAX_CELLS`` cells."""
    return max(1, -(-num_blocks // MAX_CELLS))


MARK_FIELDS = ("x", "y", "color", "text", "hover", "width", "line")


def _group_mark(
    view: TraceView, i: int, start: int, length: int, owners: Counter, releasing: bool, preempted: bool, new: bool
) -> tuple:
    """The mark of group ``i`` (``length`` blocks from ``start``), as a tuple in ``MARK_FIELDS`` order. ``owners``:
    blocks per owner, counted in block order (ties in the hover list keep that order); the flags: one of its blocks
    is released at the end of the step, was freed by a preemption, or was allocated in the step."""
    used = sum(owners.values())
    color = view.colors[next(iter(owners))] if len(owners) == 1 else MIXED_COLOR if owners else FREE_COLOR
    marks = (" ✕" if releasing else "") + (" ⟲" if preempted else "")
    # short labels (a server's ids are long; the full ones are on the slot grid's hover)
    who = ", ".join(f"{esc(view.label(rid))} {n}" for rid, n in owners.most_common(6))
    who += ", ..." if len(owners) > 6 else ""
    hover = f"blocks {start}–{start + length - 1}: {used} used" + (f" ({who})" if who else "")
    return (
        i % COLUMNS,
        i // COLUMNS,
        color,
        f"{used}/{length}{marks}",
        hover + f", {length - used} free",
        3 if new else 0.5,
        "#D55E00" if new else "#888",
    )


def _as_lists(marks: list[tuple]) -> dict[str, list]:
    return {name: [m[j] for m in marks] for j, name in enumerate(MARK_FIELDS)}


def grouped_marks(view: TraceView, step: int) -> dict[str, list]:
    """Like ``kv.block_marks`` but one entry per group: colour of its only owner (grey if shared, light grey if
    all free), text ``used/size`` (plus ✕ or ⟲ when one of its blocks is released or was preempted), hover with
    the owners and counts, thick outline if one of its blocks was allocated this step."""
    cells = block_map_cells(view, step)
    size = group_size(len(cells))
    marks = []
    for i, start in enumerate(range(0, len(cells), size)):
        part = cells[start : start + size]
        owners = Counter(c["owner"] for c in part if c["owner"])
        flags = [any(c[f] for c in part) for f in ("releasing", "preempted_from", "new")]
        marks.append(_group_mark(view, i, start, len(part), owners, *flags))
    return _as_lists(marks)


def grouped_title(view: TraceView, step: int) -> str:
    kv = view.steps[step]["kv"]
    unit = pool_unit(view.header)  # KV blocks, or an SGLang trace's token slots
    return (
        f"{esc(view.policy)}: {unit}s at step {view.step_number(step)}: "
        f"{kv['num_used_blocks']}/{kv['num_blocks']} used "
        f"(one cell = {group_size(kv['num_blocks'])} {unit.removeprefix('KV ')}s)"
    )


def grouped_marks_all(view: TraceView, span: tuple[int, int] | None = None) -> dict[int, list[tuple]]:
    """``grouped_marks`` of every step in ``span`` (positions ``lo..hi``; default all) at once, as mark tuples
    (``MARK_FIELDS`` order) per group: ``{step: [mark of group 0, ...]}``, for the player.

    A busy server's pool has tens of thousands of blocks and its trace thousands of steps, so drawing every block of
    every step (``pool.block_map_cells``) would take minutes. Here the block tables are followed step by step from the
    start (each block's holders and drawn owner, updated where a table changed), and each step of the span
    recomputes only the groups where something changed: a block joined or left a table, a block is allocated,
    released or freed by a preemption in this step or was in the step before (those marks last one step), or a
    block is shared by several tables (its drawn owner is the holder whose table comes first, as in
    ``block_map_cells``). A group left alone keeps the very same tuple as the step before.
    tests/visuals/test_player_payload.py checks the result against ``grouped_marks`` at every step.
    """
    if not view.steps:
        return {}
    n = view.steps[0]["kv"]["num_blocks"]
    size = group_size(n)
    lo, hi = span if span is not None else (0, len(view.steps) - 1)
    holders: dict[int, set[str]] = {}
    owner: list[str | None] = [None] * n
    shared: set[int] = set()
    prev: dict = {}
    marks: list[tuple] = []
    flagged: set[int] = set()  # groups with a one-step mark in the step before
    out: dict[int, list[tuple]] = {}
    for k in range(min(hi, len(view.steps) - 1) + 1):
        tables = view.block_tables(k)
        changed = _follow_tables(prev, tables, holders)
        for b in changed:
            (shared.add if len(holders.get(b, ())) > 1 else shared.discard)(b)
        order = {rid: i for i, rid in enumerate(tables)}
        for b in changed | shared:
            h = holders.get(b)
            owner[b] = (min(h, key=order.__getitem__) if len(h) > 1 else next(iter(h))) if h else None
        prev = tables
        if k < lo:
            continue
        flags = one_step_flags(view, k)
        now_flagged = {b // size for blocks in flags.values() for b in blocks}
        if not marks:
            dirty: set[int] = set(range(-(-n // size)))
            marks = [()] * len(dirty)
        else:
            dirty = {b // size for b in changed | shared} | now_flagged | flagged
        marks = list(marks)
        for g in dirty:
            marks[g] = _mark_of(view, g, g * size, min(n, (g + 1) * size), owner, flags)
        out[k] = marks
        flagged = now_flagged
    return out


def _mark_of(view: TraceView, g: int, start: int, end: int, owner: list, flags: dict[str, Any]) -> tuple:
    """Group ``g`` (blocks ``start..end - 1``) from each block's drawn owner and the step's one-step flags."""
    blocks = range(start, end)
    return _group_mark(
        view,
        g,
        start,
        end - start,
        Counter(filter(None, owner[start:end])),
        not flags["releasing"].isdisjoint(blocks),
        any(start <= b < end for b in flags["preempted"]),
        not flags["new"].isdisjoint(blocks),
    )


def _follow_tables(prev: dict, tables: dict, holders: dict[int, set[str]]) -> set[int]:
    """Update ``holders`` (block -> requests whose table holds it) from the tables of the step before to these;
    returns the blocks whose holders changed."""
    changed: set[int] = set()
    for rid in prev.keys() | tables.keys():
        old, new = prev.get(rid, ()), tables.get(rid, ())
        if old is new or old == new:
            continue
        for b in set(old).difference(new):
            holders[b].discard(rid)
            changed.add(b)
        for b in set(new).difference(old):
            holders.setdefault(b, set()).add(rid)
            changed.add(b)
    return changed
