"""The block map of a large pool (hundreds or thousands of blocks, e.g. a vLLM trace): one cell per group of
consecutive blocks, labelled with how many of them are used, so the map stays readable and cheap to redraw.

Built on ``kv.block_map_cells``, so each group counts exactly the blocks the full map would draw.
"""

from __future__ import annotations

from collections import Counter

from steplog.view import FREE_COLOR, TraceView
from visuals.kv import block_map_cells
from visuals.safe import esc

AGGREGATE_ABOVE = 400  # pools larger than this are drawn grouped
MAX_CELLS = 128  # at most this many group cells (8 rows of 16, the size of a 128-block pool's map)
COLUMNS = 16
MIXED_COLOR = "#6E6E6E"  # a group shared by several requests


def group_size(num_blocks: int) -> int:
    """Blocks per cell: the smallest group that keeps the map within ``MAX_CELLS`` cells."""
    return max(1, -(-num_blocks // MAX_CELLS))


def grouped_marks(view: TraceView, step: int) -> dict[str, list]:
    """Like ``kv.block_marks`` but one entry per group: colour of its only owner (grey if shared, light grey if
    all free), text ``used/size`` (plus ✕ or ⟲ when one of its blocks is released or was preempted), hover with
    the owners and counts, thick outline if one of its blocks was allocated this step."""
    cells = block_map_cells(view, step)
    size = group_size(len(cells))
    out: dict[str, list] = {k: [] for k in ("x", "y", "color", "text", "hover", "width", "line")}
    for i, start in enumerate(range(0, len(cells), size)):
        part = cells[start : start + size]
        owners = Counter(c["owner"] for c in part if c["owner"])
        used = sum(owners.values())
        color = view.colors[next(iter(owners))] if len(owners) == 1 else MIXED_COLOR if owners else FREE_COLOR
        marks = (" ✕" if any(c["releasing"] for c in part) else "") + (
            " ⟲" if any(c["preempted_from"] for c in part) else ""
        )
        who = ", ".join(f"{esc(rid)} {n}" for rid, n in owners.most_common(6)) + (", ..." if len(owners) > 6 else "")
        new = any(c["new"] for c in part)
        out["x"].append(i % COLUMNS)
        out["y"].append(i // COLUMNS)
        out["color"].append(color)
        out["text"].append(f"{used}/{len(part)}{marks}")
        out["hover"].append(
            f"blocks {start}–{start + len(part) - 1}: {used} used"
            + (f" ({who})" if who else "")
            + f", {len(part) - used} free"
        )
        out["width"].append(3 if new else 0.5)
        out["line"].append("#D55E00" if new else "#888")
    return out


def grouped_title(view: TraceView, step: int) -> str:
    kv = view.steps[step]["kv"]
    return (
        f"{esc(view.policy)}: KV blocks at step {view.step_number(step)}: "
        f"{kv['num_used_blocks']}/{kv['num_blocks']} used "
        f"(one cell = {group_size(kv['num_blocks'])} blocks)"
    )
