"""The paged KV cache and the attention function that reads and writes it.

``KVCachePool`` preallocates, per layer, one K and one V tensor of shape ``[num_blocks * block_size + 1, num_kv_heads,
head_dim]``: ``num_blocks`` blocks of ``block_size`` token slots, plus one scratch slot for the padding rows of a static
batch. It is the *only* K/V storage: the model is run without any transformers cache.

``paged_attention`` is registered with transformers' ``AttentionInterface`` under ``ATTN_IMPL`` and is called by the
unmodified model code of every layer with the step's flattened batch (``T`` tokens of several requests, prefill
chunks and decodes mixed; RoPE already applied). For layer ``l`` it

1. writes the ``T`` new keys/values into the pool at ``slot_mapping`` (one slot per token), then
2. gathers each request's whole context (``context_slots``, ``S`` slots, request after request, read through
   its block table), and
3. runs one ``scaled_dot_product_attention`` over ``[T] x [S]`` with a block-diagonal causal mask: a query of
   request ``r`` at position ``p`` sees the keys of ``r`` at positions ``<= p`` and nothing of other requests.

So the new tokens attend to themselves *through the pool*: if the pool were wrong, the output would be too.

Decode steps (every row computes exactly one token: decodes, 1-token chunks, static padding rows) take a faster
layout: the ``B`` rows become a batch of ``B`` single-token queries, each row's context is gathered into a padded
``[B, L_max]`` matrix of slots, and one ``scaled_dot_product_attention`` runs over ``[B] x [L_max]`` with a padding
mask. The block-diagonal layout would score every query against all ``sum(L_i)`` context slots, ``B`` times the
work; this one scores ``B * L_max``. Same pool, same reads and writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

ATTN_IMPL = "batchscope_paged"


class KVCachePool:
    """Preallocated K/V pool: ``k[l]`` and ``v[l]`` have shape ``[num_slots, num_kv_heads, head_dim]``.

    ``num_slots = num_blocks * block_size + 1``; the last slot (``padding_slot``) belongs to no block.
    Memory: ``2 * num_layers * num_slots * num_kv_heads * head_dim * dtype bytes``.
    """

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ):
        self.num_blocks, self.block_size = num_blocks, block_size
        num_slots = num_blocks * block_size + 1
        self.padding_slot = num_slots - 1
        shape = (num_layers, num_slots, num_kv_heads, head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    def block_view(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` (``self.k`` or ``self.v``) seen as ``[layers, num_blocks, block_size, heads, dim]``."""
        return tensor[:, : self.num_blocks * self.block_size].unflatten(1, (self.num_blocks, self.block_size))


@dataclass
class PagedBatch:
    """Per-step attention metadata, built once by the runner and shared by all layers.

    - ``pool``: the KV pool.
    - ``slot_mapping``: ``[T]`` int64, pool slot of each new token.
    - ``context_slots``: ``[S]`` int64, pool slots of every scheduled request's context, request after request.
    - ``mask``: ``[1, 1, T, S]`` bool, True where a query may attend to a key.

    Decode layout (``decode=True``, every row one token): ``context_slots`` is ``[B, L_max]`` (row ``i``: the slots
    of its context, padded with any valid slot) and ``mask`` is ``[B, 1, 1, L_max]`` (True on the real context).
    """

    pool: KVCachePool
    slot_mapping: torch.Tensor
    context_slots: torch.Tensor
    mask: torch.Tensor
    decode: bool = False


def paged_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    paged_batch: PagedBatch | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Attention over the paged pool (transformers ``AttentionInterface`` signature).

    Args:
        query: ``[1, num_heads, T, head_dim]``; key, value: ``[1, num_kv_heads, T, head_dim]``.
        paged_batch: the step's ``PagedBatch`` (passed through the model's forward kwargs).
    Returns:
        ``([1, T, num_heads, head_dim], None)``.
    Raises:
        ValueError: called without ``paged_batch`` (e.g. ``generate`` on a model left in paged mode).
    """
    if paged_batch is None:
        raise ValueError(f"attention '{ATTN_IMPL}' needs the runner's paged_batch; use the model runner")
    layer = int(module.layer_idx)  # type: ignore[arg-type]
    k_pool, v_pool = paged_batch.pool.k[layer], paged_batch.pool.v[layer]
    k_pool.index_copy_(0, paged_batch.slot_mapping, key[0].transpose(0, 1).to(k_pool.dtype))
    v_pool.index_copy_(0, paged_batch.slot_mapping, value[0].transpose(0, 1).to(v_pool.dtype))
    if paged_batch.decode:  # B rows of one query each: [B, H, 1, D] against each row's padded context
        rows, width = paged_batch.context_slots.shape
        flat = paged_batch.context_slots.reshape(-1)
        k = k_pool.index_select(0, flat).view(rows, width, *k_pool.shape[1:]).transpose(1, 2)  # [B, Hkv, L, D]
        v = v_pool.index_select(0, flat).view(rows, width, *v_pool.shape[1:]).transpose(1, 2)
        q = query[0].transpose(0, 1).unsqueeze(2)  # [B, H, 1, D]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=paged_batch.mask, scale=scaling, enable_gqa=True)
        return out.permute(2, 0, 1, 3), None  # [B, H, 1, D] -> [1, B, H, D]
    k = k_pool.index_select(0, paged_batch.context_slots).transpose(0, 1).unsqueeze(0)  # [1, Hkv, S, D]
    v = v_pool.index_select(0, paged_batch.context_slots).transpose(0, 1).unsqueeze(0)
    out = F.scaled_dot_product_attention(query, k, v, attn_mask=paged_batch.mask, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTN_IMPL, paged_attention)
