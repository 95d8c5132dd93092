"""What a new tokenizer's first calls cost: load, first ``encode``, a new encoder's first ``encode``.

    python benches/first_use.py [--vocab PATH.tiktoken] [--runs 3] [--pkg DIR ...]

Each run is a fresh process: it loads the vocabulary (``Tokenizer.from_tiktoken``), times its
first ``encode`` of a short text and the 20 first together, then ``with_options()`` (a new
encoder: empty piece cache) and its first ``encode``, and reports the peak RSS. ``--pkg DIR``
runs a build unpacked in DIR (as for ``ab_inprocess.py``) instead of the installed one; several
are run in turn, run by run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baselines  # noqa: E402


def child(vocab: str) -> None:
    import resource
    import time
    import cnfmce
    t0 = time.perf_counter()
    tok = cnfmce.Tokenizer.from_tiktoken(vocab)
    load = time.perf_counter() - t0
    times = []
    for i in range(20):
        a = time.perf_counter()
        tok.encode(f"hello world {i} and a few more words here")
        times.append(time.perf_counter() - a)
    a = time.perf_counter()
    tok.with_options().encode("hello world")
    fresh = time.perf_counter() - a
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"load {load:.2f} s, first encode {1e3 * times[0]:.1f} ms, first 20 {1e3 * sum(times):.1f} ms, "
          f"with_options + encode {1e3 * fresh:.1f} ms, peak RSS {rss:.0f} MB ({cnfmce.__file__})",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", default=str(baselines.vocab_path("o200k_base")))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pkg", action="append", default=[])
    ap.add_argument("--_child", action="store_true")
    a = ap.parse_args()
    if a._child:
        child(a.vocab)
        return
    for _ in range(a.runs):
        for pkg in a.pkg or [None]:
            env = dict(os.environ)
            if pkg:
                env["PYTHONPATH"] = os.pathsep.join([pkg, env.get("PYTHONPATH", "")])
            subprocess.run([sys.executable, __file__, "--_child", "--vocab", a.vocab], env=env,
                           check=True, cwd="/")


if __name__ == "__main__":
    main()
