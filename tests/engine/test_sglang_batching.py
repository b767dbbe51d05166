"""The SGLang family in the engine (``--batching sglang``, ``batchscope.sglang_family.batching``) on a real runner:
greedy outputs equal transformers ``generate`` request by request through chunks, prefix hits, evictions and
retractions; every slot is held exactly once after every step; the settings it cannot take fail in one line."""

from __future__ import annotations

import pytest
import torch
from conftest import hf_greedy, step_records

from batchscope.engine.batching import make_scheduler
from batchscope.engine.config import ConfigError, EngineConfig
from batchscope.engine.engine import LLMEngine
from batchscope.engine.request import Request, SamplingParams
from batchscope.engine.validation import RequestError
from batchscope.model.runner import ModelRunner
from batchscope.sglang_family.batching import page_size_one


def _prompts(lengths: tuple[int, ...], seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, 128, (n,), generator=g).tolist() for n in lengths]


def long_answers() -> list[tuple[list[int], int]]:
    """Four short prompts with 40-token answers: in a pool of 76 tokens the ratio over-commits and decode retracts."""
    return [(p, 40) for p in _prompts((3, 5, 2, 4), 2)]


def shared_stems() -> list[tuple[list[int], int]]:
    """A 22-token stem before five prompts, and the stem alone twice: prefix hits at token granularity."""
    stem, *rest = _prompts((22, 5, 13, 3, 9, 6), 1)
    return [(stem + p, m) for p, m in zip(rest, (10, 6, 14, 8, 12))] + [(list(stem), 7), (list(stem), 5)]


CASES = {
    "retraction-cache": (long_answers, dict(num_kv_blocks=76, max_num_batched_tokens=8)),
    "retraction-no-cache": (
        long_answers,
        dict(num_kv_blocks=76, max_num_batched_tokens=8, enable_prefix_caching=False),
    ),
    "retraction-mixed": (long_answers, dict(num_kv_blocks=76, max_num_batched_tokens=8, enable_mixed_chunk=True)),
    "stems-fcfs-chunks": (shared_stems, dict(num_kv_blocks=400, max_num_batched_tokens=10)),
    "stems-lpm": (shared_stems, dict(num_kv_blocks=400, max_num_batched_tokens=64, scheduling_policy="lpm")),
    "stems-evicting": (shared_stems, dict(num_kv_blocks=60, max_num_batched_tokens=16, max_num_seqs=2)),
    "fixed-length-no-cache": (
        long_answers,
        dict(num_kv_blocks=76, max_num_batched_tokens=8, enable_prefix_caching=False),
    ),
}
# The engine here has no EOS ids, so every request runs to max_tokens; ignore_eos only changes what SGLang charges:
# the retraction cases run without it (their remaining output counts at new_token_ratio, so admission over-commits),
# the others with it (their remaining output counts whole; without the prefix cache, the simulated fixed-length run).
IGNORE_EOS = {name: not name.startswith("retraction") for name in CASES}


def run_sglang(model, workload, ignore_eos=True, **config):
    cfg = EngineConfig(batching="sglang", block_size=1, **{"max_num_seqs": 4, **config})
    reqs = [
        Request(f"r{i}", p, SamplingParams(max_tokens=m, ignore_eos=ignore_eos), arrival_step=i % 3)
        for i, (p, m) in enumerate(workload)
    ]
    engine = LLMEngine(ModelRunner(model, cfg), cfg)
    records = engine.run(reqs, on_step=lambda _: engine.scheduler.memory.check_slots())  # type: ignore[union-attr]
    return step_records(records), {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}


