"""The waiting queue's order: the seam where a scheduling policy decides who is admitted next and who is preempted.

vLLM V1 keeps the same two decisions behind ``--scheduling-policy`` (``vllm/v1/core/sched/request_queue.py``).
A queue answers three questions for the scheduler (and ``remove`` takes an aborted request out):

- ``peek()``: which waiting request is considered for admission next (the *head*);
- ``prepend(req)``: where a preempted request goes back (it was admitted once, so it is not sent to the back);
- ``preemption_victim(running)``: which running request gives back its KV blocks when a block is missing.

``FCFSQueue`` (first come, first served) is the default: arrival order, preempted requests at the front, and the
most recently admitted running request as the victim (vLLM: ``self.running.pop()``, the last of its running
list). ``PriorityQueue`` is vLLM's ``--scheduling-policy priority``: the smallest ``(priority, arrival)`` first, and the
running request with the largest ``(priority, arrival)`` as the victim, even one already scheduled in this step. To add
an order, write a class with the same methods and register it in ``QUEUES``.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator

from batchscope.engine.request import Request


class FCFSQueue:
    """Arrival order; nobody overtakes the head (strict FCFS, so a long request is never starved)."""

    name = "fcfs"
    order = (
        "arrival"  # the words of the records (``batchscope.steplog.reasons``): the queue's order and its victim rule
    )
    victim_rule = "newest"

    def __init__(self) -> None:
        self._queue: deque[Request] = deque()

    def add(self, req: Request) -> None:
        """A newly arrived request joins the back."""
        self._queue.append(req)

    def prepend(self, req: Request) -> None:
        """A preempted request goes back to the front: it keeps its place in line."""
        self._queue.appendleft(req)

    def peek(self) -> Request:
        """The head of the queue. Raises ``IndexError`` when empty."""
        return self._queue[0]

    def pop(self) -> Request:
        """Remove and return the head."""
        return self._queue.popleft()

    def remove(self, req: Request) -> None:
        """Take ``req`` out wherever it is (an abort); the others keep their order."""
        self._queue = deque(r for r in self._queue if r is not req)

    # After a request preempts itself, later running requests wait for the next step (vLLM: ``break``).
    continue_after_self_preemption = False

    @staticmethod
    def preemption_victim(running: list[Request]) -> Request:
        """The most recently admitted running request (``running`` is in admission order)."""
        return running[-1]

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._queue)


def priority_key(req: Request) -> tuple[int, int]:
    """Lower runs first: the request's priority, then its arrival (vLLM's ``Request.__lt__``)."""
    return (req.priority, req.arrival_seq)


class PriorityQueue(FCFSQueue):
    """Smallest ``(priority, arrival)`` first. A preempted request goes back by its key, not to the front.

    Requests that arrive later with a lower priority value overtake the queue; the head still blocks everyone behind
    it (no skipping when the head does not fit), as in vLLM.
    """

    name = "priority"
    order = "priority"
    victim_rule = "lowest_priority"
    # The victim is the lowest-priority running request; when that is the requester itself, the requests after it
    # have higher priority and may still fit (it just freed its blocks): vLLM ``continue``s with them.
    continue_after_self_preemption = True

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[int, int], Request]] = []

    def add(self, req: Request) -> None:
        heapq.heappush(self._heap, (priority_key(req), req))

    def prepend(self, req: Request) -> None:
        self.add(req)

    def peek(self) -> Request:
        return self._heap[0][1]

    def pop(self) -> Request:
        return heapq.heappop(self._heap)[1]

    def remove(self, req: Request) -> None:
        self._heap = [item for item in self._heap if item[1] is not req]
        heapq.heapify(self._heap)

    @staticmethod
    def preemption_victim(running: list[Request]) -> Request:
        """The running request with the largest ``(priority, arrival)``."""
        return max(running, key=priority_key)

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[Request]:
        return iter(r for _, r in sorted(self._heap, key=lambda item: item[0]))


QUEUES: dict[str, type[FCFSQueue]] = {"fcfs": FCFSQueue, "priority": PriorityQueue}
