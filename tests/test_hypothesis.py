"""Property tests (Hypothesis): round trips, batch consistency, and MCE against the reference."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cnfmce

import reference as ref
from test_mce_reference import Gen

SETTINGS = settings(max_examples=300, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _small_tokens():
    gen = Gen(random.Random(20240611))
    return gen.vocab()


SMALL_TOKENS = _small_tokens()
SMALL = {
    "mce": cnfmce.Tokenizer.from_tokens(SMALL_TOKENS),
    "mce-inf": cnfmce.Tokenizer.from_tokens(SMALL_TOKENS, boundary_penalty=math.inf),
    "fmm": cnfmce.Tokenizer.from_tokens(SMALL_TOKENS, algorithm="fmm"),
}


@pytest.mark.parametrize("name", sorted(SMALL))
@SETTINGS
@given(data=st.binary(max_size=300))
def test_small_vocab_bytes_roundtrip(name, data):
    tok = SMALL[name]
    ids = tok.encode_bytes(data)
    assert tok.decode_bytes(ids) == data
    assert len(ids) <= len(data)


@pytest.mark.parametrize("name", sorted(SMALL))
@SETTINGS
@given(text=st.text(max_size=200))
def test_small_vocab_text_roundtrip(name, text):
    tok = SMALL[name]
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert ids == tok.encode_bytes(text.encode("utf-8"))


@SETTINGS
@given(texts=st.lists(st.text(max_size=100), max_size=20))
def test_small_vocab_batch(texts):
    tok = SMALL["mce"]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]


@SETTINGS
@given(data=st.binary(max_size=300))
def test_bpe_bytes_roundtrip(bpe, data):
    ids = bpe.encode_bytes(data)
    assert bpe.decode_bytes(ids) == data
    assert bpe.decode(ids) == data.decode("utf-8", errors="replace")


@SETTINGS
@given(text=st.text(max_size=300))
def test_bpe_text_roundtrip(bpe, text):
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text
    # special-token text is ordinary text unless allowed
    assert 8192 not in ids


@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(max_size=200), max_size=30))
def test_bpe_batch(bpe, texts):
    assert bpe.encode_batch(texts) == [bpe.encode(t) for t in texts]


# --- MCE against the reference on Hypothesis-made vocabularies and texts -------------------------------

ALPHABET = "ab é\u0301中か한ก\u0e31-_1.\n😀"
pieces = st.text(alphabet=ALPHABET, min_size=1, max_size=4).map(lambda s: s.encode("utf-8"))
cut = st.tuples(pieces, st.integers(0, 3)).map(lambda t: t[0][t[1]:] or t[0])


@settings(max_examples=400, deadline=None, database=None)
@given(extra=st.lists(st.one_of(pieces, cut), max_size=25, unique=True),
       perm_seed=st.integers(0, 2**32 - 1),
       text=st.one_of(st.text(alphabet=ALPHABET, max_size=40).map(lambda s: s.encode("utf-8")),
                      st.binary(max_size=20)),
       lam=st.sampled_from([0.0, 0.05, 0.3, 1.0, math.inf]),
       eps=st.booleans())
def test_mce_matches_reference(extra, perm_seed, text, lam, eps):
    tokens = [bytes([b]) for b in range(256)] + [t for t in extra if len(t) > 1]
    random.Random(perm_seed).shuffle(tokens)
    tok = cnfmce.Tokenizer.from_tokens(tokens, boundary_penalty=lam, token_preference=eps)
    vocab = {t: i for i, t in enumerate(tokens)}
    assert tok.encode_bytes(text) == ref.mce_encode(vocab, text, lam, eps)
    fmm = tok.with_options(algorithm="fmm")
    assert fmm.encode_bytes(text) == ref.fmm_encode(vocab, text)
