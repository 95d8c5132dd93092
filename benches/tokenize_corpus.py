#!/usr/bin/env python3
"""Corpus-to-shards benchmark: ``cnfmce tokenize`` end to end against ``encode_batch`` in memory
and against the same pipeline written with tiktoken.

Run from the repository root::

    python benches/tokenize_corpus.py                      # test set (20 MB) and training set (143 MB)
    python benches/tokenize_corpus.py --sets test --repeats 5
    python benches/tokenize_corpus.py --wait-quiet 60 --json benches/out/tokenize.json

Inputs: the six shared test corpora (``$CNFMCE_SHARED/corpora/*/test.jsonl.gz``, about 20 MB of
text) and the six training corpora (about 143 MB), in that order. Tokenizer: MCE over o200k_base
(``o200k_base.tiktoken``, ``<|endoftext|>`` = 199999 as EOS); tiktoken's own o200k_base BPE for
the comparison. MB = 10^6 bytes of UTF-8 text. Every measurement is repeated (``--repeats``,
default 3), the candidates interleaved; the report gives the median and the range of MB/s, the
CPU time this process (and its children) spent per MB, the cores it used on average and the
most cores other processes took during a run (from /proc/stat). On a shared machine the CPU time
per MB is the steadier figure; the MB/s ratios are meaningful only when the other processes took
little.

Measured per input set:

* ``read only (core)``: the documents through the reader ``cnfmce tokenize`` uses for
  ``.jsonl.gz`` (``cnfmce._core.CorpusReader``: gzip + JSON in Rust, GIL released, blocks of
  UTF-8 documents, no Python strings), nothing else; ``read only (Python)``: the Python readers
  (``cnfmce.corpus.iter_file``: gzip + ``json.loads``), which the in-memory rows and the
  tiktoken pipeline use;
* ``encode_batch in memory``: the documents already in a list, one ``encode_batch`` call over
  all of them on all cores, returning lists (``list``) or flat numpy arrays (``numpy``,
  ``return_numpy=True``);
* ``tokenize_corpus``: ``cnfmce.tokenize_corpus(..., format=F)`` in this process, from the
  compressed files to finished shards on disk (read + encode + write, EOS after every document,
  1 GB shards), MB/s of text over its wall time;
* ``cnfmce tokenize`` CLI: the same as a fresh process (Python start and tokenizer load
  included), wall time;
* ``tiktoken pipeline``: the same readers, batches of the same size, tiktoken's
  ``encode_ordinary_batch(batch, num_threads=2)``, the ids made into a numpy array
  (``np.fromiter``), EOS appended and written to one ``.bin`` file: what a user writes with
  tiktoken and numpy (sequential: read, encode, write); and tiktoken's ``encode_ordinary_batch``
  in memory for reference.

The benchmark never asserts; shards go to a temporary directory that is removed.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

BENCHES = Path(__file__).resolve().parent
REPO = BENCHES.parent
SHARED = Path(os.environ.get("CNFMCE_SHARED", str(REPO.parent / "shared"))).resolve()
os.environ.setdefault("CNFMCE_VOCABS", str(SHARED / "vocabs"))
sys.path.insert(0, str(BENCHES))

from harness import (OUT, WAIT_QUIET, CpuWatch, f1, f2, loadavg, log, machine_info,  # noqa: E402
                     snapshot_package, table, wait_quiet)

CATEGORIES = ("en", "sci", "math", "code", "zh", "multi")
MB = 1e6
EOT = 199999


def set_paths(name: str) -> List[str]:
    return [str(SHARED / "corpora" / c / f"{name}.jsonl.gz") for c in CATEGORIES]


def summarize(runs: List[Dict[str, float]], nbytes: int) -> Dict[str, Any]:
    walls = [r["wall_s"] for r in runs]
    mbs = sorted(nbytes / MB / w for w in walls)
    cpu = sorted(r["own_cores"] * r["wall_s"] / (nbytes / MB) * 1000 for r in runs)
    return {"mb_s": statistics.median(mbs), "mb_s_min": mbs[0], "mb_s_max": mbs[-1],
            "cpu_ms_per_mb": statistics.median(cpu),
            "wall_s": statistics.median(walls), "own_cores": statistics.median(r["own_cores"] for r in runs),
            "other_cores": max(r["other_cores"] for r in runs), "runs": runs}


def timed(fn: Callable[[], Any]) -> Dict[str, float]:
    gc.collect()
    w = CpuWatch()
    fn()
    return w.stop()


# --- candidates -----------------------------------------------------------------------------------

def read_only(paths: Sequence[str]) -> None:
    from cnfmce.corpus import iter_file
    for p in paths:
        for _ in iter_file(p):
            pass


def read_only_core(paths: Sequence[str], batch_chars: int) -> None:
    from cnfmce._core import CorpusReader, TextBlock
    for p in paths:
        r = CorpusReader(p, b"text", gzip=p.endswith(".gz"))
        while r.read(TextBlock(), batch_chars)[0] == "full":
            pass


def tiktoken_pipeline(enc: Any, paths: Sequence[str], out: str, batch_chars: int) -> None:
    import numpy as np

    from cnfmce.corpus import iter_file
    with open(out, "wb") as fh:
        batch: List[str] = []
        chars = 0

        def flush() -> None:
            lists = enc.encode_ordinary_batch(batch, num_threads=2)
            ids = np.fromiter(itertools.chain.from_iterable(x + [EOT] for x in lists), dtype=np.uint32,
                              count=sum(len(x) + 1 for x in lists))
            ids.tofile(fh)

        for p in paths:
            for d in iter_file(p):
                batch.append(d)
                chars += len(d)
                if chars >= batch_chars:
                    flush()
                    batch, chars = [], 0
        if batch:
            flush()


def run_set(name: str, args: argparse.Namespace, tok: Any, enc: Any, tokfile: str) -> Dict[str, Any]:
    import cnfmce
    from cnfmce.corpus import iter_file
    from cnfmce.shards import BATCH_CHARS
    paths = set_paths(name)
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        log(f"{name}: missing {missing}; skipped")
        return {"skipped": missing}
    log(f"{name}: loading the documents")
    docs = [d for p in paths for d in iter_file(p)]
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    stored = sum(os.path.getsize(p) for p in paths)
    log(f"{name}: {len(docs):,} documents, {nbytes / MB:.1f} MB of text, {stored / MB:.1f} MB stored")
    tmp = tempfile.mkdtemp(prefix="cnfmce-bench-tok-")

    def shards(fmt: str) -> Callable[[], Any]:
        def go() -> None:
            out = os.path.join(tmp, "shards")
            shutil.rmtree(out, ignore_errors=True)
            cnfmce.tokenize_corpus(tok, paths, out, format=fmt, eos=EOT)
        return go

    def cli() -> None:
        out = os.path.join(tmp, "cli")
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "cnfmce.cli", "tokenize", "-t", tokfile, "-o", out,
                        "--format", "megatron", "--eos", str(EOT), "--quiet", *paths], check=True)

    def tiktoken_e2e() -> None:
        tiktoken_pipeline(enc, paths, os.path.join(tmp, "tiktoken.bin"), BATCH_CHARS)

    cands: Dict[str, Callable[[], Any]] = {
        "read only (core)": lambda: read_only_core(paths, BATCH_CHARS),
        "read only (Python)": lambda: read_only(paths),
        "encode_batch in memory (list)": lambda: tok.encode_batch(docs),
        "encode_batch in memory (numpy)": lambda: tok.encode_batch(docs, return_numpy=True),
    }
    for fmt in args.formats:
        cands[f"tokenize_corpus ({fmt})"] = shards(fmt)
    cands["cnfmce tokenize CLI (megatron)"] = cli
    if enc is not None:
        cands["tiktoken encode_ordinary_batch in memory"] = lambda: enc.encode_ordinary_batch(docs, num_threads=2)
        cands["tiktoken pipeline (read, encode, numpy, write)"] = tiktoken_e2e
    runs: Dict[str, List[Dict[str, float]]] = {k: [] for k in cands}
    try:
        for r in range(args.repeats):
            for k, fn in cands.items():
                wait_quiet(f"{name}: {k}", key="run")
                runs[k].append(timed(fn))
                log(f"{name} run {r + 1}/{args.repeats}: {k}: {nbytes / MB / runs[k][-1]['wall_s']:.1f} MB/s "
                    f"(other processes {runs[k][-1]['other_cores']:.2f} cores)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res = {k: summarize(v, nbytes) for k, v in runs.items()}
    return {"documents": len(docs), "text_bytes": nbytes, "stored_bytes": stored, "results": res}


def report(results: Dict[str, Any], info: Dict[str, Any], args: argparse.Namespace) -> str:
    out = []
    for name, r in results.items():
        if "results" not in r:
            continue
        res = r["results"]
        base_l = res["encode_batch in memory (list)"]["mb_s"]
        base_n = res["encode_batch in memory (numpy)"]["mb_s"]
        rows = []
        for k, v in res.items():
            rows.append([k, f1(v["mb_s"]), f"{v['mb_s_min']:.1f}–{v['mb_s_max']:.1f}",
                         f2(v["mb_s"] / base_l), f2(v["mb_s"] / base_n), f1(v["cpu_ms_per_mb"]),
                         f2(v["own_cores"]), f2(v["other_cores"])])
        out.append(f"#### {name} set: {r['documents']:,} documents, {r['text_bytes'] / MB:.1f} MB of text "
                   f"({r['stored_bytes'] / MB:.1f} MB gzip)\n")
        out.append(table(["", "MB/s (median)", "range", "÷ in-memory list", "÷ in-memory numpy",
                          "CPU ms/MB", "cores used", "other processes (max)"], rows))
        out.append("")
    out.append(f"Runs: {args.repeats} per row, interleaved; load average at start "
               f"{info.get('loadavg_at_start')}, at end {loadavg()}; cnfmce core "
               f"{info.get('cnfmce_core_sha256')} (git {info.get('git')}); {info.get('cpu_model', '')}.")
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="test,train", help="comma-separated: test, train")
    ap.add_argument("--formats", default="megatron", help="comma-separated tokenize_corpus formats")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="before each run wait up to S seconds for other processes to go quiet")
    ap.add_argument("--json", default=str(OUT / "tokenize.json"), help="where to write the results")
    ap.add_argument("--no-snapshot", action="store_true", help="import the installed cnfmce directly")
    args = ap.parse_args(argv)
    args.formats = [f for f in args.formats.split(",") if f]
    WAIT_QUIET["max_s"] = args.wait_quiet
    if not args.no_snapshot:
        snapshot_package()
    import cnfmce
    info = machine_info(["tiktoken", "numpy"])
    tokfile = str(SHARED / "vocabs" / "o200k_base.tiktoken")
    tok = cnfmce.Tokenizer.from_tiktoken(tokfile, special_tokens={"<|endoftext|>": EOT})
    try:
        from cnfmce.adapters import load_encoder
        enc = load_encoder("tiktoken:o200k_base").encoding  # ranks from $CNFMCE_VOCABS, no download
    except Exception as e:  # noqa: BLE001 - reported, not raised
        log(f"tiktoken unavailable ({e}); its rows are left out")
        enc = None
    results = {name: run_set(name, args, tok, enc, tokfile) for name in args.sets.split(",") if name}
    text = report(results, info, args)
    print(text)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump({"machine": info, "wait_quiet": WAIT_QUIET["log"], "sets": results}, fh, indent=1)
    log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
