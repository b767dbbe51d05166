"""KV-cache views: blocks used per request over time, and the block map of the pool at one step (each block's state
from ``batchscope.figures.pool``)."""

from __future__ import annotations

import plotly.graph_objects as go

from batchscope.facts import eviction
from batchscope.figures import blockgroups
from batchscope.figures.pool import block_map_cells, set_aside
from batchscope.figures.safe import esc
from batchscope.steplog.reasons import pool_unit
from batchscope.steplog.view import FREE_COLOR, TraceView

# The states of a block that no request is writing to, apart in grey as well as in colour, so that a washed-out
# projector or a grayscale print keeps them apart (CIE L*: free 92, reserved 82, cached 70; every request colour of
# presenter mode is 58 or darker; tests/ui/test_browser_block_states.py measures them as drawn):
CACHED_COLOR = "#7DB0D4"  # a free block that still holds a cached prefix (blue, darker than free: it holds K/V)
RESERVED_COLOR = "#E2C992"  # set aside: a static batch's or TensorRT-LLM's reservation, or TGI's unwritten "A res"
ID_STYLE = "font-size:7px;color:#444"  # the block id, small, on the first line of its cell
HIT_MARK = "★"  # a held block found in the prefix cache in this step (DejaVu Sans has it: no emoji font needed)
HIT_LINE = "#0072B2"  # its outline: blue, where a block allocated in this step has vermillion
EVICTED_LINE = "#1F2430"  # a block a preemption (retraction, pause) freed in this step: ⟲ and a dark outline, which
# stays visible where the map's cells are too small for the mark (presenter mode's 216 token slots of SGLang)


def cell_text(block: int, body: str) -> str:
    """A block map cell's text: its block id on a small first line, then ``body`` (owner and fill, or a mark)."""
    head = f"<span style='{ID_STYLE}'>{block}</span>"
    return f"{head}<br>{body}" if body else head


def cell_body(text: str) -> str:
    """``text`` of ``cell_text`` without the block id line."""
    return text.split("<br>", 1)[1] if "<br>" in text else ""


def kv_usage(view: TraceView, step: int | None = None, num_steps: int | None = None) -> go.Figure:
    """Stacked areas: KV blocks held by each request at every step, against the pool size."""
    fig = go.Figure()
    x = list(range(view.num_steps))
    counts = view.block_counts
    for rid in view.request_ids:
        held = counts.get(rid, {})
        y = [held.get(k, 0) for k in range(len(x))]
        if not any(y):
            continue
        fig.add_scatter(
            x=x,
            y=y,
            name=esc(view.label(rid)),
            stackgroup="kv",
            mode="lines",
            line=dict(width=0.5, shape="hv"),
            fillcolor=view.colors[rid],
            marker=dict(color=view.colors[rid]),
            hovertemplate=f"{esc(rid)}: %{{y}} blocks<extra></extra>",
        )
    total = view.header["config"]["num_kv_blocks"]
    fig.add_hline(
        y=total,
        line=dict(color="#333", dash="dash"),
        annotation_text=f"pool: {total} {pool_unit(view.header).removeprefix('KV ')}s",
        annotation_position="top left",
    )
    fig.update_layout(
        title=f"{esc(view.policy)}: {pool_unit(view.header)}s used per request",
        height=300,
        margin=dict(l=10, r=10, t=40, b=30),
        showlegend=False,
        xaxis=dict(
            title="step",
            range=[-0.5, (num_steps or view.num_steps) - 0.5],
            **view.step_ticks(0, (num_steps or view.num_steps) - 1),
        ),
        yaxis=dict(title="blocks", range=[0, total * 1.08]),
    )
    if step is not None:
        fig.add_vline(x=step, line=dict(color="#D00", width=2, dash="dot"))
    return fig


def reservation(view: TraceView) -> str:
    """What a free block marked "res" is counted in: a static batch's worst case, or TensorRT-LLM's blocks to
    completion (both reserve a number of blocks, not particular ones)."""
    if view.policy == "trtllm":
        return (
            "counted in the blocks TensorRT-LLM sets aside for the running requests to complete (a number of blocks, "
            "not these ones: a request is admitted only if its own blocks to completion fit the rest)"
        )
    return (
        "counted in the static batch's worst-case reservation (it reserves a number of blocks, not these ones: a new "
        "batch is admitted only within the pool)"
    )


