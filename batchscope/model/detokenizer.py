"""Incremental detokenization: the text a request's output grows by at each sampled token.

Decoding tokens one at a time and joining the pieces is wrong for byte-level BPE: an emoji or a CJK character is
often split over several tokens, each of which decodes alone to ``�`` (shared case d14: "🌱" is 3 tokens). The
decode of a sequence is not the concatenation of per-token decodes. Serving engines therefore decode a short window
of recent tokens and emit only what has become stable, as vLLM's ``detokenize_incrementally`` does:

    output ids:   | ... already emitted ... | prefix window | new tokens |
                                            ^prefix_offset  ^read_offset

    prefix_text = decode(ids[prefix_offset:read_offset])
    new_text    = decode(ids[prefix_offset:])
    emit what new_text adds beyond prefix_text, up to an unfinished last character (a trailing U+FFFD run)
    if new_text is complete: prefix_offset, read_offset = read_offset, len(ids)   (the window moves on)
    else: keep the window; the rest of the character comes with the next token
          (vLLM holds the whole window back here; emitting the whole characters before the unfinished one keeps
          the text exactly "decode so far minus an unfinished last character")

Decoding the window, not the token, also keeps what a tokenizer does at word boundaries (leading spaces) right. The
concatenation of the emitted deltas equals ``decode(all output ids)`` minus an unfinished last character; when the
request finishes, whatever is left is flushed, so the deltas then add up to the summary's ``output_text`` exactly.
EOS tokens add nothing (the summary's ``output_text`` omits them too).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

REPLACEMENT = "\ufffd"  # what a decoder writes for bytes that are not (yet) a whole UTF-8 character


class IncrementalDetokenizer:
    """One request's output text, grown token by token. ``decode``: token ids -> text."""

    def __init__(self, decode: Callable[[list[int]], str], skip_ids: Collection[int] = ()):
        self.decode, self.skip_ids = decode, set(skip_ids)
        self.ids: list[int] = []
        self.prefix_offset = 0
        self.read_offset = 0
        self.text = ""  # everything emitted so far
        self.held = 0  # characters of the window's new text already emitted while its last character is unfinished

    def add(self, token_id: int, final: bool = False) -> str:
        """Append ``token_id``; return the text it makes stable (``final``: the request ended, flush the rest)."""
        if token_id not in self.skip_ids:
            self.ids.append(token_id)
        if final:
            full = self.decode(self.ids)
            delta = full[len(self.text) :] if full.startswith(self.text) else ""
        else:
            delta = self._stable_delta()
        self.text += delta
        return delta

    def _stable_delta(self) -> str:
        if len(self.ids) == self.read_offset:
            return ""
        prefix_text = self.decode(self.ids[self.prefix_offset : self.read_offset])
        new_text = self.decode(self.ids[self.prefix_offset :])
        stable = new_text.rstrip(REPLACEMENT)  # an unfinished character decodes to U+FFFD: hold it back
        start = len(prefix_text) + self.held
        delta = stable[start:]
        if stable == new_text and len(new_text) > len(prefix_text):  # complete: the window moves on
            self.prefix_offset, self.read_offset, self.held = self.read_offset, len(self.ids), 0
        else:
            self.held += len(delta)
        return delta


def is_partial(token_text: str) -> bool:
    """True if a token decoded alone is only part of a character (its bytes need the neighbouring tokens)."""
    return REPLACEMENT in token_text
