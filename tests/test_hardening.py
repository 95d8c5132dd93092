"""Regression tests of issue 14 (hardening): one block per item, each failing before its fix.

1. inputs: paths vs documents (the CLI's inputs are always paths; one rule for the Python API)
2. fork: encode_batch / training in a forked child (see test_fork.py)
3. absurd num_threads: the process's thread count stays small
4. a corrupt .gz corpus: one line naming the file and the line
5. the README's test command: the `test` extra covers every test import; .ci/run runs it verbatim
6. disallowed_special, against tiktoken on o200k_base
7. files: deep nesting, huge λ, gzip bombs, bad added_tokens, stdin JSON lines
8. SIGTERM removes the spill files; stale directories of killed runs are removed
9. early validation, error locations, one tokenizer-file detection, broken pipes, warnings
10. small ones: messages, numpy not imported, numpy λ, -0.0, negative option values
"""

from __future__ import annotations

import ast
import base64
import gzip
import io
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from pathlib import Path

import pytest

import cnfmce
from cnfmce import formats
from cnfmce.errors import CorpusError, TokenizerFileError
from cnfmce.formats import bytes_to_unicode

from conftest import REPO, fixture_path, shared_path

BYTES = [bytes([b]) for b in range(256)]
T = cnfmce.Tokenizer
ENV = dict(os.environ, PYTHONWARNINGS="default")


def cli(*args, cwd=None, env=None, input=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "cnfmce.cli", *map(str, args)], cwd=cwd,
                          env=env or ENV, input=input, capture_output=True, timeout=timeout)


def one_line_error(r, *needles):
    """A failed run whose stderr is a single line ``cnfmce: error: ...`` containing ``needles``."""
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode != 0, err
    assert "Traceback" not in err, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("cnfmce: error:"), err
    for n in needles:
        assert str(n) in lines[0], (n, err)
    return lines[0]


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def native_doc(extra=(), **kw):
    doc = {"format": "cnfmce", "version": 1, "options": {}, "tokens": [b64(t) for t in BYTES + list(extra)]}
    doc.update(kw)
    return doc


def hf_doc(extra=(), added=()):
    b2u = bytes_to_unicode()
    vocab = {"".join(b2u[x] for x in t): i for i, t in enumerate(BYTES + list(extra))}
    return {"model": {"type": "BPE", "vocab": vocab, "merges": []}, "added_tokens": list(added)}


def jsonl(docs) -> str:
    return "".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs)


SENT = ["the cat sat on the mat", "a dog ran in the park", "the cat and the dog", "in the park"]


# --- 1. paths or documents ---------------------------------------------------------------------------

@pytest.fixture
def files(tmp_path):
    (tmp_path / "good.jsonl").write_text(jsonl(SENT * 20))
    (tmp_path / "README").write_text("a readme\n")
    (tmp_path / "shard_00000").write_text(jsonl(SENT))
    (tmp_path / "table.csv").write_text("text\nhello\n")
    (tmp_path / "data.json").write_text(json.dumps({"text": "hello"}))
    (tmp_path / "adir").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "tmp").mkdir()
    return tmp_path


CLI_BAD_INPUTS = [
    (["/no/such/file"], "/no/such/file"),
    (["missing.jsonl"], "missing.jsonl"),
    (["adir"], "directory"),
    (["table.csv"], "table.csv"),
    (["data.json"], "data.json"),
    (["shard_00000"], "shard_00000"),
    (["good.jsonl", "README"], "README"),
    (["good.jsonl", "adir"], "adir"),
]


@pytest.mark.parametrize("command", ["train", "count"])
@pytest.mark.parametrize("inputs,needle", CLI_BAD_INPUTS, ids=[" ".join(a) for a, _ in CLI_BAD_INPUTS])
def test_cli_inputs_are_always_paths(files, command, inputs, needle):
    out = files / "out" / ("tok.json" if command == "train" else "counts.tsv")
    args = [command, "-o", out, "--quiet"] + (["--vocab-size", 300] if command == "train" else [])
    env = dict(ENV, TMPDIR=str(files / "tmp"))
    r = cli(*args, *inputs, cwd=files, env=env)
    one_line_error(r, needle)
    assert os.listdir(files / "out") == []
    assert os.listdir(files / "tmp") == []


def test_cli_encode_inputs_are_paths(files, tmp_path):
    T.from_tokens(BYTES).save(files / "t.json")
    for inputs, needle in CLI_BAD_INPUTS:
        r = cli("encode", "-t", "t.json", *inputs, cwd=files)
        one_line_error(r, needle)
        assert r.stdout == b""


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
def test_cli_unreadable_input(files):
    p = files / "secret.jsonl"
    p.write_text(jsonl(SENT))
    p.chmod(0)
    r = cli("train", "-o", files / "out" / "t.json", "--vocab-size", 300, "secret.jsonl", cwd=files)
    one_line_error(r, "secret.jsonl")
    assert os.listdir(files / "out") == []


def test_api_str_and_pathlib_paths(files, monkeypatch):
    monkeypatch.chdir(files)
    ref = cnfmce.train(SENT * 20, vocab_size=300, progress=False)
    for inputs in (["good.jsonl"], [files / "good.jsonl"], "good.jsonl", files / "good.jsonl",
                   (str(files / "good.jsonl"),)):
        tok = cnfmce.train(inputs, vocab_size=300, progress=False)
        assert tok.get_vocab() == ref.get_vocab(), inputs
        assert cnfmce.count(inputs, progress=False) == cnfmce.count(SENT * 20, progress=False)


def test_api_documents_stay_documents(files, monkeypatch):
    monkeypatch.chdir(files)
    docs = ["Open the file notes.txt", "then read data.jsonl", "and/or", "TCP/IP", ".", "..",
            "ordinary document text"]
    ref = cnfmce.count(cnfmce.Documents(docs), progress=False)
    assert cnfmce.count(docs, progress=False) == ref
    assert cnfmce.count(iter(docs), progress=False) == ref
    assert cnfmce.count((d for d in docs), progress=False) == ref
    assert ref.info["documents"] == len(docs)


