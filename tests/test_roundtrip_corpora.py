"""Round trips and batch consistency on every document of the shared test corpora, with the
o200k_base and Qwen3.5 vocabularies."""

from __future__ import annotations

import gzip
import json
from typing import Dict, List

import pytest

from conftest import SHARED

CATEGORIES = sorted(p.parent.name for p in SHARED.glob("corpora/*/test.jsonl.gz")) if SHARED.is_dir() else []

_DOCS: Dict[str, List[str]] = {}


def load_docs(category: str) -> List[str]:
    if category not in _DOCS:
        path = SHARED / "corpora" / category / "test.jsonl.gz"
        if not path.exists():
            pytest.skip(f"corpus not found: {path} (set CNFMCE_SHARED)")
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            _DOCS[category] = [json.loads(line)["text"] for line in fh if line.strip()]
    return _DOCS[category]


def test_corpora_present():
    if not CATEGORIES:
        pytest.skip(f"no corpora under {SHARED}/corpora (set CNFMCE_SHARED)")
    assert {"code", "en", "math", "multi", "sci", "zh"} <= set(CATEGORIES)


@pytest.fixture(params=["o200k", "qwen"])
def tok(request):
    return request.getfixturevalue(request.param)


# Lower bounds on UTF-8 bytes per token for each category (both vocabularies are far above them);
# a broken encoder that falls back to single bytes would fail.
MIN_BYTES_PER_TOKEN = {"code": 2.5, "en": 3.5, "math": 2.5, "multi": 3.0, "sci": 3.0, "zh": 3.0}


@pytest.mark.parametrize("category", CATEGORIES or ["<none>"])
def test_roundtrip_every_document(tok, category):
    if category == "<none>":
        pytest.skip(f"no corpora under {SHARED}/corpora")
    docs = load_docs(category)
    assert len(docs) > 100
    encoded = [tok.encode(d) for d in docs]
    n_bytes = n_tokens = 0
    for k, (doc, ids) in enumerate(zip(docs, encoded)):
        assert tok.decode(ids) == doc, f"{category} document {k} does not round-trip"
        n_bytes += len(doc.encode("utf-8"))
        n_tokens += len(ids)
        assert all(i not in tok.special_tokens.values() for i in ids), \
            f"{category} document {k}: special token produced without allowed_special"
    assert n_bytes / n_tokens > MIN_BYTES_PER_TOKEN[category], (category, n_bytes / n_tokens)
    # the batch API gives exactly the same ids, in order
    assert tok.encode_batch(docs) == encoded
    assert tok.encode_batch(docs, num_threads=1) == encoded
    # encode_bytes on the UTF-8 bytes is encode
    for k in range(0, len(docs), 7):
        data = docs[k].encode("utf-8")
        assert tok.encode_bytes(data) == encoded[k]
        assert tok.decode_bytes(encoded[k]) == data


@pytest.mark.parametrize("category", ["multi"])
def test_fmm_roundtrip(tok, category):
    docs = load_docs(category)
    fmm = tok.with_options(algorithm="fmm")
    encoded = fmm.encode_batch(docs)
    mce = tok.encode_batch(docs)
    differ = 0
    for k, (doc, ids) in enumerate(zip(docs, encoded)):
        assert fmm.decode(ids) == doc, f"FMM: {category} document {k} does not round-trip"
        differ += ids != mce[k]
    assert differ > len(docs) // 4  # FMM really is another algorithm
    assert encoded == [fmm.encode(d) for d in docs]


def test_concatenated_corpus_as_one_text(o200k):
    """One multi-megabyte text (the encoder releases the GIL above 16 KiB) round-trips."""
    text = "\n".join(load_docs("zh")[:200])
    ids = o200k.encode(text)
    assert o200k.decode(ids) == text
    assert len(ids) < len(text.encode("utf-8")) / 2


def test_special_tokens_between_documents(o200k):
    """Documents joined by <|endoftext|>: with allowed_special each piece is encoded on its own."""
    docs = load_docs("en")[:40]
    eot = o200k.special_tokens["<|endoftext|>"]
    big = "<|endoftext|>".join(docs)
    want = []
    for k, d in enumerate(docs):
        want += ([eot] if k else []) + o200k.encode(d)
    assert o200k.encode(big, allowed_special="all") == want
    assert o200k.encode(big, allowed_special={"<|endoftext|>"}) == want
    assert o200k.encode_batch([big, docs[0]], allowed_special="all") == [want, o200k.encode(docs[0])]
    plain = o200k.encode(big)
    assert eot not in plain and o200k.decode(plain) == big


@pytest.mark.parametrize("category", CATEGORIES or ["<none>"])
def test_batch_threads_share_one_piece_cache(o200k, category):
    """Threads of a batch share their encoder's piece cache (src/mce.rs `PieceCache`): a fresh
    encoder (empty cache, filled by 2 then 3 threads at once, then used warm) gives what
    per-document `encode` of another encoder gives, on every document."""
    if category == "<none>":
        pytest.skip(f"no corpora under {SHARED}/corpora")
    docs = load_docs(category)
    single = [o200k.encode(d) for d in docs]
    for threads in (2, 3):
        fresh = o200k.with_options()
        assert fresh.encode_batch(docs, num_threads=threads) == single, (category, threads, "cold")
        assert fresh.encode_batch(docs[::-1], num_threads=5 - threads) == single[::-1], (category, threads, "warm")
        assert fresh.encode_bytes_batch([d.encode("utf-8") for d in docs], num_threads=threads) == single
