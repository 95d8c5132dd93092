"""cnfmce tokenize / cnfmce.tokenize_corpus: shards read back with readers written here from the
documented layouts (Megatron-LM's IndexedDataset, llm.c's .bin, .npy), dtype by vocabulary,
EOS/BOS placement, determinism across threads and batch sizes, resume after a kill and after
Ctrl-C, and bad inputs."""

from __future__ import annotations

import gzip
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest

import cnfmce
from cnfmce.cli import main as cli_main
from cnfmce.shards import ShardsError, parse_size, read_manifest

from conftest import SHARED, ctrl_c_as_in_a_terminal, fixture_path, shared_path

EOT = "<|endoftext|>"
WORDS = [b" the", b"the", b" and", b" of", b" to", b"ing", b"tion", b" in", b" is", b"er", b"es",
         b"\xe7\x9a\x84", b"\xe4\xb8\x80", b"  ", b"    ", b"\n\n", b"()", b"def ", b"return",
         b" a", b"on", b"re", b"at", b"en", b" s"]
EOS16 = 256 + len(WORDS)  # the id of <|endoftext|> in small_tok()


def small_tok(special_id: Optional[int] = None) -> cnfmce.Tokenizer:
    """256 bytes + a few words; <|endoftext|> right after them, or at ``special_id``."""
    toks = [bytes([b]) for b in range(256)] + WORDS
    sid = len(toks) if special_id is None else special_id
    return cnfmce.Tokenizer.from_tokens(toks, special_tokens={EOT: sid})


@pytest.fixture(scope="module")
def tok16() -> cnfmce.Tokenizer:
    return small_tok()


@pytest.fixture(scope="module")
def tok32() -> cnfmce.Tokenizer:
    return small_tok(70_000)  # an id past 65,535: uint32 tokens


def shared_docs(category: str, n: int) -> List[str]:
    """The first n documents of a fixture corpus (tests/fixtures/corpora)."""
    path = fixture_path("corpora", category, "train.jsonl.gz")
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(json.loads(line)["text"])
            if len(out) == n:
                break
    return out


