"""CPU-time A/B of cnfmce builds loading the synthetic 5M-entry vocabulary of ``benches/encode.py``
(``benches/out/synthetic-5000000-seed0.cnfmce.json``, made by
``python benches/encode.py --skip throughput,counts,big``).

    python benches/ab_load.py old=DIR_A new=DIR_B [more=DIR_C ...] [--rounds 3]

Each DIR holds a built ``cnfmce`` package (an unpacked wheel, as for ``benches/ab_builds.py``).
Every round runs each build once, in a fresh subprocess, in the given order: ``Tokenizer.load``
of the file, timed by CPU time (``time.process_time``, all threads) and wall time; then the peak
RSS (VmHWM) and the token count of a short text (which must agree between builds). Printed per
round and build one JSON line with the load average; at the end, per build the median CPU and
wall time and the largest peak, and each build's CPU-time ratio to the first build's in the same
round (median, min-max). Under load, compare the CPU times; wall times are for a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

BENCHES = Path(__file__).resolve().parent

WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
import encode, cnfmce
assert cnfmce.__file__.startswith(sys.argv[1]), cnfmce.__file__
t0, w0 = time.process_time(), time.perf_counter()
big = cnfmce.Tokenizer.load(str(encode.synthetic_paths(5_000_000, 0)[0]))
cpu, wall = time.process_time() - t0, time.perf_counter() - w0
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
ntok = len(big.encode("The quick brown fox jumps over the lazy dog. " * 50))
print(json.dumps({"cpu": cpu, "wall": wall, "hwm_mib": hwm / 1024, "ntok": ntok}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="NAME=DIR, DIR containing a built cnfmce package")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    builds = [b.split("=", 1) for b in a.builds]
    if len({n for n, _ in builds}) != len(builds):
        raise SystemExit("builds need different names")
    res = {n: [] for n, _ in builds}
    for r in range(a.rounds):
        ntoks = set()
        for name, d in builds:
            p = subprocess.run([sys.executable, "-c", WORKER, str(Path(d).resolve()), str(BENCHES)],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit(f"{name}: exit {p.returncode}: {p.stderr.strip()[-500:]}")
            out = json.loads(p.stdout.strip().splitlines()[-1])
            out["loadavg"] = open("/proc/loadavg").read().split()[0]
            res[name].append(out)
            ntoks.add(out["ntok"])
            print(json.dumps({"round": r + 1, "build": name, **{k: round(v, 2) if isinstance(v, float) else v
                                                               for k, v in out.items()}}), flush=True)
        if len(ntoks) != 1:
            raise SystemExit(f"token counts differ between builds: {sorted(ntoks)}")
    first = builds[0][0]
    for name, _ in builds:
        rs = res[name]
        line = (f"{name}: load CPU {statistics.median(x['cpu'] for x in rs):.2f} s, wall "
                f"{statistics.median(x['wall'] for x in rs):.2f} s (medians), peak {max(x['hwm_mib'] for x in rs):.0f} MiB")
        if name != first:
            q = [x["cpu"] / y["cpu"] for x, y in zip(rs, res[first])]
            line += f"; CPU / {first}: {statistics.median(q):.3f} ({min(q):.3f}-{max(q):.3f})"
        print(line)


if __name__ == "__main__":
    main()
