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

from conftest import REPO

BYTES = [bytes([b]) for b in range(256)]
T = cnfmce.Tokenizer
PYPATH = str(REPO / "python")
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


def test_fork_while_threads_encode_never_hangs():
    code = (f"THREADS, FORKS, CHILD_TIMEOUT = 2, 400, 5\n") + _FORK_STRESS
    r = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                       timeout=170)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "forks=400 hung=0 failed=0 errors=[]", (r.stdout, r.stderr[-3000:])


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