EDGE = ["", "x", f"special text {EOT} stays ordinary", "\n", "中文 and ascii 🙂"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Tuple[List[Path], List[str]]:
    """Two .jsonl files (one gzipped) and one .txt; the documents in reading order."""
    d = tmp_path_factory.mktemp("corpus")
    a = shared_docs("en", 40) + EDGE[:3]
    b = shared_docs("zh", 25) + EDGE[3:] + shared_docs("code", 15)
    pa, pb, pc = d / "a.jsonl", d / "b.jsonl.gz", d / "c.txt"
    with open(pa, "w", encoding="utf-8") as fh:
        for t in a:
            fh.write(json.dumps({"text": t, "id": len(t)}) + "\n\n")  # blank lines are skipped
    with gzip.open(pb, "wt", encoding="utf-8") as fh:
        for t in b:
            fh.write(json.dumps({"text": t}) + "\n")
    c = "a whole file is one document.\nSecond line."
    pc.write_text(c, encoding="utf-8")
    return [pa, pb, pc], a + b + [c]


# --- readers written from the documented layouts ---------------------------------------------------

def read_megatron(prefix: Path) -> Tuple[np.dtype, List[List[int]]]:
    """Megatron-LM's IndexedDataset: .idx = MMIDIDX\\0\\0, u64 version 1, u8 dtype code, u64
    sequence count, u64 document count, int32 lengths, int64 pointers, int64 document indices."""
    idx = prefix.with_suffix(".idx").read_bytes()
    assert idx[:9] == b"MMIDIDX\x00\x00"
    version, = struct.unpack_from("<Q", idx, 9)
    code, = struct.unpack_from("<B", idx, 17)
    nseq, ndoc = struct.unpack_from("<QQ", idx, 18)
    assert version == 1
    dt = {8: np.dtype("<u2"), 4: np.dtype("<i4")}[code]
    off = 34
    lengths = np.frombuffer(idx, "<i4", nseq, off)
    pointers = np.frombuffer(idx, "<i8", nseq, off + 4 * nseq)
    docidx = np.frombuffer(idx, "<i8", ndoc, off + 12 * nseq)
    assert len(idx) == off + 12 * nseq + 8 * ndoc
    assert list(docidx) == list(range(nseq + 1))  # one sequence per document
    data = prefix.with_suffix(".bin").read_bytes()
    assert len(data) == int(lengths.sum()) * dt.itemsize
    seqs = [np.frombuffer(data, dt, int(n), int(p)).tolist() for n, p in zip(lengths, pointers)]
    return dt, seqs


def read_llmc(path: Path) -> Tuple[int, int, np.dtype, List[int]]:
    """llm.c: 256 int32 header (magic, version, token count), then the tokens."""
    raw = path.read_bytes()
    header = np.frombuffer(raw, "<i4", 256)
    magic, version, ntok = int(header[0]), int(header[1]), int(header[2])
    assert not header[3:].any()
    dt = {20240520: np.dtype("<u2"), 20240801: np.dtype("<u4")}[magic]
    assert len(raw) == 1024 + ntok * dt.itemsize
    return magic, version, dt, np.frombuffer(raw, dt, ntok, 1024).tolist()


def read_npy(stem: Path) -> Tuple[np.dtype, List[List[int]]]:
    toks = np.load(str(stem) + ".tokens.npy")
    offs = np.load(str(stem) + ".offsets.npy")
    assert offs.dtype == np.int64 and offs[0] == 0 and offs[-1] == len(toks)
    return toks.dtype, [toks[a:b].tolist() for a, b in zip(offs[:-1], offs[1:])]


def shard_stems(out: Path) -> List[Path]:
    names = sorted({f.split(".")[0] for f in os.listdir(out) if f.startswith("shard_")})
    return [out / n for n in names]


def read_docs(out: Path, fmt: str) -> List[List[int]]:
    """All documents' token sequences, in the order of the sorted shard names."""
    seqs: List[List[int]] = []
    for stem in shard_stems(out):
        if fmt == "megatron":
            seqs += read_megatron(stem)[1]
        elif fmt == "npy":
            seqs += read_npy(stem)[1]
        else:
            raise AssertionError(fmt)
    return seqs


def expected(tok, docs, eos=None, bos=None) -> List[List[int]]:
    return [([bos] if bos is not None else []) + tok.encode(d) + ([eos] if eos is not None else [])
            for d in docs]


def dir_bytes(out: Path) -> Dict[str, bytes]:
    return {f: (out / f).read_bytes() for f in sorted(os.listdir(out))}


# --- formats --------------------------------------------------------------------------------------

def test_megatron_documents_exact(tok16, corpus, tmp_path):
    paths, docs = corpus
    out = tmp_path / "m"
    m = cnfmce.tokenize_corpus(tok16, paths, out, format="megatron", shard_size="60KB")
    eos = tok16.special_tokens[EOT]
    assert m["eos_id"] == eos and m["dtype"] == "uint16" and m["complete"]
    want = expected(tok16, docs, eos=eos)
    assert read_docs(out, "megatron") == want
    # several shards, none over the size unless one document alone is larger
    assert len(m["shards"]) > 3
    for s, stem in zip(m["shards"], shard_stems(out)):
        assert s["name"] == stem.name
        assert s["files"][stem.name + ".bin"] == s["tokens"] * 2
        dt, seqs = read_megatron(stem)
        assert dt == np.dtype("<u2") and len(seqs) == s["documents"]
        assert s["tokens"] * 2 <= 60_000 or s["documents"] == 1
        assert seqs == want[s["first_document"]:s["first_document"] + s["documents"]]
    assert m["documents"] == len(docs) and m["tokens"] == sum(map(len, want))
    assert m["text_bytes"] == sum(len(d.encode()) for d in docs)
    assert m["inputs"] == [{"path": os.fspath(p), "bytes": p.stat().st_size} for p in paths]
    assert m["tokenizer"]["vocab_size"] == tok16.vocab_size and len(m["tokenizer"]["sha256"]) == 64
    assert read_manifest(out) == m


@pytest.mark.parametrize("which", ["16", "32"])
def test_llmc_shards(which, tok16, tok32, corpus, tmp_path):
    tok = tok16 if which == "16" else tok32
    paths, docs = corpus
    m = cnfmce.tokenize_corpus(tok, paths, tmp_path, format="llmc", shard_size="100KB")
    eos = tok.special_tokens[EOT]
    stream: List[int] = []
    for s, stem in zip(m["shards"], shard_stems(tmp_path)):
        magic, version, dt, toks = read_llmc(stem.with_suffix(".bin"))
        if which == "16":
            assert (magic, version, dt) == (20240520, 1, np.dtype("<u2"))
        else:
            assert (magic, version, dt) == (20240801, 7, np.dtype("<u4"))
        assert len(toks) == s["tokens"]
        stream += toks
    assert stream == [i for ids in expected(tok, docs, eos=eos) for i in ids]
    assert m["dtype"] == ("uint16" if which == "16" else "uint32")


@pytest.mark.parametrize("which", ["16", "32"])
def test_npy_shards(which, tok16, tok32, corpus, tmp_path):
    tok = tok16 if which == "16" else tok32
    paths, docs = corpus
    m = cnfmce.tokenize_corpus(tok, paths, tmp_path, format="npy", shard_size=10**9, eos=None)
    assert len(m["shards"]) == 1 and m["eos_id"] is None
    dt, seqs = read_npy(shard_stems(tmp_path)[0])
    assert dt == (np.uint16 if which == "16" else np.uint32)
    assert seqs == expected(tok, docs)


def test_megatron_uint32_vocab_is_int32(tok32, corpus, tmp_path):
    paths, docs = corpus
    m = cnfmce.tokenize_corpus(tok32, paths[:1], tmp_path, format="megatron")
    assert m["dtype"] == "int32"
    dt, seqs = read_megatron(shard_stems(tmp_path)[0])
    assert dt == np.dtype("<i4")
    assert seqs == expected(tok32, docs[:43], eos=70_000)


def test_dtype_boundary_65536(tmp_path):
    docs = ["abc", "d"]
    toks = [bytes([b]) for b in range(256)]
    for sid, want in ((65535, "uint16"), (65536, "uint32")):
        tok = cnfmce.Tokenizer.from_tokens(toks, special_tokens={EOT: sid})
        m = cnfmce.tokenize_corpus(tok, docs, tmp_path / str(sid), format="npy")
        assert m["dtype"] == want
        assert read_npy(shard_stems(tmp_path / str(sid))[0])[1] == expected(tok, docs, eos=sid)
    # an explicit eos id counts too (the id of a special token; an id the tokenizer does not
    # have is refused before anything is written)
    tok = cnfmce.Tokenizer.from_tokens(toks, special_tokens={"<|x|>": 100_000})
    m = cnfmce.tokenize_corpus(tok, docs, tmp_path / "e", format="llmc", eos=100_000)
    assert m["dtype"] == "uint32" and m["eos_token"] == "<|x|>"
    assert read_llmc(tmp_path / "e" / "shard_000000.bin")[3] == [97, 98, 99, 100_000, 100, 100_000]
    with pytest.raises(ValueError, match="eos id 100000 is not an id of this tokenizer"):
        cnfmce.tokenize_corpus(cnfmce.Tokenizer.from_tokens(toks), docs, tmp_path / "f",
                               format="llmc", eos=100_000)
    assert not (tmp_path / "f").exists()


# --- eos / bos ------------------------------------------------------------------------------------

def test_eos_bos_placement(tok16, tmp_path):
    docs = ["ab", "", "the cat"]
    eos = tok16.special_tokens[EOT]
    the = tok16.token_to_id(b"the")
    cases = {
        "auto": (dict(), eos, None),
        "none": (dict(eos=None), None, None),
        "bos": (dict(eos=None, bos=EOT), None, eos),
        "both": (dict(eos=EOT, bos="the"), eos, the),
        "ids": (dict(eos=3, bos=4), 3, 4),
    }
    for name, (kw, e, b) in cases.items():
        out = tmp_path / name
        m = cnfmce.tokenize_corpus(tok16, docs, out, format="megatron", **kw)
        assert read_docs(out, "megatron") == expected(tok16, docs, eos=e, bos=b), name
        assert (m["eos_id"], m["bos_id"]) == (e, b)
    with pytest.raises(ValueError, match="neither a token"):
        cnfmce.tokenize_corpus(tok16, docs, tmp_path / "bad", format="npy", eos="<|nope|>")
    assert not (tmp_path / "bad").exists()


def test_default_eos_of_shared_vocabularies(qwen):
    from cnfmce.shards import default_eos
    assert default_eos(qwen) == (qwen.special_tokens["<|endoftext|>"], "<|endoftext|>")
    assert default_eos(small_tok()) == (EOS16, EOT)
    assert default_eos(cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)])) is None


