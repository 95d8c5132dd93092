#!/usr/bin/env python3
"""Training benchmark of cnfmce (CNF) against Hugging Face BPE and sentencepiece BPE / Unigram.

Run from the repository root::

    python benches/train.py --quick                       # smoke run (~5 MB mix, 8k vocab; ~70 s)
    python benches/train.py --json benches/out/train.json # full run (~30 min on a quiet 2-core machine)
    python benches/train.py --configs mix-20MB@32k en-all --trainers cnfmce,hf-bpe --repeats 3
    python benches/train.py --from-json benches/out/train.json   # re-print the report

What it measures, for every configuration (training text + vocabulary size) and trainer:

* each trainer runs in a fresh subprocess that first loads the training documents into memory
  (not timed), then trains (timed: wall seconds, CPU seconds, MB/s of UTF-8 training text, the
  process's peak RSS during training from ``VmHWM``, reset after loading the documents);
* for cnfmce, the phases from the returned tokenizer's metadata: each counting round, the filtering
  pass, and the rest of the wall time (building the filter automaton over the raw vocabulary,
  selecting the tokens, building the final tokenizer);
* after training, in the same subprocess, characters per token of the trained tokenizer on every
  category's test set, and the gain of cnfmce over the same-data byte-level BPE (HF);
* a scaling check: cnfmce (default settings) and HF BPE on a 20 MB mix and a 40 MB mix (2x data),
  alternating sizes, the fastest run of each size counting;
* with ``--repeats N``, N timed runs of each configuration and trainer (trainer order rotated):
  the report uses the fastest, and the highest peak RSS;
* the 1/5/15-minute load average before and after every run and the CPU that other processes used
  meanwhile (from /proc/stat), because a busy machine makes training times unreliable.

Trainers (``--trainers``):

* ``cnfmce``: ``cnfmce.train(docs, vocab_size=V, progress=False, selection=RULE)`` (``--selection``
  below; raw_vocab_size the package default,
  ``cnfmce._core.default_raw_vocab_size(V)``, 10*V today);
* ``cnfmce-m20v``: the same with ``raw_vocab_size=20*V``;
* ``cnfmce-mem4g``: the same with ``memory_limit=4*10**9`` (not run by default);
* ``--selection RULE [RULE ...]`` (default ``paper``): every cnfmce trainer runs once per
  ``selection=`` rule of ``cnfmce.train`` (``paper``, ``refined``, ``refined-scripts``,
  ``refined-non-ascii``, or ``default``: no selection given, the library's defaults), named
  ``cnfmce:RULE`` in the report except the paper's, e.g.
  ``--configs mix-all@128k --trainers cnfmce --selection paper refined refined-non-ascii``;
* ``hf-bpe``: HF ``tokenizers`` byte-level BPE with the GPT-4 split regex (as ``cnfmce demo``),
  ``train_from_iterator`` over the same documents;
* ``spm-bpe`` / ``spm-unigram``: ``sentencepiece`` from an iterator over the non-empty lines of
  the documents (split on "\\n"; ``max_sentence_length`` is set above the longest line, so no
  line is dropped or cut), ``vocab_size=V``, ``byte_fallback=True``,
  ``character_coverage=0.9995`` (all configurations contain zh or are en only),
  ``num_threads=2``, ``input_sentence_size=0``, lossless-ish settings
  (``normalization_rule_name=identity``, ``remove_extra_whitespaces=False``,
  ``allow_whitespace_only_pieces=True``; other options at their defaults, e.g.
  ``add_dummy_prefix``, ``split_digits=False``, ``max_sentencepiece_length=16``);
  ``train_extremely_large_corpus`` only with ``--spm-large-corpus`` (sentencepiece 0.2.x ignores it).

Configurations (``--configs``): ``SOURCE-SIZE[@V[,V...]]`` with SOURCE ``mix`` (the six categories
en, sci, math, code, zh, multi in equal byte shares, documents in file order from each until its
share is reached) or one category, SIZE ``all`` or e.g. ``20MB`` (MB = 10^6 bytes of UTF-8 text),
V e.g. ``32000`` or ``32k``. Default: ``en-all@32k mix-20MB@32k,128k mix-all@32k,128k``.

The installed ``cnfmce`` is copied to ``benches/out/snapshot/<hash>/`` at the start (as
``benches/encode.py`` does; ``--no-snapshot`` turns this off, ``--snapshot-dir`` reuses an earlier
copy) and every subprocess imports it from there, so that a reinstall during the run cannot mix
two builds.

Corpora are read from ``$CNFMCE_SHARED/corpora/<category>/{train,test}.jsonl.gz`` (default:
``../shared`` next to the repository). Nothing is downloaded. The benchmark never asserts: errors,
time-outs and memory kills are reported in the tables. Logs of each subprocess go to
``benches/out/train-logs/``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

BENCHES = Path(__file__).resolve().parent
REPO = BENCHES.parent
SHARED = Path(os.environ.get("CNFMCE_SHARED", str(REPO.parent / "shared"))).resolve()
OUT = BENCHES / "out"
sys.path.insert(0, str(BENCHES))
from harness import WAIT_QUIET, core_sha, read_jsonl_docs, f1, f2, machine_cpu_seconds, own_cpu_seconds, table, wait_quiet, loadavg, log, machine_info, proc_status_kib, reset_peak_rss, snapshot_package  # noqa: E402
LOGS = OUT / "train-logs"

CATEGORIES = ("en", "sci", "math", "code", "zh", "multi")
MB = 1e6          # data and throughput: MB = 10^6 bytes of UTF-8 text
GB = 1e9          # memory targets: GB = 10^9 bytes
MIB = 1 << 20     # memory in tables: MiB

TRAINERS = {
    "cnfmce": "cnfmce",
    "cnfmce-m20v": "cnfmce (m=20V)",
    "cnfmce-mem4g": "cnfmce (memory_limit=4 GB)",
    "hf-bpe": "HF BPE",
    "spm-bpe": "spm BPE",
    "spm-unigram": "spm Unigram",
}
CNF_TRAINERS = ("cnfmce", "cnfmce-m20v", "cnfmce-mem4g")
BASE_CNF_TRAINERS = CNF_TRAINERS
#: "default": cnfmce.train's own defaults (no selection, rounds or balance given)
SELECTIONS = ("paper", "default", "refined", "refined-scripts", "refined-non-ascii")


def with_selection(trainer: str, selection: str) -> str:
    """The trainer name of a cnfmce trainer run with ``selection`` (``cnfmce:refined``); the paper's
    selection (the default) keeps the plain name."""
    return trainer if selection == "paper" else f"{trainer}:{selection}"


def split_selection(trainer: str) -> Tuple[str, str]:
    """(base trainer, selection) of a trainer name (``cnfmce:refined`` -> ``cnfmce``, ``refined``)."""
    base, _, sel = trainer.partition(":")
    return base, sel or "paper"


def register_trainer(trainer: str) -> None:
    """Makes a ``cnfmce...:<selection>`` name known to the report (label and cnfmce tables)."""
    global CNF_TRAINERS
    base, sel = split_selection(trainer)
    if trainer in TRAINERS or base not in BASE_CNF_TRAINERS or sel not in SELECTIONS:
        return
    TRAINERS[trainer] = (f"{TRAINERS[base]}, the library's defaults" if sel == "default"
                         else f'{TRAINERS[base]}, selection="{sel}"')
    CNF_TRAINERS = CNF_TRAINERS + (trainer,)
DEFAULT_CONFIGS = ("en-all@32000", "mix-20MB@32000,128000", "mix-all@32000,128000")
QUICK_CONFIGS = ("mix-5MB@8000",)
DEFAULT_SCALING = "mix-20MB,mix-40MB@32000"
QUICK_SCALING = "mix-5MB,mix-10MB@8000"
SPM_CHARACTER_COVERAGE = 0.9995
TIME_GRACE = 900  # seconds allowed beyond --timeout for loading data and the test-set evaluation


# --- configurations ----------------------------------------------------------------------------------

def parse_size(s: str) -> Optional[int]:
    """``all`` -> None; ``20MB`` / ``20mb`` / ``2.5MB`` -> bytes (MB = 10^6)."""
    if s.lower() == "all":
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(mb|m|kb|k|gb|g)?", s.lower())
    if not m:
        raise ValueError(f"bad size {s!r}: use 'all' or e.g. '20MB'")
    mult = {"mb": MB, "m": MB, "kb": 1e3, "k": 1e3, "gb": 1e9, "g": 1e9, None: 1}[m.group(2)]
    return int(float(m.group(1)) * mult)


def parse_vocab(s: str) -> int:
    s = s.strip().lower()
    if s.endswith("k"):
        return int(float(s[:-1]) * 1000)
    return int(s)


def parse_config(spec: str) -> List[Dict[str, Any]]:
    """``mix-20MB@32k,128k`` -> [{"name": "mix-20MB", "source": "mix", "max_bytes": 20e6,
    "vocab": 32000}, ...]. Without ``@``: 32000 and 128000 for mixes, 32000 for one category."""
    name, _, vocabs = spec.partition("@")
    source, _, size = name.partition("-")
    if source not in ("mix",) + CATEGORIES or not size:
        raise ValueError(f"bad configuration {spec!r}: use SOURCE-SIZE[@V,...], SOURCE one of "
                         f"mix, {', '.join(CATEGORIES)}")
    max_bytes = parse_size(size)
    if vocabs:
        vs = [parse_vocab(v) for v in vocabs.split(",") if v.strip()]
    else:
        vs = [32000, 128000] if source == "mix" else [32000]
    return [{"name": name, "source": source, "max_bytes": max_bytes, "vocab": v} for v in vs]


def corpus_path(category: str, split: str) -> Path:
    return SHARED / "corpora" / category / f"{split}.jsonl.gz"


def read_docs(category: str, split: str, max_bytes: Optional[int]) -> Tuple[List[str], int]:
    """Documents of a shared corpus and their UTF-8 bytes (see ``harness.read_jsonl_docs``)."""
    return read_jsonl_docs(corpus_path(category, split), max_bytes)


def training_docs(source: str, max_bytes: Optional[int]) -> Tuple[List[str], Dict[str, int]]:
    """The documents of a configuration and the UTF-8 bytes taken from each category."""
    cats = CATEGORIES if source == "mix" else (source,)
    share = None if max_bytes is None else max_bytes / len(cats)
    docs: List[str] = []
    per_cat: Dict[str, int] = {}
    for c in cats:
        d, n = read_docs(c, "train", None if share is None else int(round(share)))
        docs.extend(d)
        per_cat[c] = n
    return docs, per_cat


# --- /proc helpers -----------------------------------------------------------------------------------


# --- trainers (run inside the child) -------------------------------------------------------------------

def hf_bpe_tokenizer(vocab_size: int) -> Tuple[Any, Any]:
    """The same-data byte-level BPE of ``cnfmce demo`` (``cnfmce.baselines``): untrained
    tokenizer and trainer, so that only ``train_from_iterator`` is timed."""
    from cnfmce.baselines import bpe_tokenizer_and_trainer
    return bpe_tokenizer_and_trainer(vocab_size)


def spm_lines(docs: Sequence[str]):
    for d in docs:
        for ln in d.split("\n"):
            if ln:
                yield ln


def spm_options(model_type: str, vocab: int, max_line: int, large: bool) -> Dict[str, Any]:
    opts = dict(model_type=model_type, vocab_size=vocab, byte_fallback=True,
                character_coverage=SPM_CHARACTER_COVERAGE, num_threads=2,
                max_sentence_length=max(16384, max_line + 1), input_sentence_size=0,
                normalization_rule_name="identity", remove_extra_whitespaces=False,
                allow_whitespace_only_pieces=True)
    if large:  # deprecated and ignored by sentencepiece 0.2.x, which logs a warning
        opts["train_extremely_large_corpus"] = True
    return opts


def train_one(trainer: str, docs: List[str], vocab: int, spec: Dict[str, Any]
              ) -> Tuple[Callable[[List[str]], int], Dict[str, Any], Callable[[], Dict[str, Any]]]:
    """Trains; returns (token counter for a list of documents, info, post-training info getter).
    Everything inside this function is timed."""
    info: Dict[str, Any] = {}
    base, selection = split_selection(trainer)
    if base in BASE_CNF_TRAINERS:
        import cnfmce
        kw: Dict[str, Any] = {}
        if base == "cnfmce-m20v":
            kw["raw_vocab_size"] = 20 * vocab
        if base == "cnfmce-mem4g":
            kw["memory_limit"] = 4 * 10**9
        if selection != "default":  # "default": the library's own defaults
            kw["selection"] = selection
        tok = cnfmce.train(docs, vocab_size=vocab, progress=False, **kw)

        def post() -> Dict[str, Any]:
            md = dict(tok.metadata)
            return {"vocab_size_out": tok.vocab_size, "cnf": {
                "counting": md.get("counting"), "filtering": md.get("filtering"),
                "raw_vocabulary": md.get("raw_vocabulary"),
                "raw_vocab_size": kw.get("raw_vocab_size", cnfmce._core.default_raw_vocab_size(vocab)),
                "selection": md.get("selection", selection)}}

        return (lambda ds: sum(map(len, tok.encode_batch(ds)))), info, post
    if trainer == "hf-bpe":
        tok, tr = hf_bpe_tokenizer(vocab)
        tok.train_from_iterator(docs, tr)

        def post() -> Dict[str, Any]:
            return {"vocab_size_out": tok.get_vocab_size()}

        return (lambda ds: sum(len(e.ids) for e in tok.encode_batch(ds, add_special_tokens=False))), info, post
    if trainer in ("spm-bpe", "spm-unigram"):
        import io
        import sentencepiece as spm
        opts = spec["spm_options"]
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=spm_lines(docs), model_writer=model,
                                       minloglevel=1, **opts)
        sp = spm.SentencePieceProcessor(model_proto=model.getvalue())

        def post() -> Dict[str, Any]:
            return {"vocab_size_out": sp.get_piece_size(), "spm_options": opts}

        return (lambda ds: sum(map(len, sp.encode(ds, out_type=int, num_threads=2)))), info, post
    raise ValueError(f"unknown trainer {trainer!r}")


def write_json(path: str, obj: Dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, default=str)
    os.replace(tmp, path)


def child_main(spec: Dict[str, Any]) -> None:
    """Inside a fresh interpreter: load the documents, train (timed), evaluate on the test sets.
    Writes the result to spec["result"] after training and again after the evaluation, and its
    progress ("loading", "training" with a start time, "evaluating") to spec["status"]."""
    trainer, vocab = spec["trainer"], spec["vocab"]
    status, result_path = spec["status"], spec["result"]
    write_json(status, {"phase": "loading", "t": time.time()})
    # Import the libraries before measuring, so that their own memory is in the baseline.
    if trainer.startswith("cnfmce"):
        import cnfmce  # noqa: F401  (imported before the measurement)
        res0 = {"cnfmce_core": core_sha()}
    elif trainer == "hf-bpe":
        import tokenizers  # noqa: F401
        res0 = {}
    else:
        import sentencepiece  # noqa: F401
        res0 = {}
    t_load = time.perf_counter()
    docs, per_cat = training_docs(spec["source"], spec["max_bytes"])
    nbytes = sum(per_cat.values())
    res: Dict[str, Any] = {"docs": len(docs), "bytes": nbytes, "chars": sum(map(len, docs)),
                           "bytes_per_category": per_cat,
                           "load_seconds": round(time.perf_counter() - t_load, 3), **res0}
    if trainer.startswith("spm"):
        max_line = 0
        nlines = 0
        for ln in spm_lines(docs):
            nlines += 1
            b = len(ln) if ln.isascii() else len(ln.encode("utf-8"))
            max_line = max(max_line, b)
        spec["spm_options"] = spm_options("bpe" if trainer == "spm-bpe" else "unigram", vocab,
                                          max_line, spec.get("spm_large", False))
        res.update(spm_lines=nlines, spm_max_line_bytes=max_line)
    gc.collect()
    res["peak_reset"] = reset_peak_rss()
    res["rss_before_mib"] = (proc_status_kib("VmRSS") or 0) / 1024
    res["loadavg_start"] = loadavg()
    write_json(status, {"phase": "training", "t": time.time()})
    c0 = time.process_time()
    t0 = time.perf_counter()
    count_tokens, info, post = train_one(trainer, docs, vocab, spec)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    res.update(info)
    res.update(wall_s=wall, cpu_s=cpu, mb_s=nbytes / MB / wall,
               peak_rss_mib=(proc_status_kib("VmHWM") or 0) / 1024,
               rss_after_mib=(proc_status_kib("VmRSS") or 0) / 1024,
               loadavg_end=loadavg())
    res["peak_delta_mib"] = res["peak_rss_mib"] - res["rss_before_mib"]
    res.update(post())
    write_json(result_path, res)
    if not spec.get("eval", True):
        return
    write_json(status, {"phase": "evaluating", "t": time.time()})
    del docs
    gc.collect()
    test: Dict[str, Any] = {}
    for cat in CATEGORIES:
        try:
            tdocs, tbytes = read_docs(cat, "test", spec.get("test_bytes"))
            t1 = time.perf_counter()
            ntok = count_tokens(tdocs)
            test[cat] = {"docs": len(tdocs), "bytes": tbytes, "chars": sum(map(len, tdocs)),
                         "tokens": ntok, "seconds": round(time.perf_counter() - t1, 3)}
        except Exception as e:  # reported, never raised
            traceback.print_exc()
            test[cat] = {"error": f"{type(e).__name__}: {e}"}
    res["test"] = test
    write_json(result_path, res)


# --- parent: one run in a subprocess -------------------------------------------------------------------

def run_child(spec: Dict[str, Any], tag: str, timeout: float, max_rss_mib: float) -> Dict[str, Any]:
    """Runs one training in a fresh interpreter; kills it (by its own process group, which this
    function created) after ``timeout`` seconds of training or when its RSS exceeds
    ``max_rss_mib``. Returns the child's result with the parent's measurements added."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log_path = LOGS / f"{tag}.log"
    spec = dict(spec, status=str(LOGS / f"{tag}.status.json"), result=str(LOGS / f"{tag}.result.json"))
    for p in (spec["status"], spec["result"]):
        if os.path.exists(p):
            os.remove(p)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_child", json.dumps(spec)]
    out: Dict[str, Any] = {"loadavg_before": loadavg()}
    busy0, steal0 = machine_cpu_seconds()
    own0 = own_cpu_seconds()
    t0 = time.perf_counter()
    rss_max = 0
    killed: Optional[str] = None
    with open(log_path, "w") as logf:
        p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
        while True:
            pid, wstatus, ru = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                break
            rss = proc_status_kib("VmRSS", str(p.pid)) or 0
            rss_max = max(rss_max, rss)
            now = time.perf_counter()
            phase: Dict[str, Any] = {}
            try:
                with open(spec["status"]) as fh:
                    phase = json.load(fh)
            except (OSError, ValueError):
                pass
            if killed is None:
                if phase.get("phase") == "training" and time.time() - phase["t"] > timeout:
                    killed = f"timed out after {timeout:.0f} s of training"
                elif now - t0 > timeout + TIME_GRACE:
                    killed = f"timed out after {now - t0:.0f} s in all ({phase.get('phase', '?')})"
                elif rss / 1024 > max_rss_mib:
                    killed = f"killed at RSS {rss / 1024 / 1024:.1f} GiB > --max-rss ({phase.get('phase', '?')})"
                if killed:
                    log(f"  {tag}: {killed}")
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            time.sleep(0.25)
        p.returncode = os.waitstatus_to_exitcode(wstatus)
    wall = time.perf_counter() - t0
    busy1, steal1 = machine_cpu_seconds()
    own = own_cpu_seconds() - own0
    out.update(process_wall_s=wall, loadavg_after=loadavg(), exit_code=p.returncode,
               child_cpu_s=ru.ru_utime + ru.ru_stime, process_peak_rss_mib=ru.ru_maxrss / 1024,
               polled_peak_rss_mib=rss_max / 1024, log=str(log_path.relative_to(REPO)),
               other_cores=max(0.0, (busy1 - busy0) - own) / wall, steal_cores=(steal1 - steal0) / wall)
    res: Dict[str, Any] = {}
    try:
        with open(spec["result"]) as fh:
            res = json.load(fh)
    except (OSError, ValueError):
        pass
    out.update(res)
    if killed:
        out["error"] = killed
    elif p.returncode != 0:
        try:
            tail = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()][-3:]
        except OSError:
            tail = []
        out["error"] = f"failed (exit {p.returncode}): " + " | ".join(tail)[-400:]
    if "error" in out and "wall_s" in out:
        out["error"] += " (after training; the training numbers are valid)"
    return out


