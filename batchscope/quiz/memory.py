"""Quiz kinds about what the KV cache costs: the memory the blocks in use take (for a model whose shape
``batchscope.figures.kv_memory`` knows) and the slots reserved but unused in the requests' last blocks (internal
fragmentation). Both read one step's ``kv`` record (the pool during its forward pass), and are asked at steps
that allocate a block."""

from __future__ import annotations

import random

from batchscope.explain.words import join, plural
from batchscope.figures.kv_memory import bytes_per_token, element_bytes, fmt_bytes, model_shape, per_token_sum
from batchscope.figures.pool import block_map_cells
from batchscope.glossary.serving_finders import unused_slots
from batchscope.quiz.scheduling import ask
from batchscope.quiz.types import Choice, Question, int_choices, make_choices
from batchscope.steplog.view import TraceView

MAX_LISTED = 8  # the fragmentation question lists every request holding blocks: only where they are this few


def grew(view: TraceView, step: int) -> bool:
    """Whether the step allocates a block: the memory kinds are asked only where the pool changes."""
    return any(view.steps[step]["kv"].get("allocated", {}).values())


def kv_memory(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Bytes the KV blocks in use take during the step: blocks × block_size × bytes per token."""
    shape, element = model_shape(view.header), element_bytes(view.header)
    kv = view.steps[step]["kv"]
    n, bs = kv["num_used_blocks"], kv["block_size"]
    if not (shape and element and n and grew(view, step)):
        return None
    per_token = bytes_per_token(shape, element)
    value = n * bs * per_token
    filled = sum(c["fill"] for c in block_map_cells(view, step) if c["owner"])
    mha = n * bs * bytes_per_token(shape, element, shape.num_attention_heads)
    wrong = [filled * per_token, mha, value // 2, n * per_token, value * 2]
    choices = make_choices(Choice(fmt_bytes(value), value), [Choice(fmt_bytes(w), w) for w in wrong if w > 0], rng)
    why = (
        f"K and V for every layer and KV head: {per_token_sum(view.header)} per token; × {bs} slots = "
        f"{bs * per_token:,} bytes per block; × {n} blocks = {value:,} bytes ({fmt_bytes(value)}). A block takes "
        f"its whole size however many of its slots hold K/V ({filled} of the {n * bs} do); counting the "
        f"{shape.num_attention_heads} query heads instead of the {shape.num_kv_heads} KV heads would give "
        f"{shape.gqa_factor:g}× as much."
    )
    text = (
        f"{view.header['model']} in {view.header['dtype']}: {shape.num_layers} layers, "
        f"{shape.num_attention_heads} query heads sharing {shape.num_kv_heads} KV heads, head_dim "
        f"{shape.head_dim}. During step {view.step_number(step)}'s forward pass {plural(n, 'KV block')} of {bs} "
        "token slots are in use. How much memory do they take?"
    )
    return ask(view, step, "kv_memory", text, value, why, choices=choices)


def fragmentation(view: TraceView, step: int, rng: random.Random) -> Question | None:
    """Slots reserved but unused in the last blocks of the requests holding blocks, after the step's forward."""
    waste = unused_slots(view, step)
    if not grew(view, step) or not waste or len(waste) > MAX_LISTED or not any(u for u, _ in waste.values()):
        return None
    bs = view.steps[step]["kv"]["block_size"]
    ids = list(waste)
    value = sum(u for u, _ in waste.values())
    tokens = [n for _, n in waste.values()]
    blocks = sum(len(t) for r, t in view.block_tables(step).items() if r in waste)
    wrong = [sum(n % bs for n in tokens), sum(bs - n % bs for n in tokens), blocks * bs - value, len(ids) * bs]
    choices = int_choices(value, wrong, rng, "slot", lo=0)
    parts = [
        f"{r}: {bs} - {n} mod {bs} = {u}" if n % bs else f"{r}: {n} fills its blocks, 0" for r, (u, n) in waste.items()
    ]
    why = (
        f"Only a request's last block can be part filled; its unused slots are (block_size - tokens mod "
        f"block_size) mod block_size. {'; '.join(parts)}. In all, {value} of the {blocks * bs} slots of their "
        f"{plural(blocks, 'block')} {'is' if value == 1 else 'are'} reserved but empty, waiting for the next tokens."
    )
    text = (
        f"After step {view.step_number(step)}'s forward pass {join(ids)} hold K/V for "
        f"{join([str(n) for n in tokens])} tokens, in blocks of {bs} slots. How many slots of their blocks are "
        "reserved but unused?"
    )
    return ask(view, step, "fragmentation", text, value, why, choices=choices)