@pytest.mark.parametrize("inputs,exc,needle", [
    (["good.jsonl", "some document text"], ValueError, "mix"),
    (["some document text", "good.jsonl"], ValueError, "mix"),
    (["good.jsonl", "README"], CorpusError, "README"),
    (["README", "document"], ValueError, "mix"),
    (["a.txt", "b.txt"], FileNotFoundError, "a.txt"),
    (["part-0.jsonl.gz", "part-1.parquet"], FileNotFoundError, "part-0.jsonl.gz"),
    (["/no/such/file"], FileNotFoundError, "/no/such/file"),
    (["./missing"], FileNotFoundError, "./missing"),
    (["adir"], CorpusError, "directory"),
    (["adir/"], CorpusError, "directory"),
    ([Path("adir")], CorpusError, "directory"),
    (["shard_00000"], CorpusError, "shard_00000"),
    (["table.csv"], CorpusError, "table.csv"),
    ("missing.jsonl", FileNotFoundError, "missing.jsonl"),
    ("a document, not a path", TypeError, "single"),
    (iter([Path("good.jsonl")]), TypeError, "PosixPath"),
    ([b"bytes"], TypeError, "bytes"),
])
def test_api_rule_errors(files, monkeypatch, inputs, exc, needle):
    """A list of file names never silently becomes a corpus; a name that looks like a path but
    does not exist is an error, before any work."""
    monkeypatch.chdir(files)
    for fn in (lambda: cnfmce.count(inputs, progress=False),
               lambda: cnfmce.train(inputs, vocab_size=300, progress=False),
               lambda: cnfmce.train_from_counts({b"ab": 3}, inputs, vocab_size=300, progress=False)):
        with pytest.raises(exc, match=re.escape(needle)):
            fn()
        if not isinstance(inputs, (list, tuple, str)):
            break  # a one-shot iterator is consumed


def test_api_documents_wrapper_forces_documents(files, monkeypatch):
    monkeypatch.chdir(files)
    names = ["a.txt", "b.txt", "good.jsonl", "README"]
    c = cnfmce.count(cnfmce.Documents(names), progress=False)
    assert c.info["documents"] == 4
    assert c[b"."] == 3  # the names' text, not the files' contents
    assert b"cat" not in c
    tok = cnfmce.train(cnfmce.Documents(names), vocab_size=260, progress=False)
    assert tok.vocab_size <= 260
    with pytest.raises(TypeError):
        cnfmce.Documents("one string")
    with pytest.raises(TypeError):
        cnfmce.Documents(5)


def test_api_rule_is_documented():
    for text in (cnfmce.corpus.__doc__, cnfmce.train.__doc__, cnfmce.count.__doc__,
                 (REPO / "docs" / "training.md").read_text(encoding="utf-8")):
        assert "Documents" in text and "FileNotFoundError" in text or "cnfmce.corpus" in text
    guide = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    assert "cnfmce.Documents" in guide and "Paths or documents" in guide


# --- 3. absurd thread counts ---------------------------------------------------------------------------

_THREAD_PROBE = r"""
import os, sys, threading, time, cnfmce
peak = [0]
stop = threading.Event()
def watch():
    while not stop.is_set():
        peak[0] = max(peak[0], len(os.listdir("/proc/self/task")))
        time.sleep(0.002)
w = threading.Thread(target=watch, daemon=True)
w.start()
tok = cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)] + [b"ab", b"abc"])
texts = ["abc " * 20000] * 10
ref = [tok.encode(t) for t in texts]
for _ in range(3):
    assert tok.encode_batch(texts, num_threads=10000) == ref
    assert tok.encode_bytes_batch([t.encode() for t in texts], num_threads=10**30) == ref
assert tok.encode_batch(["x"], num_threads=10000) == [tok.encode("x")]
docs = ["the cat sat on the mat %d" % i for i in range(3000)]
a = cnfmce.train(docs, vocab_size=300, num_threads=10000, progress=False)
b = cnfmce.train(docs, vocab_size=300, num_threads=1, progress=False)
assert a.get_vocab() == b.get_vocab()
c = cnfmce.count(docs, num_threads=10**30, progress=False)
stop.set(); w.join()
print(peak[0])
"""


