"""The waiting queue's order: the seam where a scheduling policy decides who is admitted next and who is preempted.

vLLM V1 keeps the same two decisions behind ``--scheduling-policy`` (``vllm/v1/core/sched/request_queue.py``).
A queue answers three questions for the scheduler:

- ``peek()``: which waiting request is considered for admission next (the *head*);
- ``prepend(req)``: where a preempted request goes back (it was admitted once, so it is not sent to the back);
- ``preemption_victim(running)``: which running request gives back its KV blocks when a block is missing.

``FCFSQueue`` (first come, first served) is the default: arrival order, preempted requests at the front, and the
most recently admitted running request as the victim (it has done the least work). To add an order, write a class
with the same methods and register it in ``QUEUES``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from engine.request import Request


class FCFSQueue:
    """Arrival order; nobody overtakes the head (strict FCFS, so a long request is never starved)."""

    name = "fcfs"

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

    @staticmethod
    def preemption_victim(running: list[Request]) -> Request:
        """The most recently admitted running request (``running`` is in admission order)."""
        return running[-1]

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._queue)


QUEUES: dict[str, type[FCFSQueue]] = {"fcfs": FCFSQueue}
