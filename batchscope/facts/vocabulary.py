"""The one table of words for what a scheduler does, in each engine's own vocabulary.

vLLM *preempts* a running request when KV blocks run out (``Scheduler._preempt_request``, vllm/v1/core/sched/
scheduler.py); SGLang *retracts* requests from its decode batch when its token slots run out
(``ScheduleBatch.retract_decode``, python/sglang/srt/managers/schedule_batch.py); TensorRT-LLM *pauses* the last
started request when its ``MAX_UTILIZATION`` capacity scheduler runs out of blocks (``MaxUtilizationScheduler``,
cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp). All three send the request back to the waiting queue without
its K/V (a paused one's outputs are folded into its prompt and computed again). TGI's router never evicts. A server
*aborts* a request (client gone, timeout); Batchscope's own engine aborts on the workload's ``abort_step`` or a
Cancel. Every view takes these words from here (``words(view)``), never from a branch of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchscope.steplog.metric_names import family


@dataclass(frozen=True, slots=True)
class Eviction:
    """How an engine names sending a running request back to the waiting queue without its K/V: ``verb`` ("is
    preempted"), ``past`` ("preempted"), ``noun`` ("preemption"), ``plural`` ("preemptions") and the queue panel's
    row (``now``: "Preempted now")."""

    verb: str
    past: str
    noun: str
    plural: str
    now: str


EVICTION: dict[str, Eviction] = {
    "vllm": Eviction("is preempted", "preempted", "preemption", "preemptions", "Preempted now"),
    "sglang": Eviction("is retracted", "retracted", "retraction", "retractions", "Retracted now"),
    "trtllm": Eviction("is paused", "paused", "pause", "pauses", "Paused now"),
}
EVICTION["tgi"] = EVICTION["vllm"]  # TGI's router never evicts: its traces have nothing to name, the general word


# A request's state in one step, as every view prints it. The eviction state is the family's ``Eviction.past``.
NOT_ARRIVED, WAITING, RUNNING, FINISHED, ABORTED, IDLE = "not arrived", "waiting", "running", "finished", "aborted", ""
CUT_SHORT = "cut short"  # still in flight when a cut-short trace stops


def eviction(header: Any) -> Eviction:
    """The eviction words of the engine family of a trace with ``header``
    (``batchscope.steplog.metric_names.family``: the one place that says which family a trace belongs to)."""
    return EVICTION[family(header)]
