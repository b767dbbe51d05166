"""Engine settings: one small dataclass, validated with messages that name the field and its range."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Policy = Literal["continuous", "static"]
POLICIES: tuple[str, ...] = ("continuous", "static")

# Allowed ranges, shared by the CLI, the app's knobs and validation.
LIMITS = {
    "max_num_seqs": (1, 256),
    "max_num_batched_tokens": (1, 65536),
    "block_size": (1, 1024),
    "num_kv_blocks": (1, 100_000),
}


@dataclass
class EngineConfig:
    """Scheduler and KV-cache limits (names as in vLLM).

    - ``max_num_seqs``: most requests running at once (the "slots" of the pictures).
    - ``max_num_batched_tokens``: the token budget of one step (prefill chunk tokens + decode tokens).
    - ``block_size``: token slots per KV block.
    - ``num_kv_blocks``: blocks in the preallocated KV pool (capacity = num_kv_blocks * block_size tokens).
    - ``enable_chunked_prefill``: split a prompt larger than the budget left across steps.

    Defaults keep the block map readable for a handful of requests: 64 blocks of 16 tokens.
    """

    policy: Policy = "continuous"
    max_num_seqs: int = 4
    max_num_batched_tokens: int = 64
    block_size: int = 16
    num_kv_blocks: int = 64
    enable_chunked_prefill: bool = True

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field and its allowed range."""
        if self.policy not in POLICIES:
            raise ValueError(f"policy={self.policy!r} must be one of {', '.join(POLICIES)}")
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not (lo <= value <= hi):
                raise ValueError(f"{name}={value!r} is out of range: an integer in [{lo}, {hi}]")

    def header_dict(self) -> dict:
        """The ``config`` object of a trace header (the policy is recorded beside it)."""
        d = asdict(self)
        d.pop("policy")
        return d