# --- the benchmark ---------------------------------------------------------------------------------------

def default_max_rss_mib() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.85 / MIB
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return 16 * 1024


def run_key(r: Dict[str, Any]) -> str:
    return f"{r['config']}@{r['vocab']}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        description="Training benchmark of cnfmce (CNF) against Hugging Face byte-level BPE and sentencepiece "
                    "BPE / Unigram on the shared training corpora: wall time, peak RSS and MB/s of each trainer "
                    "in a fresh subprocess, cnfmce's phases, characters per token on every category's test set, "
                    "and a 2x-data scaling check. Prints a markdown report on stdout, progress on stderr; logs of "
                    "the subprocesses go to benches/out/train-logs/. Corpora are read from $CNFMCE_SHARED "
                    "(default: ../shared beside the repository).",
        epilog="Configurations: SOURCE-SIZE[@V,...]; SOURCE is 'mix' (equal byte shares of "
               + ", ".join(CATEGORIES) + ", documents in file order) or one category; SIZE is 'all' or e.g. "
               "'20MB' (10^6 bytes); V e.g. 32000 or 32k (default 32k and 128k for mixes, 32k otherwise). "
               "Examples: mix-20MB@32k,128k  en-all  mix-all@128k  code-5MB@8k.")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke run: configuration {' '.join(QUICK_CONFIGS)}, scaling {QUICK_SCALING}, "
                         "test sets cut to their first 1 MB (a few minutes)")
    ap.add_argument("--configs", nargs="+", metavar="CONFIG",
                    help="configurations to run, in order (default: " + " ".join(DEFAULT_CONFIGS) +
                         "; commas inside one argument separate vocabulary sizes)")
    ap.add_argument("--trainers", default=",".join(t for t in TRAINERS if t != "cnfmce-mem4g"),
                    help="comma-separated trainers (default: %(default)s; also cnfmce-mem4g)")
    ap.add_argument("--scaling", metavar="SMALL,LARGE@V",
                    help=f"scaling check: the --scaling-trainers on two data sizes (default "
                         f"{DEFAULT_SCALING}; quick {QUICK_SCALING}); 'none' to skip")
    ap.add_argument("--scaling-trainers", default="cnfmce,hf-bpe",
                    help="trainers of the scaling check (default: %(default)s)")
    ap.add_argument("--scaling-repeats", type=int,
                    help="runs per size in the scaling check, alternating sizes; the fastest counts "
                         "(default 2; quick 1)")
    ap.add_argument("--selection", nargs="+", metavar="SELECTION", default=["paper"],
                    help="selection rule(s) of the cnfmce trainers, in order; each cnfmce trainer runs once per "
                         "rule, named TRAINER:RULE in the report except the paper's (default: paper; choose "
                         "from " + ", ".join(SELECTIONS) + "), e.g. --selection paper refined refined-non-ascii")
    ap.add_argument("--repeats", type=int, default=1,
                    help="timed runs per configuration and trainer (default %(default)s); the tables and "
                         "targets use the fastest run of a configuration (the scaling runs of the same "
                         "configuration included) and the highest peak RSS; only the first run is evaluated")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds of training allowed per run before it is killed and reported as "
                         "'timed out' (default %(default)s)")
    ap.add_argument("--max-rss", type=float, metavar="GIB",
                    help="kill a run whose RSS exceeds this many GiB (default: 85%% of physical memory)")
    ap.add_argument("--test-bytes", type=parse_size, metavar="SIZE",
                    help="evaluate on the first SIZE (e.g. 1MB) of each test set (default: all; quick: 1MB)")
    ap.add_argument("--no-eval", action="store_true", help="skip the test-set evaluation")
    ap.add_argument("--spm-large-corpus", action="store_true",
                    help="pass train_extremely_large_corpus=True to sentencepiece")
    ap.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                    help="on a shared machine: before each run, wait up to S seconds until other processes "
                         "use < 0.3 cores (default 0: do not wait)")
    ap.add_argument("--no-snapshot", action="store_true",
                    help="import the installed cnfmce in place (default: copy it to benches/out/snapshot/<hash>/ "
                         "first and import that copy everywhere, so a reinstall during the run cannot mix builds)")
    ap.add_argument("--snapshot-dir", metavar="DIR",
                    help="import cnfmce from an earlier snapshot (a folder holding cnfmce/, e.g. "
                         "benches/out/snapshot/<hash>), e.g. to time more runs on the build of an earlier run")
    ap.add_argument("--json", metavar="PATH",
                    help="write the raw numbers as JSON to PATH (rewritten after every run, so that an "
                         "interrupted run keeps what finished)")
    ap.add_argument("--from-json", metavar="PATH",
                    help="do not run anything: print the report of an earlier --json file")
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._child:
        child_main(json.loads(args._child))
        return 0
    if args.from_json:
        with open(args.from_json) as fh:
            print(report(json.load(fh)))
        return 0
    selections = [x for s in args.selection for x in s.split(",") if x]
    for sel in selections:
        if sel not in SELECTIONS:
            ap.error(f"unknown selection {sel!r}; choose from {', '.join(SELECTIONS)}")

    snapshot_of = None if args.no_snapshot else snapshot_package(args.snapshot_dir)
    quick = args.quick
    WAIT_QUIET["max_s"] = args.wait_quiet
    trainers = [t.strip() for t in args.trainers.split(",") if t.strip()]
    sc_trainers = [t.strip() for t in args.scaling_trainers.split(",") if t.strip()]
    for t in trainers + sc_trainers:
        if t not in TRAINERS:
            ap.error(f"unknown trainer {t!r}; choose from {', '.join(TRAINERS)}")
    # every cnfmce trainer once per selection rule, in the order given
    trainers = [n for t in trainers for n in ([with_selection(t, s) for s in selections]
                                              if t in BASE_CNF_TRAINERS else [t])]
    for t in trainers:
        register_trainer(t)
    configs: List[Dict[str, Any]] = []
    try:
        for c in args.configs or (QUICK_CONFIGS if quick else DEFAULT_CONFIGS):
            configs.extend(parse_config(c))
        scaling_spec = args.scaling or (QUICK_SCALING if quick else DEFAULT_SCALING)
        scaling = None
        if scaling_spec.lower() != "none":
            sizes, _, v = scaling_spec.partition("@")
            small, large = [s.strip() for s in sizes.split(",")]
            scaling = {"small": parse_config(f"{small}@{v or 32000}")[0],
                       "large": parse_config(f"{large}@{v or 32000}")[0]}
    except ValueError as e:
        ap.error(str(e))
    if args.scaling_repeats is None:
        args.scaling_repeats = 1 if quick else 2
    test_bytes = args.test_bytes if args.test_bytes is not None else (1_000_000 if quick else None)
    max_rss_mib = args.max_rss * 1024 if args.max_rss else default_max_rss_mib()
    argv_list = sys.argv[1:] if argv is None else list(argv)
    t_start = time.perf_counter()
    res: Dict[str, Any] = {
        "config": {"command": " ".join(["python benches/train.py"] + argv_list), "quick": quick,
                   "configs": configs, "trainers": trainers, "scaling": scaling,
                   "scaling_trainers": sc_trainers, "scaling_repeats": args.scaling_repeats,
                   "repeats": args.repeats,
                   "timeout_s": args.timeout, "max_rss_mib": max_rss_mib, "test_bytes": test_bytes,
                   "spm_character_coverage": SPM_CHARACTER_COVERAGE, "shared": str(SHARED)},
        "machine": machine_info(("tokenizers", "sentencepiece")),
        "runs": [],
        "scaling_runs": [],
        "errors": [],
        "wait_quiet": WAIT_QUIET["log"],
    }
    m = res["machine"]
    if snapshot_of:
        m["cnfmce_snapshot_of"] = snapshot_of
    log(f"machine: {m.get('cpu')}, {m.get('cores_usable')} cores, {m.get('memory_gib')} GiB; "
        f"load {m['loadavg_at_start']}; shared = {SHARED}")

    def save() -> None:
        res["elapsed_seconds"] = time.perf_counter() - t_start
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            write_json(args.json, res)

    def one(cfg: Dict[str, Any], trainer: str, eval_: bool, tag: str) -> Dict[str, Any]:
        wait_quiet(tag, key="run")
        spec = {"trainer": trainer, "source": cfg["source"], "max_bytes": cfg["max_bytes"],
                "vocab": cfg["vocab"], "eval": eval_ and not args.no_eval, "test_bytes": test_bytes,
                "spm_large": args.spm_large_corpus}
        log(f"{tag}: training ...")
        try:
            r = run_child(spec, tag, args.timeout, max_rss_mib)
        except Exception as e:  # reported, never raised
            traceback.print_exc()
            r = {"error": f"{type(e).__name__}: {e}"}
        r.update(config=cfg["name"], vocab=cfg["vocab"], trainer=trainer, source=cfg["source"],
                 max_bytes=cfg["max_bytes"])
        if "wall_s" in r:
            log(f"{tag}: {r['wall_s']:.1f} s, {r['bytes'] / MB:.1f} MB, {r['mb_s']:.2f} MB/s, peak RSS "
                f"{r['peak_rss_mib']:.0f} MiB, load {r['loadavg_before']} -> {r['loadavg_after']}, other "
                f"processes {r['other_cores']:.2f} cores" + (f"; {r['error']}" if r.get("error") else ""))
        else:
            log(f"{tag}: {r.get('error')}")
        return r

    # The configurations in the order given, the scaling check before the first one on all of the
    # mix (the slowest), so that a run cut short has the most tables.
    sc_done = False
    for cfg in configs:
        if scaling and not sc_done and cfg["max_bytes"] is None and cfg["source"] == "mix":
            run_scaling(res, scaling, sc_trainers, args.scaling_repeats, one, save)
            sc_done = True
        for k in range(args.repeats):
            # Later repeats rotate the order of the trainers, so that a drift in machine load
            # hits all alike; only the first repeat evaluates on the test sets.
            for t in trainers[k % len(trainers):] + trainers[:k % len(trainers)]:
                tag = f"{cfg['name']}@{cfg['vocab']}-{t}" + (f"-{k + 1}" if args.repeats > 1 else "")
                r = one(cfg, t, k == 0, tag)
                r["repeat"] = k + 1
                res["runs"].append(r)
                save()
    if scaling and not sc_done:
        run_scaling(res, scaling, sc_trainers, args.scaling_repeats, one, save)

    after = machine_info(("tokenizers", "sentencepiece"))
    res["machine_after"] = {k: after.get(k) for k in ("cnfmce_core_sha256", "cnfmce_core_mtime", "date",
                                                         "loadavg_at_start")}
    for key in ("cnfmce_core_sha256", "cnfmce_core_mtime"):
        if after.get(key) != m.get(key):
            res["errors"].append(f"the installed cnfmce core changed during the run ({key}: {m.get(key)} -> "
                                 f"{after.get(key)}); later runs may use another build")
    save()
    print(report(res))
    if args.json:
        log(f"raw numbers written to {args.json}")
    log(f"done in {res['elapsed_seconds']:.0f} s")
    return 0


