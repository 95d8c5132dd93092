"""Issue 14, item 2: cnfmce in a forked child (the default start method of ``multiprocessing`` on
Linux, and what ``datasets.map(num_proc=N)`` does).

rayon's worker threads do not survive ``fork()``; a pool made in the parent used to make every
parallel call in the child wait forever. Each scenario runs in a fresh interpreter (so that the
test process itself never forks) under a timeout: a hang fails the test instead of blocking the
suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

TIMEOUT = 120

_PARENT = """
import os, signal, sys, time
import cnfmce
from cnfmce import _core

BYTES = [bytes([b]) for b in range(256)]
tok = cnfmce.Tokenizer.from_tokens(BYTES + [b"ab", b"abc", b" the", b"the"], special_tokens=["<s>"])
texts = [("the abc ab " * (k % 50 + 1)) + str(k) for k in range(400)]
want = [tok.encode(t) for t in texts]
# the parent uses the default pool, a sized pool and training before it forks
assert tok.encode_batch(texts) == want
assert tok.encode_batch(texts, num_threads=2) == want
assert tok.encode_batch(texts, num_threads=1) == want  # the kept pools of explicit sizes
assert tok.encode_batch(texts, num_threads=3) == want
parent_vocab = cnfmce.train(texts, vocab_size=300, progress=False).get_vocab()
counter = _core.Counter([(1, 4, 0)], 1000, 1 << 24, "", 2)
counter.begin_round()
counter.add(texts[:10])

def child_work():
    assert tok.encode_batch(texts) == want
    assert tok.encode_batch(texts, num_threads=2) == want
    assert tok.encode_batch(texts, num_threads=1) == want
    assert tok.encode_batch(texts, num_threads=3) == want
    assert tok.encode_bytes_batch([t.encode() for t in texts]) == want
    ids, starts = tok.encode_batch(texts, return_numpy=True)
    assert ids[starts[3]:starts[4]].tolist() == want[3]
    # constructors (parallel sort of the automaton keys) and training (their own pools)
    big = cnfmce.Tokenizer.from_tokens(BYTES + [b"x%05d" % k for k in range(20000)])
    assert big.encode("x00042x00043") == [256 + 42, 256 + 43]
    assert cnfmce.train(texts, vocab_size=300, progress=False).get_vocab() == parent_vocab
    assert cnfmce.train(texts, vocab_size=300, num_threads=2, progress=False).get_vocab() == parent_vocab
    # an object made in the parent, used in the child
    counter.add(texts[10:20])
    counter.end_round()
    assert len(counter.result()[0]) > 0
    return 0
"""

_OS_FORK = _PARENT + """
pids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        signal.alarm(100)  # a hang kills the child with SIGALRM
        try:
            code = child_work()
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 3
        os._exit(code)
    pids.append(pid)
# the parent keeps working while its children run, and after
assert tok.encode_batch(texts) == want
for pid in pids:
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (
        "child failed" if os.WIFEXITED(status) else f"child killed by signal {os.WTERMSIG(status)} (hang)")
assert tok.encode_batch(texts, num_threads=2) == want
print("ok")
"""

_MULTIPROCESSING = _PARENT + """
import multiprocessing as mp

def work(k):
    part = texts[k::4]
    got = tok.encode_batch(part)
    assert got == want[k::4]
    return len(got)

def train_in_child(_):
    return sorted(cnfmce.train(texts, vocab_size=300, progress=False).get_vocab().items())

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        assert sum(pool.map_async(work, range(4)).get(timeout=100)) == len(texts)
        assert pool.map_async(train_in_child, range(2)).get(timeout=100) == [
            sorted(parent_vocab.items())] * 2
    p = ctx.Process(target=child_work)
    p.start()
    p.join(100)
    assert p.exitcode == 0, f"exit code {p.exitcode} (None: hang)"
    print("ok")
"""


@pytest.mark.parametrize("script", [_OS_FORK, _MULTIPROCESSING], ids=["os.fork", "multiprocessing-fork"])
def test_parallel_calls_work_in_a_forked_child(script, tmp_path):
    path = tmp_path / "scenario.py"
    path.write_text(textwrap.dedent(script))
    try:
        r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                           timeout=TIMEOUT, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung in a forked child (no result in {TIMEOUT} s)")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-4000:]


_DATASETS = """
import cnfmce
from datasets import Dataset, disable_progress_bars

disable_progress_bars()
BYTES = [bytes([b]) for b in range(256)]
tok = cnfmce.Tokenizer.from_tokens(BYTES + [b"ab", b"abc", b" the", b"the"])
texts = [("the abc ab " * (k % 30 + 1)) + str(k) for k in range(300)]
want = tok.encode_batch(texts)  # the parent's pool is running before datasets forks


def encode(batch):
    return {"ids": tok.encode_batch(batch["text"])}


if __name__ == "__main__":
    ds = Dataset.from_dict({"text": texts}).map(encode, batched=True, batch_size=50, num_proc=2)
    assert ds["ids"] == want
    print("ok")
"""


def test_datasets_map_with_num_proc(tmp_path):
    """The case from the issue: ``datasets.map(num_proc=N)`` forks worker processes that encode
    with a tokenizer the parent built and used."""
    pytest.importorskip("datasets")
    path = tmp_path / "ds.py"
    path.write_text(textwrap.dedent(_DATASETS))
    env = dict(__import__("os").environ, HF_DATASETS_CACHE=str(tmp_path / "cache"),
               HF_HUB_OFFLINE="1")
    try:
        r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                           timeout=TIMEOUT, cwd=tmp_path, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"datasets.map(num_proc=2) hung (no result in {TIMEOUT} s)")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-4000:]
