"""The model runner: turns a ``SchedulerOutput`` into one forward pass over the flattened batch.

All scheduled tokens of the step (prefill chunks and decode tokens of different requests, plus static padding
rows) are laid out in one row of ``T`` tokens:

    input_ids:    | A: 16-token prefill chunk | B: 1 decode | C: 1 decode | pad |
    positions:    | 32 ................... 47 |     51      |     9       |  0  |
    slot_mapping: | pool slots of A's 32..47  | slot of B51 | slot of C9  | scratch |

The unmodified transformers model runs on it with our paged attention (``batchscope.model.paged_attention``) swapped in
for the call; logits are computed only at the rows that sample (the last token of each request that reaches the
end of its known tokens), via transformers' ``logits_to_keep`` index argument.

Two speed-ups, neither of which changes what a step computes (the second changes only its GEMMs' rounding):

- Decode steps (every row one token) are built without per-request tensors and use the padded decode layout of
  ``batchscope.model.paged_attention`` (``build_decode_batch``).
- On CPU in float32, every ``nn.Linear`` of the model runs through oneDNN's GEMM on weights reordered once per
  model into oneDNN's blocked layout (``torch.ops.mkldnn._reorder_linear_weight``, then
  ``torch.ops.mkldnn._linear_pointwise``: the ops PyTorch's inductor emits for frozen CPU linears). A decode step's
  GEMMs have a few rows, and the default ``F.linear`` (MKL's sgemm) streams the weights far below the memory's
  bandwidth there. Measured on this project's 2-core AMD EPYC machine (``scripts/measure_linears.py``, the
  default model's 211 linears, 538 MB): at 4 rows and 1 thread ``F.linear`` read 7.5 GB/s and oneDNN on the packed
  copy 15.1 GB/s (a plain sum: 28.8 GB/s); 1.2-2.0x faster at 1 thread for 1 to 64 rows, 1.7-2.8x at 2 threads.
  The results differ from MKL's in the last bits (a GEMM's rounding depends on its kernel, as it does on the
  batch's shape); greedy outputs stay token-identical to ``generate``, which the tests check. The packed copy costs
  one copy of the weights, is built lazily (~0.3 s; ``pack_now`` builds it at once), and is used only inside this
  runner's forward, so ``generate`` on the same model is untouched.
"""

from __future__ import annotations

import time
import weakref
from contextlib import contextmanager, nullcontext
from typing import Any

import torch

from batchscope.engine.config import EngineConfig
from batchscope.engine.ngram_proposer import PLACEHOLDER
from batchscope.engine.request import Request
from batchscope.engine.spec_decode import verify
from batchscope.model.paged_attention import ATTN_IMPL, KVCachePool, PagedBatch
from batchscope.model.sampler import make_generator, sample
from batchscope.scheduling.scheduler import SchedulerOutput


