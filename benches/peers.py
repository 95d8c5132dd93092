"""cnfmce against the fastest encoders on o200k_base: single-thread speed relative to tiktoken,
exactness, peak memory, 2-thread batch scaling and the one-document ``encode_batch`` latency.

    python benches/peers.py                     # 10 rounds, 1 MB per test set
    python benches/peers.py --rounds 3 --bytes 300000 --categories en,zh
    python benches/peers.py --json benches/out/peers.json

Each round is one fresh process that loads every encoder, then, per test set, runs each
encoder once over the same documents through its per-document API (1 thread), in an order
rotated from round to round. The result per encoder and test set is the median over rounds of
(tiktoken's time / the encoder's time) in the same round, with the min-max spread; MB/s is the
median of the encoder's own rate. The 1-minute load average is recorded at the start and end of
every round. In the first round every peer's ids are compared with tiktoken's on every document
(MCE is a different encoding by design; its exactness is the reference tests'). Peak memory:
one more process per encoder that loads it and encodes every test set (VmHWM).

Peers come from the package index (``pip install gigatoken fastokens quicktok-v1 bpe-openai
rs-bpe kitoken``); a peer that is not installed or fails to build is reported and skipped.
gigatoken, fastokens and kitoken are built from the local o200k_base.tiktoken; quicktok,
bpe-openai and rs-bpe only ship their own copy of o200k_base (checked exact against tiktoken).
The CNF 250k vocabulary is the one of ``benches/encode.py`` (trained once, cached in benches/out).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baselines  # noqa: E402
from harness import OUT, log, proc_status_kib, read_jsonl_docs, reset_peak_rss  # noqa: E402

CATEGORIES = ["en", "code", "multi", "zh"]
ENCODERS = ["tiktoken", "gigatoken", "fastokens", "cnfmce_o200k", "quicktok", "cnfmce_cnf250k",
            "kitoken", "bpe_openai", "rs_bpe"]
# cnfmce encodes differently (MCE), so its ids are not compared with tiktoken's.
NOT_COMPARED = {"cnfmce_o200k", "cnfmce_cnf250k"}


def shared() -> Path:
    return Path(os.environ.get("CNFMCE_SHARED", Path(__file__).resolve().parent.parent.parent / "shared"))


def texts(cat: str, nbytes: int) -> List[str]:
    return read_jsonl_docs(shared() / "corpora" / cat / "test.jsonl.gz", nbytes)[0]


def build(name: str) -> Callable[[str], Any]:
    """The per-document encode function of one encoder (ids as a list or an array)."""
    o200k = str(shared() / "vocabs" / "o200k_base.tiktoken")
    if name == "tiktoken":
        return baselines.tiktoken_encoding("o200k_base").encode_ordinary
    if name == "cnfmce_o200k":
        import cnfmce
        return cnfmce.Tokenizer.from_tiktoken(o200k).encode
    if name == "cnfmce_cnf250k":
        import cnfmce
        import encode as encode_bench
        path = encode_bench.cnf250k_path()
        if not path.exists():
            raise FileNotFoundError(f"{path} (run benches/encode.py once, or --train-cnf)")
        return cnfmce.Tokenizer.load(str(path)).encode
    if name == "gigatoken":
        import gigatoken
        return gigatoken.Tokenizer.from_tiktoken(o200k).encode
    if name == "fastokens":
        import fastokens
        pat = baselines.tiktoken_encoding("o200k_base")._pat_str
        tok = fastokens.Tokenizer.from_tiktoken(o200k, pattern=pat, special_tokens={})
        return lambda t: tok.encode_ordinary(t).ids
    if name == "kitoken":
        import kitoken
        return kitoken.Kitoken.from_tiktoken_file(o200k).encode
    if name == "quicktok":
        import quicktok
        return quicktok.get_encoding("o200k_base").encode
    if name == "bpe_openai":
        import bpe_openai
        return bpe_openai.get_encoding("o200k_base").encode_ordinary
    if name == "rs_bpe":
        from rs_bpe.bpe import openai
        return openai.o200k_base().encode
    raise ValueError(name)


def loadavg() -> float:
    return os.getloadavg()[0]


def child_check(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Every peer's ids against tiktoken's on every document (own process: the timed rounds
    start with cold word caches)."""
    out: Dict[str, Any] = {"errors": {}, "exact": {}}
    fns: Dict[str, Callable[[str], Any]] = {}
    for name in spec["encoders"]:
        try:
            fns[name] = build(name)
        except Exception as e:  # reported, the peer is skipped
            out["errors"][name] = f"{type(e).__name__}: {e}"
    for cat in spec["categories"]:
        docs = texts(cat, spec["bytes"])
        want = [fns["tiktoken"](d) for d in docs]
        for n in fns:
            if n in NOT_COMPARED or n == "tiktoken":
                continue
            bad = next((k for k, d in enumerate(docs) if list(fns[n](d)) != want[k]), None)
            out["exact"].setdefault(n, {})[cat] = True if bad is None else f"doc {bad} differs"
    return out