# --- determinism ----------------------------------------------------------------------------------

def test_threads_and_batches_byte_identical(tok16, corpus, tmp_path):
    paths, _ = corpus
    runs = {}
    for name, kw in {"t1": dict(num_threads=1), "t2": dict(num_threads=2),
                     "small_batches": dict(num_threads=2, batch_chars=1000)}.items():
        cnfmce.tokenize_corpus(tok16, paths, tmp_path / name, format="megatron", shard_size="40KB", **kw)
        runs[name] = dir_bytes(tmp_path / name)
    assert len(runs["t1"]) > 6
    assert runs["t1"] == runs["t2"] == runs["small_batches"]


# --- interruption and resume ----------------------------------------------------------------------

class Interrupting:
    """An iterable of documents that raises KeyboardInterrupt (as Ctrl-C would) after ``after``."""

    def __init__(self, docs: List[str], after: Optional[int]):
        self.docs, self.after = docs, after

    def __iter__(self):
        for k, d in enumerate(self.docs):
            if self.after is not None and k == self.after:
                raise KeyboardInterrupt
            yield d


def test_ctrl_c_leaves_complete_shards_and_resume_is_identical(tok16, corpus, tmp_path):
    _, docs = corpus
    ref, out = tmp_path / "ref", tmp_path / "out"
    cnfmce.tokenize_corpus(tok16, docs, ref, format="megatron", shard_size="30KB", batch_chars=2000)
    with pytest.raises(KeyboardInterrupt):
        cnfmce.tokenize_corpus(tok16, Interrupting(docs, 60), out, format="megatron",
                               shard_size="30KB", batch_chars=2000)
    m = read_manifest(out)
    assert not m["complete"] and 0 < len(m["shards"]) < len(read_manifest(ref)["shards"])
    # only complete shards: every file is listed, nothing temporary, each reads back exactly
    listed = {f for s in m["shards"] for f in s["files"]} | {"manifest.json"}
    assert set(os.listdir(out)) == listed
    assert read_docs(out, "megatron") == expected(tok16, docs[:m["documents"]], eos=EOS16)
    with pytest.raises(ShardsError, match="already holds shards"):
        cnfmce.tokenize_corpus(tok16, docs, out, format="megatron", shard_size="30KB")
    with pytest.raises(ShardsError, match="shard_size"):
        cnfmce.tokenize_corpus(tok16, docs, out, format="megatron", shard_size="31KB", resume=True)
    cnfmce.tokenize_corpus(tok16, docs, out, format="megatron", shard_size="30KB", resume=True)
    assert dir_bytes(out) == dir_bytes(ref)
    # resuming a complete run does nothing
    cnfmce.tokenize_corpus(tok16, docs, out, format="megatron", shard_size="30KB", resume=True)
    assert dir_bytes(out) == dir_bytes(ref)


