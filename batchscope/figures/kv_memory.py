"""What the KV cache of a trace's model costs in bytes, and what grouped-query attention (GQA) saves.

Every token in the cache keeps one key and one value vector per layer and per KV head, so

    bytes per token = 2 (K and V) × num_hidden_layers × num_key_value_heads × head_dim × bytes per element
    bytes per block = bytes per token × block_size

(the pool Batchscope's engine allocates, ``batchscope/model/paged_attention.py``: ``2 * num_layers * num_slots *
num_kv_heads * head_dim * dtype bytes``). A trace's header names its model and dtype but not the model's shape, and
the visuals never load a model, so the shape of the model Batchscope ships comes from ``MODEL_SHAPES``, copied from
the ``config.json`` that ``batchscope/model/models.py`` writes when it converts SmolLM2-135M-Instruct (the same numbers
as the model's card on the Hugging Face Hub; ``tests/visuals/test_kv_memory.py`` checks them against the loaded model).
A trace of any other model gets no figure (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelShape:
    """The attention shape of a decoder model, as its Hugging Face ``config.json`` names it."""

    num_layers: int  # num_hidden_layers
    num_attention_heads: int  # query heads
    num_kv_heads: int  # num_key_value_heads: fewer than the query heads under GQA
    head_dim: int  # head_dim (hidden_size / num_attention_heads where the config gives none)

    @property
    def gqa_factor(self) -> float:
        """How many times smaller the KV cache is than with one KV head per query head (multi-head attention)."""
        return self.num_attention_heads / self.num_kv_heads


# model name as the trace header writes it -> its shape (SmolLM2-135M-Instruct's config.json: num_hidden_layers 30,
# num_attention_heads 9, num_key_value_heads 3, head_dim 64)
MODEL_SHAPES = {"SmolLM2-135M-Instruct": ModelShape(num_layers=30, num_attention_heads=9, num_kv_heads=3, head_dim=64)}
DEFAULT_MODEL = "SmolLM2-135M-Instruct"
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}  # bytes per element


def model_shape(header: Any) -> ModelShape | None:
    """The shape of the header's model (a Hub id such as ``HuggingFaceTB/SmolLM2-135M-Instruct`` by its last part),
    ``None`` for a model outside ``MODEL_SHAPES``."""
    name = str(header.get("model") or "").rstrip("/").rsplit("/", 1)[-1]
    return MODEL_SHAPES.get(name)


def element_bytes(header: Any) -> int | None:
    """Bytes per element of the header's dtype (``float32`` or ``torch.float32``); ``None`` if unknown."""
    return DTYPE_BYTES.get(str(header.get("dtype") or "").removeprefix("torch."))


def bytes_per_token(shape: ModelShape, element: int, kv_heads: int | None = None) -> int:
    """K and V of one token over all layers, in bytes; ``kv_heads`` overrides the shape's (to price the cache
    without GQA: ``shape.num_attention_heads``)."""
    return 2 * shape.num_layers * (kv_heads or shape.num_kv_heads) * shape.head_dim * element


def kv_bytes_per_token(header: Any) -> int | None:
    """Bytes of K/V per token for the header's model and dtype; ``None`` where either is unknown."""
    shape, element = model_shape(header), element_bytes(header)
    return bytes_per_token(shape, element) if shape and element else None


def per_token_sum(header: Any) -> str | None:
    """The product spelled out: ``2 × 30 layers × 3 KV heads × 64 × 4 bytes = 46,080 bytes``."""
    shape, element = model_shape(header), element_bytes(header)
    if not (shape and element):
        return None
    return (
        f"2 × {shape.num_layers} layers × {shape.num_kv_heads} KV heads × {shape.head_dim} × {element} bytes = "
        f"{bytes_per_token(shape, element):,} bytes"
    )


def fmt_bytes(n: float) -> str:
    """Bytes in binary units: ``46,080 B = 45 KiB``; ``3,960 KiB`` reads ``3.87 MiB``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            v = n / size
            return f"{v:,.0f} {unit}" if v == int(v) else f"{v:,.2f} {unit}"
    return f"{n:,.0f} B"
