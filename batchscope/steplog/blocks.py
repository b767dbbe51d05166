"""Each step's block tables, from a trace of either schema version.

Version 1 steps carry every table (``kv.block_tables``). Version 2 steps carry what changed, in this order:
``kv.freed`` (requests whose whole table was released since the previous step's forward pass: finished at the end
of the previous step, preempted while this step was scheduled, aborted in between) and then ``kv.allocated``
(blocks appended to a request's table in this step; a request absent from the tables starts a new table). So
``tables(k) = tables(k - 1) - freed(k) + allocated(k)``, the same state a version 1 record holds.

``BlockTables`` rebuilds a step's tables from the nearest checkpoint at or before it (one every ``every`` steps,
built in one pass on first use). Tables are tuples shared between checkpoints, so memory grows with the blocks that
changed, not with steps x pool size: a 5,000-step trace of a 20,000-block pool keeps about 80 checkpoints of
references, and a step change replays at most ``every - 1`` steps of deltas.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

Tables = dict[str, tuple[int, ...]]


def apply(tables: Tables, kv: dict) -> None:
    """Apply one version 2 step's ``kv`` deltas to ``tables`` in place."""
    for rid in kv.get("freed", ()):
        tables.pop(rid, None)
    for rid, blocks in kv.get("allocated", {}).items():
        if blocks:
            tables[rid] = tables.get(rid, ()) + tuple(blocks)


class BlockTables:
    """``tables(step)``: ``{request_id: tuple of block ids in token order}`` of every block-holding request during
    ``step``'s forward pass, for the step records of a trace (version 1 or 2)."""

    def __init__(self, steps: list[Any], version: int, every: int = 64, cache: int = 4):
        self.steps, self.version, self.every = steps, version, max(1, every)
        self._checkpoints: list[Tables] | None = None
        self._recent: OrderedDict[int, Tables] = OrderedDict()
        self._cache = cache

    def _build(self) -> list[Tables]:
        checkpoints: list[Tables] = []
        tables: Tables = {}
        for k, st in enumerate(self.steps):
            apply(tables, st["kv"])
            if k % self.every == 0:
                checkpoints.append(dict(tables))
        return checkpoints

    def __call__(self, step: int) -> Tables:
        if self.version == 1:
            return {rid: tuple(t) for rid, t in self.steps[step]["kv"]["block_tables"].items()}
        if step in self._recent:
            self._recent.move_to_end(step)
            return self._recent[step]
        if self._checkpoints is None:
            self._checkpoints = self._build()
        base = step // self.every
        tables = dict(self._checkpoints[base])
        for k in range(base * self.every + 1, step + 1):
            apply(tables, self.steps[k]["kv"])
        self._recent[step] = tables
        if len(self._recent) > self._cache:
            self._recent.popitem(last=False)
        return tables

    def counts(self) -> dict[str, dict[int, int]]:
        """Blocks held by each request at each step it holds any: ``{request_id: {step: count}}`` (one pass)."""
        out: dict[str, dict[int, int]] = {}
        lengths: dict[str, int] = {}
        for k, st in enumerate(self.steps):
            kv = st["kv"]
            if self.version == 1:
                lengths = {rid: len(t) for rid, t in kv["block_tables"].items()}
            else:
                for rid in kv.get("freed", ()):
                    lengths.pop(rid, None)
                for rid, blocks in kv.get("allocated", {}).items():
                    if blocks:
                        lengths[rid] = lengths.get(rid, 0) + len(blocks)
            for rid, n in lengths.items():
                out.setdefault(rid, {})[k] = n
        return out


def to_v1(records: list[dict]) -> list[dict]:
    """A copy of a trace with every step's ``kv.block_tables`` filled in (lists), whatever its version; version 2
    headers keep their number, so the result is for analysis (``batchscope_vllm.compare``), not for ``write``."""
    steps = records[1:-1]
    tables = BlockTables(steps, records[0]["schema_version"])
    out = [records[0]]
    for k, st in enumerate(steps):
        kv = {**st["kv"], "block_tables": {rid: list(t) for rid, t in tables(k).items()}}
        out.append({**st, "kv": kv})
    return [*out, records[-1]]


def to_v2(records: list[dict]) -> list[dict]:
    """A version 1 trace as version 2 (``source`` "batchscope"): each step's tables replaced by ``kv.freed`` and
    ``kv.allocated`` (every block a table gained, prefix-cache hits included, as vLLM's new block ids); the hits
    among them, blocks adopted from the cache rather than newly written, are listed in ``kv.cache_hits``. A table
    that does not extend the previous step's (freed and rebuilt in one step) is listed as freed and allocated
    whole."""
    header = {**records[0], "schema_version": 2}
    header.setdefault("source", "batchscope")
    out = [header]
    prev: dict[str, list[int]] = {}
    for st in records[1:-1]:
        kv = dict(st["kv"])
        cur = kv.pop("block_tables")
        freed = [rid for rid, t in prev.items() if cur.get(rid, [])[: len(t)] != t or rid not in cur]
        allocated, hits = {}, {}
        written = kv.get("allocated", {})
        for rid, t in cur.items():
            have = 0 if rid in freed or rid not in prev else len(prev[rid])
            if len(t) > have:
                allocated[rid] = t[have:]
                adopted = [b for b in t[have:] if b not in written.get(rid, ())]
                if adopted:
                    hits[rid] = adopted
        deltas = {"freed": freed, "allocated": allocated, **({"cache_hits": hits} if hits else {})}
        out.append({**st, "kv": {**kv, **deltas}})
        prev = cur
    return [*out, records[-1]]
