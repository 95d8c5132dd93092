"""Where MCE encoding spends its time, phase by phase (a sampling profile of the Rust core).

    python benches/phases.py [--vocabs o200k,cnf250k] [--categories en,code,multi,zh]
                              [--repeats 10] [--out benches/out/phases.json]
    python benches/phases.py --instructions [--bytes 1000000] ...

Builds ``examples/encode_file.rs`` with the ``phase-profile`` feature (the phases of the encoder
kept out of line, so that samples land in them; the build is slower than the release one, which
inlines them) and runs it under ``perf record -e cpu-clock`` on each shared test set: the whole
set as one text, encoded ``--repeats`` times (the first pass meets every piece for the first
time, the others find the short ones in the piece cache). Samples are grouped by phase and given
as shares of the encoding's samples (the vocabulary's load and the example's own work left out).
With ``--instructions`` the same phases are counted in instructions instead of sampled (exact and
immune to the machine's load): ``valgrind --tool=callgrind`` on the first ``--bytes`` of each test
set, encoded zero, one and three times; per byte of text, the first pass (every piece new) and
each later pass (short pieces from the cache) are told apart as ``I(1) - I(0)`` and
``(I(3) - I(1)) / 2``. (The example annotates unit starts from bytes, validating UTF-8; the
Python API annotates them as it writes a ``str``'s UTF-8, with a vectorized path for ASCII.)
``cnf250k`` is the CNF 250k vocabulary of ``benches/encode.py`` (``benches/out/``, made by
``peers.py`` or ``encode.py``). Needs ``perf`` (or ``valgrind``) and ``cargo``; a benchmark,
not a test.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import baselines  # noqa: E402
from encode import cnf250k_path, load_docs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: phase -> the functions of the core whose samples it gets (see src/mce.rs)
PHASES = {
    "unit starts": ("cnfmce::units::unit_starts", "Utf8Chunks"),
    "cut bitmap": ("Encoder::cuts",),
    "finding pieces (keys, hashes, prefetch)": ("Encoder::next_batch",),
    "short pieces: cache lookup and replay": ("Encoder::short_piece",),
    # the first read of each piece's prefetched cache slot, and the walks of the pieces missing
    "short pieces: cache probe, walks of misses": ("Encoder::walk_missing",),
    "short pieces: program on a miss": ("Encoder::piece_program",),
    "long pieces: automaton walk": ("cnfmce::mce::walk",),
    "long pieces: candidates": ("cnfmce::mce::best_masked", "cnfmce::mce::long_chain"),
    "long pieces: program loop": ("Encoder::long_piece", "cnfmce::runs::"),
    "ids out (path to ids)": ("Encoder::encode_annotated",),
    # the loop over piece batches (mce_choices, inlined into its caller), buffers
    "other encoding work": ("Encoder::mce_choices", "Tokenizer::encode", "encode_file::main",
                            "reset_paths", "memset", "memmove", "memcpy", "clear_page",
                            "page_fault"),
}
#: not encoding: the vocabulary's load, the example's own loop
SETUP = ("Automaton::build", "SortedKeys", "sort::", "sort_order", "memcmp", "tiktoken_entries",
         "Vocab::", "base64", "hash_map", "_start")


def vocab_file(name: str, tmp: Path) -> Path:
    if name == "o200k":
        return baselines.vocab_path("o200k_base")
    if name == "cnf250k":
        src = cnf250k_path()
        if not src.exists():
            sys.exit(f"{src} is missing: run benches/peers.py (or benches/encode.py) first")
        import cnfmce
        tok = cnfmce.Tokenizer.load(str(src))
        opts = tok.options
        if (opts["boundary_penalty"], opts["token_preference"]) != (0.05, True):
            sys.exit(f"the example encodes with the default options, not {opts}")
        out = tmp / "cnf250k.tiktoken"
        with open(out, "w", encoding="ascii") as f:
            for i, b in sorted(tok.token_bytes().items()):
                f.write(f"{base64.b64encode(b).decode()} {i}\n")
        return out
    sys.exit(f"unknown vocabulary {name!r} (o200k, cnf250k)")


def test_text(cat: str, tmp: Path) -> Path:
    """The category's whole test set as one text (documents joined by newlines)."""
    out = tmp / f"{cat}.txt"
    out.write_text("".join(d + "\n" for d in load_docs(cat)), encoding="utf-8")
    return out


