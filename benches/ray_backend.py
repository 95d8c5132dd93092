#!/usr/bin/env python3
"""CNF training on a local Ray cluster against the local trainer (issue 10): the overhead of
``backend="ray"`` on one machine, and the per-core rate the 1 TB recipe (docs/ray.md) scales.

Run from the repository root::

    nice -n 10 python benches/ray_backend.py --sizes 20MB,all --repeats 3 --json benches/out/ray.json
    nice -n 10 python benches/ray_backend.py --sizes 20MB:3,50MB:2,all:1 --json benches/out/ray.json
    python benches/ray_backend.py --sizes 5MB --repeats 1            # smoke run (~1 min)
    python benches/ray_backend.py --from-json benches/out/ray.json   # re-print the report
    nice -n 10 python benches/ray_backend.py --job tokenize --sizes 20MB:3 --json benches/out/ray_tokenize.json

``--job tokenize`` measures ``cnfmce.tokenize_corpus(tok, paths, out, format="megatron")`` instead
(the o200k_base tokenizer from the shared vocabularies, eos ``<|endoftext|>``): local (all
cores) against ``backend="ray"`` (the Ray Data ``map_batches`` pipeline, 2 worker CPUs), the
same measurements (wall, CPU of every process, peak RSS), and the SHA-256 of the shard files and
manifest, which must be the same for both backends.

What it measures, per corpus size and backend:

* the corpus: a mix of the six shared training corpora (en, sci, math, code, zh, multi) in equal
  byte shares (documents in file order until the share is reached; ``all`` = every document,
  about 143 MB), written once as plain JSON-lines files (one per category) under
  ``benches/out/ray_data/``; both backends train from these files (workers read their own
  blocks), with the same parameters (``--vocab``, default 32k; every other option at its
  default);
* every run is a fresh subprocess; ``local`` is ``cnfmce.train(paths, vocab_size=V)`` (2
  threads); ``ray`` first starts a local cluster with 2 worker CPUs
  (``ray.init(num_cpus=2, object_store_memory=2 GiB)``, timed apart as "cluster start"), then
  ``cnfmce.train(paths, vocab_size=V, backend="ray")``;
* wall seconds of the ``train`` call; CPU seconds of the driver and (Ray) of every process the
  cluster started (raylet, GCS, workers: read from /proc before shutdown), hence MB per
  CPU-second, the per-core rate;
* peak RSS of the driver (``VmHWM``, reset after start-up) and the largest peak RSS of a Ray
  worker process (``VmHWM`` of each ``ray::`` process), plus the sum over the Ray daemons;
* bytes shuffled: the map tasks' partial counts sent to the reducers (every round), the
  survivors shipped per round (``ray.put`` once), what the reducers send back to the driver, and
  the filter's raw vocabulary and usage vectors;
* the trained vocabulary's SHA-256, which must be the same for both backends (the identity
  guarantee, checked here at sizes the tests do not reach);
* the 1-minute load average before and after each run (the machine is shared).

Runs alternate backends (local, ray, local, ray, ...); the report gives the median and the
range of the wall times, and the overhead ratio Ray/local of the medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from harness import (OUT, f1, f2, loadavg, log, machine_info, own_cpu_seconds,  # noqa: E402
                     proc_status_kib, read_jsonl_docs, reset_peak_rss, table)

SHARED = Path(os.environ.get("CNFMCE_SHARED", "/work/shared"))
CATEGORIES = ("en", "sci", "math", "code", "zh", "multi")
DATA = OUT / "ray_data"


def parse_size(s: str) -> Optional[int]:
    s = s.strip()
    if s == "all":
        return None
    if s.upper().endswith("MB"):
        return int(float(s[:-2]) * 1e6)
    raise ValueError(f"size must be e.g. 20MB or all, got {s!r}")


def corpus_files(size: str) -> List[str]:
    """The mix of ``size`` as plain JSON-lines files, written once."""
    max_bytes = parse_size(size)
    d = DATA / f"mix-{size}"
    done = d / "DONE"
    if not done.exists():
        d.mkdir(parents=True, exist_ok=True)
        share = None if max_bytes is None else int(round(max_bytes / len(CATEGORIES)))
        total = 0
        for c in CATEGORIES:
            docs, n = read_jsonl_docs(SHARED / "corpora" / c / "train.jsonl.gz", share)
            total += n
            tmp = d / f"{c}.jsonl.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                for t in docs:
                    fh.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
            os.replace(tmp, d / f"{c}.jsonl")
        done.write_text(f"{total}\n")
    return [str(d / f"{c}.jsonl") for c in CATEGORIES]


def corpus_bytes(size: str) -> int:
    return int((DATA / f"mix-{size}" / "DONE").read_text())


# --- /proc ------------------------------------------------------------------------------------

def _children() -> Dict[int, List[int]]:
    kids: Dict[int, List[int]] = {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat") as fh:
                s = fh.read()
            ppid = int(s[s.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(e))
    return kids


def descendants(pid: int) -> List[int]:
    kids = _children()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a live process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            s = fh.read()
        f = s[s.rindex(")") + 2:].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def proc_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return "?"


def ray_processes() -> Dict[int, Dict[str, Any]]:
    out = {}
    for p in descendants(os.getpid()):
        out[p] = {"name": proc_name(p), "cpu": proc_cpu_seconds(p),
                  "hwm_kib": proc_status_kib("VmHWM", str(p)) or 0}
    return out


def is_worker(name: str) -> bool:
    """A Ray worker process (``ray::IDLE``, ``ray::<task>``, an actor), not one of its agents."""
    return name.startswith("ray::") and not name.endswith("Agent")


class ProcessWatch:
    """Samples the processes of the local cluster every ``interval`` seconds (workers come and
    go: the filter actors are killed at the end of their pass): the last CPU seconds and the
    highest VmHWM seen of each, and the name it had while working."""

    def __init__(self, interval: float = 0.5):
        import threading
        self.seen: Dict[int, Dict[str, Any]] = {}
        self.base = {p: v["cpu"] for p, v in ray_processes().items()}
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        for p, v in ray_processes().items():
            old = self.seen.get(p)
            if old is None:
                self.seen[p] = v
            else:
                old["cpu"] = max(old["cpu"], v["cpu"])
                old["hwm_kib"] = max(old["hwm_kib"], v["hwm_kib"])
                if is_worker(v["name"]) and v["name"] != "ray::IDLE":
                    old["name"] = v["name"]

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample()

    def stop(self) -> Dict[int, Dict[str, Any]]:
        self._stop.set()
        self._thread.join()
        self._sample()
        for p, v in self.seen.items():
            v["cpu_used"] = v["cpu"] - self.base.get(p, 0.0)
        return self.seen


# --- one run (in a fresh subprocess) ----------------------------------------------------------

def vocab_sha(tok: Any) -> str:
    h = hashlib.sha256()
    for i in range(tok.vocab_size):
        t = tok.id_to_token(i)
        h.update(len(t).to_bytes(4, "little") + t)
    return h.hexdigest()[:16]


def shards_sha(out: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(out.iterdir()):
        if not f.name.startswith("."):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def tokenize_child(spec: Dict[str, Any], res: Dict[str, Any]) -> None:
    """One tokenize_corpus run into a temporary directory (removed after)."""
    import shutil
    import tempfile
    import cnfmce
    tok = cnfmce.Tokenizer.from_tiktoken(str(SHARED / "vocabs" / "o200k_base.tiktoken"),
                                         special_tokens={"<|endoftext|>": 199999})
    out = Path(tempfile.mkdtemp(prefix="cnfmce-bench-ray-tok-"))
    try:
        reset_peak_rss()
        cpu0 = own_cpu_seconds()
        t0 = time.perf_counter()
        kw = {"backend": "ray"} if spec["backend"] == "ray" else {}
        m = cnfmce.tokenize_corpus(tok, spec["paths"], out / "shards", format="megatron", **kw)
        res["seconds"] = time.perf_counter() - t0
        res["driver_cpu_seconds"] = own_cpu_seconds() - cpu0
        res["driver_peak_rss_kib"] = proc_status_kib("VmHWM")
        res["bytes"] = m["text_bytes"]
        res["tokens"] = m["tokens"]
        res["documents"] = m["documents"]
        res["shards_sha"] = shards_sha(out / "shards")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def child_main(spec: Dict[str, Any]) -> None:
    import cnfmce
    res: Dict[str, Any] = {"spec": spec}
    paths = spec["paths"]
    if spec["backend"] == "ray":
        import ray
        t0 = time.perf_counter()
        ray.init(num_cpus=spec["cpus"], include_dashboard=False, object_store_memory=2 << 30,
                 log_to_driver=False, logging_level="ERROR")
        # warm the workers (Ray starts them lazily); their start-up is part of "cluster start"
        ray.get([ray.remote(lambda: os.getpid()).remote() for _ in range(spec["cpus"])])
        res["cluster_start_seconds"] = time.perf_counter() - t0
        watch = ProcessWatch()
    if spec.get("job") == "tokenize":
        tokenize_child(spec, res)
        if spec["backend"] == "ray":
            import ray
            procs = watch.stop()
            res["cluster_cpu_seconds"] = sum(v["cpu_used"] for v in procs.values())
            workers = [v for v in procs.values() if is_worker(v["name"])]
            res["worker_cpu_seconds"] = sum(v["cpu_used"] for v in workers)
            res["worker_peak_rss_kib"] = max([v["hwm_kib"] for v in workers] or [0])
            ray.shutdown()
        print(json.dumps(res))
        return
    reset_peak_rss()
    cpu0 = own_cpu_seconds()
    t0 = time.perf_counter()
    kw = {"backend": "ray"} if spec["backend"] == "ray" else {}
    tok = cnfmce.train(paths, vocab_size=spec["vocab"], progress=False, **kw)
    res["seconds"] = time.perf_counter() - t0
    res["driver_cpu_seconds"] = own_cpu_seconds() - cpu0
    res["driver_peak_rss_kib"] = proc_status_kib("VmHWM")
    res["vocab_sha"] = vocab_sha(tok)
    meta = tok.metadata
    c, f = meta["counting"], meta["filtering"]
    res["bytes"] = c.get("bytes")
    res["rounds"] = [{k: s.get(k) for k in ("seconds", "bytes", "distinct", "retained",
                                            "shuffled_bytes", "kept_from_partitions", "spills",
                                            "worker_peak_rss", "map_seconds", "peak_rss",
                                            "survivors_bytes")}
                     for s in c["round_stats"]]
    res["filter_seconds"] = f.get("seconds")
    if spec["backend"] == "ray":
        import ray
        procs = watch.stop()
        res["cluster_cpu_seconds"] = sum(v["cpu_used"] for v in procs.values())
        workers = [v for v in procs.values() if is_worker(v["name"])]
        daemons = [v for v in procs.values() if not is_worker(v["name"])]
        res["workers"] = sorted(v["name"] for v in workers)
        res["worker_cpu_seconds"] = sum(v["cpu_used"] for v in workers)
        task_peak = max([x.get("worker_peak_rss") or 0 for x in res["rounds"]]
                        + [f.get("worker_peak_rss") or 0])
        res["worker_peak_rss_kib"] = max([v["hwm_kib"] for v in workers] + [task_peak // 1024])
        res["daemons_peak_rss_kib"] = sum(v["hwm_kib"] for v in daemons)
        res["blocks"] = c.get("blocks")
        res["partitions"] = c.get("partitions")
        res["filter_usage_bytes"] = f.get("usage_bytes")
        res["filter_worker_peak_rss"] = f.get("worker_peak_rss")
        res["raw_vocab"] = f.get("raw_vocab_size") or c.get("raw_vocab_size")
        ray.shutdown()
    print(json.dumps(res))


def run_child(spec: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    la0 = loadavg()
    p = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                       text=True, timeout=timeout)
    la1 = loadavg()
    if p.returncode != 0:
        log(f"  FAILED ({p.returncode}): {p.stderr[-2000:]}")
        return {"spec": spec, "error": p.stderr[-2000:], "loadavg": [la0, la1]}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["loadavg"] = [la0, la1]
    return r


# --- report -----------------------------------------------------------------------------------

def gib(kib: Optional[float]) -> str:
    return "—" if not kib else f"{kib / 2**20:.2f} GiB"


def mb(n: Optional[float]) -> str:
    return "—" if n is None else f"{n / 1e6:.1f} MB"


def paired_runs(res: Dict[str, Any]) -> Iterator[Tuple[str, Dict[str, List[Dict[str, Any]]], int,
                                                        Dict[str, float], Dict[str, str]]]:
    """Per corpus size that both backends ran without error: the size, its runs per backend, the
    text's bytes, and per backend the median wall seconds and their min–max range."""
    for size in res["sizes"]:
        runs = {b: [r for r in res["runs"] if r["spec"]["size"] == size and r["spec"]["backend"] == b
                    and "error" not in r] for b in ("local", "ray")}
        if not runs["local"] or not runs["ray"]:
            continue
        med = {b: statistics.median(r["seconds"] for r in runs[b]) for b in runs}
        rng = {b: f"{min(r['seconds'] for r in runs[b]):.1f}–{max(r['seconds'] for r in runs[b]):.1f}"
               for b in runs}
        yield size, runs, runs["local"][0]["bytes"], med, rng


