"""The command line end to end (SPEC section 5): count, train, train --counts, encode, demo, and
Ctrl-C during training."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import cnfmce

from conftest import ctrl_c_as_in_a_terminal, fixture_path
from train_helpers import SENTENCES, read_shared_docs, shared_corpus

M = 3000       # raw vocabulary size
N = 700        # vocabulary size


def console_script():
    exe = shutil.which("cnfmce")
    return [exe] if exe else None


def run(args, cwd, cmd=None, env=None, input=None, timeout=180):
    cmd = cmd or console_script() or [sys.executable, "-m", "cnfmce.cli"]
    return subprocess.run([*cmd, *map(str, args)], cwd=cwd, env=env, input=input,
                          capture_output=True, timeout=timeout)


def ok(r):
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    return r


def tokens(tok):
    return [tok.id_to_token(i) for i in range(tok.vocab_size)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Inputs in three formats: a .jsonl, a .jsonl.gz and a few .txt files (~350 KB)."""
    d = tmp_path_factory.mktemp("cli")
    en = read_shared_docs("en", max_bytes=250_000, max_doc_bytes=25_000)
    multi = read_shared_docs("multi", max_bytes=80_000, max_doc_bytes=8_000)
    (d / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in en),
                               encoding="utf-8")
    (d / "b.jsonl.gz").write_bytes(gzip.compress("".join(
        json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in multi).encode("utf-8")))
    txt = []
    for k, t in enumerate(SENTENCES[:6]):
        p = d / f"s{k}.txt"
        p.write_bytes(t.encode("utf-8"))
        txt.append(p.name)
    inputs = ["a.jsonl", "b.jsonl.gz", *txt]
    docs = en + multi + list(SENTENCES[:6])
    return d, inputs, docs


@pytest.fixture(scope="module")
def trained(corpus):
    """Runs the three main commands once: count, train, train --counts (and train with M)."""
    d, inputs, _ = corpus
    ok(run(["count", "-o", "counts.tsv.gz", "--raw-vocab-size", M, "--quiet", *inputs], d))
    ok(run(["train", "-o", "tok.json", "--vocab-size", N, "--quiet", *inputs], d))
    ok(run(["train", "-o", "tok_m.json", "--vocab-size", N, "--raw-vocab-size", M, "--quiet",
            *inputs], d))
    ok(run(["train", "-o", "tok2.json", "--vocab-size", N, "--counts", "counts.tsv.gz", "--quiet",
            *inputs], d))
    return d


def test_console_script_is_installed():
    if console_script() is None:
        pytest.skip("the cnfmce console script is not on PATH")
    r = ok(run(["--version"], cwd="."))
    assert cnfmce.__version__ in r.stdout.decode()


def test_count_file_equals_api(corpus, trained):
    d, inputs, _ = corpus
    raw = (d / "counts.tsv.gz").read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw).startswith(b"# cnfmce counts v1\n")
    got = cnfmce.load_counts(d / "counts.tsv.gz")
    want = cnfmce.count([d / p for p in inputs], raw_vocab_size=M, progress=False)
    assert len(got) == M
    assert list(got.items()) == list(want.items())


def test_train_file_equals_api(corpus, trained):
    d, inputs, _ = corpus
    tok = cnfmce.Tokenizer.load(d / "tok.json")
    assert tok.vocab_size == N
    want = cnfmce.train([d / p for p in inputs], vocab_size=N, progress=False)
    assert tokens(tok) == tokens(want)
    # a readable JSON file
    json.loads((d / "tok.json").read_bytes())


def test_train_with_counts_equals_direct_train(corpus, trained):
    d, inputs, _ = corpus
    direct = cnfmce.Tokenizer.load(d / "tok_m.json")
    via_counts = cnfmce.Tokenizer.load(d / "tok2.json")
    assert direct.vocab_size == via_counts.vocab_size == N
    assert tokens(via_counts) == tokens(direct)
    # and with the API
    api = cnfmce.train_from_counts(d / "counts.tsv.gz", [d / p for p in inputs], vocab_size=N,
                                   progress=False)
    assert tokens(api) == tokens(direct)