def test_temporaries_of_a_killed_run_are_removed(tok16, corpus, tmp_path):
    """A SIGKILL leaves the temporary files of the write under way: a shard's hidden
    ``.shard_*.tmp`` or the manifest's ``manifest.json.tmp<pid>``. The next run (resumed, or
    started over after a run that finished no shard) deletes them, so the directory ends
    byte-identical to an uninterrupted run; files that only look alike stay."""
    paths, _ = corpus
    ref, out = tmp_path / "ref", tmp_path / "out"
    kw = dict(format="llmc", shard_size="20KB", batch_chars=3000)
    cnfmce.tokenize_corpus(tok16, paths, ref, **kw)
    cnfmce.tokenize_corpus(tok16, paths, out, **kw)
    m = read_manifest(out)
    # as a kill inside the last shard's write would leave them, the manifest not yet updated
    last = m["shards"].pop()
    m["complete"] = False
    (out / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True) + "\n")
    for f in last["files"]:
        os.replace(out / f, out / f".{f}.tmp")
    (out / "manifest.json.tmp4242").write_bytes(b"{")
    cnfmce.tokenize_corpus(tok16, paths, out, resume=True, **kw)
    assert dir_bytes(out) == dir_bytes(ref)
    # a run that finished no shard, then killed while writing its manifest
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "manifest.json.tmp77").write_bytes(b"")
    (fresh / "manifest.json.tmpx").write_bytes(b"kept")  # not a pid suffix: not ours
    cnfmce.tokenize_corpus(tok16, paths, fresh, **kw)
    got = dir_bytes(fresh)
    assert got.pop("manifest.json.tmpx") == b"kept"
    assert got == dir_bytes(ref)