def report_tokenize(res: Dict[str, Any]) -> str:
    m = res["machine"]
    out = [f"Build {m.get('git')} (core {m.get('cnfmce_core_sha256')}), ray {m.get('ray')}, "
           f"{m.get('date')}; tokenize_corpus, o200k_base, megatron shards; Ray with "
           f"{res['cpus']} worker CPUs."]
    rows = []
    for size, runs, nbytes, med, rng in paired_runs(res):
        cpu_local = statistics.median(r["driver_cpu_seconds"] for r in runs["local"])
        cpu_ray = statistics.median(r["driver_cpu_seconds"] + r["cluster_cpu_seconds"]
                                    for r in runs["ray"])
        same = len({r["shards_sha"] for b in runs for r in runs[b]}) == 1
        loads = [x for b in runs for r in runs[b] for la in r["loadavg"] for x in la[:1]]
        rows.append([
            f"mix-{size}", f"{nbytes / 1e6:.1f}",
            f"{med['local']:.1f} ({rng['local']}, n={len(runs['local'])})",
            f"{med['ray']:.1f} ({rng['ray']}, n={len(runs['ray'])})",
            f"**{med['ray'] / med['local']:.2f}x**", f"**{cpu_ray / cpu_local:.2f}x**",
            f"{nbytes / 1e6 / cpu_local:.1f}", f"{nbytes / 1e6 / cpu_ray:.1f}",
            gib(max(r["driver_peak_rss_kib"] for r in runs["local"])),
            gib(max(r["driver_peak_rss_kib"] for r in runs["ray"])),
            gib(max(r["worker_peak_rss_kib"] for r in runs["ray"])),
            "yes" if same else "**NO**", f"{min(loads):.1f}–{max(loads):.1f}"])
    out.append("")
    out.append(table(["corpus", "MB", "local s (range, n)", "ray s (range, n)", "ray/local wall",
                      "ray/local CPU", "local MB/CPU-s", "ray MB/CPU-s", "local peak RSS",
                      "ray driver peak RSS", "ray worker peak RSS (max)", "same shards",
                      "load 1-min"], rows))
    return "\n".join(out)


