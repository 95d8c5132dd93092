"""Round trips and batch consistency on every document of the fixture corpora (tests/fixtures:
en, code, zh, multi) with the fixture BPE (as tiktoken ranks and as a tokenizer.json), and, in the
shared tier, on every document of the shared test corpora with o200k_base and Qwen3.5."""

from __future__ import annotations

import gzip
import json
from typing import Dict, List

import pytest

from conftest import FIXTURES, SHARED

# the fixture corpora (always present)
CATEGORIES = ["code", "en", "multi", "zh"]
SHARED_CATEGORIES = ["code", "en", "math", "multi", "sci", "zh"]

_DOCS: Dict[str, List[str]] = {}


def load_docs(category: str) -> List[str]:
    """Every document of a fixture corpus (test then train split); ``shared:NAME`` reads the
    shared test set NAME instead."""
    if category not in _DOCS:
        if category.startswith("shared:"):
            paths = [SHARED / "corpora" / category[7:] / "test.jsonl.gz"]
            if not paths[0].exists():
                pytest.skip(f"corpus not found: {paths[0]} (set CNFMCE_SHARED)")
        else:
            paths = [FIXTURES / "corpora" / category / f"{s}.jsonl.gz" for s in ("test", "train")]
        docs = []
        for path in paths:
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                docs += [json.loads(line)["text"] for line in fh if line.strip()]
        _DOCS[category] = docs
    return _DOCS[category]


def test_fixture_corpora_present():
    for c in CATEGORIES:
        assert len(load_docs(c)) >= 40, c


@pytest.mark.shared
def test_shared_corpora_present():
    found = sorted(p.parent.name for p in SHARED.glob("corpora/*/test.jsonl.gz"))
    if not found:
        pytest.skip(f"no corpora under {SHARED}/corpora (set CNFMCE_SHARED)")
    assert set(SHARED_CATEGORIES) <= set(found)


@pytest.fixture(params=["bpe", "bpe_hf", pytest.param("o200k", marks=pytest.mark.shared),
                        pytest.param("qwen", marks=pytest.mark.shared)])
def tok(request):
    return request.getfixturevalue(request.param)


# Lower bounds on UTF-8 bytes per token for each category (every vocabulary here is above them:
# the 8k fixture BPE has 3.6-3.9 on the Latin-script fixtures and 2.8 on zh); a broken encoder
# that falls back to single bytes would fail.
MIN_BYTES_PER_TOKEN = {"code": 2.5, "en": 3.0, "math": 2.5, "multi": 3.0, "sci": 3.0, "zh": 2.5}
ALL_CORPORA = CATEGORIES + [pytest.param(f"shared:{c}", marks=pytest.mark.shared) for c in SHARED_CATEGORIES]


@pytest.mark.parametrize("category", ALL_CORPORA)
def test_roundtrip_every_document(tok, category):
    docs = load_docs(category)
    assert len(docs) > 40
    encoded = [tok.encode(d) for d in docs]
    n_bytes = n_tokens = 0
    for k, (doc, ids) in enumerate(zip(docs, encoded)):
        assert tok.decode(ids) == doc, f"{category} document {k} does not round-trip"
        n_bytes += len(doc.encode("utf-8"))
        n_tokens += len(ids)
        assert all(i not in tok.special_tokens.values() for i in ids), \
            f"{category} document {k}: special token produced without allowed_special"
    bound = MIN_BYTES_PER_TOKEN[category.split(":")[-1]]
    if category.startswith("shared:") and tok.vocab_size < 100_000:
        bound = 2.0  # the 8k fixture BPE on text it was not trained on (code: 2.48)
    assert n_bytes / n_tokens > bound, (category, n_bytes / n_tokens)
    # the batch API gives exactly the same ids, in order
    assert tok.encode_batch(docs) == encoded
    assert tok.encode_batch(docs, num_threads=1) == encoded
    # encode_bytes on the UTF-8 bytes is encode
    for k in range(0, len(docs), 7):
        data = docs[k].encode("utf-8")
        assert tok.encode_bytes(data) == encoded[k]
        assert tok.decode_bytes(encoded[k]) == data


@pytest.mark.parametrize("category", ["multi", pytest.param("shared:multi", marks=pytest.mark.shared)])
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


def test_concatenated_corpus_as_one_text(bpe):
    """One text of about 2 MB (the encoder releases the GIL above 16 KiB) round-trips."""
    text = "\n".join(load_docs("zh") + load_docs("multi") + load_docs("en"))
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text
    assert len(ids) < len(text.encode("utf-8")) / 2


def test_special_tokens_between_documents(bpe):
    """Documents joined by <|endoftext|>: with allowed_special each piece is encoded on its own."""
    docs = load_docs("en")[:40]
    eot = bpe.special_tokens["<|endoftext|>"]
    big = "<|endoftext|>".join(docs)
    want = []
    for k, d in enumerate(docs):
        want += ([eot] if k else []) + bpe.encode(d)
    assert bpe.encode(big, allowed_special="all") == want
    assert bpe.encode(big, allowed_special={"<|endoftext|>"}) == want
    assert bpe.encode_batch([big, docs[0]], allowed_special="all") == [want, bpe.encode(docs[0])]
    plain = bpe.encode(big)
    assert eot not in plain and bpe.decode(plain) == big


@pytest.mark.parametrize("category", CATEGORIES)
def test_batch_threads_share_one_piece_cache(bpe, category):
    """Threads of a batch share their encoder's piece cache (src/mce.rs `PieceCache`): a fresh
    encoder (empty cache, filled by 2 then 3 threads at once, then used warm) gives what
    per-document `encode` of another encoder gives, on every document."""
    docs = load_docs(category)
    single = [bpe.encode(d) for d in docs]
    for threads in (2, 3):
        fresh = bpe.with_options()
        assert fresh.encode_batch(docs, num_threads=threads) == single, (category, threads, "cold")
        assert fresh.encode_batch(docs[::-1], num_threads=5 - threads) == single[::-1], (category, threads, "warm")
        assert fresh.encode_bytes_batch([d.encode("utf-8") for d in docs], num_threads=threads) == single
