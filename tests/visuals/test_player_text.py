"""The player's text table: multi-byte characters appear whole, by the recorded deltas, and a trace with skipped
idle steps is indexed by position."""

from __future__ import annotations

import json

from conftest import RECORDED, step_records
from fakes import EOS, FakeRunner, make_request

from batchscope.engine.config import EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

SEED = RECORDED / "seed-abcd-continuous.jsonl"


def test_the_browser_player_grows_text_by_the_recorded_deltas_and_skips_idle_steps():
    """The player's text table (its payload) equals ``text_so_far`` at every step: multi-byte characters appear
    whole (``text_delta``), and a trace with skipped idle steps is indexed by position."""
    from test_player_payload import decode_text

    from batchscope.explain.stepinfo import text_so_far
    from batchscope.player.playback import player_payload

    records = json.loads(json.dumps(trace.read(SEED)))
    for st in step_records(records):  # every token is one byte of an emoji: three make a character
        for s in st["sampled"]:
            s["text"], s["partial"] = "\ufffd", True
    for r in records[-1]["requests"]:
        n = len(r["output_token_ids"])
        r["output_text"] = "🌱" * (n // 3) + "\ufffd" * (n % 3)
        deltas = [("🌱" if k % 3 == 2 else "") for k in range(n)]
        if n % 3:
            deltas[-1] = "\ufffd" * (n % 3)  # the flush at the end: an unfinished character
        it = iter(deltas)
        for st in step_records(records):
            for s in st["sampled"]:
                if s["request_id"] == r["request_id"]:
                    s["text_delta"] = next(it)
    view = TraceView(trace.loads("".join(json.dumps(r) + "\n" for r in records)))
    v = player_payload([view], "deltas")["views"][0]
    for k in range(view.num_steps):
        assert [decode_text(v, i, k) for i in range(len(view.request_ids))] == list(text_so_far(view, k).values())
    gap = [make_request("A", 3, 2, arrival_step=0), make_request("B", 3, 2, arrival_step=40)]
    idle = TraceView(LLMEngine(FakeRunner(), EngineConfig(block_size=4, num_kv_blocks=8), eos_token_ids={EOS}).run(gap))
    v = player_payload([idle], "idle")["views"][0]
    for k in range(idle.num_steps):
        assert [decode_text(v, i, k) for i in range(2)] == list(text_so_far(idle, k).values())