@pytest.mark.parametrize("name", CASES)
def test_greedy_matches_generate(tiny_model, name):
    make, config = CASES[name]
    workload = make()
    steps, outputs = run_sglang(tiny_model, workload, IGNORE_EOS[name], **config)
    assert [outputs[f"r{i}"] for i in range(len(workload))] == [hf_greedy(tiny_model, p, m) for p, m in workload]
    batches = [st["decisions"]["batch"]["kind"] for st in steps]
    assert set(batches) == {"extend", "decode"}
    hits = [n for st in steps for n in st["num_prefix_hit_tokens"].values()]
    if name.startswith("retraction"):
        assert any(st["preempted"] for st in steps)  # retracted, then recomputed
        retracted = [p for st in steps for p in st["decisions"]["preemptions"]]
        assert all(p["rule"] == "sglang_retract" for p in retracted)
    if name == "retraction-cache":
        assert any(n > 0 for n in hits)  # a retracted request comes back to its cached prompt
    if name.startswith("stems"):
        assert sum(hits) >= 22 * 3, hits  # the stem found in the cache, not recomputed
    if name == "stems-fcfs-chunks":
        assert any(s["num_tokens"] == 10 and s["kind"] == "prefill" for st in steps for s in st["scheduled"])
    if name == "retraction-mixed":
        assert any(st["decisions"]["batch"].get("decodes_mixed") for st in steps)  # decodes in a prefill batch
    if name == "fixed-length-no-cache":
        limits = {st["decisions"].get("head", {}).get("limit") for st in steps}
        assert "sglang_fixed_length_run" in limits  # the simulated run holds a request back
    if name == "stems-evicting":
        assert any(st["kv"]["evicted"] for st in steps)


def test_prefill_first_makes_the_decodes_wait():
    """A fake-runner schedule worked by hand: A (20 tokens, chunks of 16) is the chunked request and takes the whole
    chunk budget; B joins A's last chunk; C arrives at step 2 and its EXTEND batch runs alone: A and B wait."""
    from fakes import make_request, run_fake, table

    reqs = [make_request("A", 20, 3), make_request("B", 4, 5), make_request("C", 12, 2, arrival_step=2)]
    steps, _, _ = run_fake(reqs, batching="sglang", block_size=1, num_kv_blocks=100, max_num_batched_tokens=16)
    assert table(steps)[:4] == [
        [("A", "prefill", 16)],  # no chunk tokens left for B
        [("A", "prefill", 4), ("B", "prefill", 4)],
        [("C", "prefill", 12)],  # C arrived: an EXTEND batch forms, so A's and B's decodes wait
        [("A", "decode", 1), ("B", "decode", 1), ("C", "decode", 1)],
    ]
    assert steps[0]["decisions"]["head"] == {
        "request_id": "B",
        "limit": "token_budget",
        "need": 1,
        "left": 0,
        "order": "arrival",
    }
    assert steps[2]["decisions"]["batch"]["decodes_waiting"] == ["A", "B"]
    admission = steps[0]["decisions"]["admissions"][0]
    assert admission["num_reserved_output_tokens"] == 0  # a chunked prompt reserves no output yet
    assert steps[1]["decisions"]["admissions"][0]["num_reserved_output_tokens"] == 5


def test_mixed_chunk_decodes_run_inside_the_prefill_batch():
    """The same schedule with ``enable_mixed_chunk`` (the flag ``--enable-mixed-chunk``), worked by hand: at step 2
    the running A and B take 2 of C's 16 chunk tokens and decode in its batch; the record says so, none wait."""
    import argparse

    from fakes import make_request, run_fake, table

    from batchscope.cli.flags import add_engine_flags, config_from_args

    parser = argparse.ArgumentParser()
    add_engine_flags(parser)
    args = parser.parse_args(["--batching", "sglang", "--enable-mixed-chunk", "--max-num-batched-tokens", "16"])
    config = config_from_args(args, {"num_kv_blocks": 100, "block_size": 1})
    assert config.enable_mixed_chunk
    reqs = [make_request("A", 20, 3), make_request("B", 4, 5), make_request("C", 12, 2, arrival_step=2)]
    kw = {k: getattr(config, k) for k in ("batching", "block_size", "num_kv_blocks", "max_num_batched_tokens")}
    steps, _, _ = run_fake(reqs, enable_mixed_chunk=True, **kw)
    assert table(steps)[:4] == [
        [("A", "prefill", 16)],
        [("A", "prefill", 4), ("B", "prefill", 4)],
        [("C", "prefill", 12), ("A", "decode", 1), ("B", "decode", 1)],  # 12 + 2 of the 16 chunk tokens
        [("C", "decode", 1), ("A", "decode", 1), ("B", "decode", 1)],  # one batch now, C first
    ]
    batch = steps[2]["decisions"]["batch"]
    assert (batch["kind"], batch["decodes_mixed"], batch["decodes_waiting"]) == ("extend", ["A", "B"], [])


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (dict(block_size=16), "block_size"),
        (dict(block_size=1, enable_chunked_prefill=False), "enable_chunked_prefill"),
        (dict(block_size=1, scheduling_policy="priority"), "scheduling_policy"),
        (dict(block_size=1, max_num_seqs=0), "max_num_seqs"),
        (
            dict(block_size=1, enable_mixed_chunk=True, max_num_seqs=4, max_num_batched_tokens=4),
            "max_num_batched_tokens",
        ),
        (dict(block_size=1, enable_mixed_chunk="yes"), "enable_mixed_chunk"),
    ],
)
def test_settings_it_cannot_take(config, field):
    with pytest.raises(ConfigError) as err:
        make_scheduler(EngineConfig(batching="sglang", **config))
    assert err.value.field == field and "\n" not in str(err.value)