def test_resume_across_files(tok16, corpus, tmp_path, monkeypatch):
    """Interrupted inside the second file: resuming skips the first file unread, reads past the
    finished documents of the second and ends identical to an uninterrupted run."""
    import cnfmce.shards as shards
    paths, docs = corpus
    ref, out = tmp_path / "ref", tmp_path / "out"
    kw = dict(format="npy", shard_size="20KB", batch_chars=3000)
    cnfmce.tokenize_corpus(tok16, paths, ref, **kw)
    # the Python readers (iter_file) for every file; test_resume_across_files_core_reader
    # does the same with the core's reader
    monkeypatch.setattr(shards, "_core_mode", lambda path, field: None)
    real = shards.iter_file
    opened = []

    def interrupted(path, *a, **k):
        opened.append(os.path.basename(path))
        for n, d in enumerate(real(path, *a, **k)):
            if path == os.fspath(paths[1]) and n == 30:
                raise KeyboardInterrupt
            yield d
    monkeypatch.setattr(shards, "iter_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cnfmce.tokenize_corpus(tok16, paths, out, **kw)
    m = read_manifest(out)
    assert m["shards"][-1]["input_end"][0] == 1 and 0 < m["shards"][-1]["input_end"][1] < 30
    opened.clear()
    monkeypatch.setattr(shards, "iter_file", lambda path, *a, **k: (opened.append(os.path.basename(path)), real(path, *a, **k))[1])
    cnfmce.tokenize_corpus(tok16, paths, out, resume=True, **kw)
    assert opened == ["b.jsonl.gz", "c.txt"]  # a.jsonl is not read again
    assert dir_bytes(out) == dir_bytes(ref)
    assert read_docs(out, "npy") == expected(tok16, docs, eos=EOS16)


def test_resume_across_files_core_reader(tok16, corpus, tmp_path, monkeypatch):
    """test_resume_across_files with the core reading the files (JSON lines, gzip, text):
    interrupted inside the second file, the resumed run does not open the first one and ends
    identical to an uninterrupted run (and to the Python readers' output)."""
    import cnfmce._core as core
    paths, docs = corpus
    ref, out, py = tmp_path / "ref", tmp_path / "out", tmp_path / "py"
    kw = dict(format="npy", shard_size="20KB", batch_chars=3000)
    cnfmce.tokenize_corpus(tok16, paths, ref, **kw)
    with monkeypatch.context() as mp:
        mp.setattr(cnfmce.shards, "_core_mode", lambda path, field: None)
        cnfmce.tokenize_corpus(tok16, paths, py, **kw)
    assert dir_bytes(py) == dir_bytes(ref)
    real = core.CorpusReader
    opened = []

    class Reader:
        def __init__(self, path, *a, **k):
            opened.append(os.path.basename(path))
            self.path, self.r, self.reads = path, real(path, *a, **k), 0

        def read(self, *a):
            if self.path == os.fspath(paths[1]) and self.r.documents >= 30 and interrupt:
                # Ctrl-C once a shard of this file is written (the writer runs behind)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    shards = read_manifest(out)["shards"]
                    if shards and shards[-1]["input_end"][0] == 1:
                        break
                    time.sleep(0.01)
                raise KeyboardInterrupt
            return self.r.read(*a)

        def __getattr__(self, name):
            return getattr(self.r, name)
    monkeypatch.setattr(core, "CorpusReader", Reader)
    interrupt = True
    with pytest.raises(KeyboardInterrupt):
        cnfmce.tokenize_corpus(tok16, paths, out, **kw)
    m = read_manifest(out)
    assert m["shards"][-1]["input_end"][0] == 1 and 0 < m["shards"][-1]["input_end"][1] < 40
    opened.clear()
    interrupt = False
    cnfmce.tokenize_corpus(tok16, paths, out, resume=True, **kw)
    assert opened == ["b.jsonl.gz", "c.txt"]  # a.jsonl is not read again
    assert dir_bytes(out) == dir_bytes(ref)
    assert read_docs(out, "npy") == expected(tok16, docs, eos=EOS16)


def _run_until(cmd: List[str], out: Path, shards: int, sig: int) -> Tuple[int, str, int]:
    """Starts ``cmd``, sends ``sig`` once the manifest lists ``shards`` shards; (shards listed
    then, stderr, return code)."""
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_as_in_a_terminal)
    sent_at = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            m = json.loads((out / "manifest.json").read_bytes())
        except (OSError, ValueError):
            m = None
        if m and len(m["shards"]) >= shards:
            proc.send_signal(sig)
            sent_at = len(m["shards"])
            break
        time.sleep(0.005)
    err = proc.communicate(timeout=120)[1]
    assert sent_at is not None, "the run ended before it could be interrupted"
    return sent_at, err, proc.returncode