def test_absurd_num_threads_are_capped():
    r = subprocess.run([sys.executable, "-c", _THREAD_PROBE], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    peak = int(r.stdout.split()[-1])
    from cnfmce.tokenizer import max_threads
    # main + watcher + the global pool (cores) + at most max_threads() workers per pool
    bound = 2 + (os.cpu_count() or 1) + 2 * max_threads() + 4
    assert peak <= min(bound, 100), (peak, bound)


@pytest.mark.parametrize("n", [0, -1, True, 2.0, "4"])
def test_bad_num_threads_everywhere(n):
    tok = T.from_tokens(BYTES)
    with pytest.raises(ValueError, match="num_threads"):
        tok.encode_batch(["a"], num_threads=n)
    with pytest.raises(ValueError, match="num_threads"):
        tok.encode_bytes_batch([b"a"], num_threads=n)
    with pytest.raises(ValueError, match="num_threads"):
        cnfmce.train(["a b"], vocab_size=300, num_threads=n, progress=False)


def test_cli_threads_must_be_positive(tmp_path):
    (tmp_path / "a.jsonl").write_text(jsonl(SENT))
    for bad in ("0", "-2", "x"):
        r = cli("train", "-o", tmp_path / "t.json", "--vocab-size", 300, "--threads", bad, "a.jsonl",
                cwd=tmp_path)
        assert r.returncode != 0 and b"--threads" in r.stderr and b"Traceback" not in r.stderr
        assert not (tmp_path / "t.json").exists()


# --- 4. a corrupt .gz corpus -------------------------------------------------------------------------

def _corrupt_midstream(raw: bytes) -> bytes:
    """gzip data that is valid up to the middle, then a deflate block of an invalid type:
    zlib fails mid-stream with 'invalid block type' (zlib.error, not an OSError)."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    half = len(raw) // 2
    return c.compress(raw[:half]) + c.flush(zlib.Z_FULL_FLUSH) + b"\x07" + bytes(range(200))


def _flipped(raw: bytes, seed: int) -> bytes:
    import random
    rng = random.Random(seed)
    data = bytearray(gzip.compress(raw))
    mid = len(data) // 2
    for k in range(mid, mid + rng.randrange(1, 4096)):
        data[k] = rng.randrange(256)
    return bytes(data)


def test_corrupt_gzip_corpus_mid_stream(tmp_path):
    raw = jsonl(f"document {k} with some words" for k in range(60000)).encode()
    (tmp_path / "c.jsonl.gz").write_bytes(_corrupt_midstream(raw))
    with pytest.raises(CorpusError, match=r"c\.jsonl\.gz.*line \d+"):
        cnfmce.count([tmp_path / "c.jsonl.gz"], progress=False)
    (tmp_path / "tmp").mkdir()
    env = dict(ENV, TMPDIR=str(tmp_path / "tmp"))
    for args in (["train", "-o", "t.json", "--vocab-size", 300], ["count", "-o", "c.tsv"]):
        r = cli(*args, "--quiet", "c.jsonl.gz", cwd=tmp_path, env=env)
        line = one_line_error(r, "c.jsonl.gz", "line")
        assert re.search(r"line \d{3,}", line), line  # the line reached, well into the file
        assert not (tmp_path / "t.json").exists() and not (tmp_path / "c.tsv").exists()
        assert os.listdir(tmp_path / "tmp") == []
    # the same for a .txt.gz document and random damage: always a CorpusError naming the file
    (tmp_path / "d.txt.gz").write_bytes(_corrupt_midstream(("words " * 50000).encode()))
    with pytest.raises(CorpusError, match=r"d\.txt\.gz"):
        cnfmce.count([tmp_path / "d.txt.gz"], progress=False)
    raw = raw[:len(raw) // 4]
    for seed in range(6):
        (tmp_path / "f.jsonl.gz").write_bytes(_flipped(raw, seed))
        with pytest.raises(CorpusError, match=r"f\.jsonl\.gz"):
            cnfmce.count([tmp_path / "f.jsonl.gz"], progress=False)


# --- 5. the README's test command ----------------------------------------------------------------------

README_TEST_COMMAND = 'pip install ".[test]" && cargo test -q && python -m pytest -q tests'


def _readme_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_readme_second_command_installs_what_the_tests_need():
    cmds = _readme_commands()
    assert cmds[0] == "pip install . && cnfmce demo"
    assert cmds[1] == README_TEST_COMMAND
    # the README says that pip compiles the Rust core, how long it took, and how to watch it
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "pip install -v ." in readme and "minutes" in readme


def test_ci_runs_the_readme_test_command_verbatim():
    lines = [x.strip() for x in (REPO / ".ci" / "run").read_text().splitlines()]
    code = [x for x in lines if x and not x.startswith("#")]
    # the README's command, then `|| exit 1`: under set -e a failure before the last `&&` of a
    # list does not stop the script, so the line must exit itself
    assert code[-2] == _readme_commands()[1] + " || exit 1"
    # then the extra tier (shared data and slow variants), the last thing it does (its status is
    # the script's)
    assert code[-1] == 'python -m pytest -q -m "shared or slow" tests'
    assert "set -euo pipefail" in code
    assert any("chromium" in x and "apt-get" in x for x in code)


def _third_party_imports():
    """Top-level modules imported anywhere in tests/ (at any depth) that are neither the
    standard library, nor cnfmce, nor the tests' own helper modules."""
    local = {p.stem for d in ("tests", "benches", "experiments") for p in (REPO / d).glob("*.py")}
    mods = set()
    for p in (REPO / "tests").glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                mods.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                mods.add(node.module.split(".")[0])
    return {m for m in mods if m not in sys.stdlib_module_names and m not in local
            and m not in ("cnfmce", "conftest")}


def test_script_folders_shadow_no_standard_module():
    # `python benches/X.py` puts benches/ first on sys.path: a script there named like a standard
    # module (benches/tokenize.py did) replaces it for everything, e.g. linecache in tracebacks.
    shadowing = sorted(f"{d}/{p.name}" for d in ("benches", "experiments", "tests")
                       for p in (REPO / d).glob("*.py") if p.stem in sys.stdlib_module_names)
    assert not shadowing, shadowing


# import name -> distribution name where they differ
_DIST = {"tiktoken_ext": "tiktoken", "yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn"}


def test_test_extra_covers_every_test_import():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + project["optional-dependencies"]["test"]
    names = {re.split(r"[\[<>=!~; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}
    missing = sorted(m for m in _third_party_imports()
                     if _DIST.get(m, m).lower().replace("_", "-") not in names)
    assert not missing, f"imported by tests but not in the test extra: {missing}"
    for extra in ("hf", "ray", "eval", "formats"):
        assert extra in project["optional-dependencies"]
    # jinja2: transformers needs it for the chat-template tests (not imported by a test itself)
    for dep in ("transformers", "jinja2", "datasets", "ray", "pyarrow", "zstandard", "tiktoken",
                "tokenizers", "sentencepiece", "matplotlib", "pytest", "hypothesis", "regex"):
        assert dep in names, dep
    assert "numpy" in {re.split(r"[<>=]", r)[0] for r in project["dependencies"]}


# --- 6. disallowed_special, as tiktoken does it --------------------------------------------------------

@pytest.fixture(scope="module")
def o200k_pair():
    """tiktoken's o200k_base (its regex and its own special tokens, ranks from the shared file)
    and cnfmce over the same ranks and special tokens."""
    pytest.importorskip("tiktoken")
    from cnfmce.adapters import _tiktoken_encoding
    path = shared_path("vocabs", "o200k_base.tiktoken")
    enc = _tiktoken_encoding("o200k_base", path)
    assert set(enc.special_tokens_set) >= {"<|endoftext|>", "<|endofprompt|>"}
    specials = {s: enc.encode_single_token(s) for s in enc.special_tokens_set}
    return enc, T.from_tiktoken(path, special_tokens=specials)


DISALLOWED_TEXTS = [
    "plain text with nothing special",
    "ends with <|endoftext|>",
    "<|endofprompt|> at the start",
    "both <|endoftext|> and <|endofprompt|>",
    "near misses <|endoftext| <endoftext|> <|endoftext |>",
    "nested <|endo<|endoftext|>ftext|>",
    "中文<|endoftext|>中文",
    "",
]
DISALLOWED_ARGS = [
    dict(disallowed_special="all"),
    dict(disallowed_special=()),
    dict(disallowed_special=set()),
    dict(disallowed_special={"<|endoftext|>"}),
    dict(disallowed_special=frozenset({"<|endofprompt|>"})),
    dict(allowed_special="all", disallowed_special="all"),
    dict(allowed_special={"<|endoftext|>"}, disallowed_special="all"),
    dict(allowed_special={"<|endoftext|>"}),
    dict(allowed_special={"<|endoftext|>"}, disallowed_special={"<|endoftext|>"}),
    dict(allowed_special={"<|endoftext|>"}, disallowed_special=()),
    dict(allowed_special="all", disallowed_special=()),
]


def _specials_in(ids, specials):
    return [i for i in ids if i in specials]


@pytest.mark.parametrize("kw", DISALLOWED_ARGS, ids=[repr(k) for k in DISALLOWED_ARGS])
def test_disallowed_special_like_tiktoken(o200k_pair, kw):
    enc, tok = o200k_pair
    specials = set(tok.special_tokens.values())
    tk_kw = dict(kw)
    tk_kw.setdefault("allowed_special", set())
    tk_kw.setdefault("disallowed_special", ())  # our default is (), tiktoken's "all"
    for text in DISALLOWED_TEXTS:
        try:
            want = enc.encode(text, **tk_kw)
        except ValueError:
            want = None
        if want is None:
            with pytest.raises(ValueError, match="disallowed_special"):
                tok.encode(text, **kw)
            with pytest.raises(ValueError, match="disallowed_special"):
                tok.encode_batch(["fine", text], **kw)
            with pytest.raises(ValueError, match="disallowed_special"):
                tok.encode_bytes(text.encode(), **kw)
            continue
        got = tok.encode(text, **kw)
        assert _specials_in(got, specials) == _specials_in(want, specials), (text, kw)
        assert tok.decode(got) == enc.decode(want) == text
        assert tok.encode_batch([text, text], **kw) == [got, got]
        assert tok.encode_bytes(text.encode(), **kw) == got


def test_disallowed_special_defaults_and_errors(o200k_pair):
    enc, tok = o200k_pair
    text = "a<|endoftext|>b"
    # tiktoken's default raises; ours encodes special-token text as text (SPEC section 1)
    with pytest.raises(ValueError):
        enc.encode(text)
    assert tok.encode(text) == tok.encode(text, disallowed_special=()) == tok.encode_ordinary(text)
    assert 199999 not in tok.encode(text)
    for bad, exc in (("none", ValueError), (5, TypeError), ({5}, TypeError), ({""}, TypeError)):
        with pytest.raises(exc):
            tok.encode(text, disallowed_special=bad)
    # a disallowed string need not be a special token (as in tiktoken)
    assert enc.encode("x<|y|>", disallowed_special=()) and True
    with pytest.raises(ValueError, match="'<\\|y\\|>'"):
        tok.encode("x<|y|>", disallowed_special={"<|y|>"})
    guide = (REPO / "docs" / "encoding.md").read_text(encoding="utf-8")
    assert "disallowed_special" in guide


# --- 7. files: nesting, huge λ, bombs, bad fields ---------------------------------------------------------

DEEP = 100_000


def _deep(prefix: bytes, suffix: bytes = b"}") -> bytes:
    return prefix + b"[" * DEEP + b"]" * DEEP + suffix


def _deep_files(tmp_path):
    """One deeply nested file per loader (name, loader, bytes)."""
    return [
        ("deep.json", T.load, _deep(b'{"format": "cnfmce", "version": 1, "tokens": ')),
        ("deep-meta.json", T.load, json.dumps(native_doc()).encode()[:-1] + b', "metadata": ' + _deep(b"") ),
        ("tokenizer.json", T.from_hf, _deep(b'{"model": {"type": "BPE", "vocab": {}}, "added_tokens": ')),
        ("counts.tsv", cnfmce.load_counts, b"# cnfmce counts v1\n# " + _deep(b"", b"") + b"\nYWI=\t3\n"),
    ]


def test_deeply_nested_files(tmp_path):
    for name, loader, data in _deep_files(tmp_path):
        for suffix, blob in (("", data), (".gz", gzip.compress(data))):
            p = tmp_path / (name + suffix)
            p.write_bytes(blob)
            with pytest.raises(TokenizerFileError, match=re.escape(p.name) + ".*nested"):
                loader(p)
    # the command line: one line, no traceback
    (tmp_path / "deep.json").write_bytes(_deep_files(tmp_path)[0][2])
    r = cli("encode", "-t", "deep.json", cwd=tmp_path, input=b"x")
    one_line_error(r, "deep.json", "nested")
    (tmp_path / "c.jsonl").write_bytes(b'{"text": "ok"}\n{"text": ' + b"[" * DEEP + b"]" * DEEP + b"}\n")
    with pytest.raises(CorpusError, match=r"c\.jsonl:2.*nested"):
        cnfmce.count([tmp_path / "c.jsonl"], progress=False)



def test_every_json_loader_reports_the_same_three_failures(tmp_path):
    """Tokenizer files, counts headers and JSON-lines corpora share one JSON check: bad UTF-8,
    deep nesting and malformed JSON each raise the loader's own error type naming the place."""
    from cnfmce.errors import load_json
    for bad, needle in ((b'{"a": "\xff"}', "JSON is not valid UTF-8"), (b"[" * DEEP + b"]" * DEEP, "JSON nested too deeply"),
                        (b'{"a": ', "malformed JSON (Expecting value")):
        for error in (TokenizerFileError, CorpusError):
            with pytest.raises(error, match=re.escape("f.json:7: " + needle)):
                load_json(bad, "f.json:7", error)
    assert load_json(b'{"a": [1]}', "f", CorpusError) == {"a": [1]}
    (tmp_path / "v.json").write_bytes(b'{"format": "cnfmce", "tokens": ')
    with pytest.raises(TokenizerFileError, match=r"v\.json: malformed JSON"):
        T.load(tmp_path / "v.json")
    (tmp_path / "c.tsv").write_bytes(b"# cnfmce counts v1\n# {\"a\": \xff}\nYWI=\t3\n")
    with pytest.raises(TokenizerFileError, match=r"c\.tsv:2: "):
        cnfmce.load_counts(tmp_path / "c.tsv")
    (tmp_path / "c.jsonl").write_bytes(b'{"text": "ok"}\n{"text": "\xff"}\n')
    with pytest.raises(CorpusError, match=r"c\.jsonl:2: JSON is not valid UTF-8"):
        cnfmce.count([tmp_path / "c.jsonl"], progress=False)

HUGE = [10**400, -10**400, 2**1024, -(2**1024)]


@pytest.mark.parametrize("lam", HUGE, ids=["1e400", "-1e400", "2**1024", "-2**1024"])
def test_huge_penalty_is_a_value_error(tmp_path, lam):
    tok = T.from_tokens(BYTES)
    p = tmp_path / "v.tiktoken"
    p.write_text("".join(f"{b64(t)} {i}\n" for i, t in enumerate(BYTES)))
    h = tmp_path / "tokenizer.json"
    h.write_text(json.dumps(hf_doc()))
    tok.save(tmp_path / "t.json")
    for fn in (lambda: T.from_tokens(BYTES, boundary_penalty=lam),
               lambda: T.from_tiktoken(p, boundary_penalty=lam),
               lambda: T.from_hf(h, boundary_penalty=lam),
               lambda: T.load(tmp_path / "t.json", boundary_penalty=lam),
               lambda: tok.with_options(boundary_penalty=lam),
               lambda: cnfmce.train(["a b"], vocab_size=300, boundary_penalty=lam, progress=False),
               lambda: cnfmce.train_from_counts({b"ab": 2}, ["a b"], vocab_size=300,
                                                boundary_penalty=lam, progress=False)):
        with pytest.raises(ValueError, match="boundary_penalty"):
            fn()
    # in a file: the file is named, and the CLI says it in one line
    doc = json.dumps(native_doc()).replace('"options": {}', '"options": {"boundary_penalty": %d}' % lam)
    (tmp_path / "huge.json").write_text(doc)
    with pytest.raises(TokenizerFileError, match=r"huge\.json.*boundary_penalty"):
        T.load(tmp_path / "huge.json")
    r = cli("encode", "-t", "huge.json", cwd=tmp_path, input=b"x")
    one_line_error(r, "huge.json", "boundary_penalty")


_SPACES_MEMBER = gzip.compress(b" " * (1 << 20), compresslevel=9, mtime=0)


def _bomb(prefix: bytes, size: int = 160 << 20) -> bytes:
    """~160 KB of gzip that inflate to ``size`` bytes: ``prefix``, then members of 1 MiB of
    spaces (a multi-member gzip file reads as their concatenation)."""
    return gzip.compress(prefix, mtime=0) + _SPACES_MEMBER * (size >> 20)


@pytest.fixture(scope="module")
def bombs():
    return {
        "t.json.gz": (T.load, _bomb(b'{"format": "cnfmce", "version": 1, "tokens": [')),
        "h.json.gz": (T.from_hf, _bomb(b'{"model": {"type": "BPE", "vocab": {')),
        "v.tiktoken.gz": (T.from_tiktoken, _bomb(b"YQ== 0\n")),
        "c.tsv.gz": (cnfmce.load_counts, _bomb(b"# cnfmce counts v1\n# {}\n")),
    }


def test_gzip_bombs_are_refused_while_streaming(tmp_path, bombs):
    import resource
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for name, (loader, blob) in bombs.items():
        assert len(blob) < 1 << 20  # ~160 KB that inflate to 160 MB
        p = tmp_path / name
        p.write_bytes(blob)
        with pytest.raises(TokenizerFileError, match=re.escape(name) + ".*inflates to more than"):
            loader(p)
    # checked while streaming: memory grew by about the limit (64 MiB), never the whole 160 MB
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert grown < 150 << 20, grown
    assert formats.inflate_limit(len(bombs["t.json.gz"][1])) == formats.INFLATE_FREE_BYTES
    assert formats.inflate_limit(1 << 20) == 100 << 20
    assert formats.inflate_limit(1 << 40) == formats.MAX_INFLATED_BYTES
    (tmp_path / "t.json.gz").write_bytes(bombs["t.json.gz"][1])
    r = cli("encode", "-t", "t.json.gz", cwd=tmp_path, input=b"x")
    one_line_error(r, "t.json.gz", "inflates")


def test_ordinary_compressed_vocabularies_still_load(tmp_path, qwen):
    """The limit leaves room: a real tokenizer.json.gz (3.6x; the session's `qwen` fixture reads
    it) and a saved, very compressible vocabulary."""
    assert qwen.vocab_size > 200_000
    toks = BYTES + [b"x%06d" % k for k in range(100_000)]
    T.from_tokens(toks).save(tmp_path / "big.json.gz")
    assert T.load(tmp_path / "big.json.gz").vocab_size == len(toks)


@pytest.mark.parametrize("entry,field", [
    ({"content": {"a": 1}, "id": 300, "special": True}, "content"),
    ({"content": ["x"], "id": 300}, "content"),
    ({"content": "<s>", "id": {"a": 1}, "special": True}, "id"),
    ({"content": "<s>", "id": [300]}, "id"),
    ({"content": "<s>", "id": None}, "id"),
    ({"content": "<s>", "id": 2**40}, "id"),
    ("just a string", "added_tokens[1]"),
])
def test_hf_added_tokens_of_the_wrong_type(tmp_path, entry, field):
    ok = {"content": "<x>", "id": 256, "special": True}
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(hf_doc(added=[ok, entry])))
    with pytest.raises(TokenizerFileError, match=r"tokenizer\.json: added_tokens\[1\].*" + re.escape(
            field if field != "added_tokens[1]" else "")):
        T.from_hf(p)
    r = cli("encode", "-t", p, input=b"x")
    one_line_error(r, "tokenizer.json", "added_tokens[1]")


def test_stdin_jsonl_errors_are_one_line(tmp_path):
    T.from_tokens(BYTES).save(tmp_path / "t.json")
    for data, needle in ((b'{"body": "x"}\n', "<stdin>:1"),
                         (b'{"text": "ok"}\n\n{"text": 5}\n', "<stdin>:3"),
                         (b'{"text": "ok"}\n{"text": \n', "<stdin>:2"),
                         (b'{"text": "\xff"}\n', "<stdin>:1"),
                         (b"[1, 2]\n", "<stdin>:1")):
        r = cli("encode", "-t", "t.json", "--jsonl", cwd=tmp_path, input=data)
        one_line_error(r, needle)
    r = cli("encode", "-t", "t.json", "--jsonl", cwd=tmp_path, input=b'{"text": "ab"}\n\n{"text": "c"}\n')
    assert r.returncode == 0 and r.stdout.decode().split("\n")[:2] == ["[97, 98]", "[99]"]


# --- 8. SIGTERM and stale temporary directories -------------------------------------------------------------

@pytest.fixture(scope="module")
def big_jsonl(tmp_path_factory):
    """About 6 MB of JSON lines: the fixture corpora, repeated with a numbered line per copy."""
    p = tmp_path_factory.mktemp("sigterm") / "big.jsonl"
    docs = [json.loads(line)["text"] for c in ("en", "code", "multi", "zh") for s in ("train", "test")
            for line in gzip.open(fixture_path("corpora", c, f"{s}.jsonl.gz"), "rt", encoding="utf-8")]
    n = k = 0
    with open(p, "w", encoding="utf-8") as o:
        while n <= 6_000_000:
            line = json.dumps({"text": f"copy {k // len(docs)}\n" + docs[k % len(docs)]}, ensure_ascii=False) + "\n"
            o.write(line)
            n += len(line.encode("utf-8"))
            k += 1
    return p


@pytest.mark.parametrize("how", ["cli-train", "api"])
def test_sigterm_during_spilling_leaves_no_temp_files(tmp_path, big_jsonl, how):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out.json"
    env = dict(ENV, TMPDIR=str(tmp))
    if how == "api":
        code = textwrap.dedent(f"""
            import cnfmce
            cnfmce.train([{str(big_jsonl)!r}], vocab_size=1000, memory_limit=1, progress=False)
        """)
        cmd = [sys.executable, "-c", code]
    else:
        command = how.split("-")[1]
        cmd = [sys.executable, "-m", "cnfmce.cli", command, "-o", str(out), "--memory-limit", "1",
               str(big_jsonl)] + (["--vocab-size", "1000"] if command == "train" else [])
    p = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        t0 = time.monotonic()
        # wait until counting has spilled a sorted run to disk
        while not list(tmp.glob("cnfmce-*/run-*")):
            assert p.poll() is None, p.communicate()[1][-2000:]
            assert time.monotonic() - t0 < 120, "no spill"
            time.sleep(0.02)
        work = [d.name for d in tmp.iterdir()]
        assert len(work) == 1 and re.fullmatch(rf"cnfmce-{p.pid}-\w+", work[0]), work
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGTERM, (p.returncode, err[-2000:])
    assert b"Traceback" not in err
    assert list(tmp.iterdir()) == []
    assert not out.exists()


def test_stale_work_dirs_of_dead_runs_are_removed(tmp_path):
    from cnfmce.training import remove_stale_work_dirs
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    # a live run's directory (locked), and directories that are not cnfmce's, are left alone
    live_code = textwrap.dedent("""
        import sys, time, cnfmce.training as tr
        with tr._work_dir(sys.argv[1]) as d:
            print(d, flush=True)
            time.sleep(60)
    """)
    live = subprocess.Popen([sys.executable, "-c", live_code, str(tmp)], stdout=subprocess.PIPE, text=True)
    try:
        live_dir = Path(live.stdout.readline().strip())
        assert live_dir.is_dir()
        # a run killed with SIGKILL (it cannot clean up): its directory stays, unlocked
        code = textwrap.dedent("""
            import os, signal, sys, cnfmce.training as tr
            with tr._work_dir(sys.argv[1]) as d:
                open(os.path.join(d, "run-0-0.bin"), "wb").write(b"x" * 1000)
                print(d, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        """)
        r = subprocess.run([sys.executable, "-c", code, str(tmp)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == -signal.SIGKILL
        dead = Path(r.stdout.strip())
        assert dead.is_dir() and dead.parent == tmp and re.fullmatch(r"cnfmce-\d+-\w+", dead.name)
        (tmp / "cnfmce-123-other").mkdir()           # no lock file: not ours
        (tmp / "cnfmce-abc").mkdir()                 # an older naming
        (tmp / "unrelated").mkdir()
        assert remove_stale_work_dirs(str(tmp)) == [str(dead)]
        assert sorted(x.name for x in tmp.iterdir()) == sorted(
            [live_dir.name, "cnfmce-123-other", "cnfmce-abc", "unrelated"])
        # every training run does it on start
        shutil.copytree(live_dir, tmp / "cnfmce-999999-copy")  # the lock file, not held by anyone
        cnfmce.count(["a b c"], progress=False, tmp_dir=str(tmp))
        assert not (tmp / "cnfmce-999999-copy").exists() and live_dir.is_dir()
    finally:
        live.kill()
        live.wait()



class _SwallowsCtrlC:
    """A finalizer that takes a Ctrl-C: Python prints "Exception ignored" and goes on (Ray's
    actor handles run Python code when dropped, and a Ctrl-C can land there)."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the handler runs here, between bytecodes
            pass


def test_ctrl_c_swallowed_by_a_finalizer_is_not_lost(monkeypatch):
    """A Ctrl-C that lands in a finalizer during a run still ends the run: the block's end (and
    the Ray loops' checkpoints) raise it again. Without the rule it is lost (checked first)."""
    from cnfmce.workdir import interrupts_kept, raise_if_interrupted, work_dir
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    swallowed = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: swallowed.append(u.exc_type))
    o = _SwallowsCtrlC()
    del o  # no rule: the interrupt is lost
    assert swallowed == [KeyboardInterrupt]
    with pytest.raises(KeyboardInterrupt):
        with work_dir(None) as d:
            o = _SwallowsCtrlC()
            del o
            assert os.path.isdir(d)
    assert not os.path.exists(d)
    with pytest.raises(KeyboardInterrupt):
        with interrupts_kept():
            o = _SwallowsCtrlC()
            del o
            raise_if_interrupted()  # a checkpoint raises it at once
            pytest.fail("the checkpoint did not raise")  # pragma: no cover
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with interrupts_kept():  # a quiet block ends normally: nothing left over from before
        raise_if_interrupted()
    # inside the blocks, no "Exception ignored" report: the interrupt is raised again instead
    assert swallowed == [KeyboardInterrupt]
    o = _SwallowsCtrlC()
    del o  # the hooks are back
    assert swallowed == [KeyboardInterrupt] * 2


# --- 9. early validation, locations, detection, pipes, warnings --------------------------------------------

def test_output_directory_fails_before_training(tmp_path, big_jsonl):
    (tmp_path / "outdir").mkdir()
    for args in (["train", "-o", "outdir", "--vocab-size", 1000], ["count", "-o", "outdir"]):
        t0 = time.monotonic()
        r = cli(*args, big_jsonl, cwd=tmp_path)
        one_line_error(r, "outdir", "directory")
        assert b"count 1/" not in r.stderr and b"round 1" not in r.stderr  # no counting happened
        assert time.monotonic() - t0 < 30
    assert os.listdir(tmp_path / "outdir") == []


class _Untouchable:
    def __init__(self):
        self.touched = False

    def __iter__(self):
        self.touched = True
        return iter(["some text"] * 10)


@pytest.mark.parametrize("specials,exc", [([""], ValueError), (["<s>", "<s>"], ValueError),
                                          ([5], ValueError), ("<s>", TypeError), (5, TypeError)])
def test_bad_special_tokens_before_counting(specials, exc):
    src = _Untouchable()
    with pytest.raises(exc):
        cnfmce.train(src, vocab_size=300, special_tokens=specials, progress=False)
    assert not src.touched


def test_lone_surrogate_location(tmp_path):
    docs = [f"document number {k}" for k in range(5000)]
    docs[3000] = "bad \ud800 here"
    for inputs in (docs, iter(docs), cnfmce.Documents(docs)):
        with pytest.raises(CorpusError, match=r"\bdocument 3000\b.*surrogate"):
            cnfmce.count(inputs, progress=False)
    ascii_jsonl = lambda ds: "".join(json.dumps({"text": d}) + "\n" for d in ds)  # noqa: E731
    (tmp_path / "a.jsonl").write_text(ascii_jsonl(docs[:10]))
    (tmp_path / "b.jsonl").write_text("\n" + ascii_jsonl(docs[10:]))  # a blank first line
    with pytest.raises(CorpusError, match=r"b\.jsonl:2992: .*surrogate"):
        cnfmce.train([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], vocab_size=300, progress=False)
    r = cli("count", "-o", "c.tsv", "--quiet", "a.jsonl", "b.jsonl", cwd=tmp_path)
    one_line_error(r, "b.jsonl:2992", "surrogate")


def test_format_key_past_4kb_is_detected(tmp_path):
    """A valid cnfmce file whose "format" key comes after a big "metadata": the CLI, the
    evaluation adapters and Tokenizer.load agree (one detection function)."""
    tok = T.from_tokens(BYTES + [b"hello", b" world"], special_tokens=["<|end|>"])
    doc = json.loads(tok.to_bytes())
    reordered = {"metadata": {"notes": "x" * 10_000, "model": {"kind": "not hf"}}}
    reordered.update({k: v for k, v in doc.items() if k != "metadata"})
    p = tmp_path / "tok.json"
    p.write_text(json.dumps(reordered))
    assert p.read_bytes().index(b'"format"') > 4096
    assert formats.tokenizer_file_kind(p) == "cnfmce"
    assert T.load(p).encode("hello world") == tok.encode("hello world")
    r = cli("encode", "-t", p, input=b"hello world")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == tok.encode("hello world")
    from cnfmce.adapters import load_encoder
    enc = load_encoder(str(p))
    assert enc.kind == "cnfmce" and enc.encode("hello world") == tok.encode("hello world")
    # the other kinds, by content and by name
    (tmp_path / "v.tiktoken").write_text("".join(f"{b64(t)} {i}\n" for i, t in enumerate(BYTES)))
    shutil.copy(tmp_path / "v.tiktoken", tmp_path / "ranks.txt")
    (tmp_path / "tokenizer.json").write_text(json.dumps(hf_doc()))
    (tmp_path / "junk.json").write_text('{"neither": 1}')
    assert formats.tokenizer_file_kind(tmp_path / "v.tiktoken") == "tiktoken"
    assert formats.tokenizer_file_kind(tmp_path / "ranks.txt") == "tiktoken"
    assert formats.tokenizer_file_kind(tmp_path / "tokenizer.json") == "hf"
    with pytest.raises(TokenizerFileError, match="junk.json"):
        formats.tokenizer_file_kind(tmp_path / "junk.json")
    r = cli("encode", "-t", tmp_path / "junk.json", input=b"x")
    one_line_error(r, "junk.json")


def test_broken_pipe_is_quiet(tmp_path):
    T.from_tokens(BYTES).save(tmp_path / "t.json")
    (tmp_path / "a.jsonl").write_text(jsonl(["some text " * 2000] * 400))
    for extra in (["a.jsonl"], []):
        cmd = f"{sys.executable} -m cnfmce.cli encode -t t.json {' '.join(extra)} | head -c 10"
        stdin = None if extra else subprocess.PIPE
        r = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}; echo status=${{PIPESTATUS[0]}} >&2"],
                           cwd=tmp_path, capture_output=True, timeout=120,
                           input=None if extra else b"abc " * 1_000_000)
        assert len(r.stdout) == 10
        assert b"status=0" in r.stderr, r.stderr
        assert b"Broken pipe" not in r.stderr and b"Traceback" not in r.stderr, r.stderr


def test_cli_warnings_are_one_line(tmp_path):
    (tmp_path / "tiny.jsonl").write_text(jsonl(["ab ab"]))
    r = cli("train", "-o", "t.json", "--vocab-size", 5000, "--quiet", "tiny.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.decode().splitlines() if x.strip()]
    assert lines and all(x.startswith("cnfmce: warning: ") for x in lines), lines
    assert "warnings.warn" not in r.stderr.decode() and ".py:" not in r.stderr.decode()


# --- 10. small ones ---------------------------------------------------------------------------------------

def test_allowed_special_message_quotes_once():
    tok = T.from_tokens(BYTES, special_tokens=["<|a|>"])
    with pytest.raises(ValueError) as e:
        tok.encode("x", allowed_special={"<|foo|>", "<|bar|>"})
    assert str(e.value) == "not special tokens of this tokenizer: '<|bar|>', '<|foo|>'"


def test_import_does_not_import_numpy():
    code = ("import sys, cnfmce, cnfmce.cli, cnfmce.evaluation, cnfmce.adapters, cnfmce.corpus\n"
            "import cnfmce.formats, cnfmce.training\n"
            "tok = cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)])\n"
            "tok.encode_batch(['a b'])\n"
            "cnfmce.train(['a b', 'c d'], vocab_size=260, progress=False)\n"
            "assert 'numpy' not in sys.modules, 'numpy imported'\n"
            "cnfmce.evaluate(tok, ['a b'])\n"
            "assert 'numpy' in sys.modules\n")
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


def test_numpy_penalties_and_negative_zero(tmp_path):
    np = pytest.importorskip("numpy")
    for v, want in ((np.float32(0.05), float(np.float32(0.05))), (np.float64(0.3), 0.3),
                    (np.float16(0.5), 0.5), (np.int64(2), 2.0), (np.float32("inf"), math.inf)):
        tok = T.from_tokens(BYTES, boundary_penalty=v)
        assert tok.boundary_penalty == want and type(tok.boundary_penalty) is float
        assert tok.with_options(boundary_penalty=v).boundary_penalty == want
        tok.save(tmp_path / "t.json")
        assert T.load(tmp_path / "t.json").boundary_penalty == want
    with pytest.raises(ValueError):
        T.from_tokens(BYTES, boundary_penalty=np.float32("nan"))
    with pytest.raises(TypeError):
        T.from_tokens(BYTES, boundary_penalty=np.bool_(True))
    for neg in (-0.0, np.float32(-0.0)):
        tok = T.from_tokens(BYTES, boundary_penalty=neg)
        assert math.copysign(1, tok.boundary_penalty) == 1
        assert "boundary_penalty=0.0" in repr(tok) and "-0.0" not in repr(tok)
        tok.save(tmp_path / "z.json")
        assert '"boundary_penalty":0.0' in (tmp_path / "z.json").read_text()
    (tmp_path / "neg.json").write_text(json.dumps(native_doc(options={"boundary_penalty": -0.0})))
    assert "-0.0" not in repr(T.load(tmp_path / "neg.json"))


def test_cli_negative_values_get_clear_messages(tmp_path):
    (tmp_path / "a.jsonl").write_text(jsonl(SENT))
    for opt, val in (("--memory-limit", "-5G"), ("--memory-limit", "0"), ("--boundary-penalty", "-0.5"),
                     ("--vocab-size", "-300"), ("--raw-vocab-size", "-1")):
        args = ["train", "-o", "t.json", "a.jsonl", opt, val]
        if opt != "--vocab-size":
            args += ["--vocab-size", "300"]
        r = cli(*args, cwd=tmp_path)
        err = r.stderr.decode()
        assert r.returncode != 0
        assert f"argument {opt}" in err and "expected one argument" not in err, err
        assert "positive" in err or ">= 0" in err, err
        assert not (tmp_path / "t.json").exists()
    r = cli("train", "-o", "t.json", "--vocab-size", "300", "--boundary-penalty", "-0.0", "--quiet",
            "a.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert T.load(tmp_path / "t.json").options["boundary_penalty"] == 0.0