def child_round(spec: Dict[str, Any]) -> Dict[str, Any]:
    """One round: every encoder over every test set. The documents go in groups of about
    ``chunk`` bytes, each group through every encoder in turn (order rotated per group and
    round), so that the machine's other load falls on all encoders alike; per encoder the wall
    time and this thread's CPU time are summed."""
    out: Dict[str, Any] = {"load_start": loadavg(), "times": {}, "cpu": {}, "sizes": {}}
    names = spec["encoders"]
    fns = {n: build(n) for n in names}
    r = spec["round"]
    for cat in spec["categories"]:
        docs = texts(cat, spec["bytes"])
        out["sizes"][cat] = sum(len(d.encode("utf-8")) for d in docs)
        groups, cur, size = [], [], 0
        for d in docs:
            cur.append(d)
            size += len(d)
            if size >= spec["chunk"]:
                groups.append(cur)
                cur, size = [], 0
        if cur:
            groups.append(cur)
        # Warm-up on other text (the start of the category's training set): one-time costs
        # (tables touched first, caches allocated) are not timed, word caches start without
        # the timed text.
        warm = read_jsonl_docs(shared() / "corpora" / cat / "train.jsonl.gz", spec["chunk"])[0]
        for n in names:
            for d in warm:
                fns[n](d)
        wall = {n: 0.0 for n in names}
        cpu = {n: 0.0 for n in names}
        for g, group in enumerate(groups):
            k = (r + g) % len(names)
            for n in names[k:] + names[:k]:
                f = fns[n]
                t, c = time.perf_counter(), time.thread_time()
                for d in group:
                    f(d)
                cpu[n] += time.thread_time() - c
                wall[n] += time.perf_counter() - t
        for n in names:
            out["times"].setdefault(n, {})[cat] = wall[n]
            out["cpu"].setdefault(n, {})[cat] = cpu[n]
    out["load_end"] = loadavg()
    return out


def child_batch(spec: Dict[str, Any]) -> Dict[str, Any]:
    """cnfmce encode_batch with 1 and 2 threads (interleaved), and the one-document latency."""
    import cnfmce
    tok = cnfmce.Tokenizer.from_tiktoken(str(shared() / "vocabs" / "o200k_base.tiktoken"))
    out: Dict[str, Any] = {"load_start": loadavg(), "scaling": {}, "latency": {}}
    for cat in spec["categories"]:
        docs = texts(cat, spec["bytes"])
        tok.encode_batch(docs[:50], num_threads=2)
        ts = {1: [], 2: []}
        for rep in range(spec["repeats"]):
            for n in ((1, 2) if rep % 2 == 0 else (2, 1)):
                t = time.perf_counter()
                tok.encode_batch(docs, num_threads=n)
                ts[n].append(time.perf_counter() - t)
        out["scaling"][cat] = [a / b for a, b in zip(ts[1], ts[2])]
    doc_en = texts("en", 1)[0]
    for label, d in [("hello", "hello"), ("200 B", doc_en[:200]), ("4 KB", (doc_en * 10)[:4000])]:
        res = {}
        for fn_name, f in [("encode", lambda: tok.encode(d)),
                           ("batch1", lambda: tok.encode_batch([d], num_threads=1)),
                           ("batch", lambda: tok.encode_batch([d]))]:
            n = 2000 if len(d) < 1000 else 300
            best = []
            for _ in range(7):
                t = time.perf_counter()
                for _ in range(n):
                    f()
                best.append((time.perf_counter() - t) / n)
            res[fn_name] = statistics.median(best)
        out["latency"][label] = res
    out["load_end"] = loadavg()
    return out