def _owned_cell(view: TraceView, c: dict, bs: int, words: tuple[str, str, str]) -> tuple[str, str]:
    """The text and hover of a block with an owner: owner, ×refs (shared), the prefix-cache hit, ✕ (released at
    the end of the step), ⟲ and the request an eviction took it from in this step (handed on at once), fill."""
    word, by, fill = words
    owner, taken = c["owner"], c["preempted_from"]
    mark = " ✕" if c["releasing"] else ""
    shared = f"×{c['refs']}" if c["refs"] > 1 else ""  # in N block tables (prefix cache)
    hit = f" {HIT_MARK}" if c["hit"] else ""
    text = cell_text(
        c["block"],
        f"{esc(view.label(owner))}{shared}{hit}{mark}"
        + (f" ⟲{esc(view.label(taken))}" if taken else "")
        + f"<br>{c['fill']}/{bs}",
    )
    hover = (
        f"{word} {c['block']}: {esc(owner)}"
        + fill.format(c["fill"])
        + (f", shared by {c['refs']} requests (reference count {c['refs']})" if shared else "")
        + (f"; {esc(c['hit'])} found it in the prefix cache in this step" if hit else "")
        + (" (released at the end of this step)" if mark else "")
        + (f"; taken from {esc(taken)} by its {by} in this step" if taken else "")
    )
    return text, hover


