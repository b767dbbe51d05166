"""Count the PyTorch operations one engine step dispatches, by kind: why a small model's step costs the same fixed
time on any device (each operation is a Python call, a dispatch and, on a GPU, usually a kernel launch).

    python scripts/count_step_ops.py [--requests 4] [--device cpu]

Runs the first N requests of the ``sixteen`` scenario for a few steps with a ``TorchDispatchMode`` that counts every
aten operation inside ``ModelRunner.execute`` (the forward and sampling), then prints each step's count and the most
frequent kinds. Views (``view``, ``transpose``, ``select``, ...) launch no kernel; the rest do. On CPU the count
includes oneDNN's packed linears (float32, ``batchscope.model.runner``); on a GPU those are ``mm``/``addmm``.
"""

from __future__ import annotations

import argparse
import collections
import sys

from torch.utils._python_dispatch import TorchDispatchMode

from batchscope.engine.config import EngineConfig
from batchscope.engine.llm import generate_trace
from batchscope.inputs.workload import load_scenario
from batchscope.model.models import load_model

VIEWS = {
    "view",
    "_unsafe_view",
    "transpose",
    "select",
    "slice",
    "unsqueeze",
    "expand",
    "t",
    "reshape",
    "alias",
    "as_strided",
    "detach",
    "permute",
    "squeeze",
    "split",
    "unbind",
}


class CountOps(TorchDispatchMode):
    """Counts every aten operation dispatched inside it, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.kinds: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.kinds[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=4, help="requests decoding together (1-16)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    loaded = load_model("SmolLM2-135M-Instruct", args.device, "float32")
    specs = load_scenario("sixteen")["requests"][: args.requests]
    for s in specs:
        s["max_tokens"] = 4
    steps: list[tuple[str, collections.Counter[str]]] = []

    def hook(engine) -> None:
        execute = engine.runner.execute

        def counted(out, block_tables):
            with CountOps() as c:
                result = execute(out, block_tables)
            kind = "decode" if all(s.num_tokens == 1 for s in out.scheduled) else "prefill"
            steps.append((f"{kind} of {len(out.scheduled)} request(s)", c.kinds))
            return result

        engine.runner.execute = counted

    config = EngineConfig(max_num_seqs=16, max_num_batched_tokens=2048, block_size=16, num_kv_blocks=256)
    generate_trace(loaded, specs, config, on_engine=hook)
    for i, (what, kinds) in enumerate(steps):
        total = sum(kinds.values())
        launching = sum(n for k, n in kinds.items() if k not in VIEWS)
        print(f"step {i}: {what}: {total} operations, {launching} of them not views")
    print("most frequent in the last step:", ", ".join(f"{k} {n}" for k, n in steps[-1][1].most_common(10)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
