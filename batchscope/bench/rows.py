"""The benchmark's rows: transformers ``generate`` (one at a time, static batches), transformers' continuous
batching, and Batchscope static / continuous, each returning ``{request_id: output token ids}`` for one
``batchscope.bench.workload.Workload``."""

from __future__ import annotations

from collections.abc import Callable

import torch

from batchscope.bench.measure import outside_forward_share
from batchscope.bench.names import BATCHED_ROWS, ROW_TITLES  # noqa: F401  (re-exported: batchscope.bench.run and the tests use them)
from batchscope.bench.workload import Workload, engine_config, run_engine
from batchscope.model.models import LoadedModel
from batchscope.scheduling.block_manager import blocks_needed

# -- the five rows -------------------------------------------------------------------------------------------------


def _eos(loaded: LoadedModel, work: Workload) -> list[int] | None:
    from batchscope.engine.llm import eos_token_ids

    return None if work.ignore_eos else sorted(eos_token_ids(loaded))


def _pad_id(loaded: LoadedModel) -> int:
    pad = loaded.model.config.pad_token_id
    return pad if pad is not None else 0


def _trim(tokens: list[int], eos: list[int] | None, max_tokens: int) -> list[int]:
    """Output tokens up to and including the first EOS, at most ``max_tokens`` (drops generate's padding)."""
    out = []
    for t in tokens[:max_tokens]:
        out.append(t)
        if eos and t in eos:
            break
    return out


def _generation_config(loaded: LoadedModel, work: Workload):
    from transformers import GenerationConfig

    eos = _eos(loaded, work)
    return GenerationConfig(
        max_new_tokens=work.max_tokens,
        do_sample=False,
        eos_token_id=eos,
        pad_token_id=_pad_id(loaded),
        min_new_tokens=work.max_tokens if eos is None else 0,
    )


@torch.inference_mode()
def hf_sequential(loaded: LoadedModel, work: Workload, max_num_seqs: int) -> dict[str, list[int]]:
    """Row 1: ``generate`` per request. Returns ``{request_id: output token ids}`` (EOS included)."""
    gen, eos, out = _generation_config(loaded, work), _eos(loaded, work), {}
    for rid, ids in zip(work.request_ids, work.prompts):
        x = torch.tensor([ids], device=loaded.device)
        y = loaded.model.generate(x, attention_mask=torch.ones_like(x), generation_config=gen)
        out[rid] = _trim(y[0, len(ids) :].tolist(), eos, work.max_tokens)
    return out


@torch.inference_mode()
def hf_static(loaded: LoadedModel, work: Workload, max_num_seqs: int) -> dict[str, list[int]]:
    """Row 2: ``generate`` on batches of ``max_num_seqs`` prompts in arrival order, left padded with a mask."""
    gen, eos, pad, out = _generation_config(loaded, work), _eos(loaded, work), _pad_id(loaded), {}
    for start in range(0, len(work.prompts), max_num_seqs):
        prompts = work.prompts[start : start + max_num_seqs]
        width = max(map(len, prompts))
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=loaded.device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=loaded.device)
        y = loaded.model.generate(ids, attention_mask=mask, generation_config=gen)
        for rid, row in zip(work.request_ids[start : start + max_num_seqs], y[:, width:].tolist()):
            out[rid] = _trim(row, eos, work.max_tokens)
    return out


def hf_cb_config(work: Workload, max_num_seqs: int, max_num_batched_tokens: int):
    """transformers' ``ContinuousBatchingConfig`` for the row: pages of 256 tokens (its default), enough blocks for
    ``max_num_seqs`` requests of the longest prompt + ``max_tokens``, and the same token budget as Batchscope."""
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    page = 256
    per_request = blocks_needed(max(map(len, work.prompts)) + work.max_tokens, page)
    return ContinuousBatchingConfig(
        page_size=page,
        num_blocks=max_num_seqs * per_request + 1,
        max_batch_tokens=max_num_batched_tokens,
        max_requests_per_batch=max_num_seqs,
    )


@torch.inference_mode()
def hf_continuous(
    loaded: LoadedModel, work: Workload, max_num_seqs: int, max_num_batched_tokens: int = 128
) -> dict[str, list[int]]:
    """Row 3: ``model.generate_batch`` (transformers' continuous batching manager, its own paged cache)."""
    model = loaded.model
    attn = model.config._attn_implementation
    try:
        res = model.generate_batch(
            work.prompts,
            generation_config=_generation_config(loaded, work),
            continuous_batching_config=hf_cb_config(work, max_num_seqs, max_num_batched_tokens),
            warmup=loaded.device.type == "cuda",
            progress_bar=False,
        )
    finally:
        if model.config._attn_implementation != attn:
            model.set_attn_implementation(attn)
    results = list(res.values())
    if len(results) != len(work.prompts) or any(r.error for r in results):
        errors = [r.error for r in results if r.error]
        raise RuntimeError(
            f"transformers continuous batching returned {len(results)} of {len(work.prompts)} "
            f"results{': ' + errors[0] if errors else ''}"
        )
    eos = _eos(loaded, work)
    return {rid: _trim(list(r.generated_tokens), eos, work.max_tokens) for rid, r in zip(work.request_ids, results)}


def _batchscope(batching: str):
    def row(
        loaded: LoadedModel,
        work: Workload,
        max_num_seqs: int,
        max_num_batched_tokens: int = 128,
        block_size: int = 16,
        sink: dict | None = None,
    ) -> dict[str, list[int]]:
        config = engine_config(work, batching, max_num_seqs, max_num_batched_tokens, block_size)
        records, runner = run_engine(loaded, work.specs, config, time_forward=sink is not None)
        if sink is not None:
            sink["outside_share"] = outside_forward_share(records, runner.forward_times)
            sink["num_steps"] = len(records) - 2
        return {r["request_id"]: r["output_token_ids"] for r in records[-1]["requests"]}

    row.__doc__ = f"Rows 4/5: Batchscope, {batching} batching. Returns ``{{request_id: output token ids}}``."
    return row


ROWS: dict[str, Callable[..., dict[str, list[int]]]] = {
    "hf-sequential": hf_sequential,
    "hf-static": hf_static,
    "hf-continuous": hf_continuous,
    "batchscope-static": _batchscope("static"),
    "batchscope-continuous": _batchscope("continuous"),
}