def block_marks(view: TraceView, step: int, columns: int = 16) -> dict[str, list]:
    """What ``block_map`` draws for each block at ``step``, as parallel lists: grid position (``x``, ``y``),
    ``color`` (owner or free), ``text`` (``cell_text``: the block id, then owner, release mark and fill; a free block
    only at the start of a row), ``hover``, outline ``width`` and ``line`` colour (thick vermillion = allocated this
    step). The browser player draws the same lists (in presenter mode, where cells are small, without the id line: it
    stays on hover)."""
    cells = block_map_cells(view, step)
    bs = view.steps[step]["kv"].get("block_size") or view.header["config"]["block_size"]
    out: dict[str, list] = {k: [] for k in ("x", "y", "color", "text", "hover", "width", "line")}
    slots = pool_unit(view.header) == "token slot"  # an SGLang trace: a cell is one token's slot, freed by retraction
    word, by, fill = ("slot", "retraction", "") if slots else ("block", "preemption", ", {}/" + f"{bs} slots")
    for c in cells:
        out["x"].append(c["block"] % columns)
        out["y"].append(c["block"] // columns)
        owner = c["owner"]
        out["color"].append(view.colors[owner] if owner else FREE_COLOR)
        hit = f" {HIT_MARK}" if owner and c["hit"] else ""
        if owner and c["unwritten"]:
            out["color"][-1] = RESERVED_COLOR
            out["text"].append(cell_text(c["block"], f"{esc(view.label(owner))} res"))
            out["hover"].append(
                f"{word} {c['block']}: reserved by {esc(owner)}, not yet written (it was allocated at admission for "
                "tokens still to come: TGI gives a request its whole lifetime of blocks at once)"
            )
        elif owner:
            text, hover = _owned_cell(view, c, bs, (word, by, fill))
            out["text"].append(text)
            out["hover"].append(hover)
        elif c["preempted_from"]:
            out["text"].append(cell_text(c["block"], f"⟲{esc(view.label(c['preempted_from']))}"))
            out["hover"].append(f"{word} {c['block']}: free (taken from {esc(c['preempted_from'])} by {by})")
        elif c["reserved"]:
            out["color"][-1] = RESERVED_COLOR
            out["text"].append(cell_text(c["block"], "res"))
            out["hover"].append(f"{word} {c['block']}: free, but {reservation(view)}")
        elif c["cached"]:
            out["color"][-1] = CACHED_COLOR
            out["text"].append(cell_text(c["block"], "cached"))
            out["hover"].append(
                f"{word} {c['block']}: free, but keeps a cached prefix (a request with the same prefix "
                "can still hit it until it is reused: evictable)"
            )
        else:
            # a free cell: its id only at the start of a row (the ids run 16 to a row, so the rest follow; a label in
            # every free cell would make each redraw of the map a third slower in the browser)
            out["text"].append(cell_text(c["block"], "") if c["block"] % columns == 0 else "")
            out["hover"].append(f"{word} {c['block']}: free")
        back = c["preempted_from"] and not owner  # freed by an eviction in this step: ⟲ and a dark outline
        out["width"].append(3 if c["new"] or hit else 2 if back else 0.5)
        out["line"].append("#D55E00" if c["new"] else HIT_LINE if hit else EVICTED_LINE if back else "#888")
    return out


def legend_text(view: TraceView) -> str:
    """The key under the block map, in the pool's unit (an SGLang trace's token slots; its preemptions are
    retractions)."""
    sglang = pool_unit(view.header) == "token slot"
    unit = "Token slots" if sglang else "KV blocks"
    freed = f"a {eviction(view.header).noun}"  # the engine's own word (batchscope.facts.vocabulary)
    return (
        f"{unit}: outlined = allocated this step; ✕ = released at the end of this step (owner finished); ⟲ (dark "
        f"outline) = freed by {freed} in this step (beside an owner's name: taken at once); ×N = shared by N "
        "requests (prefix cache); ★ (blue outline) = found in the prefix cache in this step; blue = free but cached "
        '(evictable); sand "res" = reserved: free but set aside (a static batch, TensorRT-LLM), or "A res": '
        "allocated to A for tokens it has not written yet (TGI reserves a whole lifetime); "
        "grey = free."
    )


# The block map's key in presenter mode, one item a state or mark: (key, swatch colour or "" for a mark, label).
# The player shows the items a trace's map draws (``present_keys``), each state in its own colour.
KEY_ITEMS = (
    ("free", FREE_COLOR, "free"),
    ("cached", CACHED_COLOR, "cached (free, evictable)"),
    ("reserved", RESERVED_COLOR, "res = reserved"),
    ("evicted", "", "⟲ (dark outline) freed by {noun}"),
    ("released", "", "✕ released (finished)"),
    ("hit", "", "★ prefix-cache hit"),
)


def present_keys(view: TraceView, marks: list[tuple[str, str]]) -> list[list[str]]:
    """The key items (``KEY_ITEMS``: ``[colour, label]``) of the states and marks among ``marks`` (the ``(colour,
    text)`` of every cell the map draws over the trace), free always, in the pool's words (a retraction's ⟲)."""
    seen = {"free"}
    for color, text in marks:
        seen |= {"cached"} if color == CACHED_COLOR else {"reserved"} if color == RESERVED_COLOR else set()
        seen |= {k for k, m in (("evicted", "⟲"), ("released", "✕"), ("hit", HIT_MARK)) if m in text}
    noun = eviction(view.header).noun
    return [[color, label.format(noun=noun)] for key, color, label in KEY_ITEMS if key in seen]


def block_map_title(view: TraceView, step: int) -> str:
    """The block map's title at ``step``: blocks used out of the pool, and the free blocks a static batch or
    TensorRT-LLM sets aside (the map's *res* cells: the reservation beyond the blocks in use, which
    ``kv.num_reserved_blocks`` counts too, so "14 reserved" beside "6 used" read as 20 of the pool)."""
    kv = view.steps[step]["kv"]
    who = "TensorRT-LLM" if view.policy == "trtllm" else "the static batch"
    reserved = ""
    if "num_reserved_blocks" in kv:
        reserved = f", {set_aside(kv)} more set aside by {who}"
    unit = pool_unit(view.header)  # KV blocks, or an SGLang trace's token slots
    return (
        f"{esc(view.policy)}: {unit}s at step {view.step_number(step)}: {kv['num_used_blocks']}/{kv['num_blocks']} "
        f"used{reserved}"
    )


def block_map(view: TraceView, step: int, columns: int = 16) -> go.Figure:
    """The pool as a grid of blocks at ``step``: colour = owner, text = block id, owner and fill (``5 / A / 7/16``).

    Blocks allocated in this step have a thick vermillion outline; blocks released at the end of this step (their owner
    finished) are marked ``✕``; blocks a preemption freed in this step show ``⟲`` and the old owner; free blocks
    are light grey. Pools over ``blockgroups.AGGREGATE_ABOVE`` blocks: one cell per group of blocks
    (``batchscope.figures.blockgroups``).
    """
    if view.steps[step]["kv"]["num_blocks"] > blockgroups.AGGREGATE_ABOVE:
        m, title, columns = blockgroups.grouped_marks(view, step), blockgroups.grouped_title(view, step), 16
    else:
        m, title = block_marks(view, step, columns), block_map_title(view, step)
    rows = -(-len(m["x"]) // columns)
    fig = go.Figure()
    fig.add_scatter(
        x=m["x"],
        y=m["y"],
        mode="markers+text",
        text=m["text"],
        hovertext=m["hover"],
        hoverinfo="text",
        textfont=dict(size=9, color="#111"),
        marker=dict(symbol="square", size=34, color=m["color"], line=dict(width=m["width"], color=m["line"])),
    )
    fig.update_layout(
        title=title,
        height=90 + 40 * rows,
        margin=dict(l=10, r=10, t=40, b=10),
        showlegend=False,
        xaxis=dict(visible=False, range=[-0.6, columns - 0.4]),
        yaxis=dict(visible=False, autorange="reversed", range=[rows - 0.4, -0.6]),
    )
    return fig
