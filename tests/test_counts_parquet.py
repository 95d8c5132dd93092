"""Counts from elsewhere (issue 10, item 3): parquet counts (columns token: binary, count: int64,
as a Spark or Ray job writes them) for train_from_counts / load_counts, and merge_counts over
many files, streaming in bounded memory (spilling), equal to the in-memory merge."""

from __future__ import annotations

import random

import pytest

import cnfmce
from train_helpers import read_shared_docs

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def docs():
    return read_shared_docs("en", "train", max_bytes=150_000) + read_shared_docs("code", "train", max_bytes=100_000)


@pytest.fixture(scope="module")
def counts(docs):
    return cnfmce.count(docs, raw_vocab_size=8000, progress=False)


def _write_spark_like(counts, d, nfiles=4, seed=0, string_tokens=False):
    """The counts in random row order over several part files (and row groups), plus an
    unrelated column, as a distributed job would leave them."""
    rng = random.Random(seed)
    items = list(counts.items())
    rng.shuffle(items)
    d.mkdir()
    for k in range(nfiles):
        part = items[k::nfiles]
        toks = [t for t, _ in part]
        tt = pa.binary()
        if string_tokens:
            toks = [t.decode("utf-8", "surrogateescape") for t in toks]
            tt = pa.string()
        pq.write_table(pa.table({"token": pa.array(toks, tt), "count": pa.array([c for _, c in part], pa.int64()),
                                 "shard": [k] * len(part)}), d / f"part-{k:05d}.parquet", row_group_size=500)
    (d / "_SUCCESS").write_text("")
    return d


def test_train_from_parquet_counts_equals_counts_file(tmp_path, docs, counts):
    cnfmce.save_counts(counts, tmp_path / "c.tsv")
    want = cnfmce.train_from_counts(tmp_path / "c.tsv", docs, vocab_size=1000, progress=False)
    d = _write_spark_like(counts, tmp_path / "spark")
    got = cnfmce.train_from_counts(str(d), docs, vocab_size=1000, progress=False)
    vocab = lambda t: [t.id_to_token(i) for i in range(t.vocab_size)]
    assert vocab(got) == vocab(want)
    one = tmp_path / "one.parquet"
    pq.write_table(pa.table({"token": pa.array(list(counts), pa.binary()),
                             "count": pa.array(list(counts.values()), pa.int64())}), one)
    assert vocab(cnfmce.train_from_counts(one, docs, vocab_size=1000, progress=False,
                                          raw_vocab_size=3000)) == \
        vocab(cnfmce.train_from_counts(dict(counts), docs, vocab_size=1000, progress=False,
                                       raw_vocab_size=3000))
    # load_counts reads the same layout, best first; save_counts writes it
    back = cnfmce.load_counts(d)
    assert list(back.items()) == sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    cnfmce.save_counts(counts, tmp_path / "saved.parquet")
    t = pq.read_table(tmp_path / "saved.parquet")
    assert t.schema.field("token").type == pa.binary() and t.schema.field("count").type == pa.int64()
    assert dict(cnfmce.load_counts(tmp_path / "saved.parquet")) == dict(counts)
    assert cnfmce.load_counts(tmp_path / "saved.parquet").info["rounds"] == counts.info["rounds"]


def test_string_token_column(tmp_path, counts):
    ascii_counts = {k: v for k, v in counts.items() if k.isascii()}
    d = _write_spark_like(ascii_counts, tmp_path / "s", string_tokens=True)
    assert dict(cnfmce.load_counts(d)) == ascii_counts


def test_merge_counts_streaming_equals_in_memory(tmp_path, counts):
    rng = random.Random(5)
    items = list(counts.items())
    files, parts = [], []
    for k in range(12):
        part = {t: rng.randint(1, 50) for t, _ in rng.sample(items, 3000)}
        parts.append(part)
        p = tmp_path / f"p{k}.parquet"
        pq.write_table(pa.table({"token": pa.array(list(part), pa.binary()),
                                 "count": pa.array(list(part.values()), pa.int64())}), p, row_group_size=700)
        files.append(p)
    want = {}
    for part in parts:
        for t, c in part.items():
            want[t] = want.get(t, 0) + c
    best = sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))
    got = cnfmce.merge_counts(*files, memory_limit=1, tmp_dir=str(tmp_path))
    assert list(got.items()) == best
    assert got.info["spills"] > 0  # the merger held at most its small budget at a time
    assert list(cnfmce.merge_counts(*files, raw_vocab_size=500, memory_limit=1).items()) == best[:500]
    # mixed inputs: a counts file, a mapping and parquet
    cnfmce.save_counts(parts[0], tmp_path / "a.tsv.gz")
    mixed = cnfmce.merge_counts(tmp_path / "a.tsv.gz", parts[1], *files[2:])
    assert dict(mixed) == want
    # written out while merging: parquet rows in bytewise order, nothing held
    out = cnfmce.merge_counts(*files, output=tmp_path / "merged.parquet", memory_limit=1)
    assert out == str(tmp_path / "merged.parquet")
    t = pq.read_table(out)
    assert t.column("token").to_pylist() == sorted(want)
    assert dict(cnfmce.load_counts(out)) == want
    assert cnfmce.merge_counts(*files, output=tmp_path / "top.tsv", raw_vocab_size=10) == str(tmp_path / "top.tsv")
    assert list(cnfmce.load_counts(tmp_path / "top.tsv").items()) == best[:10]


