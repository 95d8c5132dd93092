"""Tokenizers in data pipelines (issue 8): pickling, ``multiprocessing`` (fork and spawn) and
``datasets.Dataset.map(num_proc=2)``. The multi-process runs happen in a child interpreter with a
timeout, so a deadlock fails the test instead of hanging the suite."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap

import pytest

import cnfmce
from conftest import fixture_path, shared_path

TIMEOUT = int(os.environ.get("CNFMCE_MP_TIMEOUT", "240"))


def _run(script: str, tmp_path, timeout: int = TIMEOUT) -> str:
    """Runs ``script`` in a child interpreter (its own process group, so that on a timeout the
    pool workers it forked are killed too) and returns its stdout."""
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, HF_DATASETS_CACHE=str(tmp_path / "ds-cache"), HF_HUB_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    p = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, cwd=str(tmp_path), start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"timed out after {timeout}s (deadlock?); stderr: {err[-2000:]}")
    assert p.returncode == 0, err[-3000:]
    return out


def test_pickle_roundtrip(bpe, bpe_hf, tmp_path):
    docs = ["hello world <|endoftext|>", "数字 123 😀", "a" * 1000]
    for tok in (bpe, bpe_hf, bpe.with_options(algorithm="fmm"),
                bpe_hf.with_options(boundary_penalty=0.3, token_preference=False)):
        back = pickle.loads(pickle.dumps(tok))
        assert back.options == tok.options and back.special_tokens == tok.special_tokens
        assert back.vocab_size == tok.vocab_size
        for d in docs:
            assert back.encode(d, allowed_special="all") == tok.encode(d, allowed_special="all")
    # The pickle holds the vocabulary: the file it came from is not read again.
    path = tmp_path / "tok.json"
    small = cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)] + [b"hello"],
                                         special_tokens=["<s>"])
    small.metadata["note"] = "kept"
    small.save(path)
    loaded = cnfmce.Tokenizer.load(path)
    data = pickle.dumps(loaded)
    path.unlink()
    back = pickle.loads(data)
    assert back.encode("hello<s>", allowed_special="all") == [256, 257]
    assert back.metadata["note"] == "kept"


def test_pickle_transformers_tokenizer(bpe):
    pytest.importorskip("transformers")
    hf = bpe.to_transformers(eos_token="<|endoftext|>", pad_token="<|pad|>", add_eos_token=True)
    back = pickle.loads(pickle.dumps(hf))
    texts = ["hello world", "ab"]
    assert back(texts, padding=True)["input_ids"] == hf(texts, padding=True)["input_ids"]
    assert back.convert_ids_to_tokens(back("the")["input_ids"]) == ["the", "<|endoftext|>"]


_SETUP = """
import gzip, json, multiprocessing as mp, sys
import cnfmce
docs = [json.loads(l)["text"] for l in gzip.open({corpus!r}, "rt", encoding="utf-8")][:120]
tok = cnfmce.Tokenizer.from_tiktoken({vocab!r}, special_tokens={{"<|endoftext|>": 8192}})
want = [tok.encode(d) for d in docs]

def work(args):
    t, chunk = args
    return t.encode_batch(chunk)

def work_global(chunk):
    return tok.encode_batch(chunk)
"""


def _setup():
    return _SETUP.format(corpus=str(fixture_path("corpora", "en", "train.jsonl.gz")),
                         vocab=str(fixture_path("vocabs", "bpe8k.tiktoken")))


def test_multiprocessing_spawn(tmp_path):
    out = _run(_setup() + """
if __name__ == "__main__":
    chunks = [docs[k::4] for k in range(4)]
    with mp.get_context("spawn").Pool(2) as pool:
        got = pool.map(work, [(tok, c) for c in chunks])
    assert got == [want[k::4] for k in range(4)]
    print("ok")
""", tmp_path)
    assert out.strip().endswith("ok")


def test_multiprocessing_fork_after_batch(tmp_path):
    # The parent has used the parallel encoder (its thread pool exists) before forking.
    out = _run(_setup() + """
if __name__ == "__main__":
    assert tok.encode_batch(docs) == want
    chunks = [docs[k::4] for k in range(4)]
    with mp.get_context("fork").Pool(2) as pool:
        got = pool.map(work_global, chunks)
        got2 = pool.map(work, [(tok, c) for c in chunks])
    assert got == got2 == [want[k::4] for k in range(4)]
    assert tok.encode_batch(docs) == want   # and the parent still works
    print("ok")
""", tmp_path)
    assert out.strip().endswith("ok")


def test_datasets_map_num_proc(tmp_path):
    pytest.importorskip("datasets")
    pytest.importorskip("transformers")
    out = _run(_setup() + """
import datasets
if __name__ == "__main__":
    assert tok.encode_batch(docs[:10]) == want[:10]   # the pool exists in the parent
    ds = datasets.Dataset.from_dict({"text": docs})
    mapped = ds.map(lambda b: {"ids": tok.encode_batch(b["text"])}, batched=True, batch_size=16,
                    num_proc=2, remove_columns=["text"])
    assert mapped["ids"] == want
    hf = tok.to_transformers(eos_token="<|endoftext|>", add_eos_token=True)
    mapped = ds.map(lambda b: hf(b["text"]), batched=True, batch_size=16, num_proc=2,
                    remove_columns=["text"])
    assert mapped["input_ids"] == [w + [8192] for w in want]
    assert mapped["attention_mask"] == [[1] * (len(w) + 1) for w in want]
    print("ok")
""", tmp_path)
    assert out.strip().endswith("ok")