def profile(exe: Path, vocab: Path, text: Path, repeats: int, tmp: Path) -> dict:
    data = tmp / "perf.data"
    run = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-o", str(data),
                          str(exe), str(vocab), str(text), "mce", str(repeats)],
                         capture_output=True, text=True, check=True)
    rate = re.search(r"([\d.]+) MB/s\s*$", run.stderr.strip())
    rep = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--stdio",
                          "--sort", "symbol", "--percent-limit", "0"],
                         capture_output=True, text=True, check=True).stdout
    shares: dict = defaultdict(float)
    for line in rep.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.*)$", line)
        if not m:
            continue
        pct, sym = float(m.group(1)), m.group(2)
        phase = phase_of(sym)
        if pct >= 0.3 and os.environ.get("PHASES_DEBUG"):
            print(f"  {pct:5.2f}% {phase:40} {sym.strip()[:90]}", file=sys.stderr)
        shares[phase] += pct
    enc = sum(v for k, v in shares.items() if k != "setup")
    return {"mb_per_s_profile_build": float(rate.group(1)) if rate else None,
            "shares": {p: round(100 * shares.get(p, 0.0) / enc, 1) for p in PHASES}}


def phase_of(sym: str) -> str:
    phase = next((p for p, keys in PHASES.items() if any(k in sym for k in keys)), None)
    if phase is None:
        phase = "setup" if any(k in sym for k in SETUP) else "other encoding work"
    return phase


def instructions(exe: Path, vocab: Path, text: Path, repeats: int, tmp: Path) -> dict:
    """Instructions per phase (callgrind, exclusive per function) of ``repeats`` passes."""
    out = tmp / "callgrind.out"
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(exe),
                    str(vocab), str(text), "mce", str(repeats)], capture_output=True, check=True)
    rep = subprocess.run(["callgrind_annotate", "--threshold=100", str(out)],
                         capture_output=True, text=True, check=True).stdout
    counts: dict = defaultdict(int)
    for line in rep.splitlines():
        m = re.match(r"\s*([\d,]+) \([\s\d.]+%\)\s+(.*)$", line)
        if m and "PROGRAM TOTALS" not in line:
            counts[phase_of(m.group(2))] += int(m.group(1).replace(",", ""))
    return counts


def instruction_table(a: argparse.Namespace, exe: Path) -> None:
    results: dict = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for v in a.vocabs.split(","):
            vf = vocab_file(v, tmp)
            for c in a.categories.split(","):
                full = test_text(c, tmp)
                text = tmp / f"{c}-head.txt"
                data = full.read_bytes()[:a.bytes]
                text.write_bytes(data[:len(data.decode("utf-8", "ignore").encode("utf-8"))])
                n = text.stat().st_size
                zero = instructions(exe, vf, text, 0, tmp)
                one = instructions(exe, vf, text, 1, tmp)
                three = instructions(exe, vf, text, 3, tmp)
                row = {p: {"first": round((one.get(p, 0) - zero.get(p, 0)) / n, 1),
                           "cached": round((three.get(p, 0) - one.get(p, 0)) / 2 / n, 1)}
                       for p in PHASES}
                results[f"{v}/{c}"] = {"bytes": n, "per_byte": row}
                print(f"{v}/{c}: done", file=sys.stderr, flush=True)
    cols = list(results)
    print("| instructions per byte, first pass / later passes | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for p in list(PHASES) + ["total"]:
        cells = []
        for c in cols:
            r = results[c]["per_byte"]
            f_ = sum(x["first"] for x in r.values()) if p == "total" else r[p]["first"]
            k_ = sum(x["cached"] for x in r.values()) if p == "total" else r[p]["cached"]
            cells.append(f"{f_:.1f} / {k_:.1f}")
        print(f"| {p} | " + " | ".join(cells) + " |")
    out = Path(a.out).with_name(Path(a.out).stem + "-instructions.json")
    out.write_text(json.dumps({"bytes": a.bytes, "results": results}, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocabs", default="o200k,cnf250k")
    ap.add_argument("--categories", default="en,code,multi,zh")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "benches" / "out" / "phases.json"))
    ap.add_argument("--instructions", action="store_true",
                    help="count instructions with callgrind instead of sampling time")
    ap.add_argument("--bytes", type=int, default=1_000_000,
                    help="with --instructions: bytes of each test set")
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "-q", "--release", "--example", "encode_file",
                    "--features", "phase-profile"], cwd=ROOT, check=True)
    exe = ROOT / "target" / "release" / "examples" / "encode_file"
    if a.instructions:
        instruction_table(a, exe)
        return
    results: dict = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        texts = {c: test_text(c, tmp) for c in a.categories.split(",")}
        for v in a.vocabs.split(","):
            vf = vocab_file(v, tmp)
            for c, t in texts.items():
                results[f"{v}/{c}"] = profile(exe, vf, t, a.repeats, tmp)
                print(f"{v}/{c}: {results[f'{v}/{c}']}", file=sys.stderr, flush=True)
    cols = list(results)
    print("| phase (% of encoding samples) | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for p in PHASES:
        print(f"| {p} | " + " | ".join(f"{results[c]['shares'][p]:.1f}" for c in cols) + " |")
    print("| MB/s of the profiling build | "
          + " | ".join(f"{results[c]['mb_per_s_profile_build']:.1f}" for c in cols) + " |")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"repeats": a.repeats, "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
