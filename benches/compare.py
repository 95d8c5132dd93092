#!/usr/bin/env python3
"""Regression check between two benchmark runs: per-row ratios NEW / OLD.

    python benches/compare.py OLD.json NEW.json            # markdown table on stdout
    python benches/compare.py OLD.json NEW.json --all      # also rows that moved less than 3%

OLD and NEW are the ``--json`` files of ``benches/encode.py`` (or of ``benches/train.py``). Every
measurement found at the same place in both files is one row:

* speeds (``mb_s``): the median over repeats when the file has the repeats (``mb_s_repeats``),
  else the recorded value; ratio > 1 means NEW is faster;
* times (``seconds``) and memory (``peak_delta_mib``, ``peak_rss_bytes``): ratio > 1 means NEW
  takes more.

Speeds are also compared as ratios to the baseline measured in the same run (tiktoken o200k
for single-thread and batch rows, when both files have it), which cancels most of the machine
load: ``same-run ratio`` columns. The load of each run is printed first, since a slower row on a
busy machine means little.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

SPEED_KEYS = ("mb_s",)
COST_KEYS = ("seconds", "peak_delta_mib", "peak_rss_bytes")
BASELINES = {"single": "tiktoken_o200k", "batch": "tiktoken_o200k_all"}


def median(xs: Sequence[float]) -> Optional[float]:
    v = sorted(x for x in xs if isinstance(x, (int, float)))
    if not v:
        return None
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2


def leaves(node: Any, path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], str, float]]:
    """(path of the measured thing, kind 'speed' or 'cost', value) for every measurement."""
    if isinstance(node, dict):
        reps = node.get("mb_s_repeats")
        if isinstance(reps, list) and reps:
            m = median(reps)
            if m is not None:
                yield path + ("mb_s",), "speed", m
        elif isinstance(node.get("mb_s"), (int, float)):
            yield path + ("mb_s",), "speed", float(node["mb_s"])
        for k in COST_KEYS:
            if isinstance(node.get(k), (int, float)) and not isinstance(node.get(k), bool):
                yield path + (k,), "cost", float(node[k])
        for k, v in node.items():
            if k in ("machine", "config", "wait_quiet", "cpu_use", "repeat_load") or k in SPEED_KEYS:
                continue
            if isinstance(v, (dict, list)):
                yield from leaves(v, path + (str(k),))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            if isinstance(v, dict):
                yield from leaves(v, path + (str(i),))


def same_run_ratio(res: Dict[str, Any], path: Tuple[str, ...]) -> Optional[float]:
    """For throughput rows: the row's median MB/s over the same run's baseline median."""
    if len(path) < 6 or path[0] != "throughput" or path[3] != "candidates":
        return None
    section, cat, key = path[1], path[2], path[4]
    base = BASELINES.get(section)
    try:
        cands = res["throughput"][section][cat]["candidates"]
        a = median(cands[key].get("mb_s_repeats") or [cands[key]["mb_s"]])
        b = median(cands[base].get("mb_s_repeats") or [cands[base]["mb_s"]])
    except (KeyError, TypeError):
        return None
    return a / b if a and b else None


def load_line(name: str, res: Dict[str, Any]) -> str:
    m = res.get("machine", {})
    others: List[float] = []
    la: List[float] = []
    for sec in ("single", "batch"):
        for run in (res.get("throughput") or {}).get(sec, {}).values():
            for r in run.get("repeat_load") or []:
                others.append(r["other_cores"])
                la.append(r["loadavg_1min"])
            cu = run.get("cpu_use") or {}
            if not run.get("repeat_load") and "other_cores" in cu:
                others.append(cu["other_cores"])
    busy = f"other processes up to {max(others):.2f} cores" if others else "load not recorded"
    lav = f", load average {min(la):.1f}–{max(la):.1f}" if la else ""
    return f"- {name}: git {m.get('git', '?')}, core {m.get('cnfmce_core_sha256', '?')}, {m.get('date', '?')}; {busy}{lav}"


def fmt(v: float) -> str:
    return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Per-row ratios NEW / OLD of two benchmark JSON files "
                                             "(benches/encode.py or benches/train.py --json).")
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--all", action="store_true", help="show rows that changed by less than 3%% too")
    args = ap.parse_args(argv)
    with open(args.old) as fh:
        old = json.load(fh)
    with open(args.new) as fh:
        new = json.load(fh)
    a = {p: (k, v) for p, k, v in leaves(old)}
    b = {p: (k, v) for p, k, v in leaves(new)}
    common = [p for p in a if p in b]
    if not common:
        print("no measurement in common between the two files", file=sys.stderr)
        return 1
    print("# benchmark comparison\n")
    print(load_line("OLD " + args.old, old))
    print(load_line("NEW " + args.new, new))
    print("\nSpeed rows: NEW/OLD > 1 is faster. Cost rows (time, memory): NEW/OLD > 1 costs more. "
          "Same-run ratio: the row over tiktoken o200k measured in the same run (less sensitive to "
          "machine load).\n")
    print("| measurement | kind | OLD | NEW | NEW / OLD | same-run ratio OLD → NEW |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    shown = 0
    for p in common:
        kind, va = a[p]
        vb = b[p][1]
        if not va:
            continue
        r = vb / va
        sa, sb = same_run_ratio(old, p), same_run_ratio(new, p)
        moved = abs(r - 1) >= 0.03 or (sa and sb and abs(sb / sa - 1) >= 0.03)
        if not (args.all or moved):
            continue
        same = f"{sa:.2f}x → {sb:.2f}x" if sa and sb else ""
        label = "/".join(x for x in p if x not in ("candidates", "mb_s"))
        print(f"| {label} | {kind} | {fmt(va)} | {fmt(vb)} | {r:.2f}x | {same} |")
        shown += 1
    if not shown:
        print("| (no row moved by 3% or more; --all shows them) | | | | | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
