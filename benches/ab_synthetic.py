"""CPU-time A/B of cnfmce builds on the filtering case: MCE over the synthetic 5M-entry
vocabulary of ``benches/encode.py`` (``benches/out/synthetic-5000000-seed0.cnfmce.json``, made by
``python benches/encode.py --skip throughput,counts,big``).

    python benches/ab_synthetic.py old=DIR_A new=DIR_B [more=DIR_C ...] [--rounds 6] [--reps 3]
                                   [--max-bytes 1000000] [--prime-bytes 4000000]

Each DIR holds a built ``cnfmce`` package (an unpacked wheel, as for ``benches/ab_builds.py``).
Every round runs each build once, in a fresh subprocess, the order rotated from round to round;
a subprocess loads the vocabulary (its CPU time is reported), then ``--reps`` times: a new encoder
(``with_options()``) first encodes, untimed, ``--prime-bytes`` of en training text (the primed
cache of encode.py), then the first ``--max-bytes`` of en test text (per-document ``encode``),
timed by ``time.process_time``; the best repeat counts. Printed per round: MB/s of each build and
the load average; at the end, per build the median MB/s (min-max), the load CPU time and the peak
RSS (VmHWM), and each build's ratio to the first build's in the same round (median, min-max).
Token counts must agree between builds (checked).
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
import json, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
import encode, cnfmce
max_bytes, reps, prime_bytes = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
docs = encode.load_docs("en", "test", max_bytes)
prime = encode.load_docs("en", "train", prime_bytes) if prime_bytes else []
n = encode.utf8_len(docs)
t0 = time.process_time()
big = cnfmce.Tokenizer.load(str(encode.synthetic_paths(5_000_000, 0)[0]))
load = time.process_time() - t0
best, ntok = None, 0
for _ in range(reps):
    k = big.with_options()
    for d in prime:
        k.encode(d)
    t0 = time.process_time()
    ntok = sum(len(k.encode(d)) for d in docs)
    dt = time.process_time() - t0
    best = dt if best is None else min(best, dt)
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"mbs": n / best / 1e6, "load": load, "ntok": ntok, "hwm_mib": hwm / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="NAME=DIR, DIR containing a built cnfmce package")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3, help="repeats per subprocess, best of")
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    ap.add_argument("--prime-bytes", type=int, default=4_000_000)
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.builds]
    if any(len(b) != 2 for b in builds) or len(builds) < 2:
        ap.error("give at least two builds as NAME=DIR")
    res = {n: [] for n, _ in builds}
    ratios = {n: [] for n, _ in builds[1:]}
    for r in range(args.rounds):
        k = r % len(builds)
        got = {}
        for name, d in builds[k:] + builds[:k]:
            out = subprocess.run([sys.executable, "-c", WORKER, str(Path(d).resolve()), str(BENCHES),
                                  str(args.max_bytes), str(args.reps), str(args.prime_bytes)],
                                 capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
            if out.returncode:
                sys.exit(f"{name}: worker failed\n{out.stderr[-3000:]}")
            got[name] = json.loads(out.stdout.strip().splitlines()[-1])
            res[name].append(got[name])
        if len({g["ntok"] for g in got.values()}) != 1:
            sys.exit(f"token counts differ between builds: {got}")
        for name, _ in builds[1:]:
            ratios[name].append(got[name]["mbs"] / got[builds[0][0]]["mbs"])
        print(f"round {r + 1}/{args.rounds}: " + "  ".join(
            f"{n} {got[n]['mbs']:.2f} MB/s (load {got[n]['load']:.1f} s)" for n, _ in builds)
            + f"  loadavg {' '.join(open('/proc/loadavg').read().split()[:3])}", flush=True)
    for name, _ in builds:
        m = [g["mbs"] for g in res[name]]
        print(f"{name}: {statistics.median(m):.2f} MB/s ({min(m):.2f}-{max(m):.2f}); load CPU "
              f"{statistics.median(g['load'] for g in res[name]):.1f} s; peak RSS "
              f"{statistics.median(g['hwm_mib'] for g in res[name]):.0f} MiB")
    for name, rs in ratios.items():
        print(f"{name} / {builds[0][0]}: {statistics.median(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})")


if __name__ == "__main__":
    main()
