"""The steps at which the player's decoders are checked: the Python copy of the JS decoder
(tests/visuals/test_player_payload.py) and the JS decoder itself in Chromium (tests/ui/test_browser_decoder.py)
look at the same ones."""

from __future__ import annotations

import random

WINDOW = 8  # the slot grid's window both tests pack the payload with


def sample_steps(num_steps: int, events: list[int]) -> list[int]:
    """First, second, last, a few events and a few seeded random steps of the shared clock."""
    rng = random.Random(num_steps)
    picks = {0, 1, num_steps - 1, *events[:3], *events[-2:], *rng.sample(range(num_steps), min(6, num_steps))}
    return sorted(k for k in picks if 0 <= k < num_steps)
