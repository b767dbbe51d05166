"""Progress on stderr that suits where stderr goes: a live bar on a terminal, a few plain lines elsewhere.

On a terminal (``isatty``) a tqdm bar redraws one line in place. In a CI log or a pipe the same carriage returns
would pile up as hundreds of updates on one line, so off a terminal a plain line is printed only every 10 % of the
work (when the total is known) or every ``every`` updates, and for each status message.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


class Progress:
    """``update(n, done=..., note=...)`` advances the count; ``say(msg)`` reports a new phase; ``close()`` ends."""

    def __init__(self, desc: str, total: int | None = None, unit: str = "step", file: TextIO | None = None, every=100):
        self.desc, self.total, self.unit, self.every = desc, total, unit, every
        self.file = file if file is not None else sys.stderr
        self.tty = bool(getattr(self.file, "isatty", lambda: False)())
        self.count, self.done, self.next_tenth = 0, 0, 1
        self.bar = None
        if self.tty:
            from tqdm import tqdm

            self.bar = tqdm(
                desc=desc, unit=unit, file=self.file, bar_format="{desc}: {n_fmt} {unit}s {elapsed} {postfix}"
            )

    def update(self, n: int = 1, done: int | None = None, note: str = "") -> None:
        """``n`` more units; ``done``: units of the total finished so far (requests, say); ``note``: a status."""
        self.count += n
        if done is not None:
            self.done = done
        if self.bar is not None:
            self.bar.set_postfix_str(note, refresh=False)
            self.bar.update(n)
            return
        tenth = 10 * self.done // self.total if self.total else 0
        if (self.total and tenth >= self.next_tenth) or self.count % self.every == 0:
            self.next_tenth = tenth + 1
            self._line(f"{self.count} {self.unit}s" + (f", {note}" if note else ""))

    def say(self, message: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(message)
        else:
            self._line(message)

    def _line(self, text: str) -> None:
        print(f"{self.desc}: {text}", file=self.file, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class Ends:
    """Requests that ended so far in a run, from its step records: finished (any reason but ``abort``) and aborted
    (``batchscope.steplog.finishes``). ``add(record)`` counts one step's; ``note(total)`` says it, "3/8 requests
    finished" or "3/8 requests finished, 1 aborted"; ``done`` is both (the progress bar's units)."""

    def __init__(self) -> None:
        self.finished = self.aborted = 0

    def add(self, record: Any) -> None:
        aborted = sum(f["reason"] == "abort" for f in record["finished"])
        self.aborted += aborted
        self.finished += len(record["finished"]) - aborted

    @property
    def done(self) -> int:
        return self.finished + self.aborted

    def note(self, total: int) -> str:
        return f"{self.finished}/{total} requests finished" + (f", {self.aborted} aborted" if self.aborted else "")
