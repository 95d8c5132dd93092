"""backend="ray" (cnfmce.ray, issue 10) on a real local Ray cluster started once for the module:
the vocabulary and the counts equal the local run's byte for byte, whatever the blocks and the
partitions; a worker killed mid-round, spilling workers, the inputs' kinds, errors."""

from __future__ import annotations

import gzip
import json
import os
import socket
import sys
import time

import pytest

import cnfmce
from train_helpers import read_shared_docs, start_local_ray

ray = pytest.importorskip("ray")
# Ray Data's own deprecation notices
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CATEGORIES = ("en", "code", "zh", "multi")
VOCAB = 3000
RAW = 30_000


def vocabulary(tok):
    return ([tok.id_to_token(i) for i in range(tok.vocab_size)], tok.special_tokens, tok.options)


@pytest.fixture(scope="module")
def cluster():
    yield start_local_ray()
    ray.shutdown()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A mix of the fixture corpora (about 2 MB) in every kind of input file: plain and gzipped
    JSON lines, parquet with several row groups, one-document text files."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    d = tmp_path_factory.mktemp("raycorpus")
    docs = {c: read_shared_docs(c, "train", max_bytes=400_000) for c in CATEGORIES}
    docs["sci"], docs["math"] = read_shared_docs("en", "test"), read_shared_docs("code", "test")
    paths = []
    for c in ("en", "code"):
        p = d / f"{c}.jsonl"
        p.write_text("".join(json.dumps({"text": t, "lang": c}, ensure_ascii=False) + "\n" + ("\n" if k % 7 == 0 else "")
                             for k, t in enumerate(docs[c])), encoding="utf-8")
        paths.append(p)
    for c in ("zh", "sci"):
        p = d / f"{c}.jsonl.gz"
        with gzip.open(p, "wt", encoding="utf-8") as fh:
            for t in docs[c]:
                fh.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
        paths.append(p)
    p = d / "math.parquet"
    pq.write_table(pa.table({"text": docs["math"] + [None]}), p, row_group_size=25)
    paths.append(p)
    for k, t in enumerate(docs["multi"][:40]):
        q = d / f"multi{k:03d}.txt"
        q.write_bytes(t.encode("utf-8"))
        paths.append(q)
    return [str(x) for x in paths]


@pytest.fixture(scope="module")
def local(corpus):
    return cnfmce.train(corpus, vocab_size=VOCAB, raw_vocab_size=RAW, progress=False)


@pytest.mark.parametrize("partitions,block_size", [pytest.param(1, None, marks=pytest.mark.slow), (3, 150_000),
                                                    pytest.param(7, 400_000, marks=pytest.mark.slow)])
def test_vocabulary_equals_local(cluster, corpus, local, partitions, block_size):
    tok = cnfmce.train(corpus, vocab_size=VOCAB, raw_vocab_size=RAW, progress=False,
                       backend="ray", num_partitions=partitions, block_size=block_size)
    assert vocabulary(tok) == vocabulary(local)
    info = tok.metadata["counting"]
    assert info["backend"] == "ray" and info["partitions"] == partitions
    assert info["documents"] == local.metadata["counting"]["documents"]
    assert info["bytes"] == local.metadata["counting"]["bytes"]
    if block_size == 150_000:
        assert info["blocks"] >= 12  # files cut into byte ranges (the .gz ones too) and row groups
    assert [s["distinct"] for s in info["round_stats"]] == \
        [s["distinct"] for s in local.metadata["counting"]["round_stats"]]
    assert tok.metadata["filtering"]["tokens"] == local.metadata["filtering"]["tokens"]


@pytest.mark.parametrize("block_size", [4999, 30_000, 10 ** 9])
def test_blocks_partition_every_file(corpus, block_size):
    """Every line, row and file is in exactly one block, in order: the blocks' documents are the
    local reader's, for block boundaries anywhere (inside lines, on newlines, on blank lines)."""
    from cnfmce import _blocks
    from cnfmce.corpus import iter_file
    files = [(p, os.path.getsize(p)) for p in corpus]
    blocks = _blocks.plan_blocks(files, block_size)
    got = [d for b in blocks for d in _blocks.iter_block(b)]
    want = [d for p in corpus for d in iter_file(p)]
    assert got == want
    if block_size == 4999:
        assert sum(b.kind == "jsonl" and b.path.endswith(".gz") for b in blocks) > 50
    assert [b.path for b in blocks if b.kind != "text"] == sorted(
        (b.path for b in blocks if b.kind != "text"), key=lambda p: corpus.index(p))


