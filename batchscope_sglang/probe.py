"""Which condition ended SGLang's prefill admission in a step: observed on one scheduler, never changed.

``Scheduler._get_new_batch_prefill_raw`` (sglang/srt/managers/scheduler.py of 0.5.23) stops taking waiting requests
at the first of these; ``StopProbe.stop`` names it (SGLang's own terms):

- ``batch_is_full`` (line 4098): the running batch is marked full, or the queue is empty, and no chunk continues;
  nothing is tried (``queue_empty`` when the queue was empty);
- ``no_row`` (line 4120, only without a continuing chunk; or line 4226, in the loop, before each request):
  ``get_num_allocatable_reqs`` leaves no row for another request (``batch_is_full`` is set);
- ``budget_state OTHER`` (line 4207, in the loop, before each request): the adder's chunk or input tokens are
  spent (``PrefillAdder.budget_state``, sglang/srt/managers/schedule_policy.py:874);
- ``add_one_req NO_TOKEN`` / ``add_one_req OTHER`` (line 4279): the request was refused, for memory or for tokens
  (``add_one_req_ignore_eos ...`` when SGLang judged it by the fixed-length run: ``ignore_eos`` with the tree cache
  disabled, schedule_policy.py:1401); ``... after admitting`` when the request was admitted and the verdict is the
  adder's ``budget_state`` after it (schedule_policy.py:1590, 1383), which ends the loop before the next request;
- ``queue_done``: every waiting request was tried and admitted.

The scheduler's ``get_prefill_adder_class`` and ``get_num_allocatable_reqs`` are replaced, on the one instance, by
versions that call SGLang's own and note what they returned: the class is a subclass of SGLang's ``PrefillAdder``
whose ``budget_state`` and ``add_one_req`` return what SGLang's return. Only the standard library and SGLang are
used.
"""

from __future__ import annotations

from typing import Any


class StopProbe:
    """Notes, for the current step, the admission checks SGLang ran and what each returned."""

    def __init__(self, scheduler: Any):
        self.events: list[tuple[str, Any]] = []
        self.adder: Any = None
        self.queue_was_empty = True
        self._watch(scheduler)

    def begin(self, scheduler: Any) -> None:
        """Call before each ``get_next_batch_to_run``."""
        self.events, self.adder = [], None
        self.queue_was_empty = not scheduler.waiting_queue

    @property
    def stop(self) -> str:
        """The condition that ended this step's admission (see the module docstring)."""
        if not self.events:
            return "queue_empty" if self.queue_was_empty else "batch_is_full"
        what, value = self.events[-1]
        if what == "rows":
            return "no_row" if value else "unknown"
        if what == "budget_state":
            return f"budget_state {value.name}" if value.name == "OTHER" else "unknown"
        if what == "adder":
            return "unknown"
        result, added = value
        if result.name == "CONTINUE":
            return "queue_done"
        return f"{what} {result.name}" + (" after admitting" if added else "")

    def _watch(self, s: Any) -> None:
        probe = self
        base = s.get_prefill_adder_class()

        class ObservedAdder(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any):
                self._judging = False  # inside add_one_req, whose own budget_state is its verdict
                super().__init__(*args, **kwargs)
                probe.adder = self
                probe.events.append(("adder", None))

            def budget_state(self) -> Any:
                result = super().budget_state()
                if not self._judging:
                    probe.events.append(("budget_state", result))
                return result

            def add_one_req(self, req: Any, *args: Any, **kwargs: Any) -> Any:
                self._judging = True
                try:
                    result = super().add_one_req(req, *args, **kwargs)
                finally:
                    self._judging = False
                added = bool(self.can_run_list) and self.can_run_list[-1] is req
                fixed = req.sampling_params.ignore_eos and getattr(self.tree_cache, "disable", True)
                probe.events.append(("add_one_req_ignore_eos" if fixed else "add_one_req", (result, added)))
                return result

        rows = s.get_num_allocatable_reqs

        def observed_rows(*args: Any, **kwargs: Any) -> int:
            n = rows(*args, **kwargs)
            taken = len(probe.adder.can_run_list) if probe.adder is not None else 0
            probe.events.append(("rows", taken >= n))
            return n

        s.get_prefill_adder_class = lambda: ObservedAdder
        s.get_num_allocatable_reqs = observed_rows
