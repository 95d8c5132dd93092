"""Counts carry the characters counting kept beside the raw_vocab_size cut (``Counts.characters``),
so ``train_from_counts(count(x, m), x) == train(x, raw_vocab_size=m)`` under every selection,
also through counts files, parquet counts and ``merge_counts`` (docs/spec.md, section 3.2)."""

from __future__ import annotations

import gzip
import json
import random

import pytest

import cnfmce
from cnfmce.errors import TokenizerFileError
from train_helpers import SENTENCES, read_shared_docs, tokens_of

SELECTIONS = ("paper", "refined", "refined-scripts", "refined-non-ascii")
ROUNDS = ((1, 8, 0), (9, 16, 2))


def _rare_han_docs(seed: int = 5):
    """Repeated English (its candidates outnumber every character's count) and Han characters from
    a wide range, most a few times: many fall below a small raw vocabulary's cut."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(SENTENCES[:4]) for _ in range(6)) + " "
            + "".join(chr(0x4E00 + rng.randrange(1500)) for _ in range(rng.randint(20, 40)))
            + "".join(chr(0x4E00 + rng.randrange(30)) for _ in range(20)) for _ in range(40)]


def _char_occurrences(docs):
    out = {}
    for d in docs:
        for ch in d:
            if ord(ch) >= 0x80:
                b = ch.encode()
                out[b] = out.get(b, 0) + 1
    return out


def test_count_keeps_every_character_beside_the_cut():
    docs = _rare_han_docs()
    c = cnfmce.count(docs, raw_vocab_size=600, rounds=ROUNDS, progress=False)
    assert isinstance(c, cnfmce.Counts) and len(c) == 600
    assert c.characters == _char_occurrences(docs)
    assert list(c.characters) == sorted(c.characters)
    assert [t for t in c.characters if t not in c]  # characters the cut left out


@pytest.mark.parametrize("selection", SELECTIONS)
def test_train_from_counts_equals_train(tmp_path, selection):
    docs = _rare_han_docs()
    k, m = 500, 600
    kw = dict(vocab_size=k, selection=selection, progress=False)
    want = tokens_of(cnfmce.train(docs, raw_vocab_size=m, rounds=ROUNDS, **kw))
    counts = cnfmce.count(docs, raw_vocab_size=m, rounds=ROUNDS, progress=False)
    assert tokens_of(cnfmce.train_from_counts(counts, docs, **kw)) == want
    # through a counts file (text, gzip) and parquet, and a merge of one
    for name in ("c.counts", "c.counts.gz", "c.parquet"):
        p = tmp_path / name
        cnfmce.save_counts(counts, p)
        loaded = cnfmce.load_counts(p)
        assert loaded.characters == counts.characters and dict(loaded) == dict(counts)
        assert tokens_of(cnfmce.train_from_counts(p, docs, **kw)) == want
        assert tokens_of(cnfmce.train_from_counts(cnfmce.merge_counts(p), docs, **kw)) == want
    # without the characters the refined rules see only the cut
    cut_only = tokens_of(cnfmce.train_from_counts(dict(counts), docs, **kw))
    if selection == "paper":
        assert cut_only == want
    else:
        assert cut_only != want


def test_train_from_counts_equals_train_on_shared_zh_en():
    # real text: Chinese and English of the shared corpora, a raw vocabulary smaller than the
    # number of distinct characters (4,000+), so the characters beyond the cut count
    docs = read_shared_docs("zh", max_bytes=400_000) + read_shared_docs("en", max_bytes=400_000)
    k, m = 2000, 3000
    counts = cnfmce.count(docs, raw_vocab_size=m, progress=False)
    assert len(counts.characters) > m // 2
    for selection in SELECTIONS:
        kw = dict(vocab_size=k, selection=selection, progress=False)
        want = tokens_of(cnfmce.train(docs, raw_vocab_size=m, **kw))
        assert tokens_of(cnfmce.train_from_counts(counts, docs, **kw)) == want, selection
    # step 6's fallback prefixes come from every character: without them they differ
    kw = dict(vocab_size=k, selection="refined-non-ascii", progress=False)
    assert tokens_of(cnfmce.train_from_counts(dict(counts), docs, **kw)) != want


def test_merge_counts_sums_characters(tmp_path):
    a = cnfmce.Counts({b"ab": 3}, characters={"漢".encode(): 2, "字".encode(): 1})
    b = cnfmce.Counts({b"ab": 1}, characters={"漢".encode(): 5})
    cnfmce.save_counts(b, tmp_path / "b.parquet")
    want = {"字".encode(): 1, "漢".encode(): 7}
    assert cnfmce.merge_counts(a, tmp_path / "b.parquet").characters == want
    # a streamed parquet output and a directory of parquet files keep the sum
    out = cnfmce.merge_counts(a, b, output=tmp_path / "m.parquet")
    assert cnfmce.load_counts(out).characters == want
    d = tmp_path / "dir"
    d.mkdir()
    cnfmce.save_counts(a, d / "part-0.parquet")
    cnfmce.save_counts(b, d / "part-1.parquet")
    assert cnfmce.load_counts(d).characters == want
    assert cnfmce.load_counts(d)[b"ab"] == 4
    # counts saved without characters have none; a header keeps its other keys
    cnfmce.save_counts(cnfmce.Counts({b"ab": 1}, info={"x": 1}), tmp_path / "n.counts")
    n = cnfmce.load_counts(tmp_path / "n.counts")
    assert n.characters == {} and n.info == {"x": 1}
    assert "characters" not in (tmp_path / "n.counts").read_text()


def _counts_file(path, header):
    path.write_text("# cnfmce counts v1\n# " + json.dumps(header) + "\nYWI=\t3\n")
    return path


@pytest.mark.parametrize("chars", [[1, 2], {"ab": 1}, {"a": 1}, {"漢": -1}, {"漢": 1.5}, {"漢": True},
                                   {"漢": 2**64}, {"\ud800": 1}])
def test_bad_characters_in_a_file_are_file_errors(tmp_path, chars):
    p = _counts_file(tmp_path / "bad.counts", {"characters": chars})
    with pytest.raises(TokenizerFileError, match="characters"):
        cnfmce.load_counts(p)
    with pytest.raises(TokenizerFileError, match="characters"):
        cnfmce.train_from_counts(p, ["ab ab"], vocab_size=300, progress=False)


def test_bad_characters_in_memory_are_refused():
    for chars in ({b"ab": 1}, {"漢".encode()[:2]: 1}, {"漢".encode(): -1}, {"漢": 1}):
        with pytest.raises(ValueError):
            cnfmce.Counts({b"ab": 1}, characters=chars)
    good = cnfmce.Counts({b"ab": 1}, characters={"漢".encode(): 1})
    good.characters[b"a"] = 1  # mutated afterwards: checked when used
    with pytest.raises(ValueError):
        cnfmce.train_from_counts(good, ["ab ab"], vocab_size=300, progress=False)
    with pytest.raises(ValueError):
        cnfmce.save_counts(good, "unused.counts")


def test_cli_count_then_train_equals_train(tmp_path):
    from cnfmce.cli import main
    docs = _rare_han_docs(7)
    corpus = tmp_path / "c.jsonl.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps({"text": d}) + "\n")
    counts = tmp_path / "c.counts.gz"
    rounds = "1-8:0,9-16:2"
    assert main(["count", str(corpus), "-o", str(counts), "--raw-vocab-size", "600", "--rounds", rounds,
                 "--quiet"]) == 0
    assert cnfmce.load_counts(counts).characters == _char_occurrences(docs)
    out = tmp_path / "t.json"
    assert main(["train", str(corpus), "--counts", str(counts), "--vocab-size", "500", "--selection",
                 "refined-non-ascii", "-o", str(out), "--quiet"]) == 0
    want = cnfmce.train(docs, vocab_size=500, raw_vocab_size=600, rounds=ROUNDS, selection="refined-non-ascii",
                        progress=False)
    assert tokens_of(cnfmce.Tokenizer.load(str(out))) == tokens_of(want)
