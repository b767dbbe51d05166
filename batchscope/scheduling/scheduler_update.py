"""The scheduler's second half: after the forward pass, apply what the step produced (vLLM's
``Scheduler.update_from_output``), and abort requests from outside the step loop (``finish_requests``).

A mixin of ``batchscope.scheduling.scheduler.Scheduler``: it reads the scheduler's ``running``, ``waiting``,
``block_manager``, ``proposer`` and rows; every subclass (static batching) inherits it unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from batchscope.engine.request import FinishReason, Request, RequestStatus
from batchscope.scheduling.scheduler_output import SchedulerOutput
from batchscope.steplog.records import AbortRecord, AbortState

if TYPE_CHECKING:
    from batchscope.engine.ngram_proposer import NgramProposer
    from batchscope.scheduling.block_manager import BlockManager
    from batchscope.scheduling.request_queue import FCFSQueue


class SchedulerUpdate:
    """``update`` and ``abort`` (see the module docstring)."""

    running: list[Request]
    waiting: FCFSQueue
    block_manager: BlockManager
    proposer: NgramProposer | None
    max_model_len: int | None
    eos_token_ids: frozenset[int]

    def _release_row(self, req: Request) -> None:
        raise NotImplementedError

    def update(self, out: SchedulerOutput, sampled: dict[str, list[int]]) -> list[tuple[str, FinishReason]]:
        """Advance every scheduled request, append its sampled tokens (one, or with drafts the accepted ones and
        one more; rejected drafts are rolled back), finish and free, propose the next drafts. Returns who
        finished."""
        finished = []
        for s in out.scheduled:
            req = s.request
            req.num_computed_tokens += s.num_tokens
            req.num_recomputed_tokens += s.num_recomputed
            tokens = sampled.get(req.request_id)
            if not tokens:
                continue
            if s.draft_token_ids:  # vLLM's update_from_output: the rejected drafts' positions are computed again
                s.num_accepted = len(tokens) - 1
                req.num_computed_tokens -= len(s.draft_token_ids) - s.num_accepted
            reason = self._append(req, tokens)
            if reason is None and self.proposer is not None:  # drafts for its next step (vLLM: the runner's)
                req.spec_token_ids = self.proposer.propose(req.all_token_ids, self.max_model_len)
            if reason is not None:
                req.status, req.finish_reason = RequestStatus.FINISHED, reason
                self.running.remove(req)
                self.block_manager.free(req.request_id)
                self.block_manager.forget(req.request_id)
                self._release_row(req)
                finished.append((req.request_id, reason))
        return finished

    def abort(self, req: Request) -> AbortRecord | None:
        """Finish ``req`` from outside the step loop, as vLLM's ``Scheduler.finish_requests(ids, FINISHED_ABORTED)``
        does (vllm/v1/core/sched/scheduler.py): out of the running list or the waiting queue, its blocks freed (tail
        first, as at a finish), status finished with reason ``abort``. Returns what it took away
        (``batchscope.steplog.records.AbortRecord``: its state, tokens, table length), or None if it had
        finished."""
        if req.is_finished:
            return None
        state = cast(AbortState, req.status.value)  # waiting, running or preempted (unfinished)
        if req.status == RequestStatus.RUNNING:
            self.running.remove(req)
            self._release_row(req)
        else:
            self.waiting.remove(req)
        table = self.block_manager.free(req.request_id)
        self.block_manager.forget(req.request_id)
        req.status, req.finish_reason = RequestStatus.FINISHED, FinishReason.ABORT
        return {"state": state, "num_output_tokens": len(req.output_token_ids), "num_freed_blocks": len(table)}

    def _append(self, req: Request, tokens: list[int]) -> FinishReason | None:
        """Append ``tokens`` to ``req``'s output, stopping at the first that finishes it (the rest are dropped from
        ``tokens`` too, as vLLM's ``_update_request_with_output`` does); with speculation on, the blocks the accepted
        tokens filled enter the prefix cache now, as vLLM caches them after the step. Returns the finish reason."""
        reason = None
        for i, token in enumerate(tokens):
            req.output_token_ids.append(token)
            reason = self._finish_reason(req, token)
            if reason is not None:
                del tokens[i + 1 :]
                break
        if self.proposer is not None:
            self.block_manager.cache_computed(req)
        return reason

    def _finish_reason(self, req: Request, token: int) -> FinishReason | None:
        if token in self.eos_token_ids and not req.sampling.ignore_eos:
            return FinishReason.STOP
        if len(req.output_token_ids) >= req.sampling.max_tokens:
            return FinishReason.LENGTH
        return None