def test_counts_equal_local_for_documents_and_datasets(cluster):
    docs = read_shared_docs("en", "train", max_bytes=300_000) + read_shared_docs("zh", "train", max_bytes=200_000)
    rounds = ((1, 8, 0), (9, 16, 3), (17, 24, 3))
    want = cnfmce.count(docs, raw_vocab_size=20_000, rounds=rounds, progress=False)
    got = cnfmce.ray.count(cnfmce.Documents(docs), raw_vocab_size=20_000, rounds=rounds,
                           progress=False, block_size=60_000, num_partitions=5)
    assert list(got.items()) == list(want.items())
    assert got.characters == want.characters and len(want.characters) > 1000  # every character counted
    assert got.info["round_stats"][1]["retained"] == want.info["round_stats"][1]["retained"]
    ds = ray.data.from_items([{"body": t, "n": k} for k, t in enumerate(docs)], override_num_blocks=6)
    got = cnfmce.count(ds, raw_vocab_size=20_000, rounds=rounds, progress=False, backend="ray",
                       field="body")
    assert list(got.items()) == list(want.items()) and got.characters == want.characters


@pytest.mark.slow  # CI's extra tier (-m "shared or slow"); the default run keeps the others
def test_train_from_parquet_counts_on_ray(cluster, corpus, tmp_path):
    """Counts from elsewhere (a Spark-like directory of parquet parts) filtered on the cluster
    give the local train_from_counts' vocabulary on the counts file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    counts = cnfmce.count(corpus, raw_vocab_size=RAW, progress=False)
    cnfmce.save_counts(counts, tmp_path / "c.tsv.gz")
    items = list(counts.items())
    d = tmp_path / "spark"
    d.mkdir()
    for k in range(3):
        part = items[k::3]
        pq.write_table(pa.table({"token": pa.array([t for t, _ in part], pa.binary()),
                                 "count": pa.array([c for _, c in part], pa.int64())}),
                       d / f"part-{k:05d}.parquet", row_group_size=4000)
    # the paper's rule reads the candidates only: the counts file and the parquet parts agree
    want = cnfmce.train_from_counts(tmp_path / "c.tsv.gz", corpus, vocab_size=VOCAB, progress=False,
                                    selection="paper")
    got = cnfmce.train_from_counts(str(d), corpus, vocab_size=VOCAB, progress=False, backend="ray",
                                   block_size=300_000, selection="paper")
    assert vocabulary(got) == vocabulary(want)
    assert got.metadata["filtering"]["tokens"] == want.metadata["filtering"]["tokens"]
    assert got.metadata["filtering"]["actors"] == 1
    # the default selection also covers characters, whose exact counts the parquet parts lack (the
    # counts file has them): on the same parquet counts, the cluster gives the local result
    want = cnfmce.train_from_counts(str(d), corpus, vocab_size=VOCAB, progress=False)
    got = cnfmce.train_from_counts(str(d), corpus, vocab_size=VOCAB, progress=False, backend="ray",
                                   block_size=300_000)
    assert vocabulary(got) == vocabulary(want)
    assert got.metadata["selection"] == want.metadata["selection"] == "refined-non-ascii"


@pytest.mark.slow  # CI's extra tier (-m "shared or slow"); the default run keeps the others
def test_worker_killed_mid_round(cluster, corpus, local, tmp_path):
    marker = tmp_path / "killed"
    tok = cnfmce.ray.train(corpus, vocab_size=VOCAB, raw_vocab_size=RAW, progress=False,
                           num_partitions=2, _kill_once=str(marker))
    assert marker.exists()  # a map task of round 2 killed its worker process; Ray retried it
    assert vocabulary(tok) == vocabulary(local)


@pytest.mark.slow  # CI's extra tier (-m "shared or slow"); the default run keeps the others
def test_spilling_workers(cluster, corpus, local):
    tok = cnfmce.ray.train(corpus, vocab_size=VOCAB, raw_vocab_size=RAW, progress=False,
                           memory_limit=1 << 20, block_size=1_500_000, num_partitions=2)
    stats = tok.metadata["counting"]["round_stats"]
    assert stats[0]["spills"] > 0 and stats[0]["spilled_bytes"] > 0
    assert vocabulary(tok) == vocabulary(local)


def test_progress_and_info(cluster, corpus, capsys):
    c = cnfmce.ray.count(corpus[:2], raw_vocab_size=5000, progress=True, num_partitions=2)
    err = capsys.readouterr().err
    assert "count 1/3" in err and "shuffled" in err and "round 3" in err
    assert c.info["documents"] > 0 and all(s["shuffled_bytes"] > 0 for s in c.info["round_stats"])
    assert all(s["survivors_bytes"] > 0 for s in c.info["round_stats"][1:])  # the trie, put once


def test_errors(cluster, tmp_path, corpus):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": broken}\n', encoding="utf-8")
    with pytest.raises(cnfmce.CorpusError, match="bad.jsonl"):
        cnfmce.ray.count([str(bad)], raw_vocab_size=100, progress=False)
    with pytest.raises(FileNotFoundError):
        cnfmce.train([str(tmp_path / "missing.jsonl")], vocab_size=300, backend="ray")
    with pytest.raises(ValueError, match="num_partitions"):
        cnfmce.ray.count(corpus, num_partitions=0)
    with pytest.raises(ValueError, match="backend"):
        cnfmce.train(corpus, vocab_size=300, backend="spark")
    with pytest.raises(TypeError, match="backend='ray'"):
        cnfmce.train(corpus, vocab_size=300, ray_address="x:1")
    with pytest.raises(ValueError, match="memory_limit"):
        cnfmce.ray.count(corpus, memory_limit=1 << 50, progress=False)
    # a text column of another type: a bad corpus file (CorpusError), a dataset of the wrong
    # type (TypeError); nulls are skipped
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"text": pa.array([b"bytes", None], pa.binary())}), tmp_path / "b.parquet")
    with pytest.raises(cnfmce.CorpusError, match=r"b.parquet: \"text\" holds bytes values"):
        cnfmce.ray.count([str(tmp_path / "b.parquet")], raw_vocab_size=100, progress=False)
    ds = ray.data.from_items([{"text": 5}, {"text": None}])
    with pytest.raises(TypeError, match=r"'text' column holds int values \(5\), not strings"):
        cnfmce.ray.count(ds, raw_vocab_size=100, progress=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_cluster_fails_fast():
    port = _free_port()  # nothing listens there
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError, match=f"127.0.0.1:{port}"):
        cnfmce.train(["some text"], vocab_size=300, backend="ray", ray_address=f"127.0.0.1:{port}")
    with pytest.raises(cnfmce.ray.ClusterError):
        cnfmce.ray.count(["x"], ray_address=f"ray://127.0.0.1:{port}")
    assert time.perf_counter() - t0 < 30


def test_missing_ray_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'cnfmce\[ray\]'"):
        cnfmce.ray.count(["some text"], progress=False)


def _files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if not p.name.startswith(".")}


@pytest.fixture(scope="module")
def shard_tok(local):
    return cnfmce.Tokenizer.from_tokens([local.id_to_token(i) for i in range(local.vocab_size)],
                                        special_tokens=["<|endoftext|>"])


def _cut_after_two_shards(d):
    """The state of a run stopped after its first two shards (resume continues from there)."""
    m = cnfmce.shards.read_manifest(d)
    assert len(m["shards"]) > 2
    m["shards"] = m["shards"][:2]
    m["complete"] = False
    (d / "manifest.json").write_text(json.dumps(m))
    for f in d.iterdir():
        if f.name.startswith("shard_") and not f.name.startswith(("shard_000000", "shard_000001")):
            f.unlink()


@pytest.mark.parametrize("fmt", ["megatron", pytest.param("llmc", marks=pytest.mark.slow),
                                 pytest.param("npy", marks=pytest.mark.slow)])
def test_tokenize_corpus_files_equal_local(cluster, corpus, shard_tok, tmp_path, fmt, capsys):
    """Paths: each file block is read and encoded by a map_batches actor; the driver writes
    the same files as the local run, whatever the blocks, also after a resume. The default run
    takes megatron (its resume and the progress bar); the other formats are marked slow."""
    tok = shard_tok
    want = cnfmce.tokenize_corpus(tok, corpus, tmp_path / "local", format=fmt, shard_size=300_000)
    got = cnfmce.tokenize_corpus(tok, corpus, tmp_path / "ray", format=fmt, shard_size=300_000,
                                 backend="ray", block_size=120_000, progress=fmt in ("megatron", "npy"))
    assert got == want and len(want["shards"]) > 3
    if fmt in ("megatron", "npy"):  # the bar reaches the inputs' stored size, then the summary line
        total = sum(i["bytes"] for i in want["inputs"])
        err = capsys.readouterr().err
        assert f"tokenized {want['documents']:,} documents" in err
        assert f"{total / 1e6:.2f}M/{total / 1e6:.2f}M" in err
    assert _files(tmp_path / "ray") == _files(tmp_path / "local")
    assert ray.data.DataContext.get_current().execution_options.preserve_order is False  # restored
    if fmt == "megatron":
        _cut_after_two_shards(tmp_path / "ray")
        cnfmce.tokenize_corpus(tok, corpus, tmp_path / "ray", format=fmt, shard_size=300_000,
                               backend="ray", resume=True, block_size=90_000)
        assert _files(tmp_path / "ray") == _files(tmp_path / "local")


@pytest.mark.parametrize("fmt", ["llmc", pytest.param("npy", marks=pytest.mark.slow)])
def test_tokenize_dataset_equals_local(cluster, shard_tok, tmp_path, fmt):
    """A ray.data.Dataset (its own blocks, other columns and nulls in it) and documents in
    memory give the local run's files; a resumed dataset run too."""
    tok = shard_tok
    docs = read_shared_docs("en", "train", max_bytes=150_000) + read_shared_docs("zh", "train", max_bytes=50_000)
    # (field is only recorded in the manifest for documents in memory)
    cnfmce.tokenize_corpus(tok, docs, tmp_path / "local", format=fmt, shard_size=50_000, field="body")
    rows = [{"body": t, "k": k} for k, t in enumerate(docs)]
    rows[3:3] = [{"body": None, "k": -1}]  # a null is skipped, as in a parquet file
    ds = ray.data.from_items(rows, override_num_blocks=7)
    cnfmce.tokenize_corpus(tok, ds, tmp_path / "ds", format=fmt, shard_size=50_000, backend="ray",
                           field="body")
    assert _files(tmp_path / "ds") == _files(tmp_path / "local")
    if fmt == "llmc":
        _cut_after_two_shards(tmp_path / "ds")
        cnfmce.tokenize_corpus(tok, ds, tmp_path / "ds", format=fmt, shard_size=50_000,
                               backend="ray", field="body", resume=True)
        assert _files(tmp_path / "ds") == _files(tmp_path / "local")
    else:
        cnfmce.ray.tokenize_corpus(tok, docs, tmp_path / "mem", format=fmt, shard_size=50_000,
                                   field="body", block_size=30_000)
        assert _files(tmp_path / "mem") == _files(tmp_path / "local")