def test_bad_parquet_counts(tmp_path, docs):
    p = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"tok": [b"a"], "count": [1]}), p)
    with pytest.raises(cnfmce.TokenizerFileError, match="token"):
        cnfmce.load_counts(p)
    pq.write_table(pa.table({"token": [b"a", b""], "count": [1, 2]}), p)
    with pytest.raises(cnfmce.TokenizerFileError, match="empty token"):
        cnfmce.train_from_counts(p, docs, vocab_size=300, progress=False)
    pq.write_table(pa.table({"token": [b"a", None], "count": [1, 2]}), p)
    with pytest.raises(cnfmce.TokenizerFileError, match="null"):
        cnfmce.merge_counts(p)
    pq.write_table(pa.table({"token": [b"a"], "count": [-1]}), p)
    with pytest.raises(cnfmce.TokenizerFileError, match="negative"):
        cnfmce.load_counts(p)
    pq.write_table(pa.table({"token": [b"a"], "count": [1.5]}), p)
    with pytest.raises(cnfmce.TokenizerFileError, match="int64"):
        cnfmce.load_counts(p)
    p.write_bytes(b"not parquet")
    with pytest.raises(cnfmce.TokenizerFileError, match="parquet"):
        cnfmce.load_counts(p)
    (tmp_path / "empty").mkdir()
    with pytest.raises(cnfmce.TokenizerFileError, match="without"):
        cnfmce.load_counts(tmp_path / "empty")
    with pytest.raises(FileNotFoundError):
        cnfmce.merge_counts(tmp_path / "missing.parquet")
    with pytest.raises(ValueError, match="raw_vocab_size"):
        cnfmce.merge_counts({b"a": 1}, raw_vocab_size=0)


def _with_metadata(path, meta):
    """A one-row parquet counts file whose schema metadata is ``meta`` (bytes -> bytes)."""
    schema = pa.schema([("token", pa.binary()), ("count", pa.int64())], metadata=meta)
    pq.write_table(pa.table({"token": pa.array([b"ab", "é".encode()], pa.binary()),
                             "count": pa.array([3, 2], pa.int64())}, schema=schema), path)
    return path


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"'])
def test_damaged_parquet_header_is_an_error_not_ignored(tmp_path, docs, raw):
    """A cnfmce header that is not a JSON object would silently drop the characters it holds."""
    bad = _with_metadata(tmp_path / "bad.parquet", {b"cnfmce": raw})
    d = tmp_path / "dir"
    d.mkdir()
    _with_metadata(d / "a.parquet", {})
    _with_metadata(d / "b.parquet", {b"cnfmce": raw})
    for src in (bad, d):
        with pytest.raises(cnfmce.TokenizerFileError, match="schema metadata 'cnfmce'"):
            cnfmce.load_counts(src)
        with pytest.raises(cnfmce.TokenizerFileError, match="schema metadata 'cnfmce'"):
            cnfmce.train_from_counts(src, docs[:5], vocab_size=300, progress=False)
        with pytest.raises(cnfmce.TokenizerFileError, match="schema metadata 'cnfmce'"):
            cnfmce.merge_counts(src, output=tmp_path / "out.parquet")
    # no header at all (counts written by Spark) is fine, and so is unrelated metadata
    ok = _with_metadata(tmp_path / "ok.parquet", {b"spark.sql": b"whatever"})
    c = cnfmce.load_counts(ok)
    assert dict(c) == {b"ab": 3, "é".encode(): 2} and c.characters == {} and c.info == {}


def test_parquet_counts_open_each_file_once(tmp_path, counts, monkeypatch):
    chars = {"é".encode(): 5, "中".encode(): 7}
    d = tmp_path / "d"
    d.mkdir()
    items = list(counts.items())
    for k in range(3):
        cnfmce.save_counts(cnfmce.Counts(items[k::3], characters=chars), d / f"p{k}.parquet")
    opened = []
    real = pq.ParquetFile
    monkeypatch.setattr(pq, "ParquetFile", lambda f, *a, **kw: (opened.append(f), real(f, *a, **kw))[1])
    c = cnfmce.load_counts(d)
    assert len(opened) == 3 and len(set(opened)) == 3
    # the characters of every file, summed
    assert c.characters == {k: 3 * v for k, v in sorted(chars.items())}
    assert dict(c) == dict(counts)
