"""The block map's title and its cells say one number: "N more set aside" is the count of free cells the map marks
*res* (a static batch's or TensorRT-LLM's reservation beyond the blocks in use). Found in a lecturer's trial: the title
said "6/27 used, 14 reserved" beside 8 *res* cells and a moment saying "8 more set aside"; the 14 counted the used
blocks again."""

from __future__ import annotations

import re

import pytest
from conftest import RECORDED

from batchscope.figures.kv import RESERVED_COLOR, block_map_title, block_marks
from batchscope.steplog import trace
from batchscope.steplog.view import TraceView

# the runs that set blocks aside (TensorRT-LLM's MAX_UTILIZATION sets none aside)
RESERVING = ["four-engines-trtllm", "spec-decode-static", "seed-abcd-static", "sixteen-static"]


@pytest.mark.parametrize("name", RESERVING)
def test_the_title_counts_the_cells_it_marks_reserved(name):
    view = TraceView(trace.read(RECORDED / f"{name}.jsonl"))
    said = 0
    for k in range(view.num_steps):
        found = re.search(r"(\d+) more set aside by", block_map_title(view, k))
        if not found:
            continue
        m = block_marks(view, k)
        labels = [t.rsplit("<br>", 1)[-1] for c, t in zip(m["color"], m["text"]) if c == RESERVED_COLOR]
        drawn = labels.count("res")  # not "A res": A's own blocks, allocated and not yet written
        assert int(found.group(1)) == drawn, (k, block_map_title(view, k), drawn)
        said += drawn > 0
    assert said  # the run sets blocks aside somewhere