def test_ctrl_c_then_kill_then_resume_is_byte_identical(tmp_path):
    """A real `cnfmce tokenize` process interrupted with SIGINT (Ctrl-C), resumed and killed
    with SIGKILL, then resumed to the end: the same bytes as one uninterrupted run."""
    inputs = [os.fspath(fixture_path("corpora", c, "train.jsonl.gz")) for c in ("en", "code", "multi", "zh")]
    tokfile = tmp_path / "tok.json"
    small_tok().save(tokfile)
    args = ["-t", os.fspath(tokfile), "--format", "llmc", "--shard-size", "64KB", "--threads", "1",
            "--quiet"]
    out, ref = tmp_path / "out", tmp_path / "ref"
    cmd = [sys.executable, "-m", "cnfmce.cli", "tokenize", "-o", os.fspath(out), *args, *inputs]
    n1, err, rc = _run_until(cmd, out, 2, signal.SIGINT)
    assert rc == 130 and "interrupted;" in err and "--resume" in err, err
    m = read_manifest(out)
    assert not m["complete"] and len(m["shards"]) >= n1
    listed = {f for s in m["shards"] for f in s["files"]} | {"manifest.json"}
    assert set(os.listdir(out)) == listed  # Ctrl-C: no temporary file left either
    n2, _, _ = _run_until(cmd + ["--resume"], out, len(m["shards"]) + 3, signal.SIGKILL)
    assert not read_manifest(out)["complete"] and n2 > n1
    assert cli_main(["tokenize", "-o", os.fspath(out), "--resume", *args, *inputs]) == 0
    assert cli_main(["tokenize", "-o", os.fspath(ref), *args, *inputs]) == 0
    assert dir_bytes(out) == dir_bytes(ref)
    assert len(read_manifest(ref)["shards"]) > n2


# --- inputs ---------------------------------------------------------------------------------------

def test_field_option_and_other_readers(tok16, tmp_path):
    docs = ["first doc", "second, longer document", ""]
    jl = tmp_path / "f.jsonl"
    jl.write_text("".join(json.dumps({"content": d, "text": 1}) + "\n" for d in docs))
    m = cnfmce.tokenize_corpus(tok16, [jl], tmp_path / "o1", format="npy", field="content")
    assert read_npy(shard_stems(tmp_path / "o1")[0])[1] == expected(tok16, docs, eos=EOS16)
    with pytest.raises(cnfmce.CorpusError, match=r'f\.jsonl:1: .*"body"'):
        cnfmce.tokenize_corpus(tok16, [jl], tmp_path / "o2", format="npy", field="body")
    assert os.listdir(tmp_path / "o2") == ["manifest.json"]  # no shard, nothing temporary
    # that failed run finished no shard: the corrected command starts over in the same directory
    # (without and with resume), its manifest from this run's settings
    cnfmce.tokenize_corpus(tok16, [jl], tmp_path / "o2", format="npy", field="content")
    assert dir_bytes(tmp_path / "o2") == dir_bytes(tmp_path / "o1")
    with pytest.raises(cnfmce.CorpusError):
        cnfmce.tokenize_corpus(tok16, [jl], tmp_path / "o5", format="llmc", field="body")
    cnfmce.tokenize_corpus(tok16, [jl], tmp_path / "o5", format="npy", field="content", resume=True)
    assert dir_bytes(tmp_path / "o5") == dir_bytes(tmp_path / "o1")
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa
    pqf = tmp_path / "f.parquet"
    pq.write_table(pa.table({"content": docs}), pqf)
    cnfmce.tokenize_corpus(tok16, [pqf], tmp_path / "o3", format="npy", field="content")
    assert read_npy(shard_stems(tmp_path / "o3")[0])[1] == expected(tok16, docs, eos=EOS16)
    zstd = pytest.importorskip("zstandard")
    zf = tmp_path / "f.jsonl.zst"
    zf.write_bytes(zstd.ZstdCompressor().compress(jl.read_bytes()))
    cnfmce.tokenize_corpus(tok16, [zf], tmp_path / "o4", format="npy", field="content")
    assert dir_bytes(tmp_path / "o4")["shard_000000.tokens.npy"] == \
        dir_bytes(tmp_path / "o1")["shard_000000.tokens.npy"]


