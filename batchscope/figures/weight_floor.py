"""The weight-streaming floor of a decode step: the time a forward needs just to read every weight once, as
``python -m batchscope bench`` measured it (the model's weight bytes, and the read bandwidth of summing a buffer as
large as the weights on that device). One place for the figure; the step-cost chart and the glossary read it here.

The shipped measurements, one per device: ``batchscope/assets/bench.json`` (this project's 2-core CPU machine) and
``batchscope/assets/bench-h200.json`` (an NVIDIA H200, recorded by ``scripts/gpu-engine-check.sh``). A trace is matched
to the one of its model, dtype and device (PyTorch's device type, and for a GPU the name its header records).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

ASSETS = Path(__file__).resolve().parents[1] / "assets"
BENCHES = (
    "bench.json",
    "bench-h200.json",
)  # file names under batchscope/assets/: each a `python -m batchscope bench` result


@lru_cache(maxsize=4)
def _measurements() -> tuple[dict, ...]:
    """The shipped benchmark results that carry a decode-step measurement (unreadable files left out)."""
    found = []
    for name in BENCHES:
        try:
            bench = json.loads((ASSETS / name).read_text(encoding="utf-8"))
            step = bench["decode_step"]
            found.append(
                {
                    "provenance": bench["provenance"],
                    "weight_bytes": float(step["weight_bytes"]),
                    "bandwidth_Bps": float(step["read_bandwidth_GBps"]) * 1e9,
                }
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return tuple(found)


@lru_cache(maxsize=16)
def weight_floor(
    model: str | None, dtype: str | None, device: str | None, device_name: str | None = None
) -> dict | None:
    """``{"seconds", "weight_bytes", "bandwidth_Bps", "device", "source"}`` for a run of ``model`` in ``dtype`` on
    ``device`` (``cpu``, ``cuda``, ``cuda:0``; a GPU also by ``device_name``, such as ``NVIDIA H200``), when a
    shipped benchmark measured that combination; None otherwise (another model, dtype or machine)."""
    kind = (device or "").split(":")[0]
    for m in _measurements():
        prov = m["provenance"]
        if (prov.get("model"), prov.get("dtype"), prov.get("device")) != (model, dtype, kind):
            continue
        if kind != "cpu" and prov.get("device_name") != device_name:
            continue
        where = f"this {prov.get('cpu_count', '?')}-core machine" if kind == "cpu" else f"an {prov.get('device_name')}"
        seconds = m["weight_bytes"] / m["bandwidth_Bps"]
        rate = rate_text(m["bandwidth_Bps"])
        return {
            "seconds": seconds,
            "weight_bytes": m["weight_bytes"],
            "bandwidth_Bps": m["bandwidth_Bps"],
            "device": "this CPU" if kind == "cpu" else prov.get("device_name"),
            "source": f"{m['weight_bytes'] / 1e6:.0f} MB of {dtype} weights at {rate}, "
            f"the read bandwidth `python -m batchscope bench` measured on {where}",
        }
    return None


def floor_of(header: Mapping[str, Any]) -> dict | None:
    """``weight_floor`` of the run a trace header describes."""
    return weight_floor(header.get("model"), header.get("dtype"), header.get("device"), header.get("device_name"))


def rate_text(bandwidth_bps: float) -> str:
    """A read bandwidth in GB/s: one decimal under 100 ("22.1 GB/s"), none above ("3,830 GB/s")."""
    gbps = bandwidth_bps / 1e9
    return f"{gbps:,.{1 if gbps < 100 else 0}f} GB/s"


def floor_ms_text(seconds: float) -> str:
    """A floor in ms to two significant figures: "24 ms", "0.14 ms"."""
    ms = seconds * 1e3
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.2g} ms"
