"""Training on files whose text is in another JSON field / parquet column: ``field=`` of
:func:`cnfmce.train`, :func:`cnfmce.count` and :func:`cnfmce.train_from_counts` (local and Ray),
``cnfmce train --field`` and ``cnfmce count --field``; the same vocabulary as training on the
documents themselves; a file without the field is an error naming the file."""

from __future__ import annotations

import gzip
import json

import pytest

import cnfmce
from cnfmce.cli import main
from cnfmce.config import TrainConfig
from cnfmce.demo import load_sample
from train_helpers import start_local_ray

VOCAB = 700
RAW = 6000


@pytest.fixture(scope="module")
def docs():
    return [d["text"] for d in load_sample()][:400]


@pytest.fixture(scope="module")
def files(tmp_path_factory, docs):
    """The documents in a .jsonl, a .jsonl.gz and a .parquet file, their text under "content"
    (and a decoy "text" field / column that must not be read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    d = tmp_path_factory.mktemp("field")
    a, b, c = docs[:150], docs[150:280], docs[280:]
    p1 = d / "a.jsonl"
    p1.write_text("".join(json.dumps({"text": "decoy", "content": t}, ensure_ascii=False) + "\n"
                          for t in a), encoding="utf-8")
    p2 = d / "b.jsonl.gz"
    with gzip.open(p2, "wt", encoding="utf-8") as fh:
        for t in b:
            fh.write(json.dumps({"content": t, "id": 1}, ensure_ascii=False) + "\n")
    p3 = d / "c.parquet"
    pq.write_table(pa.table({"text": ["decoy"] * len(c), "content": c}), p3, row_group_size=40)
    return [p1, p2, p3]


def vocabulary(tok):
    return [tok.id_to_token(i) for i in range(tok.vocab_size)], tok.special_tokens, tok.options


@pytest.fixture(scope="module")
def expected(docs):
    return vocabulary(cnfmce.train(cnfmce.Documents(docs), vocab_size=VOCAB, raw_vocab_size=RAW,
                                   progress=False))


def test_train_reads_the_field(files, expected):
    tok = cnfmce.train(files, vocab_size=VOCAB, raw_vocab_size=RAW, progress=False, field="content")
    assert vocabulary(tok) == expected
    # the default field is "text": here the decoys and a file without it
    with pytest.raises(cnfmce.CorpusError, match="b.jsonl.gz"):
        cnfmce.train(files, vocab_size=VOCAB, raw_vocab_size=RAW, progress=False)


def test_count_and_train_from_counts_read_the_field(files, docs, expected):
    counts = cnfmce.count(files, raw_vocab_size=RAW, progress=False, field="content")
    assert dict(counts) == dict(cnfmce.count(cnfmce.Documents(docs), raw_vocab_size=RAW, progress=False))
    tok = cnfmce.train_from_counts(counts, files, vocab_size=VOCAB, progress=False, field="content")
    assert vocabulary(tok) == expected


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_file_without_the_field_is_named(files, which):
    with pytest.raises(cnfmce.CorpusError) as e:
        cnfmce.train([files[which]], vocab_size=VOCAB, progress=False, field="body")
    assert files[which].name in str(e.value) and '"body"' in str(e.value)
    with pytest.raises(cnfmce.CorpusError, match=files[which].name):
        cnfmce.count([files[which]], progress=False, field="body")


def test_field_is_checked_before_any_work(files, docs, expected):
    for bad in ("", 3, None):
        with pytest.raises(ValueError, match="field must be a non-empty string"):
            cnfmce.train(files, vocab_size=VOCAB, progress=False, field=bad)
        with pytest.raises(ValueError, match="field must be a non-empty string"):
            cnfmce.count(files, progress=False, field=bad)
    # documents in memory are the text already: the field does not apply to them
    tok = cnfmce.train(cnfmce.Documents(docs), vocab_size=VOCAB, raw_vocab_size=RAW, progress=False,
                       field="content")
    assert vocabulary(tok) == expected


def test_cli_train_and_count_take_field(files, tmp_path, expected, capsys):
    out = tmp_path / "tok.json"
    assert main(["train", "-o", str(out), "--vocab-size", str(VOCAB), "--raw-vocab-size", str(RAW),
                 "--field", "content", "--quiet", *map(str, files)]) == 0
    assert vocabulary(cnfmce.Tokenizer.load(out)) == expected
    counts = tmp_path / "counts.tsv"
    assert main(["count", "-o", str(counts), "--raw-vocab-size", str(RAW), "--field", "content",
                 "--quiet", *map(str, files)]) == 0
    out2 = tmp_path / "tok2.json"
    assert main(["train", "-o", str(out2), "--vocab-size", str(VOCAB), "--counts", str(counts),
                 "--field", "content", "--quiet", *map(str, files)]) == 0
    assert vocabulary(cnfmce.Tokenizer.load(out2)) == expected
    capsys.readouterr()
    assert main(["train", "-o", str(out), "--vocab-size", str(VOCAB), "--field", "body", "--quiet",
                 str(files[2])]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cnfmce: error: ") and "c.parquet" in err and '"body"' in err


def test_train_config_is_the_one_check():
    c = TrainConfig(vocab_size=500, boundary_penalty=0.25, num_threads=1, field="content")
    assert (c.options.boundary_penalty, c.num_threads, c.field) == (0.25, 1, "content")
    assert c.replace(boundary_penalty=0.5).options.boundary_penalty == 0.5
    # the messages the public calls give, from the one place
    for kw, exc, msg in [({"boundary_penalty": -1.0}, ValueError, "boundary_penalty"),
                         ({"algorithm": "bpe"}, ValueError, "algorithm"),
                         ({"raw_han_exponent": "x"}, TypeError, "raw_han_exponent must be a number"),
                         ({"memory_limit": 0}, ValueError, "memory_limit must be a positive int"),
                         ({"num_threads": 0}, ValueError, "num_threads must be a positive int")]:
        with pytest.raises(exc, match=msg):
            TrainConfig(**kw)
        with pytest.raises(exc, match=msg):
            cnfmce.train(["some text"], progress=False, **kw)


@pytest.mark.parametrize("steps", ["train", pytest.param("count, train_from_counts", marks=pytest.mark.slow)])
def test_ray_backend_reads_the_field(files, expected, steps):
    """The field on Ray: train (the default run), count and train_from_counts (marked slow)."""
    ray = start_local_ray()
    try:
        if steps == "train":
            tok = cnfmce.train(files, vocab_size=VOCAB, raw_vocab_size=RAW, progress=False,
                               field="content", backend="ray", block_size=40_000)
            assert vocabulary(tok) == expected
            with pytest.raises(cnfmce.CorpusError, match="a.jsonl"):
                cnfmce.train([files[0]], vocab_size=VOCAB, progress=False, field="body", backend="ray")
            return
        counts = cnfmce.count(files, raw_vocab_size=RAW, progress=False, field="content",
                              backend="ray")
        tok = cnfmce.train_from_counts(counts, files, vocab_size=VOCAB, progress=False,
                                       field="content", backend="ray")
        assert vocabulary(tok) == expected
        with pytest.raises(TypeError, match="unexpected keyword argument 'num_partitions'"):
            cnfmce.train_from_counts(counts, files, progress=False, backend="ray", num_partitions=2)
    finally:
        ray.shutdown()
