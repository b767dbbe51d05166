"""Static batching: the baseline that continuous batching is measured against, on the same engine and limits.

A batch of up to ``max_num_seqs`` requests is formed only when the previous batch has completely finished. Each
member's worst-case KV blocks (prompt + ``max_tokens`` - 1 tokens: the last sampled token is never fed back), net of
the blocks its prefix-cache hit already holds, are reserved when the batch forms, so the pool can never run out and
nobody is preempted. A member that finishes early keeps its row and runs a *padding row* until the slowest member ends,
as a fixed-shape batch does: the weights are still read for it every step. That waste is what continuous batching
removes; the trace logs it as padding.

Only the three hooks of ``batchscope.scheduling.scheduler.Scheduler`` change; running requests are scheduled as in
continuous batching (which, within a batch, only ever finishes prefills chunk by chunk and decodes).
"""

from __future__ import annotations

from batchscope.engine.config import EngineConfig
from batchscope.engine.request import Request
from batchscope.scheduling.block_manager import blocks_needed
from batchscope.scheduling.scheduler import Scheduler, SchedulerOutput
from batchscope.steplog.records import KVExtras


class StaticScheduler(Scheduler):
    """Fixed batch membership until the slowest member ends."""

    def __init__(self, config: EngineConfig, eos_token_ids: set[int] | frozenset[int] = frozenset()):
        super().__init__(config, eos_token_ids)
        self.batch: list[Request] = []  # members of the current batch, finished ones included
        self.reserved: dict[str, int] = {}  # member -> worst-case blocks beyond its prefix-cache hit
        self.hit_blocks: dict[str, int] = {}  # member -> blocks of its prefix-cache hit

    def _admit_waiting(self, out: SchedulerOutput, budget: int) -> None:
        """Form a new batch when the last one has ended, reserving each member's worst-case blocks net of its
        prefix-cache hit (hit blocks are adopted at once and counted once however many members share them)."""
        if self.running or out.scheduled:
            if self.waiting:
                self._hold_head(out, "static_batch_running")
            return
        for req in self.batch:  # the old batch's rows are free only now
            self.rows.pop(req.request_id, None)
        self.batch, self.reserved = [], {}
        shared: set[int] = set()
        while self.waiting:
            if len(self.batch) >= self.config.max_num_seqs:
                self._hold_head(out, "max_num_seqs", 1, 0)
                break
            req = self.waiting.peek()
            hits = self.block_manager.find_cached_prefix(req)
            need = blocks_needed(req.max_kv_tokens, self.config.block_size) - len(hits)
            left = self.config.num_kv_blocks - sum(self.reserved.values()) - len(shared)
            adds = need + len(set(hits) - shared)  # its own worst case, plus hit blocks nobody in the batch holds
            if adds > left:
                self._hold_head(out, "kv_blocks_reserved", adds, left)
                break
            self.reserved[req.request_id], self.hit_blocks[req.request_id] = need, len(hits)
            shared |= set(hits)
            self._admit(self.waiting.pop(), out, hits)
            self.batch.append(req)
        super()._schedule_running(out, budget)  # the new members start prefilling in this very step

    def _release_row(self, req: Request) -> None:
        """A finished member keeps its row (it becomes padding) until the batch ends."""

    def _finish_output(self, out: SchedulerOutput) -> None:
        out.padding = [(self.rows[r.request_id], r.request_id) for r in self.batch if r.is_finished]

    @property
    def num_reserved_blocks(self) -> int:
        """Worst-case blocks reserved for the unfinished members of the current batch, net of their prefix-cache
        hits (whose blocks they already hold)."""
        tables = self.block_manager.block_tables
        live = [r for r in self.batch if not r.is_finished]
        shared = {b for r in live for b in tables.get(r.request_id, [])[: self.hit_blocks.get(r.request_id, 0)]}
        return sum(self.reserved[r.request_id] for r in live) + len(shared)

    def step_stats(self) -> KVExtras:
        return {"num_reserved_blocks": self.num_reserved_blocks}
