"""Regression tests of the second hardening round: one block per item, each failing before its fix.

1. fork: a child forked while other threads of the parent are inside cnfmce never hangs
2. the thread cap (and the error for non-positive counts) wherever a thread count enters
3. `cnfmce show -t tiktoken:/hf:/sp:`: a missing optional package or file is a one-line error
4. `cnfmce eval TOKENIZER... --corpus FILE...` as docs/spec.md says, with a progress bar
5. exception types and messages of train arguments
6. error places: file and line of a lone surrogate in .jsonl; an undecodable --field
7. `tokenize --bos/--eos` ids outside the vocabulary refused before anything is written
8. leftovers: SIGTERM during tokenize, an empty input, SIGINT during imports, Ray start-up
9. terminal output: colours only on a terminal (NO_COLOR), "interrupted" once, no stale bar
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import cnfmce

from conftest import REPO, ctrl_c_as_in_a_terminal

BYTES = [bytes([b]) for b in range(256)]
T = cnfmce.Tokenizer
PYPATH = str(Path(cnfmce.__file__).resolve().parent.parent)  # the cnfmce under test (installed or in place)
ENV = dict(os.environ, PYTHONPATH=PYPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))


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
        assert n in lines[0], (n, lines[0])
    return lines[0]


def jsonl(texts, field="text"):
    return "".join(json.dumps({field: t}) + "\n" for t in texts)


# --- 1. fork while other threads work -----------------------------------------------------------

_FORK_STRESS = r"""
import os, signal, sys, threading, time
import cnfmce
BYTES = [bytes([b]) for b in range(256)]
WORDS = [b"the", b" the", b"ab", b"abc", b" of", b"ing"]
stop = threading.Event()
current = []
lock = threading.Lock()
errors = []

def work(k):
    # new tokenizers all the time (each first encode makes the int cache and the piece cache),
    # pools of five sizes (more than are kept: pools are built all the time), numpy results
    n = 0
    try:
        while not stop.is_set():
            tok = cnfmce.Tokenizer.from_tokens(BYTES + WORDS + [b"w%d_%d" % (k, n)])
            with lock:
                current.append(tok)
                del current[:-4]
            tok.encode("the abc of things " * 3)
            tok.encode_batch(["the ab", "abc of", "x y z", "ing"] * 3, num_threads=4 + n % 5)
            tok.encode_batch(["the ab", "abc"], return_numpy=True)
            n += 1
    except BaseException as e:
        errors.append(repr(e))

threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(THREADS)]
for t in threads:
    t.start()
time.sleep(0.1)
fresh = cnfmce.Tokenizer.from_tokens(BYTES + WORDS)
want = fresh.encode_batch(["the ab", "abc of"])
hung = failed = 0
for i in range(FORKS):
    with lock:
        toks = list(current)
    pid = os.fork()
    if pid == 0:
        try:
            for tok in toks:
                tok.encode("the abc of things")
                tok.encode_batch(["the ab", "abc of", "x"] * 2)
                tok.encode_batch(["the ab", "abc of", "x"] * 2, num_threads=3)
                tok.encode_batch(["the ab"], return_numpy=True)
            assert cnfmce.Tokenizer.from_tokens(BYTES + WORDS).encode_batch(["the ab", "abc of"]) == want
            os._exit(0)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(3)
    deadline = time.monotonic() + CHILD_TIMEOUT
    while True:
        r, st = os.waitpid(pid, os.WNOHANG)
        if r:
            failed += not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0)
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            hung += 1
            break
        time.sleep(0.001)
    if hung:
        break  # one is enough to fail
