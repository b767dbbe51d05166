"""Names the benchmark's command line needs before anything heavy loads: the rows and the sweep's spread levels.

Kept apart from ``batchscope.bench.rows`` and ``batchscope.bench.sweep`` (which import torch and transformers, seconds
each) so that ``python -m batchscope --help`` and a bad flag answer at once.
"""

from __future__ import annotations

ROW_TITLES = {
    "hf-sequential": "transformers generate, one request at a time",
    "hf-static": "transformers generate, static batches (left padding)",
    "hf-continuous": "transformers continuous batching (generate_batch)",
    "batchscope-static": "Batchscope static",
    "batchscope-continuous": "Batchscope continuous",
}
BATCHED_ROWS = ("hf-static", "hf-continuous", "batchscope-static", "batchscope-continuous")

DEFAULT_SIGMAS = (0.0, 0.5, 1.0, 1.5, 2.0)  # coefficient of variation 0, 0.53, 1.31, 2.91, 7.32 before the cap
