"""Token offsets (SPEC section 6, ``encode_with_offsets``): computed in the core, checked here
against spans derived independently from the token bytes, on every document of every shared test
corpus and on Hypothesis strings (combining marks, emoji, CJK, invalid UTF-8 for the bytes API)."""

from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cnfmce
from test_roundtrip_corpora import CATEGORIES, load_docs


_LENS: dict = {}


def _lengths(tok: cnfmce.Tokenizer) -> np.ndarray:
    """Byte length of every id (0 for unused ids)."""
    if id(tok) in _LENS:
        return _LENS[id(tok)][1]
    lens = np.zeros(tok.n_vocab, dtype=np.int64)
    for i, t in tok.token_bytes().items():
        lens[i] = len(t)
    for s, i in tok.special_tokens.items():
        lens[i] = len(s.encode("utf-8"))
    _LENS[id(tok)] = (tok, lens)
    return lens


def expected_char_spans(text: str, ids: Sequence[int], lens: np.ndarray) -> np.ndarray:
    """For each token: (first character holding one of its bytes, one past the last such
    character), from the UTF-8 of ``text`` and the token lengths (vectorised)."""
    b = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    char_of_byte = np.cumsum((b & 0xC0) != 0x80) - 1
    tl = lens[np.asarray(ids, dtype=np.int64)]
    assert (tl > 0).all()
    ends = np.cumsum(tl)
    assert (ends[-1] if len(ends) else 0) == len(b), "tokens do not tile the text"
    starts = ends - tl
    return np.stack([char_of_byte[starts], char_of_byte[ends - 1] + 1], axis=1) if len(ids) else \
        np.zeros((0, 2), dtype=np.int64)


def slow_char_spans(tok: cnfmce.Tokenizer, text: str, ids: Sequence[int]) -> List[Tuple[int, int]]:
    """The same, one character at a time: the characters whose byte ranges meet the token's."""
    bounds = []
    pos = 0
    for ch in text:
        n = len(ch.encode("utf-8"))
        bounds.append((pos, pos + n))
        pos += n
    out = []
    pos = 0
    for i in ids:
        n = len(tok.id_to_token(i))
        touched = [c for c, (a, e) in enumerate(bounds) if a < pos + n and e > pos]
        out.append((touched[0], touched[-1] + 1))
        pos += n
    return out


@pytest.fixture(params=["bpe", "bpe_hf", pytest.param("o200k", marks=pytest.mark.shared),
                        pytest.param("qwen", marks=pytest.mark.shared)])
def tok(request):
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("category", CATEGORIES)
def test_char_offsets_every_document(tok, category):
    docs = load_docs(category)
    lens = _lengths(tok)
    got = tok.encode_batch_with_offsets(docs)
    assert len(got) == len(docs)
    for text, (ids, offs) in zip(docs, got):
        assert np.array_equal(np.asarray(offs, dtype=np.int64).reshape(-1, 2),
                              expected_char_spans(text, ids, lens))
    # The ids are encode's; the single-text call agrees with the batch.
    for text, (ids, offs) in list(zip(docs, got))[:10]:
        assert tok.encode_with_offsets(text) == (ids, offs)
        assert ids == tok.encode(text)


@pytest.mark.parametrize("category", CATEGORIES)
def test_byte_offsets_every_document(bpe, category):
    docs = [d.encode("utf-8") for d in load_docs(category)]
    got = bpe.encode_bytes_batch_with_offsets(docs)
    for data, (ids, offs) in zip(docs, got):
        pos = 0
        for i, (s, e) in zip(ids, offs):
            assert s == pos
            pos = e
        assert pos == len(data)
        assert b"".join(data[s:e] for s, e in offs) == data
    for data, pair in list(zip(docs, got))[:10]:
        assert bpe.encode_bytes_with_offsets(data) == pair
        assert pair[0] == bpe.encode_bytes(data)


MIXED = st.sampled_from(
    list("abcxyz AZ09.,;-\n\t") + ["e\u0301", "\u0301", "\u0308", "\u093f", "\u200d", "\ufe0f"]
    + ["😀", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷", "\U0001F9D1"]
    + list("中文字漢語日本語ひらがなカタカナ한국어") + ["\U00020000", "\u0e01\u0e32"]
    + ["é", "ß", "Ω", "ж", "\u00a0", "\u3000", "<|endoftext|>"])
TEXTS = st.lists(MIXED, max_size=40).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_char_offsets_hypothesis(bpe, bpe_hf, text):
    for tok in (bpe, bpe_hf):
        for allowed in (frozenset(), "all"):
            ids, offs = tok.encode_with_offsets(text, allowed_special=allowed)
            assert ids == tok.encode(text, allowed_special=allowed)
            assert offs == slow_char_spans(tok, text, ids)
            # Every character is covered, in order.
            assert all(a <= b for (a, _), (b, _) in zip(offs, offs[1:]))
            assert (offs[-1][1] if offs else 0) == len(text)


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=60) | TEXTS.map(lambda t: t.encode("utf-8")[1:]),
       junk=st.binary(max_size=4))
def test_byte_offsets_hypothesis(bpe, bpe_hf, data, junk):
    data = data + junk  # invalid UTF-8 anywhere, truncated characters at the ends
    for tok in (bpe, bpe_hf):
        ids, offs = tok.encode_bytes_with_offsets(data)
        assert ids == tok.encode_bytes(data)
        assert [data[s:e] for s, e in offs] == [tok.id_to_token(i) for i in ids]
        assert (offs[-1][1] if offs else 0) == len(data)


def test_token_inside_a_character_gets_the_whole_character():
    # A vocabulary that must split "😀" (4 bytes) and "é" (2 bytes) across tokens.
    tokens = [bytes([b]) for b in range(256)] + [b"\xf0\x9f", b"\x98\x80", b"a\xc3"]
    tok = cnfmce.Tokenizer.from_tokens(tokens, special_tokens=["<s>"])
    text = "😀a\u00e9<s>"
    ids, offs = tok.encode_with_offsets(text, allowed_special="all")
    assert ids == [256, 257, 258, 0xA9, 259]
    assert offs == [(0, 1), (0, 1), (1, 3), (2, 3), (3, 6)]
    assert text[offs[-1][0]:offs[-1][1]] == "<s>"
    ids, offs = tok.encode_bytes_with_offsets(text.encode("utf-8"))
    assert offs == [(0, 2), (2, 4), (4, 6), (6, 7), (7, 8), (8, 9), (9, 10)]


def test_offsets_bad_input(bpe):
    with pytest.raises(TypeError):
        bpe.encode_with_offsets(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        bpe.encode_bytes_with_offsets("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        bpe.encode_batch_with_offsets("one string")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        bpe.encode_batch_with_offsets(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        bpe.encode_bytes_batch_with_offsets([b"ok", "no"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="surrogate"):
        bpe.encode_with_offsets("a\ud800b")
    with pytest.raises(ValueError, match="surrogate"):
        bpe.encode_batch_with_offsets(["fine", "a\ud800b"])
    with pytest.raises(ValueError):
        bpe.encode_batch_with_offsets(["x"], num_threads=0)
    assert bpe.encode_with_offsets("") == ([], [])
    assert bpe.encode_batch_with_offsets([]) == []
    assert bpe.encode_bytes_batch_with_offsets([b"\xff"], num_threads=1) == [([bpe.encode_bytes(b"\xff")[0]], [(0, 1)])]
