"""KV-cache bytes: the figure for the shipped model equals a hand computation from its config.json, the formula
prices the engine's real pool, and the quiz's memory questions give the hand-computed answers on the shipped traces.

SmolLM2-135M-Instruct's config.json (as ``batchscope/model/models.py`` converts it): num_hidden_layers 30,
num_attention_heads 9, num_key_value_heads 3, head_dim 64; float32 is 4 bytes an element."""

from __future__ import annotations

import pytest
from conftest import RECORDED

from batchscope.figures.kv_memory import MODEL_SHAPES, ModelShape, bytes_per_token, fmt_bytes, kv_bytes_per_token
from batchscope.quiz.deck import question
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

SMOL_PER_TOKEN = 2 * 30 * 3 * 64 * 4  # K and V × layers × KV heads × head_dim × bytes: 46,080 bytes
SMOL_WITHOUT_GQA = 2 * 30 * 9 * 64 * 4  # one KV head per query head


def test_the_shipped_models_kv_bytes_are_the_hand_computed_ones():
    header = {"model": "SmolLM2-135M-Instruct", "dtype": "float32"}
    assert kv_bytes_per_token(header) == SMOL_PER_TOKEN == 46080
    assert kv_bytes_per_token({**header, "model": "HuggingFaceTB/SmolLM2-135M-Instruct"}) == 46080
    assert kv_bytes_per_token({**header, "dtype": "bfloat16"}) == 23040
    assert kv_bytes_per_token({**header, "model": "some-other-model"}) is None
    shape = MODEL_SHAPES["SmolLM2-135M-Instruct"]
    assert shape.gqa_factor == 3 and bytes_per_token(shape, 4, shape.num_attention_heads) == SMOL_WITHOUT_GQA
    assert (fmt_bytes(46080), fmt_bytes(8 * 46080), fmt_bytes(11 * 8 * 46080)) == ("45 KiB", "360 KiB", "3.87 MiB")


def test_the_formula_prices_the_engines_own_pool(tiny_model):
    """The tiny model (2 layers, 4 query heads sharing 2 KV heads of 16, float64): 2 × 2 × 2 × 16 × 8 = 1,024 bytes a
    slot, what the runner's KVCachePool allocates (its extra padding slot included)."""
    from batchscope.engine.config import EngineConfig
    from batchscope.model.runner import ModelRunner

    pool = ModelRunner(tiny_model, EngineConfig(num_kv_blocks=4, block_size=8)).pool
    slots = 4 * 8 + 1
    assert (pool.k.nbytes + pool.v.nbytes) / slots == bytes_per_token(ModelShape(2, 4, 2, 16), 8) == 1024


@pytest.mark.real_model
def test_the_table_matches_the_loaded_default_model_and_its_pool(smollm):
    from batchscope.engine.config import EngineConfig
    from batchscope.model.runner import ModelRunner

    cfg = smollm.model.config
    want = MODEL_SHAPES[smollm.name]  # the name traces record as ``model``
    got = (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim)
    assert got == (want.num_layers, want.num_attention_heads, want.num_kv_heads, want.head_dim) == (30, 9, 3, 64)
    pool = ModelRunner(smollm.model, EngineConfig(num_kv_blocks=2, block_size=8)).pool
    assert (pool.k.nbytes + pool.v.nbytes) / (2 * 8 + 1) == SMOL_PER_TOKEN


def _view(name: str) -> TraceView:
    return TraceView(trace.read(RECORDED / f"{name}.jsonl"))


def test_kv_memory_questions_price_the_blocks_in_use_by_hand():
    view = _view("seed-abcd-continuous")
    q = question(view, 3, 0, "kv_memory")
    st = view.records[4]  # step 3's raw record: 11 blocks of 8 in use during its forward pass
    assert st["kv"]["num_used_blocks"] == 11 and st["kv"]["block_size"] == 8
    assert q is not None and q.value == 11 * 8 * SMOL_PER_TOKEN == 4_055_040 and q.answer_label == "3.87 MiB"
    wrong = {c.value for c in q.choices} - {q.value}
    assert wrong <= {87 * SMOL_PER_TOKEN, 11 * 8 * SMOL_WITHOUT_GQA, q.value // 2, 11 * SMOL_PER_TOKEN, q.value * 2}
    assert "46,080 bytes per token" in q.explanation and "87 of the 88" in q.explanation
    assert question(view, 6, 0, "kv_memory") is None  # step 6 allocates no block: nothing to ask


def test_fragmentation_questions_count_the_empty_slots_of_the_last_blocks_by_hand():
    view = _view("seed-abcd-continuous")
    q0, q3 = question(view, 0, 0, "fragmentation"), question(view, 3, 0, "fragmentation")
    assert q0 is not None and q0.value == (8 - 5) + (8 - 3) + 0  # B 5 tokens, C 3, A 24 in 3 full blocks
    assert q3 is not None and q3.value == 1  # B 8 and A 72 fill their blocks, D's 7 leave one slot
    for q in (q0, q3):
        raw = view.records[q.step + 1]["kv"]
        want = sum(len(t) * 8 - raw["num_cached_tokens"][r] for r, t in raw["block_tables"].items())
        assert q.value == want and sum(c.value == want for c in q.choices) == 1
    sixteen = _view("sixteen-continuous")
    asked = [q for k in range(sixteen.num_steps) if (q := question(sixteen, k, 0, "fragmentation"))]
    assert asked and all(0 <= q.value < 16 * 4 for q in asked)  # under one block per request (4 slots of 16)
