"""In-process, finely interleaved CPU-time A/B of two cnfmce builds (for small effects under load).

    python benches/ab_inprocess.py old=DIR_A new=DIR_B [--vocab o200k] [--categories en,code,multi]
                                   [--rounds 5] [--max-bytes 1000000] [--prime-bytes 4000000]

Each DIR holds a built ``cnfmce`` package (an unpacked wheel, as for ``benches/ab_builds.py``).
Both builds are imported into one process under other names (``cnfmce_old``, ``cnfmce_new``:
the package's own imports are relative), each loads the vocabulary once. Every round makes a new
encoder of each build (``with_options()``: empty piece cache), primes both, untimed, on
``--prime-bytes`` of the category's training text, then encodes the test documents in blocks of
20 documents, alternating the builds block by block (the first of each pair alternating too), and
adds up each build's CPU time (``time.process_time``). Printed per category: the median over
rounds of new's speed ÷ old's (min-max) and each build's MB/s, then the load average.

Other processes slow both builds alike within a few milliseconds, so the ratio's spread is a few
percent where ``ab_builds.py`` (one subprocess per build and round) spreads ±20% at a load of
3-6. The two builds' caches and automata share the CPU caches and the TLB, so absolute MB/s are
lower than alone, and effects on memory behaviour can be larger than alone. Token counts must
agree (checked).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

BENCHES = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHES))

import baselines  # noqa: E402
import encode  # noqa: E402


def load_build(name: str, directory: str, tmp: str):
    """The cnfmce package in ``directory``, imported as ``cnfmce_<name>``."""
    src = Path(directory) / "cnfmce"
    if not (src / "__init__.py").exists():
        raise SystemExit(f"{directory}: no cnfmce package (expected {src}/__init__.py)")
    root = Path(tmp) / name
    shutil.copytree(src, root / f"cnfmce_{name}")
    sys.path.insert(0, str(root))
    return importlib.import_module(f"cnfmce_{name}")


def tokenizer(mod, vocab: str):
    if vocab == "cnf250k":
        return mod.Tokenizer.load(str(encode.cnf250k_path()))
    if vocab == "synthetic5m":  # the filtering case of benches/ab_synthetic.py
        return mod.Tokenizer.load(str(encode.synthetic_paths(5_000_000, 0)[0]))
    return mod.Tokenizer.from_tiktoken(str(baselines.vocab_path(vocab + "_base")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs=2, help="NAME=DIR, DIR containing a built cnfmce package")
    ap.add_argument("--vocab", default="o200k", help="o200k, cl100k (tiktoken files), cnf250k or "
                    "synthetic5m (the 5M-entry vocabulary of benches/ab_synthetic.py)")
    ap.add_argument("--categories", default="en,code,multi")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    ap.add_argument("--prime-bytes", type=int, default=4_000_000)
    a = ap.parse_args()
    names, dirs = zip(*(b.split("=", 1) for b in a.builds))
    if len(set(names)) != 2:
        raise SystemExit("two builds with different names")
    with tempfile.TemporaryDirectory() as tmp:
        mods = [load_build(n, d, tmp) for n, d in zip(names, dirs)]
        toks = [tokenizer(m, a.vocab) for m in mods]
        for cat in a.categories.split(","):
            docs = encode.load_docs(cat, "test", a.max_bytes)
            prime = encode.load_docs(cat, "train", a.prime_bytes) if a.prime_bytes else []
            nbytes = encode.utf8_len(docs)
            blocks = [docs[i:i + 20] for i in range(0, len(docs), 20)]
            ratios, total = [], [0.0, 0.0]
            for r in range(a.rounds):
                encs = [t.with_options() for t in toks]
                for e in encs:
                    for d in prime:
                        e.encode(d)
                spent, ntok = [0.0, 0.0], [0, 0]
                gc.collect()
                gc.disable()
                try:
                    for bi, blk in enumerate(blocks):
                        for k in ((0, 1) if (bi + r) % 2 == 0 else (1, 0)):
                            f = encs[k].encode
                            t = time.process_time()
                            ntok[k] += sum(len(f(d)) for d in blk)
                            spent[k] += time.process_time() - t
                finally:
                    gc.enable()
                if ntok[0] != ntok[1]:
                    raise SystemExit(f"{cat}: token counts differ: {ntok}")
                ratios.append(spent[0] / spent[1])
                total = [total[0] + spent[0], total[1] + spent[1]]
            mbs = [nbytes * a.rounds / t / 1e6 for t in total]
            print(f"{a.vocab}/{cat}: {names[1]} / {names[0]} {statistics.median(ratios):.3f} "
                  f"({min(ratios):.3f}-{max(ratios):.3f}); MB/s {names[0]} {mbs[0]:.1f}, {names[1]} {mbs[1]:.1f}",
                  flush=True)
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?")


if __name__ == "__main__":
    main()