def test_tokenize_dataset_errors(cluster, shard_tok, tmp_path):
    ds = ray.data.from_items([{"body": "x"}])
    with pytest.raises(ValueError, match=r"no 'text' column \(columns: \['body'\]\)"):
        cnfmce.tokenize_corpus(shard_tok, ds, tmp_path / "a", backend="ray")
    ds = ray.data.from_items([{"text": "fine"}] * 5 + [{"text": 7}], override_num_blocks=2)
    with pytest.raises(TypeError, match=r"'text' column holds int values \(7\), not strings"):
        cnfmce.tokenize_corpus(shard_tok, ds, tmp_path / "b", backend="ray")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": broken}\n', encoding="utf-8")
    with pytest.raises(cnfmce.CorpusError, match="bad.jsonl"):
        cnfmce.tokenize_corpus(shard_tok, [str(bad)], tmp_path / "c", backend="ray")


def test_refined_selection_equals_local(cluster, corpus):
    # selection="refined" (issue 13): the filtering pass and every refining pass run on the
    # cluster give the local vocabulary
    counts = cnfmce.count(corpus, raw_vocab_size=RAW, progress=False)
    kw = dict(vocab_size=VOCAB, progress=False, selection="refined")
    want = cnfmce.train_from_counts(counts, corpus, **kw)
    tok = cnfmce.train_from_counts(counts, corpus, backend="ray", **kw)
    assert vocabulary(tok) == vocabulary(want)
    assert tok.metadata["selection"] == "refined"
    assert len(tok.metadata["refining"]) == len(want.metadata["refining"]) >= 1