def test_encode(corpus, trained):
    d, inputs, docs = corpus
    tok = cnfmce.Tokenizer.load(d / "tok.json")
    r = ok(run(["encode", "-t", "tok.json", *inputs], d))
    lines = r.stdout.decode().splitlines()
    assert len(lines) == len(docs)
    for line, doc in zip(lines, docs):
        assert json.loads(line) == tok.encode(doc)
    # a single input
    r = ok(run(["encode", "-t", "tok.json", "s0.txt"], d))
    assert [json.loads(x) for x in r.stdout.decode().splitlines()] == [tok.encode(SENTENCES[0])]
    # stdin: the bytes as one document
    data = "héllo wörld, 漢字\n".encode() + b"\xff raw"
    r = ok(run(["encode", "-t", "tok.json"], d, input=data))
    assert json.loads(r.stdout) == tok.encode_bytes(data)
    r = ok(run(["encode", "-t", "tok.json", "--jsonl"], d,
               input=b'{"text": "one doc"}\n\n{"text": "two docs"}\n'))
    assert [json.loads(x) for x in r.stdout.decode().splitlines()] == \
        [tok.encode("one doc"), tok.encode("two docs")]


def test_quiet_and_progress_output(corpus, tmp_path):
    d, inputs, _ = corpus
    paths = [d / p for p in inputs]
    r = ok(run(["count", "-o", tmp_path / "c.tsv", "--raw-vocab-size", 500, "--quiet", *paths],
               tmp_path))
    assert r.stderr == b"" and r.stdout == b""
    r = ok(run(["count", "-o", tmp_path / "c2.tsv", "--raw-vocab-size", 500, *paths], tmp_path))
    err = r.stderr.decode()
    assert "wrote" in err and "round 1" in err
    assert r.stdout == b""
    assert cnfmce.load_counts(tmp_path / "c.tsv") == cnfmce.load_counts(tmp_path / "c2.tsv")
    r = ok(run(["train", "-o", tmp_path / "t.json", "--vocab-size", 300, "--raw-vocab-size", 500,
                *paths], tmp_path))
    assert "filter" in r.stderr.decode() and "wrote" in r.stderr.decode()


def test_threads_option(corpus, trained, tmp_path):
    d, inputs, _ = corpus
    paths = [d / p for p in inputs]
    ok(run(["train", "-o", tmp_path / "t1.json", "--vocab-size", N, "--raw-vocab-size", M,
            "--threads", 1, "--quiet", *paths], tmp_path))
    assert tokens(cnfmce.Tokenizer.load(tmp_path / "t1.json")) == \
        tokens(cnfmce.Tokenizer.load(d / "tok_m.json"))
    ok(run(["count", "-o", tmp_path / "c1.tsv.gz", "--raw-vocab-size", M, "--threads", 1,
            "--quiet", *paths], tmp_path))
    assert list(cnfmce.load_counts(tmp_path / "c1.tsv.gz").items()) == \
        list(cnfmce.load_counts(d / "counts.tsv.gz").items())


def test_python_m_cli(corpus, trained, tmp_path):
    d, inputs, _ = corpus
    cmd = [sys.executable, "-m", "cnfmce.cli"]
    ok(run(["train", "-o", tmp_path / "t.json", "--vocab-size", N, "--counts",
            d / "counts.tsv.gz", "--quiet", *[d / p for p in inputs]], tmp_path, cmd=cmd))
    assert tokens(cnfmce.Tokenizer.load(tmp_path / "t.json")) == \
        tokens(cnfmce.Tokenizer.load(d / "tok2.json"))
    r = run([], tmp_path, cmd=cmd)
    assert r.returncode == 2


