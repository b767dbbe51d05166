"""The model's linears per step, as PyTorch's default GEMM (MKL's sgemm on x86) and as oneDNN's on packed weights.

    .venv/bin/python scripts/measure_linears.py                    # the default model, rows 1 4 8 16 64, 1 thread
    .venv/bin/python scripts/measure_linears.py --threads 2 --rows 4 --model DIR

For each row count (a decode step of B requests has B rows; a prefill chunk of N tokens has N), every
``nn.Linear`` of the model (the ``lm_head`` included, which a step runs only on its sampling rows) is run once on
random input ``[rows, in]``, the way ``batchscope.model.runner`` runs them: ``F.linear`` (the default),
then ``torch.ops.mkldnn._linear_pointwise`` on weights reordered once by ``_reorder_linear_weight`` (what the
runner uses on CPU in float32). Printed: milliseconds per pass (best of ``--repeats``), the weight bytes read per
second, and the ratio; first, a plain ``sum`` over as many bytes as the weights, the read bandwidth the GEMMs could
reach. Also the largest difference between the two outputs (a GEMM's rounding depends on its kernel). A
measurement, not a test: the figures depend on the machine and its load (compare the ratios of one run).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def best_ms(fn, repeats: int) -> float:
    """The fastest of ``repeats`` calls of ``fn`` after one warm-up, in milliseconds."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model name or folder (default: the default model)")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8, 16, 64], help="row counts (default 1 4 8 16 64)")
    ap.add_argument(
        "--threads", type=int, default=1, help="PyTorch intra-op threads (default 1, as the app on 2 cores)"
    )
    ap.add_argument("--repeats", type=int, default=10, help="timed passes per figure (default 10; the best is shown)")
    args = ap.parse_args()
    from batchscope.engine.threads import check_threads
    from batchscope.model.models import DEFAULT_MODEL, ModelLoadError, load_model

    if not 1 <= args.repeats <= 1000:
        ap.error(f"--repeats={args.repeats} is out of range: an integer in [1, 1000]")
    if not all(1 <= r <= 4096 for r in args.rows):
        ap.error(f"--rows={' '.join(map(str, args.rows))} is out of range: integers in [1, 4096]")
    try:
        threads = check_threads(args.threads)
        model = load_model(args.model or DEFAULT_MODEL, device="cpu", dtype="float32").model
    except (ValueError, ModelLoadError) as exc:
        ap.error(str(exc))

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    weight_bytes = sum(m.weight.numel() * m.weight.element_size() for m in linears)
    with torch.inference_mode():
        packed = [torch.ops.mkldnn._reorder_linear_weight(m.weight) for m in linears]
        flat = torch.ones(weight_bytes // 4)
        ms = best_ms(lambda: flat.sum(), args.repeats)
        print(f"{len(linears)} linears, {weight_bytes / 1e6:.0f} MB of float32 weights, {threads} thread(s)")
        print(f"plain sum over {weight_bytes / 1e6:.0f} MB: {ms:.1f} ms, {weight_bytes / ms / 1e6:.1f} GB/s")
        print("rows | F.linear ms | GB/s | oneDNN packed ms | GB/s | speed-up | max |diff|")
        for rows in args.rows:
            inputs = [torch.randn(rows, m.in_features) for m in linears]

            def default(inputs=inputs):
                return [F.linear(x, m.weight, m.bias) for x, m in zip(inputs, linears)]

            def onednn(inputs=inputs):
                return [
                    torch.ops.mkldnn._linear_pointwise(x, w, m.bias, "none", [], "")
                    for x, w, m in zip(inputs, packed, linears)
                ]

            a, b = best_ms(default, args.repeats), best_ms(onednn, args.repeats)
            diff = max((p - q).abs().max().item() for p, q in zip(default(), onednn()))
            print(
                f"{rows:4d} | {a:11.1f} | {weight_bytes / a / 1e6:4.1f} | {b:16.1f} | {weight_bytes / b / 1e6:4.1f} "
                f"| {a / b:7.2f}x | {diff:.1e}"
            )


if __name__ == "__main__":
    main()