def test_refined_train_counting_on_ray_equals_local(cluster, corpus):
    # selection="refined" with the counting on the cluster (partitioned rounds): the characters
    # every partition counted beside the raw_vocab_size cut reach coverage as in a local run
    kw = dict(vocab_size=VOCAB, raw_vocab_size=4000, progress=False, selection="refined")
    want = cnfmce.train(corpus, **kw)
    assert want.metadata["covered_beyond_cut"] > 0
    tok = cnfmce.train(corpus, backend="ray", num_partitions=3, **kw)
    assert vocabulary(tok) == vocabulary(want)
    assert tok.metadata["covered_beyond_cut"] == want.metadata["covered_beyond_cut"]


@pytest.mark.slow  # CI's extra tier (-m "shared or slow"); the default run keeps the others
def test_han_weighted_cut_on_ray_equals_local(cluster, corpus):
    # raw_han_exponent (src/raw_cut.rs): the partitioned rounds keep the pool, the coordinator's
    # cut weighs it as the local run does; and non_ascii_exponent reaches the refining passes
    kw = dict(vocab_size=VOCAB, raw_vocab_size=4000, progress=False, selection="refined-non-ascii",
              non_ascii_exponent=1.0, raw_han_exponent=0.5)
    want = cnfmce.train(corpus, **kw)
    assert vocabulary(want) != vocabulary(cnfmce.train(corpus, **dict(kw, raw_han_exponent=0.0)))
    tok = cnfmce.train(corpus, backend="ray", num_partitions=3, **kw)
    assert vocabulary(tok) == vocabulary(want)
    assert tok.metadata["raw_han_exponent"] == 0.5 and tok.metadata["non_ascii_exponent"] == 1.0
    counts = cnfmce.count(corpus, raw_vocab_size=16_000, progress=False)
    assert vocabulary(cnfmce.train_from_counts(counts, corpus, backend="ray", **kw)) == vocabulary(want)


