"""Write a synthetic trace shaped like the vLLM tracer's (schema version 2) for a busy server, to measure the app.

    python scripts/synth_vllm_trace.py --out /tmp/busy.jsonl.gz        # 2,000 requests, 5,000 steps (defaults)

A seeded toy scheduler with vLLM V1's rules (running requests first, then FCFS admissions under ``max_num_seqs``,
the token budget and free blocks; chunked prefill; preemption of the newest running request by recompute when a
block is missing) runs chat-like traffic: request ids like vLLM's OpenAI server's (``chatcmpl-<32 hex>-<8 hex>``),
prompts of 50-16,000 tokens, outputs of 5-1,500, arrivals in bursts so the waiting queue swings between empty and a
few dozen. Defaults: up to 64 running, a 20,000-block pool of 16-token blocks, a 4,096-token budget. The
trace stops after ``--steps`` steps (requests still running then have no finish reason), like a tracer stopped
mid-traffic. Token ids are random; no text (the tracer's default). Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import sys
from dataclasses import dataclass, field


@dataclass
class Req:
    rid: str
    prompt: int
    output: int  # tokens it will generate before stopping
    arrival_step: int
    computed: int = 0
    generated: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    preemptions: int = 0
    recomputed: int = 0
    slot: int = -1
    first_token: float | None = None

    @property
    def known(self) -> int:
        return self.prompt + len(self.generated)


def workload(rng: random.Random, n: int, steps: int) -> list[Req]:
    """``n`` requests arriving in bursts over the first 85 % of ``steps``."""
    reqs = []
    for i in range(n):
        burst = (i // 50) * 50 / n  # 50 requests per burst
        arrival = int((burst + rng.random() * 50 / n) * steps * 0.85)
        prompt = min(16000, max(50, int(rng.lognormvariate(math.log(2400), 0.9))))
        output = min(1500, max(5, int(rng.lognormvariate(math.log(90), 0.9))))
        rid = f"chatcmpl-{rng.getrandbits(128):032x}-{rng.getrandbits(32):08x}"
        reqs.append(Req(rid, prompt, output, arrival))
    return sorted(reqs, key=lambda r: r.arrival_step)


class Sim:
    def __init__(self, args: argparse.Namespace, rng: random.Random):
        self.a, self.rng = args, rng
        self.free = list(range(args.num_blocks - 1, -1, -1))  # pop() hands out the lowest id first
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.to_free: list[Req] = []  # finished at the end of the previous step
        self.t = 0.0

    def _grow(self, req: Req, tokens: int, allocated: dict[str, list[int]]) -> bool:
        need = -(-tokens // self.a.block_size) - len(req.blocks)
        if need > len(self.free):
            return False
        new = [self.free.pop() for _ in range(max(0, need))]
        req.blocks += new
        if new:
            allocated.setdefault(req.rid, []).extend(new)
        return True

    def _release(self, req: Req) -> None:
        self.free.extend(reversed(req.blocks))
        req.blocks = []

    def _preempt(self, victim: Req, freed: list[str], preempted: list[str]) -> None:
        self.running.remove(victim)
        self._release(victim)
        victim.recomputed += victim.computed
        victim.computed, victim.slot = 0, -1
        victim.preemptions += 1
        self.waiting.insert(0, victim)
        freed.append(victim.rid)
        preempted.append(victim.rid)

    def _schedule_running(self, budget: int, sched: list, allocated: dict, freed: list, preempted: list) -> int:
        for req in list(self.running):
            if req not in self.running or budget <= 0:
                continue
            n = min(req.known - req.computed, budget)
            while not self._grow(req, req.computed + n, allocated):
                self._preempt(self.running[-1], freed, preempted)
                if req not in self.running:
                    break
            if req in self.running:
                sched.append((req, n))
                budget -= n
        return budget

    def _admit(self, budget: int, sched: list, allocated: dict, admitted: list) -> None:
        used = {r.slot for r in self.running}
        while self.waiting and budget > 0 and len(self.running) < self.a.max_num_seqs:
            req = self.waiting[0]
            n = min(req.known - req.computed, budget)
            if not self._grow(req, req.computed + n, allocated):
                break
            self.waiting.pop(0)
            req.slot = min(set(range(self.a.max_num_seqs)) - used)
            used.add(req.slot)
            self.running.append(req)
            admitted.append(req.rid)
            sched.append((req, n))
            budget -= n

    def step(self, k: int, arrivals: list[Req]) -> dict:
        freed = [r.rid for r in self.to_free]
        for r in self.to_free:
            self._release(r)
        self.to_free = []
        self.waiting += arrivals
        sched: list[tuple[Req, int]] = []
        allocated: dict[str, list[int]] = {}
        admitted: list[str] = []
        preempted: list[str] = []
        budget = self._schedule_running(self.a.max_num_batched_tokens, sched, allocated, freed, preempted)
        if not preempted:
            self._admit(budget, sched, allocated, admitted)
        return self._record(k, arrivals, sched, allocated, freed, admitted, preempted)

    def _entry(self, req: Req, n: int) -> dict:
        decode = n == 1 and req.computed + n == req.known and req.computed >= req.prompt
        kind = "decode" if decode else "prefill"
        return {
            "request_id": req.rid,
            "kind": kind,
            "num_tokens": n,
            "num_computed_tokens": req.computed,
            "slot": req.slot,
            "recompute": kind == "prefill" and req.preemptions > 0,
        }

    def _record(self, k, arrivals, sched, allocated, freed, admitted, preempted) -> dict:
        entries = [self._entry(r, n) for r, n in sched]
        running = [r.rid for r in self.running]
        tokens = sum(n for _, n in sched)
        t_start, self.t = self.t, self.t + 0.012 + 0.00002 * tokens
        sampled, finished = [], []
        for req, n in sched:
            req.computed += n
            if req.computed == req.known:
                tok = self.rng.randrange(151_000)
                req.generated.append(tok)
                req.first_token = self.t if req.first_token is None else req.first_token
                sampled.append({"request_id": req.rid, "token_id": tok})
                if len(req.generated) >= req.output:
                    finished.append({"request_id": req.rid, "reason": self.rng.choice(["stop", "stop", "length"])})
                    self.running.remove(req)
                    self.to_free.append(req)
        return {
            "type": "step",
            "step": k,
            "t_start": t_start,
            "t_end": self.t,
            "arrived": [spec(r, t_start) for r in arrivals],
            "scheduled": entries,
            "num_batched_tokens": tokens,
            "sampled": sampled,
            "admitted": admitted,
            "finished": finished,
            "preempted": preempted,
            "waiting": [r.rid for r in self.waiting],
            "running": running,
            "padding_slots": [],
            "num_cached_tokens": {rid: 0 for rid in admitted},
            "kv": {
                "num_blocks": self.a.num_blocks,
                "block_size": self.a.block_size,
                "num_used_blocks": self.a.num_blocks - len(self.free),
                "freed": freed,
                "allocated": allocated,
            },
        }


def spec(r: Req, t: float) -> dict:
    return {
        "request_id": r.rid,
        "num_prompt_tokens": r.prompt,
        "max_tokens": 1000,
        "temperature": 0.7,
        "top_p": 0.95,
        "top_k": 0,
        "seed": None,
        "ignore_eos": False,
        "arrival_time": t,
        "arrival_step": r.arrival_step,
        "priority": 0,
    }


def synthesize(args: argparse.Namespace) -> list[dict]:
    rng = random.Random(args.seed)
    reqs = workload(rng, args.requests, args.steps)
    sim = Sim(args, rng)
    header = {
        "type": "header",
        "schema_version": 2,
        "source": "vllm",
        "vllm_version": "0.33.0",
        "model": "synthetic (scripts/synth_vllm_trace.py)",
        "device": "cuda (synthetic)",
        "dtype": "bfloat16",
        "policy": "continuous",
        "created": "2026-01-01T00:00:00+00:00",
        "scenario": None,
        "record_text": False,
        "config": {
            "max_num_seqs": args.max_num_seqs,
            "max_num_batched_tokens": args.max_num_batched_tokens,
            "block_size": args.block_size,
            "num_kv_blocks": args.num_blocks,
            "enable_chunked_prefill": True,
            "enable_prefix_caching": False,
            "scheduling_policy": "fcfs",
            "async_scheduling": False,
        },
        "requests": [],
    }
    records, i = [header], 0
    for k in range(args.steps):
        arrivals = []
        while i < len(reqs) and reqs[i].arrival_step <= k:
            arrivals.append(reqs[i])
            i += 1
        records.append(sim.step(k, arrivals))
    finish = {f["request_id"]: (f["reason"], st["t_end"]) for st in records[1:] for f in st["finished"]}
    first = {}
    for st in records[1:]:
        for s in st["scheduled"]:
            first.setdefault(s["request_id"], st["t_start"])
    records.append({"type": "summary", "requests": [summary(r, first, finish, records) for r in reqs[:i]]})
    return records


def summary(r: Req, first: dict, finish: dict, records: list[dict]) -> dict:
    reason, t = finish.get(r.rid, (None, None))
    return {
        "request_id": r.rid,
        "output_token_ids": r.generated,
        "finish_reason": reason,
        "num_preemptions": r.preemptions,
        "num_recomputed_tokens": r.recomputed,
        "arrival_time": records[1 + r.arrival_step]["t_start"],
        "first_scheduled_time": first.get(r.rid),
        "first_token_time": r.first_token,
        "finish_time": t,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output path (.jsonl or .jsonl.gz)")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--max-num-batched-tokens", type=int, default=4096)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--num-blocks", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    records = synthesize(args)
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
    with open(args.out, "wb") as f:
        f.write(gzip.compress(text, 6) if args.out.endswith(".gz") else text)
    steps = records[1:-1]
    print(
        f"{args.out}: {len(records[-1]['requests'])} requests, {len(steps)} steps, "
        f"up to {max(len(s['running']) for s in steps)} running, up to {max(len(s['waiting']) for s in steps)} "
        f"waiting, up to {max(s['kv']['num_used_blocks'] for s in steps)}/{args.num_blocks} blocks used, "
        f"{sum(len(s['preempted']) for s in steps)} preemptions, {len(text) / 2**20:.1f} MB of text",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