def report(res: Dict[str, Any]) -> str:
    if res.get("job") == "tokenize":
        return report_tokenize(res)
    out = []
    m = res["machine"]
    out.append(f"Build {m.get('git')} (core {m.get('cnfmce_core_sha256')}), ray {m.get('ray')}, "
               f"{m.get('date')}; vocab {res['vocab']}, Ray with {res['cpus']} worker CPUs.")
    rows, detail = [], []
    for size, runs, nbytes, med, rng in paired_runs(res):
        same = len({r["vocab_sha"] for b in runs for r in runs[b]}) == 1
        lr = runs["ray"]
        shuffled = statistics.median(sum(x["shuffled_bytes"] or 0 for x in r["rounds"]) for r in lr)
        cpu_local = statistics.median(r["driver_cpu_seconds"] for r in runs["local"])
        cpu_ray = statistics.median(r["driver_cpu_seconds"] + r["cluster_cpu_seconds"] for r in lr)
        loads = [x for b in runs for r in runs[b] for la in r["loadavg"] for x in la[:1]]
        rows.append([
            f"mix-{size}", f"{nbytes / 1e6:.1f}",
            f"{med['local']:.1f} ({rng['local']}, n={len(runs['local'])})",
            f"{med['ray']:.1f} ({rng['ray']}, n={len(lr)})",
            f"**{med['ray'] / med['local']:.2f}x**", f"**{cpu_ray / cpu_local:.2f}x**",
            gib(max(r["driver_peak_rss_kib"] for r in runs["local"])),
            gib(max(r["driver_peak_rss_kib"] for r in lr)),
            gib(max(r["worker_peak_rss_kib"] for r in lr)),
            mb(shuffled), "yes" if same else "**NO**",
            f"{min(loads):.1f}–{max(loads):.1f}"])
        detail.append([
            f"mix-{size}", f"{lr[0]['blocks']}", f"{lr[0]['partitions']}",
            f"{statistics.median(r['cluster_start_seconds'] for r in lr):.1f}",
            f"{cpu_local:.0f}", f"{cpu_ray:.0f}",
            f"{nbytes / 1e6 / cpu_local:.2f}", f"{nbytes / 1e6 / cpu_ray:.2f}",
            " / ".join(mb(x["shuffled_bytes"]) for x in lr[0]["rounds"]),
            " / ".join(f"{x['kept_from_partitions']:,}" for x in lr[0]["rounds"]),
            gib(max(r["daemons_peak_rss_kib"] for r in lr))])
    out.append("")
    out.append(table(["corpus", "MB", "local s (range, n)", "ray s (range, n)", "ray/local wall",
                      "ray/local CPU",
                      "local peak RSS", "ray driver peak RSS", "ray worker peak RSS (max)",
                      "shuffled (map→reduce)", "same vocab", "load 1-min"], rows))
    out.append("")
    out.append(table(["corpus", "blocks", "partitions", "cluster start s", "local CPU s",
                      "ray CPU s (all processes)", "local MB/CPU-s", "ray MB/CPU-s",
                      "shuffled per round", "survivors back per round", "Ray daemons peak RSS"],
                     detail))
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="20MB,all",
                    help="comma-separated: 20MB, 50MB, all (143 MB); SIZE:N runs that size N times")
    ap.add_argument("--job", choices=("train", "tokenize"), default="train",
                    help="train (cnfmce.train) or tokenize (cnfmce.tokenize_corpus into shards)")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--cpus", type=int, default=2, help="worker CPUs of the Ray cluster")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", help="write the results there (after every run)")
    ap.add_argument("--from-json", help="only print the report of an earlier run")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child_main(json.loads(a.child))
        return 0
    if a.from_json:
        print(report(json.loads(Path(a.from_json).read_text())))
        return 0
    plan = []  # (size, repeats): "20MB:3" overrides --repeats for that size
    for item in (x.strip() for x in a.sizes.split(",")):
        if item:
            size, _, n = item.partition(":")
            plan.append((size, int(n) if n else a.repeats))
    sizes = [s for s, _ in plan]
    res: Dict[str, Any] = {"machine": machine_info(["ray", "pyarrow"]), "sizes": sizes,
                           "vocab": a.vocab, "cpus": a.cpus, "job": a.job, "runs": []}
    for size, repeats in plan:
        paths = corpus_files(size)
        log(f"mix-{size}: {corpus_bytes(size) / 1e6:.1f} MB in {len(paths)} files")
        for k in range(repeats):
            for backend in ("local", "ray"):
                spec = {"size": size, "backend": backend, "paths": paths, "vocab": a.vocab,
                        "cpus": a.cpus, "repeat": k, "job": a.job}
                r = run_child(spec, a.timeout)
                res["runs"].append(r)
                if "error" not in r:
                    log(f"  {backend} #{k + 1}: {r['seconds']:.1f} s, driver CPU "
                        f"{r['driver_cpu_seconds']:.1f} s"
                        + (f" + cluster {r['cluster_cpu_seconds']:.1f} s" if backend == "ray" else "")
                        + f", driver peak "
                        f"{gib(r['driver_peak_rss_kib'])}, load {r['loadavg'][0][0]}→{r['loadavg'][1][0]}"
                        + (f", worker peak {gib(r['worker_peak_rss_kib'])}, shuffled "
                           f"{mb(sum(x['shuffled_bytes'] or 0 for x in r['rounds']))}"
                           if backend == "ray" and a.job == "train" else ""))
                if a.json:
                    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
                    Path(a.json).write_text(json.dumps(res, indent=1))
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
