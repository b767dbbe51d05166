"""What every command of ``python -m batchscope`` shares: help text with defaults, checked paths and devices, Ctrl-C
that stops between steps, and the version.

Bad values raise ``CLIError`` (a ``ValueError``): the CLI prints its one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
from collections.abc import Iterator
from pathlib import Path


class CLIError(ValueError):
    """A command-line value that cannot be used; the message names the flag."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Help with each option's default (where it has one) and examples kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _version

    try:
        return _version("batchscope")
    except PackageNotFoundError:
        return "unknown (not installed)"


def check_out_path(out: str | Path, flag: str, inputs: tuple[str | Path | None, ...] = (), force: bool = True) -> Path:
    """An output path that can be written without destroying anything: its folder exists, it is not a folder, not
    one of the ``inputs`` and (unless ``force``) not an existing file. Checked before any work starts."""
    p = Path(out)
    if p.is_dir():
        raise CLIError(f"{flag} {str(p)!r} is a folder; give a file path")
    if not p.parent.is_dir():
        raise CLIError(f"{flag} {str(p)!r}: the folder {str(p.parent)!r} does not exist; create it first")
    for inp in inputs:
        if inp is not None and Path(inp).exists() and p.exists() and p.resolve() == Path(inp).resolve():
            raise CLIError(f"{flag} {str(p)!r} is also an input of this command; writing it would destroy the input")
    if p.exists() and not force:
        raise CLIError(f"{flag} {str(p)!r} already exists; pass --force to overwrite it")
    return p


_DEVICE = re.compile(r"^(cpu|mps|cuda(:\d{1,3})?)$")
DTYPES = ("float32", "bfloat16", "float16")  # the weights' and KV cache's floating-point type (--dtype)


def add_device_flags(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--device`` and ``--dtype``: where the model runs and in which float type (every command that
    loads the model shares them; ``batchscope.model.models.load_model`` takes the three values)."""
    parser.add_argument(
        "--model", default="SmolLM2-135M-Instruct", help="HF causal-LM id (in the local cache) or local folder"
    )
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:N or mps (default: cuda if available)")
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default=None,
        help="weights and KV cache (default: float32 on CPU, whose greedy outputs are deterministic; bfloat16 on CUDA)",
    )


def check_device(device: str | None) -> str | None:
    """``cpu``, ``cuda``, ``cuda:N`` (an existing GPU) or ``mps`` (where present); ``None`` picks the default."""
    if device is None:
        return None
    if not _DEVICE.match(device):
        raise CLIError(f"--device {device!r} is not a device: use cpu, cuda, cuda:N or mps")
    import torch

    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= count:
            found = f"{count} CUDA device(s): cuda:0..cuda:{count - 1}" if count else "no CUDA device"
            raise CLIError(f"--device {device!r}: this machine has {found}; use --device cpu")
    if device == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise CLIError("--device 'mps': Apple's MPS backend is not available here; use --device cpu")
    return device


@contextlib.contextmanager
def stop_on_ctrl_c() -> Iterator[list[bool]]:
    """Inside: the first Ctrl-C sets ``flag[0]`` (the run stops after its current step and keeps what it did); a
    second one interrupts at once. Outside the main thread, nothing changes."""
    flag = [False]

    def handler(signum, frame):
        if flag[0]:
            raise KeyboardInterrupt
        flag[0] = True

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield flag
        return
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)
