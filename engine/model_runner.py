"""The model runner: turns a ``SchedulerOutput`` into one forward pass over the flattened batch.

All scheduled tokens of the step (prefill chunks and decode tokens of different requests, plus static padding
rows) are laid out in one row of ``T`` tokens:

    input_ids:    | A: 16-token prefill chunk | B: 1 decode | C: 1 decode | pad |
    positions:    | 32 ................... 47 |     51      |     9       |  0  |
    slot_mapping: | pool slots of A's 32..47  | slot of B51 | slot of C9  | scratch |

The unmodified transformers model runs on it with our paged attention (``engine.paged_attention``) swapped in
for the call; logits are computed only at the rows that sample (the last token of each request that reaches the
end of its known tokens), via transformers' ``logits_to_keep`` index argument.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from engine.config import EngineConfig
from engine.paged_attention import ATTN_IMPL, KVCachePool, PagedBatch
from engine.request import Request
from engine.sampler import make_generator, sample
from engine.scheduler import SchedulerOutput


class ModelRunner:
    """Owns the model, the KV pool and per-request samplers. ``execute`` runs one step."""

    def __init__(self, model: torch.nn.Module, config: EngineConfig, device: torch.device | None = None):
        self.model = model
        cfg = model.config
        self.device = device or next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.block_size = config.block_size
        self.pool = KVCachePool(cfg.num_hidden_layers, config.num_kv_blocks, config.block_size,
                                cfg.num_key_value_heads, head_dim, self.dtype, self.device)
        self.pad_token_id = cfg.pad_token_id if cfg.pad_token_id is not None else 0
        self._generators: dict[str, torch.Generator] = {}
        self.time_forward = False  # when True, ``forward_times`` gets the seconds of each step's model forward
        self.forward_times: list[float] = []

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

    def build_batch(self, out: SchedulerOutput, block_tables: dict[str, list[int]]):
        """Flatten the step. Returns ``(input_ids [1,T], position_ids [1,T], PagedBatch, sample_rows, sample_reqs)``."""
        bs = self.block_size
        ids, pos, slots, ctx, masks, sample_rows, sample_reqs = [], [], [], [], [], [], []
        num_q = 0
        for s in out.scheduled:
            req, c, n = s.request, s.num_computed_tokens, s.num_tokens
            table = torch.tensor(block_tables[req.request_id], dtype=torch.long)
            all_pos = torch.arange(c + n)
            all_slots = table[all_pos // bs] * bs + all_pos % bs
            ids.extend(req.all_token_ids[c : c + n])
            pos.append(all_pos[c:])
            slots.append(all_slots[c:])
            ctx.append(all_slots)
            masks.append(all_pos[None, :] <= all_pos[c:, None])  # [n, c+n] causal within the request
            num_q += n
            if s.samples:
                sample_rows.append(num_q - 1)
                sample_reqs.append(req)
        for _slot, _rid in out.padding:  # a finished static member: one dummy token on the scratch slot
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
    def execute(self, out: SchedulerOutput, block_tables: dict[str, list[int]]) -> dict[str, int]:
        """Run one forward pass for ``out`` and sample. Returns ``{request_id: sampled token id}``."""
        if out.is_empty:
            if self.time_forward:
                self.forward_times.append(0.0)
            return {}
        input_ids, position_ids, batch, rows, reqs = self.build_batch(out, block_tables)
        keep = torch.tensor(rows if rows else [0], dtype=torch.long, device=self.device)
        t0 = time.perf_counter() if self.time_forward else 0.0
        with self._paged_attention():
            logits = self.model(input_ids=input_ids, position_ids=position_ids, paged_batch=batch,
                                use_cache=False, logits_to_keep=keep).logits[0]  # [len(keep), vocab]
        if self.time_forward:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.forward_times.append(time.perf_counter() - t0)
        if not rows:
            return {}
        tokens = sample(logits, [r.sampling for r in reqs], [self._generator(r) for r in reqs])
        return {r.request_id: t for r, t in zip(reqs, tokens)}

    def _generator(self, req: Request) -> torch.Generator | None:
        if req.sampling.temperature == 0.0:
            return None
        if req.request_id not in self._generators:
            self._generators[req.request_id] = make_generator(req.sampling.seed or 0)
        return self._generators[req.request_id]

    def release(self, request_id: str) -> None:
        """Forget a finished request's sampler state."""
        self._generators.pop(request_id, None)
