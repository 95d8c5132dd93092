"""encode_batch(texts, return_numpy=True) -> (flat uint32 ids, int64 starts) equals the list
output on every shared test corpus and on edge cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import cnfmce

from test_roundtrip_corpora import CATEGORIES, load_docs


def flat(lists):
    ids = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.uint32)
    starts = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=starts[1:])
    return ids, starts


def check(tok, texts, **kw):
    lists = tok.encode_batch(texts, **kw)
    ids, starts = tok.encode_batch(texts, return_numpy=True, **kw)
    assert ids.dtype == np.uint32 and starts.dtype == np.int64
    assert ids.ndim == starts.ndim == 1 and len(starts) == len(texts) + 1
    want_ids, want_starts = flat(lists)
    assert np.array_equal(ids, want_ids) and np.array_equal(starts, want_starts)
    assert ids.flags.writeable and starts.flags.writeable
    return ids, starts


@pytest.fixture(params=["bpe", "bpe_hf", pytest.param("o200k", marks=pytest.mark.shared),
                        pytest.param("qwen", marks=pytest.mark.shared)])
def tok(request):
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("category", CATEGORIES)
def test_numpy_equals_lists_on_corpora(tok, category):
    docs = load_docs(category)
    check(tok, docs, num_threads=1 if category == "en" else None)


def test_numpy_edge_cases(bpe):
    ids, starts = check(bpe, [])
    assert len(ids) == 0 and starts.tolist() == [0]
    ids, starts = check(bpe, ["", "", ""])
    assert len(ids) == 0 and starts.tolist() == [0, 0, 0, 0]
    check(bpe, ["", "a", "", "hello world", ""])
    text = "one<|endoftext|>two"
    ids, _ = check(bpe, [text], allowed_special="all")
    assert 8192 in ids.tolist()
    ids, _ = check(bpe, [text])
    assert 8192 not in ids.tolist()
    check(bpe, ["\u00e9" * 1000, "中" * 3000, "a" * 100_000])
    fmm = bpe.with_options(algorithm="fmm")
    check(fmm, load_docs("en")[:20] if CATEGORIES else ["some text"])


def test_numpy_bad_input(bpe):
    with pytest.raises(ValueError, match="lone surrogates"):
        bpe.encode_batch(["ok", "bad \ud800"], return_numpy=True)
    with pytest.raises(TypeError):
        bpe.encode_batch(["ok", b"bytes"], return_numpy=True)
    with pytest.raises(TypeError):
        bpe.encode_batch("a string", return_numpy=True)


def test_numpy_arrays_own_their_memory(bpe):
    ids, starts = bpe.encode_batch(["hello world"] * 3, return_numpy=True)
    again, _ = bpe.encode_batch(["something else entirely"], return_numpy=True)
    ids[0] = 7  # writable, and independent of later calls
    assert ids[0] == 7 and ids[1:].tolist() == bpe.encode("hello world")[1:] + bpe.encode("hello world") * 2
    assert isinstance(cnfmce.Tokenizer.encode_batch.__doc__, str) and "return_numpy" in cnfmce.Tokenizer.encode_batch.__doc__