def test_rounds_and_special_tokens_options(corpus, tmp_path):
    d, inputs, _ = corpus
    paths = [d / p for p in inputs]
    ok(run(["train", "-o", tmp_path / "t.json.gz", "--vocab-size", 400, "--raw-vocab-size", 2000,
            "--rounds", "1-8:0,9-16:5", "--special-token", "<|a|>", "--special-token", "<|b|>",
            "--quiet", *paths], tmp_path))
    tok = cnfmce.Tokenizer.load(tmp_path / "t.json.gz")
    want = cnfmce.train(paths, vocab_size=400, raw_vocab_size=2000, rounds=((1, 8, 0), (9, 16, 5)),
                        special_tokens=["<|a|>", "<|b|>"], progress=False)
    assert tokens(tok)[:398] == tokens(want)[:398]
    assert tok.special_tokens == {"<|a|>": 398, "<|b|>": 399}
    assert max(len(t) for t in tokens(tok)[:398]) <= 16


def test_cli_rejects_raw_vocab_size_zero(tmp_path):
    (tmp_path / "s.jsonl").write_text('{"text": "hello world hello"}\n')
    r = run(["count", "-o", "c.tsv", "--raw-vocab-size", 0, "--quiet", "s.jsonl"], tmp_path)
    assert r.returncode != 0 and not (tmp_path / "c.tsv").exists()


def test_demo():
    r = run(["demo", "--quiet"], cwd=".", timeout=300)
    ok(r)
    out = r.stdout.decode()
    assert "chars/token" in out
    rows = [line for line in out.splitlines() if line.startswith("|") and "cnfmce" in line]
    assert rows, out
    cpt = float(rows[0].rstrip("| ").split("|")[-1])
    assert 2.0 < cpt < 10.0, rows[0]


@pytest.mark.parametrize("command", ["train", "count", "extend"])
def test_keyboard_interrupt(tmp_path, command):
    """SIGINT during training (or counting, or extending a vocabulary): a prompt non-zero exit,
    no output, no temporary directory."""
    big = tmp_path / "big.jsonl"
    docs = [json.loads(line)["text"] for c in ("en", "code", "multi", "zh")
            for line in gzip.open(shared_corpus(c), "rt", encoding="utf-8")]
    n = k = 0
    with open(big, "w", encoding="utf-8") as o:  # the fixture corpora, numbered copies, > 5 MB
        while n <= 5_000_000:
            line = json.dumps({"text": f"copy {k // len(docs)}\n" + docs[k % len(docs)]}, ensure_ascii=False) + "\n"
            o.write(line)
            n += len(line.encode("utf-8"))
            k += 1
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / ("tok.json" if command == "train" else "counts.tsv")
    base = [str(fixture_path("vocabs", "bpe8k.tiktoken"))] if command == "extend" else []
    size = {"train": ["--vocab-size", 1000], "extend": ["--new-tokens", 500]}.get(command, [])
    args = [command, *base, "-o", out] + size + ["--memory-limit", "1", big]
    env = dict(os.environ, TMPDIR=str(tmp))
    p = subprocess.Popen([sys.executable, "-m", "cnfmce.cli", *map(str, args)], env=env,
                         cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=ctrl_c_as_in_a_terminal)
    try:
        t0 = time.monotonic()
        while not any(x.name.startswith("cnfmce-") for x in tmp.iterdir()):
            assert time.monotonic() - t0 < 120 and p.poll() is None, "did not start"
            time.sleep(0.02)
        time.sleep(1.0)
        assert p.poll() is None, "finished before the interrupt"
        t1 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
        elapsed = time.monotonic() - t1
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0
    # Ctrl-C is honoured between 4 MB batches (the Rust core does not poll for signals): a few
    # seconds on an idle machine; the bound is generous because a 2-core machine running other
    # test suites (load 15+) slows the child tenfold (a run that ignored the signal would end
    # with status 0 and no "interrupted" message, checked below)
    assert elapsed < 45.0, elapsed
    assert b"Traceback" not in err
    assert b"interrupted" in err
    assert not out.exists()
    assert list(tmp.iterdir()) == []
    assert sorted(x.name for x in tmp_path.iterdir()) == ["big.jsonl", "tmp"]