def run_scaling(res: Dict[str, Any], scaling: Dict[str, Any], trainers: List[str], repeats: int,
                one: Callable[..., Dict[str, Any]], save: Callable[[], None]) -> None:
    """Alternates small and large runs (small, large, small, large, ...) per trainer."""
    for t in trainers:
        for k in range(repeats):
            for size in ("small", "large"):
                cfg = scaling[size]
                tag = f"scaling-{cfg['name']}@{cfg['vocab']}-{t}-{k + 1}"
                r = one(cfg, t, False, tag)
                r.update(size=size, repeat=k + 1)
                res["scaling_runs"].append(r)
                save()


# --- report -------------------------------------------------------------------------------------------

def f3(x: Optional[float]) -> str:
    return "—" if x is None else f"{x:.3f}"


def pct(x: Optional[float]) -> str:
    return "—" if x is None else f"{100 * x:+.1f}%"


def vk(v: int) -> str:
    return f"{v // 1000}k" if v % 1000 == 0 else str(v)


def gib(mib: Optional[float]) -> str:
    return "—" if mib is None else f"{mib / 1024:.2f} GiB"


def ok(r: Optional[Dict[str, Any]]) -> bool:
    return bool(r) and "wall_s" in r  # type: ignore[operator]


def status_of(r: Dict[str, Any]) -> str:
    if not ok(r):
        return r.get("error") or "not run"
    notes = []
    if r.get("error"):
        notes.append(r["error"])
    if r.get("vocab_size_out") is not None and r["vocab_size_out"] != r["vocab"]:
        notes.append(f"vocabulary has {r['vocab_size_out']:,} ids")
    return "; ".join(notes) or "ok"


def cpt(r: Dict[str, Any], cat: Optional[str] = None) -> Optional[float]:
    """Characters per token on one test set, or pooled over all of them (``cat`` None)."""
    t = r.get("test") or {}
    cats = [cat] if cat else list(CATEGORIES)
    chars = tokens = 0
    for c in cats:
        x = t.get(c) or {}
        if not x.get("tokens"):
            return None
        chars += x["chars"]
        tokens += x["tokens"]
    return chars / tokens if tokens else None


def runs_by_key(res: Dict[str, Any]) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """config@V -> trainer -> one merged run: the timing of the fastest successful run (the scaling
    runs of the same configuration included), the highest peak RSS of all, the test-set results of
    the evaluated run, and "walls" listing every run's wall time (or error)."""
    groups: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
    main_keys = {(run_key(r), r["trainer"]) for r in res.get("runs", [])}
    for r in list(res.get("runs", [])) + list(res.get("scaling_runs", [])):
        if (run_key(r), r["trainer"]) in main_keys:
            groups.setdefault(run_key(r), {}).setdefault(r["trainer"], []).append(r)
    out: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for key, by_t in groups.items():
        for t, runs in by_t.items():
            good = [r for r in runs if ok(r)]
            m = dict(min(good, key=lambda r: r["wall_s"]) if good else runs[0])
            ev = next((r for r in runs if r.get("test")), None)
            if ev is not None:
                m["test"] = ev["test"]
            if good:
                m["peak_rss_mib"] = max(r["peak_rss_mib"] for r in good)
                m["process_peak_rss_mib"] = max(r.get("process_peak_rss_mib") or 0 for r in good)
                if len(good) < len(runs):
                    m["error"] = "; ".join(r["error"] for r in runs if not ok(r) and r.get("error"))
                elif ev is not None and ev.get("error"):
                    m["error"] = ev["error"]
                else:
                    m.pop("error", None)
            m["walls"] = [f"{r['wall_s']:.1f}" if ok(r) else (r.get("error") or "?")[:30] for r in runs]
            m["n_runs"] = len(runs)
            out.setdefault(key, {})[t] = m
    return out


def load_summary(runs: Sequence[Dict[str, Any]]) -> str:
    vals = [x for r in runs for x in (r.get("loadavg_before", [None])[:1] + r.get("loadavg_after", [None])[:1])
            if x is not None]
    other = [r["other_cores"] for r in runs if r.get("other_cores") is not None]
    if not vals:
        return "—"
    s = f"1-min load average {min(vals):.2f}–{max(vals):.2f} (mean {sum(vals) / len(vals):.2f})"
    if other:
        s += f"; other processes used {min(other):.2f}–{max(other):.2f} cores during the runs"
    return s


def scaling_summary(res: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Per trainer: the fastest small and large run and their ratio."""
    out: Dict[str, Dict[str, Any]] = {}
    for r in res.get("scaling_runs", []):
        d = out.setdefault(r["trainer"], {"small": [], "large": []})
        d[r["size"]].append(r)
    for t, d in out.items():
        for size in ("small", "large"):
            good = [r for r in d[size] if ok(r)]
            d[size + "_best"] = min(good, key=lambda r: r["wall_s"]) if good else None
        s, l = d["small_best"], d["large_best"]
        d["ratio"] = l["wall_s"] / s["wall_s"] if s and l else None
        cs = [r["cpu_s"] for r in d["small"] if ok(r)]
        cl = [r["cpu_s"] for r in d["large"] if ok(r)]
        d["cpu_ratio"] = min(cl) / min(cs) if cs and cl else None
        d["data_ratio"] = l["bytes"] / s["bytes"] if s and l else None
    return out


def report(res: Dict[str, Any]) -> str:
    out: List[str] = []
    cfg = res["config"]
    m = res["machine"]
    for r in res.get("runs", []) + res.get("scaling_runs", []):
        register_trainer(r.get("trainer", ""))
    for t in cfg.get("trainers", []):
        register_trainer(t)
    by = runs_by_key(res)
    out.append("# cnfmce training benchmark\n")
    out.append(f"Command: `{cfg['command']}`  \n"
               f"Mode: {'quick (smoke run)' if cfg['quick'] else 'full'}; every run in a fresh subprocess "
               f"(documents loaded before timing); MB = 10^6 bytes of UTF-8 text; peak RSS = VmHWM of the "
               f"training process during training (reset after loading the documents; the loaded documents "
               f"are included), GiB = 2^30 bytes. Time budget {cfg['timeout_s']:.0f} s of training per run.\n")

    # 0. data and settings
    data: Dict[str, Dict[str, Any]] = {}
    for r in list(res.get("runs", [])) + list(res.get("scaling_runs", [])):
        if r.get("bytes") and r["config"] not in data:
            data[r["config"]] = r
    if data:
        out.append("## Training data\n")
        rows = [[name, f"{r['docs']:,}", f"{r['bytes'] / MB:.1f}", f"{r['chars'] / 1e6:.1f}"] +
                [f"{r['bytes_per_category'].get(c, 0) / MB:.1f}" if c in r["bytes_per_category"] else "—"
                 for c in CATEGORIES] for name, r in data.items()]
        out.append(table(["config", "documents", "MB", "M chars"] + [f"{c} MB" for c in CATEGORIES], rows))
        sp = next((r for r in res.get("runs", []) if r.get("spm_options")), None)
        if sp:
            o = sp["spm_options"]
            out.append(f"\nsentencepiece input: the non-empty lines of the documents (split on \"\\n\"), e.g. "
                       f"{sp['spm_lines']:,} lines for {sp['config']}, longest {sp['spm_max_line_bytes']:,} bytes, "
                       f"max_sentence_length={o['max_sentence_length']:,}: no line dropped or cut. Options: "
                       + ", ".join(f"{k}={v}" for k, v in o.items() if k not in ("model_type", "vocab_size")) + ".")
        out.append("")

    # 1. wall time and memory
    out.append("## 1. Training time and memory\n")
    rows = []
    for key, runs in by.items():
        for t in TRAINERS:
            r = runs.get(t)
            if r is None:
                continue
            hf = runs.get("hf-bpe")
            rel = f2(r["wall_s"] / hf["wall_s"]) + "x" if ok(r) and ok(hf) else "—"
            rel_cpu = f2(r["cpu_s"] / hf["cpu_s"]) + "x" if ok(r) and ok(hf) else "—"
            rows.append([key, TRAINERS[t], f"{r['bytes'] / MB:.1f}" if ok(r) else "—",
                         f1(r.get("wall_s")), ", ".join(r["walls"]) if r["n_runs"] > 1 else "",
                         rel, f2(r.get("mb_s")), f1(r.get("cpu_s")), rel_cpu,
                         f2(r["cpu_s"] / r["wall_s"]) if ok(r) else "—",
                         gib(r.get("peak_rss_mib")), gib(r.get("rss_before_mib")),
                         f"{r['loadavg_before'][0]:.2f} → {r['loadavg_after'][0]:.2f}" if r.get("loadavg_after") else "—",
                         f2(r.get("other_cores")), status_of(r)])
    out.append(table(["config@V", "trainer", "MB", "wall s", "all runs (wall s)", "vs HF BPE", "MB/s", "CPU s",
                      "CPU vs HF BPE", "cores used", "peak RSS", "RSS before (docs)",
                      "load 1-min before → after", "other procs (cores)", "status"], rows,
                     align="llrrrrrrrrrrrrl"))
    out.append("\nWith several runs of a configuration (--repeats, or the scaling check's runs of the same data), "
               "the row shows the fastest run (its CPU, load and other-process figures) and the highest peak RSS "
               "of all runs.")
    out.append("\"CPU s\" = CPU seconds of the training process (all its threads); \"cores used\" = CPU "
               "seconds / wall seconds; \"other procs\" = CPU that other processes on the machine used meanwhile "
               "(from /proc/stat), in cores: above ~0.3 the wall times are inflated (on 2 cores, up to about "
               "2x), and the CPU-second ratios are the steadier comparison.\n")

    # 2. cnfmce phases
    rows = []
    for r in res.get("runs", []):
        if ok(r) and r.get("cnf"):
            rows.append(cnf_phase_row(run_key(r) + (f" #{r['repeat']}" if cfg.get("repeats", 1) > 1 else ""),
                                      TRAINERS[r["trainer"]], r))
    for r in res.get("scaling_runs", []):
        if ok(r) and r.get("cnf"):
            rows.append(cnf_phase_row(f"{run_key(r)} (scaling #{r['repeat']})", TRAINERS[r["trainer"]], r))
    if rows:
        out.append("## 2. cnfmce phases (seconds; MB/s in parentheses)\n")
        out.append(table(["config@V", "trainer", "raw vocab m", "round 1 [1-12]", "round 2 [13-21]",
                          "round 3 [22-30]", "filtering", "select", "build filter", "finish", "rest", "total",
                          "rest %", "round 1 distinct", "spills", "peak table", "peak RSS", "other procs (cores)"],
                         rows, align="ll" + "r" * 16))
        out.append("\nround k / filtering = feeding the documents to that pass (counting or MCE). select = the "
                   "ends of rounds 1..n-1 (what each round keeps); build filter = the end of the last round "
                   "(the counts handed over, the filter automaton built over the raw vocabulary); finish = "
                   "selecting the tokens and building the final tokenizer; rest = the wall time in none of "
                   "those. Builds that did not record the ends show — and count them in the pass before. "
                   "peak table = largest counting table; spills = runs written to "
                   "disk because of memory_limit.\n")

    # 3. quality
    if any(r.get("test") for runs in by.values() for r in runs.values()):
        tb = cfg.get("test_bytes")
        out.append("## 3. Characters per token on the test sets\n")
        out.append("Characters (Unicode code points of the original text) per token on each category's "
                   f"test set ({'first ' + f1(tb / MB) + ' MB of each' if tb else 'all of each'}); "
                   "\"all\" pools the six. cnfmce: `encode_batch` (MCE); HF: `encode_batch(..., "
                   "add_special_tokens=False)`; spm: `encode(out_type=int)`.\n")
        hdr = ["config@V", "trainer"] + list(CATEGORIES) + ["all"]
        rows = []
        for key, runs in by.items():
            for t in TRAINERS:
                r = runs.get(t)
                if r is None or not r.get("test"):
                    continue
                rows.append([key, TRAINERS[t]] + [f3(cpt(r, c)) for c in CATEGORIES] + [f3(cpt(r))])
            hf = runs.get("hf-bpe")
            if hf and hf.get("test"):
                for t in CNF_TRAINERS + ("spm-bpe", "spm-unigram"):
                    r = runs.get(t)
                    if r is None or not r.get("test"):
                        continue
                    rows.append([key, f"**{TRAINERS[t]} vs HF BPE**"] +
                                [pct(gain(r, hf, c)) for c in CATEGORIES] + [pct(gain(r, hf, None))])
        out.append(table(hdr, rows, align="ll" + "r" * (len(CATEGORIES) + 1)))
        out.append("")

    # 4. scaling
    sc = scaling_summary(res)
    if sc:
        s_cfg, l_cfg = cfg["scaling"]["small"], cfg["scaling"]["large"]
        out.append(f"## 4. Scaling: {s_cfg['name']} vs {l_cfg['name']} at {vk(s_cfg['vocab'])}\n")
        rows = []
        for t, d in sc.items():
            s, l = d["small_best"], d["large_best"]
            walls = {size: ", ".join(f1(r.get("wall_s")) if ok(r) else (r.get("error") or "?")[:40] for r in d[size])
                     for size in ("small", "large")}
            others = ", ".join(f2(r.get("other_cores")) for size in ("small", "large") for r in d[size])
            rows.append([TRAINERS[t], f1(s["bytes"] / MB) if s else "—", walls["small"],
                         f1(l["bytes"] / MB) if l else "—", walls["large"], f2(d["data_ratio"]) + "x",
                         f2(d["ratio"]) + "x", f2(d["cpu_ratio"]) + "x", others])
        out.append(table(["trainer", "small MB", "small wall s (each run)", "large MB",
                          "large wall s (each run)", "data ratio", "time ratio (fastest runs)",
                          "CPU-time ratio (least CPU)", "other procs (cores), small runs then large"], rows))
        out.append("")

    # 5. targets
    out.append("## Targets\n")
    out.append(table(["target", "measured", "status"], targets(res), align="lll"))
    out.append("")

    # 6. machine
    out.append("## Machine\n")
    all_runs = list(res.get("runs", [])) + list(res.get("scaling_runs", []))
    rows = [[k, v] for k, v in m.items()]
    rows.append(["load during the runs", load_summary(all_runs)])
    if res.get("elapsed_seconds") is not None:
        rows.append(["benchmark run time", f"{res['elapsed_seconds'] / 60:.1f} min"])
    out.append(table(["", ""], rows, align="ll"))
    wq = res.get("wait_quiet") or []
    if wq:
        busy = [w for w in wq if not w["quiet"]]
        out.append(f"\n--wait-quiet: waited {sum(w['waited_s'] for w in wq):.0f} s in all before {len(wq)} runs; "
                   + ("the machine was quiet before each." if not busy else
                      f"still busy before {len(busy)} runs."))
    out.append("")
    errs = list(res.get("errors", []))
    cores = {}
    for r in all_runs:
        if r.get("cnfmce_core"):
            cores.setdefault(r["cnfmce_core"], []).append(f"{run_key(r)} {TRAINERS[r['trainer']]}")
    if len(cores) > 1:
        errs.append("the cnfmce runs used different builds of the core: " +
                    "; ".join(f"{k}: {', '.join(v[:3])}{' ...' if len(v) > 3 else ''}" for k, v in cores.items()))
    errs += [f"{run_key(r)} {TRAINERS.get(r['trainer'], r['trainer'])}: {r['error']}"
             for r in all_runs if r.get("error")]
    if errs:
        out.append("## Errors\n")
        out.append("\n".join(f"- {e}" for e in errs))
        out.append("")
    return "\n".join(out)


def exceed(q: float) -> str:
    """A ratio above its limit, e.g. 1.77x (3 decimals when close to 1)."""
    return f"{q:.3f}x" if q < 1.01 else f"{q:.2f}x"


def gain(r: Dict[str, Any], base: Dict[str, Any], cat: Optional[str]) -> Optional[float]:
    a, b = cpt(r, cat), cpt(base, cat)
    return a / b - 1 if a and b else None


def cnf_phase_row(key: str, label: str, r: Dict[str, Any]) -> List[str]:
    cnf = r["cnf"]
    rounds = (cnf.get("counting") or {}).get("round_stats") or []
    filt = cnf.get("filtering") or {}

    # A round's "seconds" runs until its end is done; builds that record that part (end_seconds)
    # show it in its own column. Finishing (finish_seconds) comes after the filtering pass.
    def sec(x: Dict[str, Any], part: str) -> str:
        s = x.get("seconds")
        if s is None:
            return "—"
        s -= x.get(part) or 0
        return f"{s:.1f} ({x.get('bytes', 0) / MB / max(s, 1e-9):.1f})"

    cells = [sec(rounds[k], "end_seconds") if k < len(rounds) else "—" for k in range(3)]
    ends = [x.get("end_seconds") for x in rounds]
    select = sum(e for e in ends[:-1] if e is not None) if ends and None not in ends else None
    build = ends[-1] if ends else None
    finish = filt.get("finish_seconds")
    covered = sum(x.get("seconds", 0) for x in rounds) + (filt.get("seconds") or 0) + (finish or 0)
    rest = r["wall_s"] - covered

    def opt(x: Optional[float]) -> str:
        return "—" if x is None else f"{x:.1f}"

    spills = sum(x.get("spills", 0) for x in rounds)
    peak_table = max((x.get("peak_table_bytes", 0) for x in rounds), default=0)
    return [key, label, f"{cnf.get('raw_vocab_size', 0):,}"] + cells + [
        sec(filt, "-"), opt(select), opt(build), opt(finish), f"{rest:.1f}", f"{r['wall_s']:.1f}", f"{100 * rest / r['wall_s']:.0f}%",
        f"{rounds[0].get('distinct', 0):,}" if rounds else "—", str(spills), f"{peak_table / MIB:.0f} MiB",
        gib(r.get("peak_rss_mib")), f2(r.get("other_cores"))]


def targets(res: Dict[str, Any]) -> List[List[str]]:
    rows: List[List[str]] = []
    by = runs_by_key(res)
    # speed: below spm Unigram, at most 3x HF BPE (aim parity)
    for key, runs in by.items():
        hf, uni = runs.get("hf-bpe"), runs.get("spm-unigram")
        for t in CNF_TRAINERS:
            r = runs.get(t)
            if not ok(r):
                continue
            parts, miss = [], []
            if ok(hf):
                q = r["wall_s"] / hf["wall_s"]
                parts.append(f"{r['wall_s']:.1f} s = {q:.2f}x HF BPE ({hf['wall_s']:.1f} s; by CPU seconds "
                             f"{r['cpu_s'] / hf['cpu_s']:.2f}x)")
                if q > 3:
                    miss.append(f"3x HF by {exceed(q / 3)}")
                parity = "parity with HF met" if q <= 1 else f"parity missed by {exceed(q)}"
            else:
                parts.append(f"{r['wall_s']:.1f} s; HF BPE: {status_of(hf) if hf else 'not run'}")
                parity = None
            if ok(uni):
                q2 = r["wall_s"] / uni["wall_s"]
                parts.append(f"{q2:.2f}x spm Unigram ({uni['wall_s']:.1f} s; CPU {r['cpu_s'] / uni['cpu_s']:.2f}x)")
                if q2 >= 1:
                    miss.append(f"below Unigram by {exceed(q2)}")
            elif uni is not None:
                parts.append(f"spm Unigram: {status_of(uni)[:60]}")
                if uni.get("error", "").startswith("timed out"):
                    parts[-1] += " (CNF below it)"
            if not ok(hf) and not ok(uni):
                status = "—"
            else:
                status = ("met" if not miss else "missed: " + ", ".join(miss)) + (f" ({parity})" if parity else "")
            rows.append([f"{TRAINERS[t]} wall time on {key} < spm Unigram and <= 3x HF BPE (aim: parity)",
                         "; ".join(parts), status])
    # memory
    for key, runs in by.items():
        if not key.startswith("mix-all"):
            continue
        for t in CNF_TRAINERS:
            r = runs.get(t)
            if not ok(r):
                continue
            peak = r["peak_rss_mib"] * MIB
            rows.append([f"{TRAINERS[t]} peak RSS on all shared training text ({key}) <= 4 GB",
                         f"{peak / GB:.2f} GB ({r['peak_rss_mib'] / 1024:.2f} GiB), of which "
                         f"{r['rss_before_mib'] * MIB / GB:.2f} GB before training (documents in memory)",
                         "met" if peak <= 4 * GB else f"missed by {exceed(peak / (4 * GB))}"])
    over = []
    n = 0
    for r in list(res.get("runs", [])) + list(res.get("scaling_runs", [])):
        if ok(r) and r.get("cnf"):
            lim = ((r["cnf"].get("counting") or {}).get("memory_limit"))
            if lim:
                n += 1
                if r["peak_rss_mib"] * MIB > lim:
                    over.append(f"{run_key(r)} {TRAINERS[r['trainer']]}: {r['peak_rss_mib'] * MIB / GB:.2f} GB "
                                f"> {lim / GB:.2f} GB")
    if n:
        lims = {(r["cnf"].get("counting") or {}).get("memory_limit") for r in res.get("runs", []) if ok(r) and r.get("cnf")}
        lims.discard(None)
        rows.append(["cnfmce peak RSS never above memory_limit",
                     f"{n} runs, memory_limit {', '.join(f'{x / GB:.2f} GB' for x in sorted(lims))}"
                     + ("; over: " + "; ".join(over) if over else ""), "met" if not over else "missed"])
    # scaling
    sc = scaling_summary(res).get("cnfmce")
    if sc and sc.get("ratio"):
        q = sc["ratio"]
        rows.append([f"cnfmce: 2x data -> at most 2.2x time ({res['config']['scaling']['small']['name']} -> "
                     f"{res['config']['scaling']['large']['name']})",
                     f"{sc['data_ratio']:.2f}x data -> {q:.2f}x time ({sc['small_best']['wall_s']:.1f} s -> "
                     f"{sc['large_best']['wall_s']:.1f} s); by CPU seconds {f2(sc.get('cpu_ratio'))}x",
                     "met" if q <= 2.2 else f"missed by {exceed(q / 2.2)} ({q:.3f}x)"])
    # quality
    for key, runs in by.items():
        if not key.startswith("en-") or not key.endswith("@32000"):
            continue
        hf = runs.get("hf-bpe")
        for t in CNF_TRAINERS:
            r = runs.get(t)
            if not (r and hf and r.get("test") and hf.get("test")):
                continue
            g = gain(r, hf, "en")
            if g is None:
                continue
            rows.append([f"{TRAINERS[t]} chars/token on en test, 32k trained on en ({key}) >= +15% over same-data "
                         f"BPE (paper: +21.9%)",
                         f"{cpt(r, 'en'):.3f} vs {cpt(hf, 'en'):.3f}: {pct(g)}",
                         "met" if g >= 0.15 else f"missed by {100 * (0.15 - g):.1f} points"])
    return rows


if __name__ == "__main__":
    sys.exit(main())