# --- bad inputs -----------------------------------------------------------------------------------

def test_missing_input(tok16, tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        cnfmce.tokenize_corpus(tok16, [tmp_path / "nope.jsonl"], tmp_path / "o", format="npy")
    assert not (tmp_path / "o").exists()


def test_corrupt_gzip_leaves_no_partial_shard(tok16, corpus, tmp_path):
    paths, docs = corpus
    good = paths[1].read_bytes()
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(good[: len(good) // 2] + b"\x00garbage" * 50)
    out = tmp_path / "o"
    with pytest.raises(cnfmce.CorpusError, match="bad.jsonl.gz"):
        cnfmce.tokenize_corpus(tok16, [paths[0], bad], out, format="megatron", shard_size="50KB")
    m = read_manifest(out)
    assert not m["complete"]
    listed = {f for s in m["shards"] for f in s["files"]} | {"manifest.json"}
    assert set(os.listdir(out)) == listed  # complete shards only, no temporary file
    assert read_docs(out, "megatron") == expected(tok16, docs[:m["documents"]], eos=EOS16)


def test_unwritable_output(tok16, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(OSError, match="cannot create the output directory|not a directory"):
        cnfmce.tokenize_corpus(tok16, ["a"], f / "sub", format="npy")
    with pytest.raises(NotADirectoryError):
        cnfmce.tokenize_corpus(tok16, ["a"], f, format="npy")
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            with pytest.raises(PermissionError, match="cannot write"):
                cnfmce.tokenize_corpus(tok16, ["a"], ro, format="npy")
        finally:
            ro.chmod(0o700)


def test_vocabulary_too_large_for_the_format(tok32, tmp_path):
    with pytest.raises(ShardsError, match="too many for uint16"):
        cnfmce.tokenize_corpus(tok32, ["a"], tmp_path / "o", format="llmc", dtype="uint16")
    with pytest.raises(ShardsError, match="int32"):
        cnfmce.tokenize_corpus(small_tok(2**31), ["a"], tmp_path / "o", format="megatron", eos=2**31)
    assert not (tmp_path / "o").exists()


def test_too_many_shards_stops_with_complete_ones(tok16, tmp_path, monkeypatch):
    """Shard names have six digits (sorting them gives document order): past the limit the run
    stops with an error instead of writing names that sort out of order."""
    import cnfmce.shards as shards
    monkeypatch.setattr(shards, "_MAX_SHARDS", 3)
    docs = ["the cat sat"] * 10
    out = tmp_path / "o"
    with pytest.raises(ShardsError, match="more than 3 shards"):
        cnfmce.tokenize_corpus(tok16, docs, out, format="npy", shard_size=8)
    m = read_manifest(out)
    assert [s["name"] for s in m["shards"]] == ["shard_000000", "shard_000001", "shard_000002"]
    assert not m["complete"]
    assert set(os.listdir(out)) == {f for s in m["shards"] for f in s["files"]} | {"manifest.json"}


def test_second_run_into_the_same_outdir_is_refused(tok16, tmp_path):
    """While a run holds OUTDIR (here: before its first shard, when its manifest lists none),
    another run into it fails at once and leaves the first one's files alone."""
    import fcntl
    out = tmp_path / "o"
    out.mkdir()
    tmp = out / ".shard_000000.bin.tmp"  # the running one's shard in progress
    tmp.write_bytes(b"x")
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for resume in (False, True):
            with pytest.raises(ShardsError, match="another run"):
                cnfmce.tokenize_corpus(tok16, ["a b"], out, format="llmc", resume=resume)
        assert os.listdir(out) == [tmp.name]
    finally:
        os.close(fd)
    cnfmce.tokenize_corpus(tok16, ["a b"], out, format="llmc")  # the lock is gone with its holder
    cnfmce.tokenize_corpus(tok16, ["a b"], out, format="llmc", resume=True)  # ours is released too
    assert sorted(os.listdir(out)) == ["manifest.json", "shard_000000.bin"]


def test_bad_arguments(tok16, tmp_path):
    with pytest.raises(ValueError, match="format"):
        cnfmce.tokenize_corpus(tok16, ["a"], tmp_path / "o", format="bin")
    with pytest.raises(ValueError, match="not a size"):
        cnfmce.tokenize_corpus(tok16, ["a"], tmp_path / "o", format="npy", shard_size="big")
    with pytest.raises(TypeError, match="document 1"):
        cnfmce.tokenize_corpus(tok16, ["a", b"b"], tmp_path / "o", format="npy")
    for bad in ("inf", "1e400GB", "nan"):
        with pytest.raises(ValueError, match="not a size"):
            parse_size(bad)
    assert parse_size("1GB") == 10**9 and parse_size("256MiB") == 256 * 2**20 and parse_size(5) == 5


# --- command line ---------------------------------------------------------------------------------

def test_cli_tokenize(corpus, tmp_path, capsys):
    paths, docs = corpus
    tokfile = tmp_path / "tok.json"
    small_tok().save(tokfile)
    out = tmp_path / "o"
    rc = cli_main(["tokenize", "-t", os.fspath(tokfile), "-o", os.fspath(out), "--format", "megatron",
                   "--eos", EOT, "--bos", "1", "--shard-size", "1MB", "--threads", "2",
                   *map(os.fspath, paths)])
    assert rc == 0
    err = capsys.readouterr().err
    assert f"tokenized {len(docs)} documents" in err and "megatron shard" in err and "MB/s" in err
    assert read_docs(out, "megatron") == expected(small_tok(), docs, eos=EOS16, bos=1)
    small_tok(70_000).save(tmp_path / "tok32.json")
    rc = cli_main(["tokenize", "-t", os.fspath(tmp_path / "tok32.json"), "-o", os.fspath(tmp_path / "o2"),
                   "--format", "llmc", "--dtype", "uint16", "--eos", "70000", os.fspath(paths[0])])
    assert rc == 1 and "too many for uint16" in capsys.readouterr().err


def test_progress_bar_follows_the_written_documents(tok16, tmp_path, monkeypatch):
    """The bar shows the input behind the documents written, not the reader's lookahead (a few
    batches: with it the bar reached 100 % and its ETA 0 while documents were still encoding)."""
    import time
    import cnfmce.shards as shards
    doc = "the cat sat on a mat. " * 500  # 11 KB
    f = tmp_path / "big.jsonl"
    line = (json.dumps({"text": doc}) + "\n").encode()
    n = 550  # 6 MB
    f.write_bytes(line * n)
    seen = []
    show = shards._Pipeline._show

    def recording_show(self):
        show(self)
        seen.append((self.bar.pos, self.docs_done))
    add = shards._Shard.add

    def slow_add(self, *a):  # a slow disk: the reader runs ahead as far as the pipeline lets it
        time.sleep(0.05)
        add(self, *a)
    closed = []
    close = shards._Bar.close

    def recording_close(self):
        closed.append(self.pos)
        close(self)
    monkeypatch.setattr(shards._Bar, "close", recording_close)
    monkeypatch.setattr(shards._Pipeline, "_show", recording_show)
    monkeypatch.setattr(shards._Shard, "add", slow_add)
    cnfmce.tokenize_corpus(tok16, [f], tmp_path / "o", format="npy", batch_chars=750_000,
                           progress=True)
    # the reader's position (reported every MB, its buffer 1 MB ahead) may lead the written
    # documents by about 1 MB, not by the batches waiting to be encoded (about 3 MB here)
    lead = max(pos - docs * len(line) for pos, docs in seen)
    assert lead <= 1.25 * 2**20, lead / 2**20
    assert closed == [f.stat().st_size]  # and it ends at 100 %


def test_tokenizer_hash(tok16, tmp_path):
    from cnfmce.shards import tokenizer_sha256
    tok16.save(tmp_path / "t.json.gz")
    again = cnfmce.Tokenizer.load(tmp_path / "t.json.gz")
    assert tokenizer_sha256(again) == tokenizer_sha256(tok16)
    assert tokenizer_sha256(tok16.with_options(algorithm="fmm")) != tokenizer_sha256(tok16)
    assert tokenizer_sha256(small_tok(70_000)) != tokenizer_sha256(tok16)
    other = cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)] + WORDS[::-1],
                                         special_tokens={EOT: EOS16})
    assert tokenizer_sha256(other) != tokenizer_sha256(tok16)  # same tokens, other ids
