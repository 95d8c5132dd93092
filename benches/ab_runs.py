"""CPU-time A/B of two cnfmce builds on long runs of one byte (issue 11 item 4).

    python benches/ab_runs.py old=DIR_A new=DIR_B [--rounds 5] [--mb 10] [--bytes " -\\t\\n"]

Each DIR holds a built ``cnfmce`` package (an unpacked wheel, as for ``benches/ab_builds.py``).
Every round runs one subprocess per build (the order alternating from round to round); each loads
o200k_base from ``$CNFMCE_SHARED/vocabs`` and, for each byte, encodes a run of ``--mb`` MB of it
once untimed, then three times timed by ``time.process_time`` (best of three). Printed per build
and byte: the median CPU time over rounds (min-max) and the MB/s it gives, then the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import cnfmce
tok = cnfmce.Tokenizer.from_tiktoken(os.path.join(os.environ.get("CNFMCE_SHARED", "../shared"), "vocabs", "o200k_base.tiktoken"))
n = int(float(sys.argv[2]) * 1e6)
out = {}
for b in json.loads(sys.argv[3]):
    s = b * n
    tok.encode(s)
    ts = []
    for _ in range(3):
        t0 = time.process_time()
        tok.encode(s)
        ts.append(time.process_time() - t0)
    out[b] = min(ts)
print(json.dumps(out))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs=2, help="NAME=DIR, DIR containing a built cnfmce package")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mb", type=float, default=10.0, help="run length in MB (default 10)")
    ap.add_argument("--bytes", default=" -\\t\\n",
                    help="the repeated bytes (ASCII, backslash escapes allowed: \\t, \\n), one run each")
    a = ap.parse_args()
    a.bytes = a.bytes.encode("ascii").decode("unicode_escape")
    builds = [b.split("=", 1) for b in a.builds]
    res: dict = {n: {} for n, _ in builds}
    for r in range(a.rounds):
        for name, d in (builds if r % 2 == 0 else builds[::-1]):
            p = subprocess.run([sys.executable, "-c", CHILD, d, str(a.mb), json.dumps(list(a.bytes))],
                               capture_output=True, text=True, check=True)
            for b, t in json.loads(p.stdout).items():
                res[name].setdefault(b, []).append(t)
    for name, _ in builds:
        for b, ts in res[name].items():
            med = statistics.median(ts)
            print(f"{name}: {b!r} x {a.mb:g} MB: CPU {1000 * med:.1f} ms ({1000 * min(ts):.1f}-{1000 * max(ts):.1f}), "
                  f"{a.mb / med:.1f} MB/s ({a.mb / max(ts):.1f}-{a.mb / min(ts):.1f})")
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]) if os.path.exists("/proc/loadavg") else "?")


if __name__ == "__main__":
    main()
