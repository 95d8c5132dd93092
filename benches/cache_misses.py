"""Share of the short pieces solved rather than replayed by the piece cache, 1 vs 2+ threads.

    maturin build --release --features python,cache-stats -o /tmp/w_stats
    python -m zipfile -e /tmp/w_stats/cnfmce-*.whl /tmp/stats
    python benches/cache_misses.py /tmp/stats [--categories en,code,multi,zh] [--vocab o200k]
                                   [--threads 1,2]

Needs a build with the ``cache-stats`` feature (``Tokenizer._core._piece_cache_stats``). Per
category and thread count: a new encoder (``with_options()``, empty cache) encodes
``encode.PRIME_BYTES`` of the category's training text with ``encode_batch(num_threads=n)``
(``benches/encode.py``'s primed protocol), then the test set twice the same way; printed: the
misses ÷ (hits + misses) of the first test batch ("primed") and of the second ("kept"), and the
cache's busy / torn reads, lost writer races and promotions over the three batches.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import encode  # noqa: E402
from ab_inprocess import load_build, tokenizer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", help="directory containing a cnfmce package built with cache-stats")
    ap.add_argument("--vocab", default="o200k")
    ap.add_argument("--categories", default="en,code,multi,zh")
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        mod = load_build("stats", a.build, tmp)
        tok = tokenizer(mod, a.vocab)
        if not hasattr(tok._core, "_piece_cache_stats"):
            raise SystemExit("this build has no cache-stats feature")
        for cat in a.categories.split(","):
            docs = encode.load_docs(cat)
            prime = encode.load_docs(cat, "train", encode.PRIME_BYTES)
            for n in (int(x) for x in a.threads.split(",")):
                t = tok.with_options()
                t.encode_batch(prime, num_threads=n)
                s0 = t._core._piece_cache_stats()
                t.encode_batch(docs, num_threads=n)
                s1 = t._core._piece_cache_stats()
                t.encode_batch(docs, num_threads=n)
                s2 = t._core._piece_cache_stats()
                share = [(y[1] - x[1]) / ((y[0] - x[0]) + (y[1] - x[1])) for x, y in ((s0, s1), (s1, s2))]
                print(f"{a.vocab}/{cat} threads {n}: solved primed {100 * share[0]:.2f}% kept "
                      f"{100 * share[1]:.2f}% | busy {s2[2]} torn {s2[3]} lost {s2[4]} promoted {s2[6]} "
                      f"of {s2[0] + s2[1]} short pieces", flush=True)


if __name__ == "__main__":
    main()
