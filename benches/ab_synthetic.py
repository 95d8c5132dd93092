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
Token counts must agree between builds (checked). A build whose ``Tokenizer`` has no
``with_options()`` gets a fresh ``Tokenizer.load`` per repeat instead (same priming, same text).

``--train``: the filtering pass as training runs it instead. Each subprocess runs
``cnfmce.train`` on the first ``--train-bytes`` of en training text (all of it by default) with
``--vocab-size`` (32000) and ``--raw-vocab-size`` (5,000,000), ``num_threads=1``,
``progress=False``; printed per build: the filtering pass's CPU time (``time.process_time`` from
the start of the last pass over the documents, the filtering pass, to the end of ``train``:
the pass plus the final selection), its MB/s by that CPU time and by the report's wall seconds
(``metadata["filtering"]``), the whole run's CPU time, and the peak RSS of the training process
(VmHWM). The trained vocabularies must agree between builds (sha256 of the token table,
checked).
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
fresh = not hasattr(big, "with_options")
for _ in range(reps):
    # A build without with_options(): a fresh load per repeat (untimed), the same cold cache.
    k = cnfmce.Tokenizer.load(str(encode.synthetic_paths(5_000_000, 0)[0])) if fresh else big.with_options()
    for d in prime:
        k.encode(d)
    t0 = time.process_time()
    ntok = sum(len(k.encode(d)) for d in docs)
    dt = time.process_time() - t0
    best = dt if best is None else min(best, dt)
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"mbs": n / best / 1e6, "load": load, "ntok": ntok, "hwm_mib": hwm / 1024}))
"""


TRAIN_WORKER = r"""
import hashlib, json, sys, time
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
import encode, cnfmce
train_bytes, vocab_size, raw_size = int(sys.argv[3]) or None, int(sys.argv[4]), int(sys.argv[5])
marks = []


class Docs(list):
    # The start of every pass over the documents (counting rounds, then the filtering pass).
    def __iter__(self):
        marks.append(time.process_time())
        return list.__iter__(self)


docs = Docs(encode.load_docs("en", "train", train_bytes))
t0 = time.process_time()
tok = cnfmce.train(docs, vocab_size=vocab_size, raw_vocab_size=raw_size, num_threads=1,
                   progress=False)
t1 = time.process_time()
f = tok.metadata["filtering"]
tb = tok.token_bytes()  # id -> bytes (every build has this form)
table = hashlib.sha256(b"".join(i.to_bytes(4, "little") + len(b).to_bytes(2, "little") + b
                                for i, b in sorted(tb.items()))).hexdigest()
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
print(json.dumps({"filter_cpu": t1 - marks[-1], "total_cpu": t1 - t0, "bytes": f["bytes"],
                  "filter_wall": f["seconds"], "ntok": f["tokens"], "passes": len(marks),
                  "raw": tok.metadata.get("raw_vocabulary"), "table": table[:16],
                  "hwm_mib": hwm / 1024}))
"""


def train_main(args, builds) -> None:
    res = {n: [] for n, _ in builds}
    ratios = {n: [] for n, _ in builds[1:]}
    for r in range(args.rounds):
        k = r % len(builds)
        got = {}
        for name, d in builds[k:] + builds[:k]:
            load0 = open("/proc/loadavg").read().split()[0]
            out = subprocess.run([sys.executable, "-c", TRAIN_WORKER, str(Path(d).resolve()),
                                  str(BENCHES), str(args.train_bytes), str(args.vocab_size),
                                  str(args.raw_vocab_size)],
                                 capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ""})
            if out.returncode:
                sys.exit(f"{name}: worker failed\n{out.stderr[-3000:]}")
            g = json.loads(out.stdout.strip().splitlines()[-1])
            g["loadavg"] = f"{load0}-{open('/proc/loadavg').read().split()[0]}"
            got[name] = g
            res[name].append(g)
        if len({(g["table"], g["ntok"]) for g in got.values()}) != 1:
            sys.exit(f"trained vocabularies differ between builds: {got}")
        for name, _ in builds[1:]:
            ratios[name].append(got[builds[0][0]]["filter_cpu"] / got[name]["filter_cpu"])
        print(f"round {r + 1}/{args.rounds}: " + "  ".join(
            f"{n} filter {got[n]['filter_cpu']:.1f} s CPU ({got[n]['bytes'] / got[n]['filter_cpu'] / 1e6:.2f} MB/s; "
            f"wall {got[n]['filter_wall']:.1f} s), total {got[n]['total_cpu']:.1f} s CPU, "
            f"peak {got[n]['hwm_mib']:.0f} MiB, load {got[n]['loadavg']}" for n, _ in builds), flush=True)
    first = res[builds[0][0]][0]
    print(f"training text {first['bytes']:,} bytes, raw vocabulary {first['raw']:,}, "
          f"{first['ntok']:,} tokens in the filtering pass, vocabulary sha256 {first['table']}")
    med = statistics.median
    for name, _ in builds:
        rs = res[name]
        c = [g["filter_cpu"] for g in rs]
        print(f"{name}: filter CPU {med(c):.1f} s ({min(c):.1f}-{max(c):.1f}), "
              f"{rs[0]['bytes'] / med(c) / 1e6:.2f} MB/s by CPU, "
              f"{med(g['bytes'] / g['filter_wall'] / 1e6 for g in rs):.2f} MB/s by the report's wall; "
              f"total CPU {med(g['total_cpu'] for g in rs):.1f} s; "
              f"peak RSS {med(g['hwm_mib'] for g in rs):.0f} MiB "
              f"({min(g['hwm_mib'] for g in rs):.0f}-{max(g['hwm_mib'] for g in rs):.0f})")
    for name, rs in ratios.items():
        print(f"filter speed {name} / {builds[0][0]} (CPU time {builds[0][0]} / {name}): "
              f"{med(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="NAME=DIR, DIR containing a built cnfmce package")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3, help="repeats per subprocess, best of")
    ap.add_argument("--max-bytes", type=int, default=1_000_000)
    ap.add_argument("--prime-bytes", type=int, default=4_000_000)
    ap.add_argument("--train", action="store_true", help="time the filtering pass of cnfmce.train")
    ap.add_argument("--train-bytes", type=int, default=0, help="0: all en training text")
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--raw-vocab-size", type=int, default=5_000_000)
    args = ap.parse_args()
    builds = [b.split("=", 1) for b in args.builds]
    if any(len(b) != 2 for b in builds) or len(builds) < 2:
        ap.error("give at least two builds as NAME=DIR")
    if args.train:
        return train_main(args, builds)
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
