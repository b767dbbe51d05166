"""The weight-streaming floor of a decode step: the time a forward needs just to read every weight once, as
``python -m engine bench`` measured it on this project's machine (``assets/bench.json``: the model's weight bytes
and the read bandwidth of summing a buffer as large as the weights). One place for the figure; the step-cost
chart and the glossary read it here.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "assets" / "bench.json"


@lru_cache(maxsize=8)
def weight_floor(model: str | None, dtype: str | None, device: str | None) -> dict | None:
    """``{"seconds", "weight_bytes", "bandwidth_Bps", "source"}`` when the benchmark ran on this model, dtype and
    device; None otherwise (another model or machine, or no benchmark result shipped)."""
    try:
        bench = json.loads(BENCH.read_text(encoding="utf-8"))
        prov, step = bench["provenance"], bench["decode_step"]
        if (prov["model"], prov["dtype"], prov["device"]) != (model, dtype, device):
            return None
        weight_bytes, bandwidth = float(step["weight_bytes"]), float(step["read_bandwidth_GBps"]) * 1e9
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {
        "seconds": weight_bytes / bandwidth,
        "weight_bytes": weight_bytes,
        "bandwidth_Bps": bandwidth,
        "source": f"{weight_bytes / 1e6:.0f} MB of {dtype} weights at {bandwidth / 1e9:.1f} GB/s, the read bandwidth "
        f"`python -m engine bench` measured on this {prov.get('cpu_count', '?')}-core machine",
    }
