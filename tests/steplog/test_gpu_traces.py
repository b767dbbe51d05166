"""The traces recorded on an NVIDIA H200 (batchscope/assets/traces/gpu/, by scripts/gpu-engine-check.sh in float32)
against the CPU traces of the same scenarios, an independent run on another device: the same steps and token-identical
outputs, so the step-cost chart compares one schedule on two devices. Each is matched with the weight-streaming floor
measured on its own device."""

from __future__ import annotations

import pytest
from conftest import RECORDED

from batchscope.figures.weight_floor import floor_of
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

GPU = RECORDED / "gpu"
NAMES = ["sixteen-continuous", "sixteen-static", "seed-abcd-continuous", "seed-abcd-static"]


def test_every_gpu_trace_is_shipped_and_valid():
    assert sorted(p.stem for p in GPU.glob("*.jsonl")) == sorted(NAMES)
    for name in NAMES:
        header = trace.read(GPU / f"{name}.jsonl")[0]  # validated against the schema
        assert (header["device"], header["device_name"], header["dtype"]) == ("cuda", "NVIDIA H200", "float32")


@pytest.mark.parametrize("name", NAMES)
def test_gpu_trace_runs_the_cpu_traces_schedule_and_tokens(name):
    gpu, cpu = TraceView(trace.read(GPU / f"{name}.jsonl")), TraceView(trace.read(RECORDED / f"{name}.jsonl"))
    assert gpu.header["requests"] == cpu.header["requests"] and gpu.header["config"] == cpu.header["config"]

    def schedule(view):
        return [[(s["request_id"], s["num_tokens"]) for s in step["scheduled"]] for step in view.steps]

    def outputs(view):
        return {r["request_id"]: (r["output_token_ids"], r["finish_reason"]) for r in view.summary["requests"]}

    assert schedule(gpu) == schedule(cpu)
    assert outputs(gpu) == outputs(cpu)


def test_each_device_gets_its_own_floor_and_badge():
    gpu = trace.read(GPU / "sixteen-continuous.jsonl")[0]
    cpu = trace.read(RECORDED / "sixteen-continuous.jsonl")[0]
    g, c = floor_of(gpu), floor_of(cpu)
    assert g is not None and c is not None
    assert g["weight_bytes"] == c["weight_bytes"] == 538_060_288  # the same float32 weights
    assert g["device"] == "NVIDIA H200" and c["device"] == "this CPU"
    assert 0.05e-3 < g["seconds"] < 0.5e-3 < 10e-3 < c["seconds"] < 50e-3  # HBM against a 2-core CPU's DRAM
    assert floor_of({**gpu, "device_name": "NVIDIA A100"}) is None  # no measurement of that GPU: no floor drawn
    assert floor_of({**gpu, "dtype": "bfloat16"}) is None
    assert "cuda (NVIDIA H200) · float32" in TraceView(trace.read(GPU / "seed-abcd-continuous.jsonl")).provenance()