def onednn_packing_available(device: torch.device, dtype: torch.dtype) -> bool:
    """oneDNN's packed GEMM applies: CPU, float32, a PyTorch built with oneDNN (MKL-DNN)."""
    return (
        device.type == "cpu"
        and dtype == torch.float32
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


class PackedLinears:
    """Every ``nn.Linear`` of a model with its weight (``[out, in]``) reordered once into oneDNN's blocked layout.

    ``installed()`` swaps the packed forward in for the duration of a ``with`` block and restores the module's own
    afterwards; inputs of any shape ``[..., in]`` and any row count. Weights must not change after packing
    (inference only). Like the attention switch of ``ModelRunner``, this changes the shared model object for one
    forward: run one forward per model at a time (the app holds a lock around the model).
    """

    def __init__(self, model: torch.nn.Module):
        pack = torch.ops.mkldnn._reorder_linear_weight
        self.linears = [(m, pack(m.weight.detach())) for m in model.modules() if isinstance(m, torch.nn.Linear)]

    @contextmanager
    def installed(self):
        linear = torch.ops.mkldnn._linear_pointwise
        for module, packed in self.linears:
            module.forward = lambda x, w=packed, b=module.bias: linear(x, w, b, "none", [], "")
        try:
            yield
        finally:
            for module, _ in self.linears:
                module.__dict__.pop("forward", None)


_PACKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> PackedLinears


def packed_linears(model: torch.nn.Module) -> PackedLinears:
    """The model's ``PackedLinears`` (built on first use, ~0.3 s for the default model, then kept with it)."""
    if model not in _PACKED:
        with torch.inference_mode():
            _PACKED[model] = PackedLinears(model)
    return _PACKED[model]


def pack_now(model: torch.nn.Module) -> None:
    """Build the model's packed linears now where the runner would use them (CPU, float32), so that a long-lived
    process (the app) pays the ~0.3 s when it loads the model, not in its first live run."""
    param = next(model.parameters())
    if onednn_packing_available(param.device, param.dtype):
        packed_linears(model)


class ModelRunner:
    """Owns the model, the KV pool and per-request samplers. ``execute`` runs one step."""

    def __init__(self, model: Any, config: EngineConfig, device: torch.device | None = None):
        self.model = model
        cfg = model.config
        self.device = device or next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.block_size = config.block_size
        self.pool = KVCachePool(
            cfg.num_hidden_layers,
            config.num_kv_blocks,
            config.block_size,
            cfg.num_key_value_heads,
            head_dim,
            self.dtype,
            self.device,
        )
        self.pad_token_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0
        self._generators: dict[str, torch.Generator] = {}
        self.time_forward = False  # when True, ``forward_times`` gets the seconds of each step's model forward
        self.forward_times: list[float] = []
        self.packed = onednn_packing_available(self.device, self.dtype)  # every step's linears through oneDNN

    @contextmanager
    def _paged_attention(self):
        """Switch the model to paged attention for one forward (so ``generate`` still works on it elsewhere)."""
        cfg = self.model.config
        previous = cfg._attn_implementation
        cfg._attn_implementation = ATTN_IMPL
        try:
            yield
        finally:
            cfg._attn_implementation = previous

    def build_decode_batch(self, out: SchedulerOutput, block_tables: dict[str, list[int]]):
        """A step where every row computes one token (decodes, 1-token chunks, padding rows), in the decode layout.

        Returns what ``build_batch`` returns; the ``PagedBatch`` has ``decode=True``, ``context_slots`` ``[B, L_max]``
        and ``mask`` ``[B, 1, 1, L_max]``.
        """
        bs, pad_slot = self.block_size, self.pool.padding_slot
        ids, pos, tables, sample_rows, sample_reqs = [], [], [], [], []
        for i, s in enumerate(out.scheduled):
            req, c = s.request, s.num_computed_tokens
            ids.append(req.all_token_ids[c])
            pos.append(c)
            tables.append(block_tables[req.request_id])
            if s.samples:
                sample_rows.append(i)
                sample_reqs.append(req)
        num_real, num_pad = len(pos), len(out.padding)
        ids += [self.pad_token_id] * num_pad
        width = max(pos, default=0) + 1
        num_blocks = max((len(t) for t in tables), default=1)
        table = torch.tensor(
            [t + [0] * (num_blocks - len(t)) for t in tables] + [[0] * num_blocks] * num_pad, dtype=torch.long
        )  # [B, blocks]; the fill is masked out below
        p = torch.arange(width)
        ctx = table[:, p // bs] * bs + p % bs  # [B, L_max] pool slot of every context position
        ctx[num_real:, 0] = pad_slot  # a padding row reads and writes only the scratch slot
        positions = torch.tensor(pos + [0] * num_pad, dtype=torch.long)
        mask = p[None, :] <= positions[:, None]  # [B, L_max]: the row's own context, itself included
        slot_mapping = ctx.gather(1, positions[:, None])[:, 0]
        dev = self.device
        batch = PagedBatch(self.pool, slot_mapping.to(dev), ctx.to(dev), mask[:, None, None, :].to(dev), decode=True)
        input_ids = torch.tensor([ids], dtype=torch.long, device=dev)
        return input_ids, positions[None].to(dev), batch, sample_rows, sample_reqs

    def build_batch(self, out: SchedulerOutput, block_tables: dict[str, list[int]]):
        """Flatten the step. Returns ``(input_ids [1,T], position_ids [1,T], PagedBatch, sample_rows, sample_reqs)``."""
        bs = self.block_size
        ids: list[int] = []
        sample_rows: list[int] = []
        pos, slots, ctx, masks, sample_reqs = [], [], [], [], []
        num_q = 0
        for s in out.scheduled:
            req, c, n = s.request, s.num_computed_tokens, s.num_tokens
            table = torch.tensor(block_tables[req.request_id], dtype=torch.long)
            all_pos = torch.arange(c + n)
            all_slots = table[all_pos // bs] * bs + all_pos % bs
            ids.extend(t if t != PLACEHOLDER else self.pad_token_id for t in s.token_ids)  # a placeholder: any id
            pos.append(all_pos[c:])
            slots.append(all_slots[c:])
            ctx.append(all_slots)
            masks.append(all_pos[None, :] <= all_pos[c:, None])  # [n, c+n] causal within the request
            num_q += n
            if s.samples:  # with drafts: every position of the row (its last token's and each draft's)
                sample_rows.extend(range(num_q - 1 - len(s.draft_token_ids), num_q))
                sample_reqs.append(req)
        for _row, _rid in out.padding:  # a finished static member: one dummy token on the scratch slot
            ids.append(self.pad_token_id)
            pos.append(torch.zeros(1, dtype=torch.long))
            slots.append(torch.tensor([self.pool.padding_slot]))
            ctx.append(torch.tensor([self.pool.padding_slot]))
            masks.append(torch.ones(1, 1, dtype=torch.bool))
        mask = torch.block_diag(*masks)[None, None]  # [1, 1, T, S]; off-diagonal blocks False: no cross-request
        dev = self.device
        batch = PagedBatch(self.pool, torch.cat(slots).to(dev), torch.cat(ctx).to(dev), mask.to(dev))
        input_ids = torch.tensor([ids], dtype=torch.long, device=dev)
        position_ids = torch.cat(pos)[None].to(dev)
        return input_ids, position_ids, batch, sample_rows, sample_reqs

    @torch.inference_mode()
    def execute(self, out: SchedulerOutput, block_tables: dict[str, list[int]]) -> dict[str, list[int]]:
        """Run one forward pass for ``out`` and sample. Returns ``{request_id: [token ids]}`` for the requests that
        sample: one token, or with drafts the accepted ones and the next (``batchscope.engine.spec_decode.verify``)."""
        if out.is_empty:
            if self.time_forward:
                self.forward_times.append(0.0)
            return {}
        one_token_rows = all(s.num_tokens == 1 for s in out.scheduled)
        build = self.build_decode_batch if one_token_rows else self.build_batch
        input_ids, position_ids, batch, rows, reqs = build(out, block_tables)
        num_tokens = input_ids.shape[1]
        # logits only where a token is sampled; all rows (no gather) when every row samples
        keep = 0 if rows == list(range(num_tokens)) else torch.tensor(rows or [0], dtype=torch.long, device=self.device)
        packed = packed_linears(self.model).installed() if self.packed else nullcontext()
        t0 = time.perf_counter() if self.time_forward else 0.0
        with self._paged_attention(), packed:
            logits = self.model(
                input_ids=input_ids, position_ids=position_ids, paged_batch=batch, use_cache=False, logits_to_keep=keep
            ).logits[0]  # [len(keep), vocab]
        if self.time_forward:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.forward_times.append(time.perf_counter() - t0)
        if not rows:
            return {}
        return self._sample(out, logits, reqs)

    def _sample(self, out: SchedulerOutput, logits: torch.Tensor, reqs: list[Request]) -> dict[str, list[int]]:
        """``logits`` ``[rows, vocab]``: one row per sampling request, ``1 + drafts`` for one with drafts."""
        drafts = {s.request.request_id: s.draft_token_ids for s in out.scheduled if s.draft_token_ids}
        if not drafts:
            tokens = sample(logits, [r.sampling for r in reqs], [self._generator(r) for r in reqs])
            return {r.request_id: [t] for r, t in zip(reqs, tokens)}
        result, row = {}, 0
        for r in reqs:
            d = drafts.get(r.request_id, [])
            rows = logits[row : row + 1 + len(d)]
            result[r.request_id] = (
                verify(rows, d, r.sampling, self._generator(r))
                if d
                else sample(rows, [r.sampling], [self._generator(r)])
            )
            row += 1 + len(d)
        return result

    def _generator(self, req: Request) -> torch.Generator | None:
        if req.sampling.temperature == 0.0:
            return None
        if req.request_id not in self._generators:
            self._generators[req.request_id] = make_generator(req.sampling.seed or 0)
        return self._generators[req.request_id]

    def release(self, request_id: str) -> None:
        """Forget a finished request's sampler state."""
        self._generators.pop(request_id, None)