def _strip_metadata(path):
    """A tokenizer file without its free-form metadata (timings, the backend's statistics)."""
    d = json.loads(path.read_text(encoding="utf-8"))
    d.pop("metadata")
    return d


@pytest.mark.parametrize("command", ["train", pytest.param("count", marks=pytest.mark.slow),
                                     pytest.param("tokenize", marks=pytest.mark.slow)])
def test_cli_backend_ray(cluster, corpus, tmp_path, command):
    """cnfmce train / count / tokenize --backend ray --ray-address ADDR (the module's cluster):
    the local run's files. The default run takes train; count and tokenize are marked slow."""
    from cnfmce.cli import main
    addr = ray.get_runtime_context().gcs_address
    on_ray = ["--backend", "ray", "--ray-address", addr]
    small = corpus[:2]
    train = ["train", "--vocab-size", "800", "--raw-vocab-size", "8000", "--rounds", "1-8:0,9-16:3",
             "--quiet"]
    if command != "count":  # the local run's vocabulary (tokenize encodes with it)
        assert main(train + ["-o", str(tmp_path / "local.json")] + small) == 0
    if command == "train":
        assert main(train + ["-o", str(tmp_path / "ray.json")] + on_ray + small) == 0
        assert _strip_metadata(tmp_path / "ray.json") == _strip_metadata(tmp_path / "local.json")
        assert json.loads((tmp_path / "ray.json").read_text())["metadata"]["counting"]["round_stats"][0]["shuffled_bytes"] > 0
        return
    if command == "tokenize":
        tok = ["tokenize", "-t", str(tmp_path / "local.json"), "--format", "megatron",
               "--shard-size", "100KB", "--quiet"]
        assert main(tok + ["-o", str(tmp_path / "sl")] + small) == 0
        assert main(tok + ["-o", str(tmp_path / "sr")] + on_ray + small) == 0
        assert len(_files(tmp_path / "sl")) > 3
        assert _files(tmp_path / "sr") == _files(tmp_path / "sl")
        return
    count = ["count", "--raw-vocab-size", "5000", "--rounds", "1-10:0", "--quiet"]
    assert main(count + ["-o", str(tmp_path / "local.tsv")] + small) == 0
    assert main(count + ["-o", str(tmp_path / "ray.tsv")] + on_ray + small) == 0
    # the candidates and counts, byte for byte (the second line is the run's info: timings)
    got, want = ((tmp_path / f).read_bytes().split(b"\n", 2) for f in ("ray.tsv", "local.tsv"))
    assert got[0] == want[0] and got[2] == want[2] and len(want[2]) > 10_000


def test_cli_backend_errors(corpus, tmp_path, monkeypatch, capsys):
    from cnfmce.cli import main
    out = str(tmp_path / "t.json")
    assert main(["train", "-o", out, "--vocab-size", "300", "--ray-address", "x:1", corpus[0]]) == 1
    assert "--ray-address needs --backend ray" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    for cmd in (["train", "-o", out, "--vocab-size", "300"], ["count", "-o", str(tmp_path / "c.tsv")],
                ["tokenize", "-t", out, "-o", str(tmp_path / "s"), "--format", "npy"]):
        assert main(cmd + ["--backend", "ray", corpus[0]]) == 1
        err = capsys.readouterr().err
        assert err.startswith("cnfmce: error: --backend ray") and "pip install 'cnfmce[ray]'" in err
        assert "Traceback" not in err
    assert not os.path.exists(out)
