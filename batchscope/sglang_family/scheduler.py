"""SGLang-style scheduling: prefill first, admission by estimated future output, retraction, a radix prefix cache.

The rules of SGLang 0.5.23's ``Scheduler.get_next_batch_to_run`` (sglang/srt/managers/scheduler.py), overlap off,
``page_size`` 1; memory is a pool of ``pool_tokens`` K/V slots. Units: tokens; a step is one ``schedule()``.

1. **Prefill first** (``get_next_batch_to_run``): if an EXTEND batch can be formed it runs alone and the running
   requests wait (unless mixed chunks are on, rule 6); otherwise one DECODE batch of every running request runs;
   if neither, the step is idle.
2. **An EXTEND batch** (``_get_new_batch_prefill_raw``): the one chunked request continues first, then waiting
   requests in queue order (``batchscope.sglang_family.policy``: FCFS or LPM) join while
``batchscope.sglang_family.prefill_adder`` allows and a
   row is free (``max_running_requests``). Once admission stops for memory, the running batch is marked *full* and
   no prefill is tried again until a running request leaves it (finishes or is retracted).
3. **A DECODE batch** (``update_running_batch``): one token each. If the pool cannot hold them (after evicting the
   unlocked cache), requests are *retracted* (``ScheduleBatch.retract_decode``): at least one, then more until the
   rest fit, fewest output tokens then longest prompt first; the batch keeps the others in that order. A retracted
   request frees the K/V it holds outside the cache and goes to the back of the queue; its prompt stays cached.
4. **new_token_ratio** (``NewTokenRatioTracker``): starts at 0.7 x ``schedule_conservativeness`` (1.0), loses
   (0.7 - 0.7 x 0.14) / 600 per decode step down to 0.7 x 0.14; after a retraction it becomes
   ``(generated + 20 x n) / (max_new_tokens + 1)`` over the n requests kept (capped at 1); an idle step resets it.
5. **K/V and the cache**: after each EXTEND a request's computed tokens enter the radix cache and it locks them (a
   chunk's as the next step begins, after the others'); decode tokens are its own until it finishes; then all but
   its last sampled token enter the cache. When the pool runs short, the cache evicts whole unlocked leaves, least
   recently accessed first (``batchscope.sglang_family.radix_cache``).
6. **Mixed chunks** (``--enable-mixed-chunk``, off by default; ``_get_new_batch_prefill_raw``'s "mixed-style
   chunked prefill"): the adder starts with one token per running request taken from the chunk and input tokens
   and the memory; once the EXTEND batch is formed (its K/V allocated), if the pool holds one more token per
   running request (after evicting the unlocked cache) the running batch decodes inside it, after its members,
   and the two are one batch from then on (its *full* flag is clear, as a replaced running batch's is);
   otherwise the decodes wait, never retracted. A mixed step does not decay the ratio.

7. **Arrival** (``handle_request``): SGLang's request handling clips the output budget to the pool and refuses a
   prompt too long for it (``batchscope.sglang_family.request_handling``) before the request joins the queue.
8. **Abort** (``abort``, SGLang's ``Scheduler.abort_request``, scheduler.py:5675-5812): a waiting (or retracted)
   request leaves the queue at once; the chunked request mid-prompt is dropped as the next step begins
   (``process_pending_chunked_abort``, :3778-3823, before the chunk it computed last is stashed): that chunk is
   freed, its earlier chunks stay cached; any other running request is only marked *to finish*: it runs on with
   its batch until it next samples (a decode, a mixed decode, or after a retraction its recomputed prefill), keeps
   that token and ends with the abort, its K/V into the radix cache as a finished request's.

``batchscope.sglang_family.state`` holds the per-request state and the memory bookkeeping this module drives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from batchscope.sglang_family.policy import WaitingOrder
from batchscope.sglang_family.prefill_adder import CONTINUE, NO_TOKEN, OTHER, PrefillAdder
from batchscope.sglang_family.request_handling import STAND_IN_PROMPT, Handled, RequestLimits, handle
from batchscope.sglang_family.state import Memory, SglRequest

INIT_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO x schedule_conservativeness 1.0
MIN_RATIO = INIT_RATIO * 0.14  # x SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
RATIO_DECAY = (INIT_RATIO - MIN_RATIO) / 600  # over SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS
MAX_PREFILL_TOKENS = 16384  # ServerArgs.max_prefill_tokens


@dataclass
class SglStep:
    """One step's decision: the batch kind, who runs with how many tokens (batch order), admissions with their
    prefix hits and the output tokens their estimate charged, retracted request ids; for a retraction, in the
    order taken, (request id, K/V tokens it held, tokens freed), and the decode batch's need and the free tokens
    it met."""

    kind: str  # "extend", "decode" or "idle"
    run: list[tuple[SglRequest, int]] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)
    prefix_hits: dict[str, int] = field(default_factory=dict)
    retracted: list[str] = field(default_factory=list)
    reserved: dict[str, int] = field(default_factory=dict)
    retractions: list[tuple[str, int, int]] = field(default_factory=list)
    retract_need: tuple[int, int] = (0, 0)
    mixed: list[str] = field(default_factory=list)  # running requests that decode inside this EXTEND batch


class SGLangScheduler:
    """Holds the waiting queue, the running batch, the chunked request, the ratio and the memory."""

    def __init__(
        self,
        max_running: int,
        chunk_tokens: int,
        pool_tokens: int,
        policy: str,
        prefix_cache: bool,
        memory: Memory | None = None,
        mixed_chunk: bool = False,
        context_len: int | None = None,
    ):
        """``memory``: a ``Memory`` to keep the K/V bookkeeping in (the engine's ``SlotMemory``; default a new one
        of ``pool_tokens`` and ``prefix_cache``). ``mixed_chunk``: SGLang's ``--enable-mixed-chunk`` (rule 6).
        ``context_len``: the model's context in tokens (None: unbounded), for the request limits (rule 7)."""
        self.max_running, self.chunk_tokens, self.policy = max_running, chunk_tokens, policy
        self.order = WaitingOrder(policy)
        self.mixed_chunk = mixed_chunk
        self.memory = memory if memory is not None else Memory(pool_tokens, prefix_cache)
        self.waiting: list[SglRequest] = []
        self.running: list[SglRequest] = []  # the running (decoding) batch, in batch order
        self.chunked: SglRequest | None = None
        self.batch_is_full = False
        self.ratio = INIT_RATIO
        self._last: SglStep | None = None
        # why the head of the queue stays out this step: (limit of ``batchscope.steplog.reasons``, need, left) or None
        self.held: tuple[str, int | None, int | None] | None = None
        self.limits = RequestLimits(pool_tokens, context_len)

    def add_request(self, req: SglRequest) -> None:
        """Straight into the waiting queue (no request handling: a retracted request, or a test)."""
        self.waiting.append(req)

    def handle_request(self, req: SglRequest, max_new_tokens: int | None) -> Handled:
        """Rule 7 (``Scheduler.handle_generate_request``): ``req`` gets the ``max_new_tokens`` SGLang grants it
        (asked: ``max_new_tokens``, None for unset); a refused prompt is swapped for SGLang's one-token stand-in and
        marked to finish. Then it joins the waiting queue. Returns what the handling decided."""
        handled = handle(self.limits, req.num_prompt_tokens, max_new_tokens)
        req.max_new_tokens = handled.max_new_tokens
        if handled.error is not None:
            req.prompt_token_ids, req.to_finish, req.error = list(STAND_IN_PROMPT), True, handled.error
        self.add_request(req)
        return handled

    def schedule(self) -> SglStep:
        """This step's batch (rules 1-3 of the module docstring)."""
        if self.chunked is not None and self.chunked.kv_len > self.chunked.cached_len:
            self.memory.checkpoint(self.chunked)  # its last chunk enters the cache now (``stash_chunked_request``)
        self._merge_last()
        self.held = None
        step = self._extend_batch()
        if step is None:
            step = self._decode_batch() if self.running else SglStep("idle")
        self._last = step
        return step

    def _merge_last(self) -> None:
        """The last EXTEND batch joins the running batch, less the chunked request and finished ones; a request
        leaving the running batch clears *full*."""
        if self._last is not None and self._last.kind == "extend":
            new = [r for r, _ in self._last.run if r is not self.chunked and not r.finished]
            # an empty running batch is replaced by the new one, whose *full* flag is clear
            if len(new) < len(self._last.run) or (new and not self.running):
                self.batch_is_full = False
            self.running += new
        kept = [r for r in self.running if not r.finished]
        if len(kept) < len(self.running):
            self.batch_is_full = False
        self.running = kept

    def _rows_left(self, held: int = 0) -> int:
        taken = len(self.running) + (self.chunked is not None)
        return min(self.max_running - len(self.running), self.max_running - taken + held)

    def _extend_batch(self) -> SglStep | None:
        if not self.running:
            self.batch_is_full = False
        if (self.batch_is_full or not self.waiting) and self.chunked is None:
            self.held = ("sglang_batch_full", None, None) if self.waiting else None
            return None
        if self._rows_left() <= 0 and self.chunked is None:
            self.batch_is_full = True
            self.held = ("max_num_seqs", 1, 0)
            return None
        self.order.sort(self.waiting, self.memory)
        adder = PrefillAdder(
            self.memory.capacity,
            self.running,
            self.ratio,
            self.chunk_tokens,
            MAX_PREFILL_TOKENS,
            self.memory.cache.enabled,
            len(self.running) if self.mixed_chunk else 0,
        )
        step, was_chunked = SglStep("extend"), self.chunked
        if self.chunked is not None:
            self.chunked.prefix_len = self.chunked.kv_len  # it continues after its earlier chunks
            n, truncated = adder.add_chunked(self.chunked)
            step.run.append((self.chunked, n))
            self.chunked = self.chunked if truncated else None
        self._admit(adder, step, held=int(was_chunked is not None))
        if not step.run:
            return None
        ids = set(step.admitted)
        self.waiting = [r for r in self.waiting if r.request_id not in ids]
        if adder.new_chunked is not None:  # the request cut short this step becomes the chunked one
            self.chunked = next(r for r, _ in step.run if r is adder.new_chunked)
        for req, n in step.run:
            self.memory.extend(req, n)
        if self.mixed_chunk and self.running and self.memory.decode_fits(len(self.running)):
            self._mix_decodes(step)
        return step

    def _mix_decodes(self, step: SglStep) -> None:
        """Rule 6: the running batch decodes inside the EXTEND batch (after its members) and becomes part of it."""
        for req in self.running:
            self.memory.extend(req, 1)
        step.run += [(r, 1) for r in self.running]
        step.mixed = [r.request_id for r in self.running]
        self.running = []

    def _admit(self, adder: PrefillAdder, step: SglStep, held: int) -> None:
        """Waiting requests in order while the adder and the rows allow (``_get_new_batch_prefill_raw``'s loop)."""
        for req in self.waiting:
            if adder.budget_state() == OTHER:
                self.held = ("token_budget", 1, 0)
                break
            if len(adder.can_run) >= self._rows_left(held):
                self.batch_is_full = True
                self.held = ("max_num_seqs", 1, 0)
                break
            self.memory.match(req)
            result, n = adder.add_one(req, partial(self.memory.lock, req), partial(self.memory.unlock, req))
            if n:
                step.run.append((req, n))
                step.admitted.append(req.request_id)
                step.prefix_hits[req.request_id] = req.prefix_len
                step.reserved[req.request_id] = adder.last_reserved
            if result != CONTINUE:
                if result == NO_TOKEN:
                    self.batch_is_full = bool(adder.can_run) or bool(self.running)
                # refused: the rule and estimate it did not fit; admitted: the budget left after it is spent (the
                # pool after the output estimates, ``budget_state``), whatever rule admitted it
                need, left = adder.last_need if not n else (None, None)
                no_room = (adder.last_limit if not n else "sglang_reserved_output", _ceil(need), _floor(left))
                self.held = no_room if result == NO_TOKEN else ("token_budget", 1, 0)
                break

    def _decode_batch(self) -> SglStep:
        step = SglStep("decode")
        if not self.memory.decode_fits(len(self.running)):
            step.retract_need = (len(self.running), self.memory.free)
            step.retracted = self._retract(step)
            self.batch_is_full = False
        else:
            self.ratio = max(self.ratio - RATIO_DECAY, MIN_RATIO)
        for req in self.running:
            self.memory.extend(req, 1)
        step.run = [(r, 1) for r in self.running]
        return step

    def _retract(self, step: SglStep) -> list[str]:
        """``ScheduleBatch.retract_decode``: keep-first order, retract from its end (at least one, never the last)
        until the rest fit; then the ratio estimate of the requests kept."""
        order = _keep_order(self.running)
        out: list[str] = []
        while (not out or not self.memory.decode_fits(len(order))) and len(order) > 1:
            req = order.pop()
            step.retractions.append((req.request_id, req.kv_len, req.kv_len - req.cached_len))
            self.memory.retract(req, len(order) * RETRACT_DECODE_STEPS)
            self.waiting.append(req)
            out.append(req.request_id)
        self.running = order
        decoded = sum(len(r.output_token_ids) for r in order)
        budget = sum(r.max_new_tokens for r in order)
        self.ratio = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(order)) / (budget + 1))
        return sorted(out)

    def abort(self, req: SglRequest) -> str | None:
        """Rule 8, an abort between steps: ``waiting`` (out of the queue), ``chunked`` (the chunk in flight freed,
        the earlier chunks left in the cache), ``to_finish`` (marked; it ends at its next sample), or None (it had
        finished already)."""
        if req.finished:
            return None
        if req in self.waiting:
            self.waiting.remove(req)
            req.finished, req.finish_reason = True, "abort"
            return "waiting"
        if req is self.chunked:
            self.memory.discard(req)
            self.chunked = None
            req.finished, req.finish_reason = True, "abort"
            return "chunked"
        req.to_finish = True
        return "to_finish"

    def update(self, step: SglStep, sampled: dict[str, int]) -> list[str]:
        """Apply the step's sampled tokens (``sampled``: request id -> token, for requests that sample); returns
        who finished. An idle step resets the ratio (``Scheduler.on_idle``)."""
        if step.kind == "idle":
            self.ratio = INIT_RATIO
            return []
        finished = []
        for req, _ in step.run:
            if req is self.chunked:  # a chunk that stops mid-prompt samples nothing (cached when the next step begins)
                continue
            req.output_token_ids.append(sampled[req.request_id])
            if req.check_finished():
                self.memory.release(req)
                finished.append(req.request_id)
            elif step.kind == "extend" and req.request_id not in step.mixed:  # a mixed decode is not cached yet
                self.memory.checkpoint(req)
        return finished


def _floor(x: float | None) -> int | None:
    return None if x is None else int(x // 1)


def _ceil(x: float | None) -> int | None:
    return None if x is None else -int(-x // 1)


def _keep_order(running: list[SglRequest]) -> list[SglRequest]:
    """Most-preferred to keep first: most output tokens, then shortest prompt (``_get_decode_retraction_order``);
    retraction takes from the end."""
    return sorted(running, key=lambda r: (len(r.output_token_ids), -r.num_prompt_tokens), reverse=True)