stop.set()
print(f"forks={i + 1} hung={hung} failed={failed} errors={errors}")
"""


@pytest.mark.parametrize("forks", [100, pytest.param(400, marks=pytest.mark.slow)])
def test_fork_while_threads_encode_never_hangs(forks):
    code = (f"THREADS, FORKS, CHILD_TIMEOUT = 2, {forks}, 5\n") + _FORK_STRESS
    r = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                       timeout=170)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == f"forks={forks} hung=0 failed=0 errors=[]", (r.stdout, r.stderr[-3000:])


def test_fork_during_the_first_numpy_import_does_not_hang(tmp_path):
    # A numpy whose import takes a while (a stand-in on sys.path, so the timing is certain): a
    # thread's first encode_batch(return_numpy=True) is inside `import numpy` when the main
    # thread forks. The child's own encode_batch(return_numpy=True) waited forever for the
    # import lock held by a thread it does not have.
    fake = tmp_path / "numpy"
    fake.mkdir()
    (fake / "__init__.py").write_text(textwrap.dedent("""
        import array, time
        time.sleep(1.5)
        uint32, int64 = "I", "q"
        def frombuffer(b, dtype):
            return list(array.array(dtype, bytes(b)))
    """))
    code = textwrap.dedent("""
        import os, signal, sys, threading, time
        import cnfmce
        assert "numpy" not in sys.modules
        tok = cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)] + [b"ab"])
        t = threading.Thread(target=lambda: tok.encode_batch(["ab c"], return_numpy=True))
        t.start()
        time.sleep(0.3)  # the thread is inside the import now
        pid = os.fork()
        if pid == 0:
            ids, starts = tok.encode_batch(["ab c", "c"], return_numpy=True)
            os._exit(0 if list(ids) == [256, 32, 99, 99] else 3)
        deadline = time.monotonic() + 15
        while True:
            r, st = os.waitpid(pid, os.WNOHANG)
            if r:
                print("exit", os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                print("hung")
                break
            time.sleep(0.01)
        t.join()
    """)
    env = dict(ENV, PYTHONPATH=str(tmp_path) + os.pathsep + ENV["PYTHONPATH"])
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "exit 0", (r.stdout, r.stderr[-3000:])


def test_fork_while_a_thread_builds_an_encoders_token_table():
    # cnfmce.adapters.Encoder.token_table was built under a per-encoder lock: a child forked
    # while another thread built it waited forever for the lock on its first token_table().
    code = textwrap.dedent("""
        import os, signal, threading, time
        from cnfmce.adapters import Encoder

        class Slow(Encoder):
            def id_bound(self):
                return 400
            def token_bytes(self, i):
                time.sleep(0.002)
                return bytes([i % 256]) * (1 + i // 256)

        enc = Slow("slow")
        t = threading.Thread(target=enc.token_table)
        t.start()
        time.sleep(0.2)  # the thread is building the table
        pid = os.fork()
        if pid == 0:
            os._exit(0 if len(enc.token_table()) == 400 else 3)
        deadline = time.monotonic() + 20
        while True:
            r, st = os.waitpid(pid, os.WNOHANG)
            if r:
                print("exit", os.WEXITSTATUS(st) if os.WIFEXITED(st) else -1)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                print("hung")
                break
            time.sleep(0.01)
        t.join()
    """)
    r = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "exit 0", (r.stdout, r.stderr[-3000:])


# --- 2. the thread cap wherever a thread count enters ---------------------------------------------

def test_tokenize_corpus_caps_num_threads(tmp_path, monkeypatch):
    import threading
    from cnfmce.tokenizer import max_threads
    started = []
    real_start = threading.Thread.start

    def start(self):
        if self.name == "cnfmce-encode":
            started.append(self.name)
            if len(started) > max_threads():  # fail at once instead of starting 10**6 threads
                raise AssertionError(f"more than {max_threads()} encoding threads")
        return real_start(self)
    monkeypatch.setattr(threading.Thread, "start", start)
    tok = T.from_tokens(BYTES)
    t0 = time.perf_counter()
    m = cnfmce.tokenize_corpus(tok, ["a b", "c"], tmp_path / "o", format="npy", eos=None,
                               num_threads=10**6)
    assert m["complete"] and m["documents"] == 2
    assert 1 <= len(started) <= max_threads()
    assert time.perf_counter() - t0 < 30


@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "4"])
def test_tokenize_corpus_bad_num_threads_is_the_encoders_error(tmp_path, bad):
    tok = T.from_tokens(BYTES)
    with pytest.raises(ValueError) as want:
        tok.encode_batch(["a"], num_threads=bad)
    with pytest.raises(ValueError) as got:
        cnfmce.tokenize_corpus(tok, ["a"], tmp_path / "o", format="npy", num_threads=bad)
    assert str(got.value) == str(want.value)
    assert not (tmp_path / "o").exists()


def test_cli_tokenize_huge_threads_is_capped(tmp_path):
    (tmp_path / "c.jsonl").write_text(jsonl(["a b", "c d"]))
    T.from_tokens(BYTES).save(tmp_path / "tok.json")
    t0 = time.perf_counter()
    r = cli("tokenize", "-t", "tok.json", "-o", "o", "--format", "npy", "--quiet", "--threads",
            "20000", "c.jsonl", cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["documents"] == 2
    assert time.perf_counter() - t0 < 45
    for cmd in (["tokenize", "-t", "tok.json", "-o", "o2", "--format", "npy"],
                ["encode", "-t", "tok.json"], ["train", "-o", "t2.json", "--vocab-size", "300"],
                ["count", "-o", "c.tsv"]):
        r = cli(*cmd, "--threads", "0", "c.jsonl", cwd=tmp_path)
        assert r.returncode == 2 and b"must be a positive integer, got '0'" in r.stderr, (cmd, r.stderr)


# --- 3. show -t tiktoken:/hf:/sp: without the package or the file ---------------------------------

def _hide_package(tmp_path, name):
    """A directory that, first on PYTHONPATH, makes ``import name`` fail as a missing package."""
    d = tmp_path / f"without_{name}"
    (d / name).mkdir(parents=True)
    (d / name / "__init__.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n")
    return dict(ENV, PYTHONPATH=str(d) + os.pathsep + ENV["PYTHONPATH"])


@pytest.mark.parametrize("prefix,package", [("tiktoken", "tiktoken"), ("hf", "tokenizers"),
                                            ("sp", "sentencepiece")])
def test_show_missing_optional_package_is_one_line(tmp_path, prefix, package):
    f = tmp_path / ("vocab.tiktoken" if prefix == "tiktoken" else "tok.json" if prefix == "hf"
                    else "m.model")
    f.write_bytes(b"YQ== 0\n" if prefix == "tiktoken" else b"{}" if prefix == "hf" else b"x")
    r = cli("show", "-t", f"{prefix}:{f}", "hello", env=_hide_package(tmp_path, package))
    one_line_error(r, package, 'pip install "cnfmce[eval]"')


@pytest.mark.parametrize("spec", ["tiktoken:nope/o200k_base.tiktoken", "tiktoken:nope.tiktoken",
                                  "hf:nope/tokenizer.json", "sp:nope/m.model"])
def test_show_missing_file_says_so(tmp_path, spec):
    r = cli("show", "-t", spec, "hello", cwd=tmp_path)
    one_line_error(r, "no such tokenizer file", spec.split(":", 1)[1])


# --- 4. eval TOKENIZER... --corpus FILE..., with a progress bar -------------------------------------

@pytest.fixture
def eval_files(tmp_path):
    T.from_tokens(BYTES + [b"ab", b" cd"]).save(tmp_path / "t1.json")
    T.from_tokens(BYTES + [b"ab"]).save(tmp_path / "t2.json")
    (tmp_path / "c.jsonl").write_text(jsonl(["ab cd ab", "cd ab"]))
    (tmp_path / "d.jsonl").write_text(jsonl(["ab"]))
    return tmp_path


def _table_rows(out):
    return sorted(line for line in out.splitlines() if line.startswith("| ") and "---" not in line)


def test_eval_documented_form(eval_files):
    r = cli("eval", "t1.json", "t2.json", "--corpus", "c.jsonl", "d.jsonl", cwd=eval_files)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    rows = _table_rows(out)
    assert len(rows) == 1 + 4  # the header and 2 tokenizers x 2 corpora
    # the -t form is the same command
    r2 = cli("eval", "-t", "t1.json", "-t", "t2.json", "c.jsonl", "d.jsonl", "--quiet", cwd=eval_files)
    assert r2.returncode == 0, r2.stderr
    assert _table_rows(r2.stdout.decode()) == rows
    r3 = cli("eval", "-t", "t1.json", "t2.json", "--corpus", "c.jsonl", "d.jsonl", "--quiet",
             cwd=eval_files)
    assert _table_rows(r3.stdout.decode()) == rows
    # a progress bar on stderr (4 evaluations), none with --quiet
    err = r.stderr.decode()
    assert "eval" in err and "4/4" in err, err
    assert r2.stderr.decode().strip() == ""


def test_eval_usage_errors(eval_files):
    one_line_error(cli("eval", "--corpus", "c.jsonl", cwd=eval_files), "no tokenizer")
    one_line_error(cli("eval", "t1.json", "--corpus", "nope.jsonl", cwd=eval_files),
                   "no such corpus file: nope.jsonl")


def test_spec_and_cli_say_the_same():
    spec = (REPO / "docs" / "spec.md").read_text()
    assert "cnfmce eval TOKENIZER... --corpus FILE..." in spec
    from cnfmce.cli import build_parser
    p = build_parser()
    sub = next(a for a in p._actions if a.dest == "command")
    usage = sub.choices["eval"].format_usage()
    assert "TOKENIZER... --corpus FILE..." in usage, usage
    assert "-t TOKENIZER [-t TOKENIZER ...] [options] FILE..." in usage, usage


# --- 5. exception types and messages of train arguments --------------------------------------------

@pytest.mark.parametrize("kw,name", [
    (dict(raw_han_exponent=10**400), "raw_han_exponent"),
    (dict(non_ascii_exponent=10**400, selection="refined-non-ascii"), "non_ascii_exponent"),
    (dict(memory_limit=2**70), "memory_limit"),
    (dict(rounds=((1, 12, 2**64),)), "rounds"),
    (dict(rounds=((1, 2**70, 0),)), "rounds"),
])
def test_train_argument_errors_name_the_argument(kw, name):
    with pytest.raises(ValueError) as e:
        cnfmce.train(["a b", "c d"], vocab_size=300, progress=False, **kw)
    assert type(e.value) is ValueError and name in str(e.value)
    assert len(str(e.value)) < 200  # a 400-digit int is shortened
    if name == "rounds":
        assert "bad round" in str(e.value) and "sequence of" not in str(e.value)


# --- 6. error places ------------------------------------------------------------------------------

def test_lone_surrogate_in_jsonl_names_file_and_line(tmp_path):
    f = tmp_path / "sur.jsonl"
    f.write_text('{"text": "ok"}\n\n{"text": "fine"}\n{"text": "a \\ud800 b"}\n')
    T.from_tokens(BYTES).save(tmp_path / "tok.json")
    r = cli("tokenize", "-t", "tok.json", "-o", "o", "--format", "npy", "--quiet", "sur.jsonl",
            cwd=tmp_path)
    one_line_error(r, "sur.jsonl:4", "lone surrogate", "U+D800")
    with pytest.raises(cnfmce.CorpusError, match=r"sur\.jsonl:4: .*lone surrogate"):
        cnfmce.tokenize_corpus(T.from_tokens(BYTES), [f], tmp_path / "o2", format="npy")


def test_lone_surrogate_in_documents_names_the_document(tmp_path):
    docs = ["ok"] * 5 + ["a \ud800"]
    with pytest.raises(cnfmce.CorpusError, match=r"document 5: .*lone surrogate \(U\+D800"):
        cnfmce.tokenize_corpus(T.from_tokens(BYTES), docs, tmp_path / "o", format="npy",
                               batch_chars=4)


def test_undecodable_field_is_a_clear_error(tmp_path):
    (tmp_path / "c.jsonl").write_text(jsonl(["a"]))
    T.from_tokens(BYTES).save(tmp_path / "tok.json")
    r = subprocess.run([sys.executable, "-m", "cnfmce.cli", "tokenize", "-t", "tok.json", "-o", "o",
                        "--format", "npy", "--quiet", b"--field=\xff", "c.jsonl"], cwd=tmp_path,
                       env=ENV, capture_output=True, timeout=120)
    line = one_line_error(r, "field")
    assert "codec" not in line and "--field" in line, line
    assert not (tmp_path / "o").exists()


# --- 7. --bos/--eos ids outside the vocabulary ------------------------------------------------------

@pytest.mark.parametrize("opt", ["--bos", "--eos"])
def test_cli_token_id_outside_vocabulary_refused(tmp_path, opt):
    (tmp_path / "c.jsonl").write_text(jsonl(["a b"]))
    T.from_tokens(BYTES + [b"ab"], special_tokens=["<|endoftext|>"]).save(tmp_path / "tok.json")
    r = cli("tokenize", "-t", "tok.json", "-o", "o", "--format", "npy", opt, "999999", "c.jsonl",
            cwd=tmp_path)
    one_line_error(r, opt.lstrip("-"), "999999", "not an id of this tokenizer")
    assert not (tmp_path / "o").exists()  # nothing written
    # the ids it has are fine: a token's, the special token's (257)
    for good in ("97", "257"):
        r = cli("tokenize", "-t", "tok.json", "-o", f"o{good}", "--format", "npy", "--quiet", opt,
                good, "c.jsonl", cwd=tmp_path)
        assert r.returncode == 0, r.stderr


def test_api_token_id_outside_vocabulary_refused(tmp_path):
    tok = T.from_tokens(BYTES, special_tokens={"<s>": 300})  # ids 256..299 are holes
    for v in (999_999, 256, 299, 301):
        for kw in (dict(bos=v), dict(eos=v)):
            with pytest.raises(ValueError, match=f"id {v} is not an id of this tokenizer"):
                cnfmce.tokenize_corpus(tok, ["a"], tmp_path / "o", format="npy", **kw)
    assert not (tmp_path / "o").exists()
    m = cnfmce.tokenize_corpus(tok, ["a"], tmp_path / "o", format="npy", bos=300, eos=255)
    assert (m["bos_id"], m["bos_token"], m["eos_id"]) == (300, "<s>", 255)


# --- 8. leftovers -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory):
    """About 24 MB of JSON lines: a tokenize run of several seconds on one thread."""
    d = tmp_path_factory.mktemp("long")
    words = [f"w{k:x}" for k in range(2000)]
    lines = []
    for k in range(120_000):
        lines.append(json.dumps({"text": " ".join(words[(k * 7 + j * 13) % 2000] for j in range(36))}))
    (d / "big.jsonl").write_text("\n".join(lines) + "\n")
    T.from_tokens(BYTES + [b" w", b"w1", b"w2"]).save(d / "tok.json")
    return d


def _start_tokenize(src, out, *extra, shard_size="64KB"):
    return subprocess.Popen([sys.executable, "-m", "cnfmce.cli", "tokenize", "-t",
                             str(src / "tok.json"), "-o", str(out), "--format", "megatron",
                             "--shard-size", shard_size, "--threads", "1", *extra,
                             str(src / "big.jsonl")], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=ctrl_c_as_in_a_terminal)


def _wait_for_shards(p, out, n=3, timeout=60):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        assert p.poll() is None, p.communicate()[1][-2000:]
        try:
            if len(json.loads((out / "manifest.json").read_text())["shards"]) >= n:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError("no shards written")


def test_sigterm_during_tokenize_leaves_complete_shards_only(tmp_path, long_corpus):
    out = tmp_path / "o"
    # shards of 2 MB: one is being written (as a hidden temporary file) nearly all the time
    p = _start_tokenize(long_corpus, out, "--quiet", shard_size="2MB")
    try:
        _wait_for_shards(p, out, n=1)
        time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == -signal.SIGTERM, (p.returncode, err[-2000:])
    names = sorted(os.listdir(out))
    assert not [n for n in names if n.startswith(".")], names  # no hidden temporary shard
    m = json.loads((out / "manifest.json").read_text())
    shards = [n for n in names if n.startswith("shard_")]
    assert len(shards) == 2 * len(m["shards"]), (names, m["shards"])  # .bin + .idx each
    # and --resume finishes the run
    r = cli("tokenize", "-t", long_corpus / "tok.json", "-o", out, "--format", "megatron",
            "--shard-size", "2MB", "--threads", "1", "--quiet", "--resume", long_corpus / "big.jsonl",
            timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((out / "manifest.json").read_text())["complete"]


def test_sigint_during_tokenize_says_interrupted_once(tmp_path, long_corpus):
    out = tmp_path / "o"
    # the corpus four times (~90 MB, several seconds even on an idle machine): the signal lands
    # while the run is still writing shards
    big = str(long_corpus / "big.jsonl")
    p = _start_tokenize(long_corpus, out, big, big, big)
    try:
        _wait_for_shards(p, out)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    err = err.decode()
    assert p.returncode == 130, (p.returncode, err[-2000:])
    assert err.count("interrupted") == 1, err[-2000:]
    assert "--resume" in err and "Traceback" not in err
    # no stale progress line before the message: the bar was cleared
    visible = _visible_lines(err)
    assert visible[-1].startswith("cnfmce: interrupted;"), visible[-3:]
    assert not any(v.startswith("tokenize:") for v in visible), visible


@pytest.mark.parametrize("name,content", [("empty.jsonl", ""), ("blank.jsonl", "\n\n"),
                                          ("empty.txt", None)])
def test_empty_input_gives_a_valid_manifest(tmp_path, name, content):
    f = tmp_path / name
    f.write_text(content or "")
    T.from_tokens(BYTES).save(tmp_path / "tok.json")
    r = cli("tokenize", "-t", "tok.json", "-o", "o", "--format", "npy", "--quiet", name, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    m = cnfmce.shards.read_manifest(tmp_path / "o")
    assert m["complete"] and m["documents"] == len([x for x in (tmp_path / "o").iterdir()
                                                    if x.name.endswith(".tokens.npy")])


def test_sigint_during_imports_is_not_a_traceback(tmp_path):
    # The console script as pip writes it, with a line on stderr just before its import: SIGINT
    # at several moments of the import (and of the start of the command).
    script = tmp_path / "cnfmce"
    script.write_text("import sys\nsys.stderr.write('ready\\n'); sys.stderr.flush()\n"
                      "from cnfmce.cli import main\nsys.exit(main())\n")
    # ~28 MB on one thread (about 2 s): still running at the last delay, also on an idle machine
    (tmp_path / "c.jsonl").write_text(jsonl(["a b " * 20] * 300000))
    T.from_tokens(BYTES).save(tmp_path / "tok.json")
    for delay in (0.02, 0.04, 0.07, 0.1, 0.15, 0.2, 0.3):
        p = subprocess.Popen([sys.executable, str(script), "tokenize", "-t", "tok.json", "-o",
                              f"o{delay}", "--format", "npy", "--quiet", "--threads", "1", "c.jsonl"], cwd=tmp_path,
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             preexec_fn=ctrl_c_as_in_a_terminal)
        assert p.stderr.readline() == b"ready\n"
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        err = err.decode()
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, (delay, err)
        if p.returncode != 0:  # (it may have ended before the signal)
            assert p.returncode in (130, -signal.SIGINT), (delay, p.returncode, err)
            assert err.count("interrupted") == 1, (delay, err)


def test_ray_start_up_failure_is_one_line(tmp_path, monkeypatch, capsys):
    ray = pytest.importorskip("ray")
    from cnfmce.cli import main as cli_main

    def failing_init(*a, **k):
        raise RuntimeError("Failed to start the GCS server.\n" + "\n".join(
            f"  detail line {k}" for k in range(30)))
    monkeypatch.setattr(ray, "init", failing_init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    (tmp_path / "c.jsonl").write_text(jsonl(["a b"]))
    T.from_tokens(BYTES).save(tmp_path / "tok.json")
    rc = cli_main(["tokenize", "--backend", "ray", "-t", str(tmp_path / "tok.json"), "-o",
                   str(tmp_path / "o"), "--format", "npy", "--quiet", str(tmp_path / "c.jsonl")])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 1 and len(lines) == 1, err
    assert lines[0].startswith("cnfmce: error: cannot start a local Ray: RuntimeError: Failed to "
                               "start the GCS server."), lines


# --- 9. terminal output -----------------------------------------------------------------------------

def _visible_lines(err):
    """The lines a terminal shows for ``err``: carriage returns overwrite the line."""
    out = []
    for raw in err.split("\n"):
        line = ""
        for part in raw.split("\r"):
            line = part + line[len(part):]
        line = line.rstrip()
        if line:
            out.append(line)
    return out


def test_show_colours_only_on_a_terminal(tmp_path):
    import pty
    T.from_tokens(BYTES + [b"ab"]).save(tmp_path / "tok.json")
    r = cli("show", "-t", "tok.json", "ab c", cwd=tmp_path)
    assert r.returncode == 0 and b"\x1b[" not in r.stdout and b"ab|" in r.stdout, r.stdout
    r = cli("show", "-t", "tok.json", "--color", "ab c", cwd=tmp_path)
    assert b"\x1b[" in r.stdout

    def on_tty(env):
        master, slave = pty.openpty()
        try:
            p = subprocess.run([sys.executable, "-m", "cnfmce.cli", "show", "-t", "tok.json", "ab c"],
                               cwd=tmp_path, env=env, stdout=slave, stderr=subprocess.PIPE, timeout=120)
            os.close(slave)
            slave = -1
            data = b""
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                data += chunk
            assert p.returncode == 0, p.stderr
            return data
        finally:
            if slave >= 0:
                os.close(slave)
            os.close(master)
    env = {k: v for k, v in ENV.items() if k != "NO_COLOR"}
    assert b"\x1b[" in on_tty(env)
    assert b"\x1b[" not in on_tty(dict(env, NO_COLOR="1"))


def test_no_stale_progress_line_before_an_error(tmp_path):
    good = [json.dumps({"text": f"document {k} " * 20}) for k in range(20000)]
    (tmp_path / "c.jsonl").write_text("\n".join(good) + "\n{not json\n")
    T.from_tokens(BYTES).save(tmp_path / "tok.json")
    r = cli("tokenize", "-t", "tok.json", "-o", "o", "--format", "npy", "--shard-size", "64KB",
            "c.jsonl", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    visible = _visible_lines(err)
    assert visible[-1].startswith("cnfmce: error:") and "c.jsonl:20001" in visible[-1], visible
    assert not any(v.startswith("tokenize:") for v in visible), visible


def test_no_stale_progress_line_before_a_training_error(tmp_path):
    good = [json.dumps({"text": f"document {k} " * 20}) for k in range(30000)]
    (tmp_path / "c.jsonl").write_text("\n".join(good) + "\n{not json\n")
    r = cli("train", "-o", "t.json", "--vocab-size", "300", "c.jsonl", cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    visible = _visible_lines(err)
    assert len(visible) == 1 and visible[0].startswith("cnfmce: error: c.jsonl:30001:"), visible