def child_memory(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Peak memory of loading one encoder and encoding every test set with it."""
    docs = {c: texts(c, spec["bytes"]) for c in spec["categories"]}
    before = proc_status_kib("VmRSS")
    reset_peak_rss()
    f = build(spec["encoder"])
    loaded = proc_status_kib("VmHWM")
    for c in spec["categories"]:
        for d in docs[c]:
            f(d)
    return {"rss_before_kib": before, "peak_load_kib": loaded, "peak_kib": proc_status_kib("VmHWM")}


def run_child(kind: str, spec: Dict[str, Any]) -> Dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_child", json.dumps({"kind": kind, **spec})]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"{kind} child failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    return json.loads(lines[-1])


def fmt_range(xs: List[float]) -> str:
    return f"{statistics.median(xs):.2f}x ({min(xs):.2f}–{max(xs):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--bytes", type=int, default=1_000_000, help="bytes of each test set")
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--chunk", type=int, default=64 * 1024, help="bytes per interleaved group")
    ap.add_argument("--encoders", default=",".join(ENCODERS))
    ap.add_argument("--skip", default="", help="comma list of: memory, batch")
    ap.add_argument("--batch-repeats", type=int, default=6)
    ap.add_argument("--train-cnf", action="store_true", help="train the CNF 250k vocabulary if missing")
    ap.add_argument("--json", help="also write every raw number here")
    ap.add_argument("--_child")
    a = ap.parse_args()
    if a._child:
        spec = json.loads(a._child)
        fn = {"round": child_round, "check": child_check, "batch": child_batch,
              "memory": child_memory}[spec["kind"]]
        print(json.dumps(fn(spec)))
        return
    cats = a.categories.split(",")
    encs = a.encoders.split(",")
    skip = set(filter(None, a.skip.split(",")))
    if a.train_cnf and "cnfmce_cnf250k" in encs:
        import encode as encode_bench
        log(f"CNF 250k: {encode_bench.ensure_cnf250k()}")
    check = run_child("check", {"encoders": encs, "categories": cats, "bytes": a.bytes})
    errors = check["errors"]
    names = [n for n in encs if n not in errors]
    rounds = []
    for r in range(a.rounds):
        log(f"round {r + 1}/{a.rounds} (load {loadavg():.1f})")
        rounds.append(run_child("round", {"round": r, "encoders": names, "categories": cats,
                                          "bytes": a.bytes, "chunk": a.chunk}))
    print(f"# peers.py: {a.rounds} rounds, {a.bytes} bytes of each test set, groups of {a.chunk} "
          f"bytes, 1 thread, per-document encode; load (1 min) "
          f"{min(x['load_start'] for x in rounds):.1f}–{max(x['load_end'] for x in rounds):.1f}\n")
    summary: Dict[str, Any] = {}
    for key, title in [("cpu", "thread CPU time"), ("times", "wall time")]:
        print(f"\nmedian over rounds of tiktoken's {title} / the encoder's (min–max); MB/s: median "
              f"of the encoder's own rate by {title}\n")
        print("| encoder | " + " | ".join(cats) + " | exact vs tiktoken |")
        print("|---|" + "---:|" * len(cats) + "---|")
        for n in names:
            cells = []
            for c in cats:
                ratios = [x[key]["tiktoken"][c] / x[key][n][c] for x in rounds]
                mbs = [x["sizes"][c] / x[key][n][c] / 1e6 for x in rounds]
                summary.setdefault(key, {}).setdefault(n, {})[c] = {"ratios": ratios, "mbs": mbs}
                cells.append(f"{fmt_range(ratios)}, {statistics.median(mbs):.1f} MB/s")
            ex = check["exact"].get(n)
            exact = "—" if n in NOT_COMPARED or n == "tiktoken" else (
                "yes" if ex and all(v is True for v in ex.values()) else f"NO: {ex}")
            print(f"| {n} | " + " | ".join(cells) + f" | {exact} |")
    for n, e in errors.items():
        print(f"\nskipped {n}: {e}")
    result: Dict[str, Any] = {"check": check, "rounds": rounds, "summary": summary}
    if "memory" not in skip:
        print("\n| encoder | peak RSS over start, load (MiB) | peak RSS over start, load + encode (MiB) |")
        print("|---|---:|---:|")
        mem = {}
        for n in names:
            m = run_child("memory", {"encoder": n, "categories": cats, "bytes": a.bytes})
            mem[n] = m
            print(f"| {n} | {(m['peak_load_kib'] - m['rss_before_kib']) / 1024:.0f} | "
                  f"{(m['peak_kib'] - m['rss_before_kib']) / 1024:.0f} |")
        result["memory"] = mem
    if "batch" not in skip:
        b = run_child("batch", {"categories": cats, "bytes": a.bytes, "repeats": a.batch_repeats})
        result["batch"] = b
        print(f"\ncnfmce o200k encode_batch, 2 threads vs 1 (wall ratio, median (min–max) of "
              f"{a.batch_repeats}; load {b['load_start']:.1f}–{b['load_end']:.1f}): " +
              ", ".join(f"{c} {fmt_range(b['scaling'][c])}" for c in cats))
        print("\n| one document | encode | encode_batch([doc], num_threads=1) | encode_batch([doc]) |")
        print("|---|---:|---:|---:|")
        for label, r in b["latency"].items():
            print(f"| {label} | {r['encode'] * 1e6:.1f} µs | {r['batch1'] * 1e6:.1f} µs "
                  f"({r['batch1'] / r['encode']:.1f}x) | {r['batch'] * 1e6:.1f} µs "
                  f"({r['batch'] / r['encode']:.1f}x) |")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