def test_lpm_and_mixed_chunks_are_sglang_only_and_pages_are_token_slots():
    with pytest.raises(ConfigError, match="scheduling_policy"):
        make_scheduler(EngineConfig(scheduling_policy="lpm"))
    for batching in ("continuous", "static"):
        with pytest.raises(ConfigError, match=r"enable_mixed_chunk=True .*--batching sglang"):
            make_scheduler(EngineConfig(batching=batching, enable_mixed_chunk=True))
    mapped = page_size_one(EngineConfig(batching="sglang", block_size=8, num_kv_blocks=32))
    assert (mapped.block_size, mapped.num_kv_blocks) == (1, 256)


def test_only_a_request_sglang_would_never_admit_is_refused():
    """SGLang clips what does not fit and refuses a prompt too long with an abort (tests/engine/test_sglang_edges.py);
    the one request it takes and never runs is an ignore_eos one without the prefix cache whose output fills the pool
    to pool - prompt - 2: its simulated run keeps 20 + 1 and its 10 tokens, and wants more than 1 free."""
    from fakes import make_request, run_fake

    fixed = make_request("A", 20, 10, ignore_eos=True)
    with pytest.raises(RequestError, match=r"needs a pool of >= 33 tokens .* lower max_tokens to <= 9") as err:
        run_fake([fixed], batching="sglang", block_size=1, num_kv_blocks=32, enable_prefix_caching=False)
    assert (err.value.field, err.value.allowed) == ("max_tokens", "[1, 9]") and "\n" not in str(err.value)
    *_, records = run_fake([fixed], batching="sglang", block_size=1, num_kv_blocks=33, enable_prefix_caching=False)
    assert len(records[-1]["requests"][0]["output_token_ids"]) == 10  # it runs alone in exactly that pool
    *_, records = run_fake([make_request("A", 20, 10)], batching="sglang", block_size=1, num_kv_blocks=31)
    assert len(records[-1]["requests"][0]["output_token_ids"]) == 9  # clipped: min(10, 30 - 20 - 1), not refused


@pytest.mark.real_model
def test_real_model_outputs_equal_generate(smollm):
    tok, model = smollm.tokenizer, smollm.model
    texts = ["The capital of France is", "Water boils at", "The capital of France is a city that"]
    workload = [(tok(t)["input_ids"], 8) for t in texts]
    steps, outputs = run_sglang(model, workload, num_kv_blocks=48, max_num_batched_tokens=8, max_num_seqs=3)
    assert [outputs[f"r{i}"] for i in range(3)] == [hf_greedy(model, p, m) for p, m in workload]
    assert any(n > 0 for st in steps for n in st["num_prefix_hit_tokens"].values())


def test_the_trace_page_opens_an_sglang_trace():
    """A trace of ``--batching sglang`` (fake runner) opens on the Trace page with its narration, as a live run."""
    from fakes import make_request, run_fake
    from streamlit.testing.v1 import AppTest

    reqs = [make_request("A", 2, 40), make_request("B", 2, 40), make_request("C", 2, 40, arrival_step=1)]
    *_, records = run_fake(reqs, batching="sglang", block_size=1, num_kv_blocks=103, max_num_seqs=3)
    assert any(st.get("preempted") for st in step_records(records))  # a retraction to narrate
    at = AppTest.from_string("from batchscope.app import page_trace\npage_trace.page()", default_timeout=120)
    at.session_state["playground:live-runs"] = {"sglang": records}
    at.query_params["live"] = "sglang"
    at.run()
    assert not at.exception, at.exception
    assert "Live run** sglang · sglang" in at.caption[0].value  # the run's name, then its policy
