"""cnfmce alone on text it has not seen, then on the same text again (every piece in the cache).

    python benches/first_sight.py [--categories en,code] [--vocab PATH.tiktoken] [--warm-docs 300]

One process per category: the tokenizer is loaded, warmed on the first ``--warm-docs`` documents of
the category's training set, then encodes the whole test set once (first sight) and once more
(every piece cached); MB/s of UTF-8 by thread CPU time. Unlike ``peers.py`` no other encoder runs
in between, so the rates are those of a process that encodes with one tokenizer.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def shared() -> Path:
    return Path(os.environ.get("CNFMCE_SHARED", str(Path(__file__).resolve().parents[2] / "shared")))


def child(cat: str, vocab: str, warm_docs: int) -> None:
    import cnfmce
    corp = shared() / "corpora" / cat
    with gzip.open(corp / "test.jsonl.gz", "rt", encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f]
    with gzip.open(corp / "train.jsonl.gz", "rt", encoding="utf-8") as f:
        warm = [json.loads(line)["text"] for _, line in zip(range(warm_docs), f)]
    tok = cnfmce.Tokenizer.from_tiktoken(vocab)
    for d in warm:
        tok.encode(d)
    n = sum(len(d.encode()) for d in docs)
    rates = []
    for _ in range(2):
        t = time.thread_time()
        for d in docs:
            tok.encode(d)
        rates.append(n / 1e6 / (time.thread_time() - t))
    print(f"| {cat} | {n / 1e6:.1f} MB | {rates[0]:.1f} MB/s | {rates[1]:.1f} MB/s |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--categories", default="en,code")
    ap.add_argument("--vocab", default=str(shared() / "vocabs" / "o200k_base.tiktoken"))
    ap.add_argument("--warm-docs", type=int, default=300)
    ap.add_argument("--_child")
    a = ap.parse_args()
    if a._child:
        child(a._child, a.vocab, a.warm_docs)
        return
    print("| set | text | first sight | again |\n|---|---:|---:|---:|", flush=True)
    for cat in a.categories.split(","):
        subprocess.run([sys.executable, __file__, "--_child", cat, "--vocab", a.vocab,
                        "--warm-docs", str(a.warm_docs)], check=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
