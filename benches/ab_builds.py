"""CPU-time A/B of cnfmce builds, interleaved, for a change's effect on a loaded machine.

    python benches/ab_builds.py old=DIR_A new=DIR_B [--rounds 6] [--vocabs cnf250k,o200k,tiktoken]
                                [--categories en,code,multi,zh] [--max-bytes 1000000] [--reps 2]
                                [--cache primed|fresh] [--prime-bytes 4000000]

Each DIR holds a built ``cnfmce`` package, e.g. an unpacked wheel of a commit:

    maturin build --release -o /tmp/w && mkdir DIR && python -m zipfile -e /tmp/w/cnfmce-*.whl DIR

Every round runs each build once, in a fresh subprocess (``PYTHONPATH=DIR``), the order rotated
from round to round; a subprocess loads the tokenizers (not timed), then encodes each category's
first documents (per-document ``encode``; tiktoken: ``encode_ordinary``) ``--reps`` times and
keeps its best CPU time (``time.process_time``). Each repeat of a cnfmce build uses a new encoder
(``with_options()``: empty piece cache) that first encodes, untimed, ``--prime-bytes`` of the
category's training text (``--cache primed``; ``fresh``: nothing), so no repeat replays pieces
solved by the one before (benches/encode.py ``--cache``).
Printed: per build the median MB/s over rounds (min-max), then each build's ratio to the first
build's in the same round (median, min-max) and the load average after each round. Token counts must agree between builds (checked). CPU time
is still inflated by other processes sharing caches and cores: trust paired ratios of many
rounds, and profiles (``perf record``) for the mechanism.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCHES = Path(__file__).resolve().parent

WORKER = r"""
import gc, json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import baselines, encode
cats, vocabs, max_bytes, reps = sys.argv[2].split(","), sys.argv[3].split(","), int(sys.argv[4]), int(sys.argv[5])
cache, prime_bytes = sys.argv[6], int(sys.argv[7])
import cnfmce
fns = {}
for v in vocabs:
    if v == "cnf250k":
        fns[v] = cnfmce.Tokenizer.load(str(encode.cnf250k_path()))
    elif v == "tiktoken":
        fns[v] = baselines.tiktoken_encoding("o200k_base")
    else:
        fns[v] = cnfmce.Tokenizer.from_tiktoken(str(baselines.vocab_path(v + "_base")))
out = {}
for c in cats:
    docs = encode.load_docs(c, "test", max_bytes)
    nbytes = encode.utf8_len(docs)
    prime = encode.load_docs(c, "train", prime_bytes) if cache == "primed" else []
    for v, f in fns.items():
        best, ntok = None, 0
        for _ in range(reps):
            # cnfmce: a new encoder per repeat (empty piece cache), primed untimed on training text
            enc = f.encode_ordinary if v == "tiktoken" else f.with_options().encode
            for d in prime if v != "tiktoken" else ():
                enc(d)
            gc.collect(); gc.disable()
            t = time.process_time()
            ntok = sum(len(enc(d)) for d in docs)
            dt = time.process_time() - t
            gc.enable()
            best = dt if best is None else min(best, dt)
        out[f"{v}/{c}"] = [nbytes / best / 1e6, ntok]
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="NAME=DIR, DIR containing a built cnfmce package")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=2, help="repeats per subprocess, best of")
    ap.add_argument("--vocabs", default="cnf250k,o200k,tiktoken",
                    help="cnf250k (benches/out's CNF-250k), o200k, cl100k (MCE), tiktoken (o200k)")
    ap.add_argument("--categories", default="en,code,multi,zh")
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    ap.add_argument("--cache", choices=("primed", "fresh"), default="primed",
                    help="cnfmce's piece cache before each repeat: primed (a new encoder that first "
                         "encoded --prime-bytes of the category's training text; default) or fresh")
    ap.add_argument("--prime-bytes", type=int, default=4_000_000)
    a = ap.parse_args()
    builds = []
    for b in a.builds:
        name, sep, d = b.partition("=")
        if not sep or not (Path(d) / "cnfmce").is_dir():
            ap.error(f"{b!r}: expected NAME=DIR with DIR/cnfmce a built package")
        builds.append((name, d))
    res = {n: [] for n, _ in builds}
    for r in range(a.rounds):
        k = r % len(builds)
        for name, d in builds[k:] + builds[:k]:
            env = dict(os.environ, PYTHONPATH=d)
            p = subprocess.run([sys.executable, "-c", WORKER, str(BENCHES), a.categories, a.vocabs,
                                str(a.max_bytes), str(a.reps), a.cache, str(a.prime_bytes)], env=env, capture_output=True, text=True)
            if p.returncode:
                sys.exit(f"build {name} failed:\n{p.stderr}")
            res[name].append(json.loads(p.stdout.strip().splitlines()[-1]))
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"round {r + 1}/{a.rounds}: load {load}", file=sys.stderr, flush=True)
    first = builds[0][0]
    keys = list(res[first][0])
    print("| row | " + " | ".join(f"{n} MB/s" for n, _ in builds) + " | "
          + " | ".join(f"{n} / {first}" for n, _ in builds[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(builds) - 1))
    for key in keys:
        cells = []
        for n, _ in builds:
            v = [x[key][0] for x in res[n]]
            cells.append(f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})")
        for n, _ in builds[1:]:
            rs = [x[key][0] / y[key][0] for x, y in zip(res[n], res[first])]
            cells.append(f"{statistics.median(rs):.3f} ({min(rs):.2f}-{max(rs):.2f})")
        print(f"| {key} | " + " | ".join(cells) + " |")
        counts = {x[key][1] for n, _ in builds for x in res[n]}
        if len(counts) > 1:
            print(f"TOKEN COUNTS DIFFER for {key}: {sorted(counts)}", file=sys.stderr)


if __name__ == "__main__":
    main()
