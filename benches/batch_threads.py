"""encode_batch scaling with the CPU time of each thread (issue 11 item 2).

    python benches/batch_threads.py [--categories zh,en,code,multi] [--repeats 10] [--vocab o200k_base|cnf250k]

For each category (the shared test set): ``encode_batch(docs, num_threads=1)`` and
``encode_batch(docs, num_threads=2)``, alternated, ``--repeats`` times each. Prints the wall
ratio (of the medians, of the bests, and the median and range of the same-repeat ratios) and,
per setting, the CPU milliseconds per batch of the calling thread and of every other thread
of the process (from ``/proc/self/task/*/schedstat``, nanoseconds), which show how the work is
split even when other processes leave no free core (then the wall ratio says nothing). Also
prints the 1-minute load average. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfmce  # noqa: E402
import baselines  # noqa: E402
from encode import cnf250k_path, load_docs  # noqa: E402


def thread_ns() -> Dict[int, int]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except OSError:
            pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--categories", default="zh,en,code,multi")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--vocab", default="o200k_base")
    args = ap.parse_args()
    if args.vocab == "cnf250k":  # benches/encode.py's CNF 250k vocabulary (benches/out/)
        tok = cnfmce.Tokenizer.load(str(cnf250k_path()))
    else:
        path = baselines.vocab_path(args.vocab)
        tok = (cnfmce.Tokenizer.from_tiktoken(path) if args.vocab in baselines.TIKTOKEN_FILES
               else cnfmce.Tokenizer.from_hf(path))
    me = os.getpid()
    print(f"cnfmce {cnfmce.__file__}, vocabulary {args.vocab}, {args.repeats} batches per setting")
    for cat in args.categories.split(","):
        docs = load_docs(cat)
        for n in (1, 2):
            tok.encode_batch(docs, num_threads=n)  # warm: pools, scratch, int cache
        wall: Dict[int, List[float]] = {1: [], 2: []}
        cpu: Dict[int, Dict[int, int]] = {1: {}, 2: {}}
        for r in range(args.repeats):
            for n in ((1, 2) if r % 2 == 0 else (2, 1)):
                a = thread_ns()
                t0 = time.perf_counter()
                tok.encode_batch(docs, num_threads=n)
                wall[n].append(time.perf_counter() - t0)
                b = thread_ns()
                for k, v in b.items():
                    cpu[n][k] = cpu[n].get(k, 0) + v - a.get(k, v)
        med = {n: sorted(w)[len(w) // 2] for n, w in wall.items()}
        same = sorted(a / b for a, b in zip(wall[1], wall[2]))  # same-repeat ratios
        parts = []
        for n in (1, 2):
            ms = {k: v / args.repeats / 1e6 for k, v in cpu[n].items()}
            caller = ms.pop(me, 0.0)
            others = sorted((v for v in ms.values() if v >= 0.5), reverse=True)
            parts.append(f"n={n}: caller {caller:.1f} ms, others {' + '.join(f'{v:.1f}' for v in others) or '-'}"
                         f" (total {caller + sum(others):.1f})")
        print(f"{cat:6} wall ratio median {med[1] / med[2]:.2f}x best {min(wall[1]) / min(wall[2]):.2f}x "
              f"same-repeat median {same[len(same) // 2]:.2f}x ({same[0]:.2f}-{same[-1]:.2f}) "
              f"(n=1 {med[1] * 1e3:.0f} ms, n=2 {med[2] * 1e3:.0f} ms) | " + " | ".join(parts)
              + f" | load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
