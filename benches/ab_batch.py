"""In-process A/B of two cnfmce builds on ``encode_batch`` with 1 and 2 threads (issue 11 item 2).

    python benches/ab_batch.py old=DIR_A new=DIR_B [--categories en,code,multi,zh] [--rounds 10]
                               [--vocab o200k] [--cache kept|primed]

Each DIR holds a built ``cnfmce`` package (an unpacked wheel; imported under another name as in
``benches/ab_inprocess.py``). Both builds load the vocabulary once; each round runs, for both
builds (the first alternating by round), ``encode_batch(docs, num_threads=1)`` then
``num_threads=2`` over the category's whole test set, the result freed at once (as
``benches/batch_threads.py`` does), and records wall time and the process's CPU time
(``time.process_time``: every thread). Printed per category and build: the median over rounds of
the same-round wall ratio ``t(1 thread) / t(2 threads)`` (min-max), which needs two free cores
to mean anything, and the median CPU milliseconds per batch with 1 and 2 threads; then new's
CPU ÷ old's (median of same-round ratios), which other processes' load disturbs much less; and
the load average. Token lists must agree (checked once per category). Nothing is asserted.

``--cache kept`` (default): each build's one tokenizer throughout, so its piece cache holds the
earlier rounds' pieces. ``--cache primed`` (``benches/encode.py``'s default protocol): before
each timed batch, untimed, a new encoder over the same vocabulary (``with_options()``, empty
cache) encodes ``encode.PRIME_BYTES`` of the category's training text with the same call
(same ``num_threads``), and that encoder is timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import encode  # noqa: E402
from ab_inprocess import load_build, tokenizer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs=2, help="NAME=DIR, DIR containing a built cnfmce package")
    ap.add_argument("--vocab", default="o200k", help="o200k, cl100k (tiktoken files) or cnf250k")
    ap.add_argument("--categories", default="en,code,multi,zh")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--cache", choices=("kept", "primed"), default="kept")
    a = ap.parse_args()
    names, dirs = zip(*(b.split("=", 1) for b in a.builds))
    if len(set(names)) != 2:
        raise SystemExit("two builds with different names")
    with tempfile.TemporaryDirectory() as tmp:
        mods = [load_build(n, d, tmp) for n, d in zip(names, dirs)]
        toks = [tokenizer(m, a.vocab) for m in mods]
        for cat in a.categories.split(","):
            docs = encode.load_docs(cat)
            prime = encode.load_docs(cat, "train", encode.PRIME_BYTES) if a.cache == "primed" else None
            first = [t.encode_batch(docs, num_threads=n) for t in toks for n in (1, 2)]
            if any(x != first[0] for x in first):
                raise SystemExit(f"{cat}: the builds' results differ")
            del first
            wall = [{1: [], 2: []}, {1: [], 2: []}]
            cpu = [{1: [], 2: []}, {1: [], 2: []}]
            for r in range(a.rounds):
                for b in ((0, 1) if r % 2 == 0 else (1, 0)):
                    for n in (1, 2):
                        t = toks[b]
                        if prime is not None:
                            t = t.with_options()
                            t.encode_batch(prime, num_threads=n)
                        c0, t0 = time.process_time(), time.perf_counter()
                        t.encode_batch(docs, num_threads=n)
                        wall[b][n].append(time.perf_counter() - t0)
                        cpu[b][n].append(time.process_time() - c0)
            parts = []
            for b in (0, 1):
                ratios = [x / y for x, y in zip(wall[b][1], wall[b][2])]
                parts.append(f"{names[b]}: 1/2-thread wall {statistics.median(ratios):.2f}x "
                             f"({min(ratios):.2f}-{max(ratios):.2f}), CPU ms n=1 "
                             f"{statistics.median(cpu[b][1]) * 1e3:.1f} n=2 {statistics.median(cpu[b][2]) * 1e3:.1f}")
            rel = {n: [y / x for x, y in zip(cpu[0][n], cpu[1][n])] for n in (1, 2)}
            print(f"{a.vocab}/{cat} ({a.cache}): " + " | ".join(parts)
                  + f" | CPU {names[1]}/{names[0]} n=1 {statistics.median(rel[1]):.3f} "
                  f"({min(rel[1]):.3f}-{max(rel[1]):.3f}) n=2 {statistics.median(rel[2]):.3f} "
                  f"({min(rel[2]):.3f}-{max(rel[2]):.3f})"
                  + f" | load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
