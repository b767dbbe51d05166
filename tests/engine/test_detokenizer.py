"""Incremental detokenization (batchscope/model/detokenizer.py; shared case d14 and its kind): whatever way a text's
bytes are split into tokens, the deltas add up to the decode of all tokens so far minus an unfinished last character,
never show a replacement character for a split one, and add up exactly to the whole text at the end."""

from __future__ import annotations

import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from batchscope.model.detokenizer import REPLACEMENT, IncrementalDetokenizer, is_partial

PIECES = [*"ab ,.\n", "é", "ß", "中", "文", "😀", "🌱", "👩\u200d💻", "\u0301"]
TEXTS = st.lists(st.sampled_from(PIECES), min_size=1, max_size=10).map("".join)


@st.composite
def byte_tokens(draw):
    """A text and a random split of its UTF-8 bytes into tokens (byte-level BPE may cut a character anywhere)."""
    text = draw(TEXTS)
    data = text.encode()
    cuts = sorted(draw(st.sets(st.integers(1, len(data) - 1), max_size=len(data))) if len(data) > 1 else [])
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
    return text, pieces


@settings(max_examples=examples(300), deadline=None)
@given(case=byte_tokens())
def test_deltas_add_up_to_the_text_by_whole_characters(case):
    text, pieces = case
    vocab = {i: p for i, p in enumerate(pieces)}

    def decode(ids):
        return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")

    detok = IncrementalDetokenizer(decode)
    shown = ""
    for i in range(len(pieces)):
        delta = detok.add(i, final=i == len(pieces) - 1)
        assert REPLACEMENT not in delta
        shown += delta
        so_far = decode(list(range(i + 1)))
        assert shown == so_far.rstrip(REPLACEMENT)  # the decode so far, minus an unfinished last character
    assert shown == text  # at the end: exactly the text


def test_eos_adds_nothing_and_the_flush_completes_the_text():
    vocab = {1: b"Hi", 2: b"<eos>", 3: "😀".encode()[:2], 4: "😀".encode()[2:]}

    def decode(ids):
        return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")

    detok = IncrementalDetokenizer(decode, skip_ids={2})
    assert [detok.add(1), detok.add(3), detok.add(4), detok.add(2, final=True)] == ["Hi", "", "😀", ""]
    assert is_partial(decode([3])) and not is_partial(decode([1]))
    cut = IncrementalDetokenizer(decode)
    assert cut.add(1) + cut.add(3, final=True) == decode([1, 3])  # a request cut mid-character ends as its decode


@pytest.mark.real_model
@pytest.mark.parametrize(
    "text,split", [("Happy 😀 Sad 😢 Love", True), ("中文字符和日本語のテキスト", True), ("naïve café, Straße", False)]
)
def test_with_the_real_tokenizer_the_text_grows_by_whole_characters(smollm, text, split):
    tok = smollm.tokenizer
    ids = tok(text, add_special_tokens=False).input_ids
    detok = IncrementalDetokenizer(lambda xs: tok.decode(xs, skip_special_tokens=False))
    deltas = [detok.add(t, final=k == len(ids) - 1) for k, t in enumerate(ids)]
    assert "".join(deltas) == tok.decode(ids) == text
    assert all(REPLACEMENT not in d for d in deltas)
    assert any(is_partial(tok.decode([t])) for t in ids) == split  # per-token texts would have shown �
