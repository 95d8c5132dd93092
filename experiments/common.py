"""Shared helpers of the experiment scripts (``experiments/*.py``).

* data: the shared corpora (``../shared/corpora/<cat>/{train,test}.jsonl.gz``), read in file order;
* artifacts: the mix vocabularies (counted once on all six training sets, filtered at 128k and
  250k) and the en counts, cached under ``experiments/out/`` with the parameters that made them;
* bookkeeping: machine description, the wait for the other engineer's benchmarks, JSON output,
  markdown helpers.

Every results page is rendered from the JSON the same run wrote (``render(json)``), so a page
never shows a number that is not in its JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import gzip
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CNFMCE_SHARED", REPO.parent / "shared"))
CORPORA = SHARED / "corpora"
VOCABS = SHARED / "vocabs"
PAPER = SHARED / "paper" / "cnf-mce-paper.txt"
OUT = REPO / "experiments" / "out"
RESULTS = REPO / "docs" / "results"

sys.path.insert(0, str(REPO / "benches"))  # baselines.py (offline tiktoken / HF baselines)

CATEGORIES = ["en", "sci", "math", "code", "zh", "multi"]
PAPER_CATEGORY = {"en": "en-web", "sci": "en-pdf", "math": "math", "code": "code", "zh": "zh",
                  "multi": "lang11"}

# The mix vocabularies: counted once on all six training sets, then filtered at these sizes.
MIX_RAW_VOCAB = 5_000_000
MIX_SIZES = {"full": {"mix128k": 128_000, "mix250k": 250_000},
             "quick": {"mix128k": 8_000, "mix250k": 16_000}}
QUICK_TRAIN_BYTES = 1_000_000  # per category, for --quick
MEMORY_LIMIT = 8 << 30         # counting tables; the machine is shared


# --- data -----------------------------------------------------------------------------------------

def corpus_path(cat: str, split: str) -> Path:
    return CORPORA / cat / f"{split}.jsonl.gz"


def read_jsonl(path: Path) -> Iterable[Dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_docs(cat: str, split: str, max_chars: Optional[int] = None,
              field: Optional[str] = None) -> Tuple[List[str], List[Any]]:
    """(texts, values of ``field`` or None) of a split, in file order; with ``max_chars``, whole
    documents until the total reaches it (the first document is always taken)."""
    texts: List[str] = []
    vals: List[Any] = []
    total = 0
    for d in read_jsonl(corpus_path(cat, split)):
        if max_chars is not None and total >= max_chars:
            break
        texts.append(d["text"])
        vals.append(d.get(field) if field else None)
        total += len(d["text"])
    return texts, vals


def text_stats(texts: Sequence[str]) -> Dict[str, int]:
    return {"docs": len(texts), "chars": sum(len(t) for t in texts),
            "bytes": sum(len(t.encode("utf-8")) for t in texts)}


def quick_train_paths() -> List[Path]:
    """For --quick: the first ~1 MB of each training set, written once to experiments/out."""
    d = OUT / "quick-data"
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for cat in CATEGORIES:
        p = d / f"{cat}-train-1MB.jsonl.gz"
        if not p.exists():
            tmp = p.with_suffix(".tmp")
            total = 0
            with gzip.open(tmp, "wt", encoding="utf-8") as fh:
                for doc in read_jsonl(corpus_path(cat, "train")):
                    if total >= QUICK_TRAIN_BYTES:
                        break
                    fh.write(json.dumps({"text": doc["text"]}, ensure_ascii=False) + "\n")
                    total += len(doc["text"].encode("utf-8"))
            tmp.replace(p)
        paths.append(p)
    return paths


def mix_train_paths(quick: bool) -> List[Path]:
    return quick_train_paths() if quick else [corpus_path(c, "train") for c in CATEGORIES]


def paths_stats(paths: Sequence[Path]) -> Dict[str, Any]:
    per = {}
    for p in paths:
        docs = chars = nbytes = 0
        for d in read_jsonl(p):
            docs += 1
            chars += len(d["text"])
            nbytes += len(d["text"].encode("utf-8"))
        per[str(p)] = {"docs": docs, "chars": chars, "bytes": nbytes}
    tot = {k: sum(v[k] for v in per.values()) for k in ("docs", "chars", "bytes")}
    return {"files": per, **tot}


# --- artifacts ------------------------------------------------------------------------------------

def _load_json(p: Path) -> Optional[Dict[str, Any]]:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def cached_counts(tag: str, paths: Sequence[Path], raw_vocab_size: int,
                  log: Optional[List[Dict[str, Any]]] = None) -> Path:
    """The counts file of ``paths`` under ``experiments/out/<tag>/``, counted when missing or made
    with other parameters. Returns its path."""
    import cnfmce
    d = OUT / tag
    d.mkdir(parents=True, exist_ok=True)
    counts_p = d / "counts.tsv.gz"
    meta_p = d / "counts.params.json"
    params = {"paths": [str(p) for p in paths], "raw_vocab_size": raw_vocab_size,
              "rounds": [list(r) for r in cnfmce.DEFAULT_ROUNDS], "cnfmce": cnfmce.__version__}
    meta = _load_json(meta_p)
    if counts_p.exists() and meta and meta.get("params") == params:
        if log is not None:
            log.append({"step": f"{tag}/counts", "cached": True, "seconds": meta.get("seconds"),
                        "info": meta.get("info")})
        return counts_p
    print(f"[{tag}] counting {len(paths)} file(s), raw_vocab_size={raw_vocab_size:,} ...", flush=True)
    t0 = time.perf_counter()
    counts = cnfmce.count([str(p) for p in paths], raw_vocab_size=raw_vocab_size,
                          memory_limit=MEMORY_LIMIT, progress=sys.stderr.isatty())
    secs = time.perf_counter() - t0
    cnfmce.save_counts(counts, counts_p)
    info = dict(counts.info)
    info["kept"] = len(counts)
    del counts
    meta_p.write_text(json.dumps({"params": params, "seconds": round(secs, 1), "info": info},
                                 indent=1, default=str))
    if log is not None:
        log.append({"step": f"{tag}/counts", "cached": False, "seconds": round(secs, 1), "info": info})
    return counts_p


_COUNTS_MEMO: Dict[str, Any] = {}


def _counts_obj(counts_p: Path):
    """The counts of ``counts_p`` loaded once per process (several filterings reuse them)."""
    import cnfmce
    key = str(counts_p)
    if key not in _COUNTS_MEMO:
        _COUNTS_MEMO.clear()
        _COUNTS_MEMO[key] = cnfmce.load_counts(counts_p)
    return _COUNTS_MEMO[key]


def cached_cnf(tag: str, name: str, counts_p: Path, paths: Sequence[Path], vocab_size: int,
               log: Optional[List[Dict[str, Any]]] = None, memo_counts: bool = False, **opts: Any):
    """A CNF tokenizer filtered from ``counts_p`` on ``paths``, cached as
    ``experiments/out/<tag>/<name>.cnfmce.json.gz``. ``memo_counts``: load the counts file once
    and keep it in memory for the next calls (faster when filtering many sizes)."""
    import cnfmce
    d = OUT / tag
    tok_p = d / f"{name}.cnfmce.json.gz"
    meta_p = d / f"{name}.params.json"
    counts_meta = _load_json(counts_p.parent / "counts.params.json") or {}
    params = {"counts": str(counts_p), "counts_params": counts_meta.get("params"),
              "paths": [str(p) for p in paths], "vocab_size": vocab_size,
              "opts": {k: (str(v) if isinstance(v, float) and v == float("inf") else v)
                       for k, v in sorted(opts.items())},
              "cnfmce": cnfmce.__version__}
    meta = _load_json(meta_p)
    if tok_p.exists() and meta and meta.get("params") == params:
        if log is not None:
            log.append({"step": f"{tag}/{name}", "cached": True, "seconds": meta.get("seconds")})
        return cnfmce.Tokenizer.load(tok_p)
    print(f"[{tag}] filtering {name} (vocab_size={vocab_size:,}) ...", flush=True)
    t0 = time.perf_counter()
    counts_arg = _counts_obj(counts_p) if memo_counts else str(counts_p)
    tok = cnfmce.train_from_counts(counts_arg, [str(p) for p in paths], vocab_size=vocab_size,
                                   progress=sys.stderr.isatty(), **opts)
    secs = time.perf_counter() - t0
    tok.save(tok_p)
    meta_p.write_text(json.dumps({"params": params, "seconds": round(secs, 1),
                                  "filtering": tok.metadata.get("filtering"),
                                  "raw_vocabulary": tok.metadata.get("raw_vocabulary"),
                                  "vocab_size": tok.vocab_size}, indent=1))
    if log is not None:
        log.append({"step": f"{tag}/{name}", "cached": False, "seconds": round(secs, 1)})
    return tok


def mix_tokenizers(quick: bool, log: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """{"mix128k": Tokenizer, "mix250k": Tokenizer} (quick: 8k and 16k on ~6 MB), plus
    "_info": how they were made."""
    tag = "mix-quick" if quick else "mix"
    paths = mix_train_paths(quick)
    counts_p = cached_counts(tag, paths, MIX_RAW_VOCAB, log)
    out: Dict[str, Any] = {}
    info: Dict[str, Any] = {"train_paths": [str(p) for p in paths], "raw_vocab_size": MIX_RAW_VOCAB,
                            "counts": _load_json(OUT / tag / "counts.params.json"), "vocabs": {}}
    for name, size in MIX_SIZES["quick" if quick else "full"].items():
        tok = cached_cnf(tag, name, counts_p, paths, size, log)
        out[name] = tok
        info["vocabs"][name] = _load_json(OUT / tag / f"{name}.params.json")
    out["_info"] = info
    return out


# --- bookkeeping ----------------------------------------------------------------------------------

def wait_for_benches(max_minutes: float = 45, poll_s: float = 60) -> Dict[str, Any]:
    """Waits until no ``benches/(train|encode).py`` runs (the other engineer's timings), polling
    every ``poll_s`` seconds, at most ``max_minutes``; returns what happened."""
    t0 = time.time()
    seen = False
    while True:
        r = subprocess.run(["pgrep", "-f", "benches/(train|encode).py"], capture_output=True, text=True)
        pids = [p for p in r.stdout.split() if p.strip() and int(p) != os.getpid()]
        if not pids:
            return {"waited_s": round(time.time() - t0), "benches_running": seen, "proceeded_anyway": False}
        seen = True
        if time.time() - t0 >= max_minutes * 60:
            print(f"benchmarks still running after {max_minutes} min; proceeding anyway", flush=True)
            return {"waited_s": round(time.time() - t0), "benches_running": True, "proceeded_anyway": True}
        print(f"waiting for benches/(train|encode).py to finish (pids {' '.join(pids)}) ...", flush=True)
        time.sleep(poll_s)


def _cmd(args: Sequence[str]) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, cwd=REPO, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def record_path(base: Path) -> Path:
    """``<base>.json``, also for a base whose name has a dot (``...-han0.15``)."""
    return Path(str(base) + ".json")


def cached_training(base: Path, params: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The record ``<base>.json`` of an earlier :func:`run_training` with the same ``params``."""
    try:
        m = json.loads(record_path(base).read_text())
    except (OSError, ValueError):
        return None
    return m if m.get("params") == params else None


@contextlib.contextmanager
def child_env(env: Dict[str, Optional[str]]) -> Iterator[None]:
    """Sets (a string) or removes (None) environment variables for the child processes started
    inside the block (e.g. ``run_training`` with another build on ``PYTHONPATH``, or a trial
    constant), and restores every one of them afterwards, also when the block raises."""
    saved = {k: os.environ.get(k) for k in env}
    try:
        _set_env(env)
        yield
    finally:
        _set_env(saved)


def _set_env(env: Dict[str, Optional[str]]) -> None:
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def run_training(script: str, worker_args: Sequence[str], base: Path, params: Dict[str, Any],
                 label: str) -> Dict[str, Any]:
    """Runs ``python <script> --worker <worker_args...> <base>.run`` in its own process (one
    training at a time; ``nice`` is inherited from the caller) and returns the worker's
    ``<base>.run.json`` with ``peak_rss`` (bytes, from ``wait4``), ``cpu_s`` (user + system
    seconds of the child), ``params`` and the load averages around the run, also written to
    ``<base>.json`` (the record :func:`cached_training` reads back)."""
    load0 = os.getloadavg()
    proc = subprocess.Popen([sys.executable, script, "--worker", *worker_args, str(base) + ".run"])
    _, status, ru = os.wait4(proc.pid, 0)
    if status != 0:
        raise RuntimeError(f"training {label} failed ({status})")
    info = json.loads(Path(str(base) + ".run.json").read_text())
    info.update(peak_rss=ru.ru_maxrss * 1024, cpu_s=round(ru.ru_utime + ru.ru_stime, 1), params=params,
                load_before=load0, load_after=os.getloadavg())
    record_path(base).write_text(json.dumps(info))
    return info


def train_worker(out: str, train: Callable[[], Any], **extra: Any) -> None:
    """The body of a script's ``--worker`` (the child :func:`run_training` starts): times
    ``train()``, saves the tokenizer to ``<out>.cnfmce.json.gz`` and writes ``<out>.json``, the
    run's timings and what its metadata says of the result (plus ``extra``)."""
    import cnfmce
    t0 = time.perf_counter()
    tok = train()
    secs = time.perf_counter() - t0
    tok.save(out + ".cnfmce.json.gz")
    md = tok.metadata
    counting = md.get("counting", {})
    info = {"seconds": round(secs, 1), "counting_s": counting.get("seconds"),
            "filtering_s": md.get("filtering", {}).get("seconds"),
            "refining_s": round(sum(r["seconds"] for r in md.get("refining", [])), 1),
            "refining": md.get("refining"), "raw_vocabulary": md.get("raw_vocabulary"),
            "covered_characters": md.get("covered_characters"), "selection": md.get("selection"),
            "raw_vocab_size": counting.get("raw_vocab_size"),
            "round_stats": counting.get("round_stats") or []}
    if md.get("selection") == "refined-scripts":
        info["script_share_exponent"] = cnfmce._core.SCRIPT_SHARE_EXPONENT
    if md.get("selection") == "refined-non-ascii":
        info["non_ascii_share_exponent"] = cnfmce._core.NON_ASCII_SHARE_EXPONENT
    info.update(extra)
    Path(out + ".json").write_text(json.dumps(info))


def machine_info() -> Dict[str, Any]:
    import cnfmce
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = None
    versions = {"python": platform.python_version(), "cnfmce": cnfmce.__version__}
    for mod in ("tiktoken", "tokenizers", "numpy", "matplotlib"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - optional
            pass
    return {
        "cpu": cpu, "cores": os.cpu_count(), "memory_gb": round(mem / 2**30, 1) if mem else None,
        "os": platform.platform(), "versions": versions,
        "git_commit": _cmd(["git", "rev-parse", "--short", "HEAD"]),
        "git_dirty": bool(_cmd(["git", "status", "--porcelain", "--untracked-files=no"])),
    }


def run_header(name: str, quick: bool) -> Dict[str, Any]:
    return {"experiment": name, "quick": quick,
            "command": f"python experiments/{name}.py" + (" --quick" if quick else ""),
            "date": _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
            "machine": machine_info()}


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False, default=str) + "\n")
    tmp.replace(path)


def result_paths(name: str, quick: bool) -> Tuple[Path, Path, Path]:
    """(json, markdown, png prefix) of an experiment; quick runs go to experiments/out/quick-results."""
    base = (OUT / "quick-results") if quick else RESULTS
    base.mkdir(parents=True, exist_ok=True)
    return base / f"{name}.json", base / f"{name}.md", base / name


# Finished trials: their pages (and JSON) are kept as recorded results; the scripts that made
# them were removed after their findings went into the core (or were dropped), and are in the
# repository's history at the commit given here (the last commit that has them). Each page (and
# its JSON, key "retired") carries retired_line(page) in its header.
# page: (the retired files that made it, that commit, what the trial settled)
_ISSUE13 = "28e5e3381d"  # the issue-13 trials retired after the defaults were chosen (defaults.md)
FINISHED_TRIALS = {
    "raw_rule": ("raw_rule.py", "1ca72ca", "the raw-cut rules screened with train_from_counts; "
                 "the Han-weighted cut became the core's raw_han_exponent"),
    "zh_sources": ("zh_sources.py, zh_segment.py", "1ca72ca", "Chinese per source package: budget "
                   "or method (no JSON: the page records the runs' numbers)"),
    "diagnosis": ("diagnosis.py, cnfx.py", _ISSUE13, "where the paper's CNF loses its edge on zh and "
                  "multi; led to the refined selections"),
    "selection": ("selection.py, cnfx.py", _ISSUE13, "the selection variants and raw vocabulary "
                  "multiples; chose the core's RAW_VOCAB_PER_TOKEN and selection='refined'"),
    "generalisation": ("generalisation.py, cnfx.py", _ISSUE13, "before/after with cnfmce.train at the "
                       "settings of its time; the defaults were chosen since on a validation split"),
    "languages": ("languages.py, cnfx.py", _ISSUE13, "the languages of multi below the BPE and where "
                  "their tokens go in generalisation's vocabularies"),
    "frontier": ("frontier.py, cnfx.py", _ISSUE13, "ids moved between scripts in trained vocabularies; "
                 "the measurement behind selection='refined-non-ascii'"),
    "thresholds": ("thresholds.py, cnfx.py", _ISSUE13, "counting thresholds of rounds 2 and 3; the "
                   "core scales them to the corpus"),
    "targets": ("targets.py", _ISSUE13, "issue 13's targets against every configuration measured; "
                "defaults.md holds the defaults to them on the test split"),
    "by_source": ("by_source.py, cnfx.py", _ISSUE13, "per-package gains of the 250k recipe with "
                  "raw_han_exponent, which the defaults dropped"),
    "script_tokens": ("script_tokens.py, cnfx.py", _ISSUE13, "why CNF's Han, Cyrillic, Greek and "
                      "Hangul tokens are worth less than the BPE's; led to the byte-fallback trials"),
    **{p: ("byte_fallback.py, cnfx.py", _ISSUE13, "byte fallback trials; the fallback prefixes went "
           "into the core's step 6") for p in ("byte_fallback", "byte_fallback_128k", "byte_fallback_250k")},
    **{p: ("script_balance.py, cnfx.py", _ISSUE13, "balancing the scripts inside the non-ASCII group "
           "(not kept); fallback prefixes of every character (kept in step 6)")
       for p in ("script_balance_32k", "script_balance_128k", "script_balance_250k")},
}


def retired_line(page: str) -> str:
    """The sentence a finished trial's page (a bullet of its header) and JSON (``"retired"``) carry:
    which retired files made it and the commit that still has them."""
    files, commit, _ = FINISHED_TRIALS[page]
    names = [f"experiments/{f}" for f in files.split(", ")]
    one = len(names) == 1
    return (f"Recorded results of a finished trial; the script{'' if one else 's'} that made it "
            f"({', '.join(names)}) {'was' if one else 'were'} retired at commit `{commit}`; "
            f"`git show {commit}:{names[0]}`.")


def parser(doc: Optional[str], quick: bool = True,
           render: Optional[str] = "only rewrite the page from the JSON") -> argparse.ArgumentParser:
    """The argument parser of every experiment script: the script's docstring as its help,
    ``--quick`` (small data and vocabularies) and ``--render`` (help ``render``: rewrite the page
    from what is recorded, no training); a script adds its own options to it."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if quick:
        ap.add_argument("--quick", action="store_true", help="small data and vocabularies (development)")
    if render:
        ap.add_argument("--render", action="store_true", help=render)
    return ap


def experiment_main(name: str, doc: Optional[str],
                    run: Callable[[argparse.Namespace], Dict[str, Any]],
                    render: Callable[[Dict[str, Any], Path], None],
                    plot: Optional[Callable[[Dict[str, Any], Path], None]] = None,
                    flags: Sequence[Tuple[str, str]] = (),
                    commands: Optional[Dict[str, Callable[..., Any]]] = None) -> None:
    """The command line of an experiment script: ``--quick``, ``--render`` (only rewrite the page
    and plot from the JSON) and the script's own boolean ``flags`` (name, help). Runs
    ``run(args)``, writes its JSON, then renders the page (and the plot) from the JSON written.

    ``commands``: the script's other entry points, ``python script.py COMMAND ARG...`` calling
    ``commands[COMMAND](*ARGS)``; ``"--worker"`` is the one a :func:`run_training` child runs."""
    if commands and len(sys.argv) > 1 and sys.argv[1] in commands:
        commands[sys.argv[1]](*sys.argv[2:])
        return
    ap = parser(doc, render="only rewrite the page" + (" and plot" if plot else "") + " from the JSON")
    for flag, help_ in flags:
        ap.add_argument(flag, action="store_true", help=help_)
    args = ap.parse_args()
    js, md, png = result_paths(name, args.quick)
    if not args.render:
        write_json(js, run(args))
    res = json.loads(js.read_text())  # render from what was written
    written = [str(js), str(md)]
    if plot is not None:
        plot(res, png.with_suffix(".png"))
        written.append(str(png.with_suffix(".png")))
    render(res, md)
    print("wrote " + ", ".join(written))


# --- markdown -------------------------------------------------------------------------------------

def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: Optional[str] = None) -> str:
    """A markdown table; ``align`` one char per column: l, r (default: first l, rest r)."""
    header = list(header)
    align = align or ("l" + "r" * (len(header) - 1))
    sep = ["---:" if a == "r" else ":---:" if a == "c" else "---" for a in align]
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "|".join(sep) + "|"]
    for r in rows:
        lines.append("| " + " | ".join("" if c is None else str(c) for c in r) + " |")
    return "\n".join(lines)


def f3(x: Optional[float]) -> str:
    return "—" if x is None else f"{x:.3f}"


def f1(x: Optional[float]) -> str:
    return "—" if x is None else f"{x:.1f}"


def pct(x: Optional[float], digits: int = 1, sign: bool = False) -> str:
    if x is None:
        return "—"
    return f"{100 * x:+.{digits}f}%" if sign else f"{100 * x:.{digits}f}%"


def n_(x: Optional[float]) -> str:
    return "—" if x is None else f"{x:,.0f}"


def mb(nbytes: Optional[float]) -> str:
    return "—" if nbytes is None else f"{nbytes / 1e6:.1f} MB"


def machine_line(m: Dict[str, Any]) -> str:
    v = m["versions"]
    vs = ", ".join(f"{k} {v[k]}" for k in ("cnfmce", "tiktoken", "tokenizers", "python") if k in v)
    dirty = " (uncommitted changes)" if m.get("git_dirty") else ""
    return (f"{m['cpu'] or 'unknown CPU'}, {m['cores']} cores, {m['memory_gb']} GB RAM, "
            f"{m['os']}; {vs} (the installed build); repository HEAD at run time "
            f"`{m['git_commit']}`{dirty}")


def header_md(res: Dict[str, Any], title: str) -> str:
    lines = [f"# {title}", ""]
    if res.get("quick"):
        lines += ["> **Quick run** (small data, small vocabularies): for development only; the "
                  "numbers are not comparable with the paper's.", ""]
    w = res.get("bench_wait") or {}
    work = res.get("runtime_s", 0) - (w.get("waited_s") or 0)
    lines += [f"* Command: `{res['command']}` (from the repository root; {work / 60:.1f} min of "
              "work in this run, not counting the wait below; trained tokenizers and counts are "
              "cached under `experiments/out/` and reused when present)",
              f"* Date: {res['date']}",
              f"* Machine: {machine_line(res['machine'])}"]
    w = res.get("bench_wait")
    if w and w.get("benches_running"):
        lines.append(f"* Waited {w['waited_s'] / 60:.0f} min for the benchmark scripts to finish"
                     + ("; they were still running when this run proceeded (timings of both may be "
                        "affected)" if w.get("proceeded_anyway") else ""))
    lines.append(f"* Numbers: [`{res['experiment']}.json`]({res['experiment']}.json) (every number "
                 "on this page comes from it)")
    return "\n".join(lines) + "\n"


def doc_body(doc: Optional[str]) -> str:
    """A script's docstring without its first two paragraphs (title and usage): the page's
    description of what it measures."""
    return (doc or "").split("\n\n", 2)[2].strip()


# --- same-data byte-level BPE (Hugging Face tokenizers) ------------------------------------------

# The GPT-4 split regex and the trainer live in cnfmce.baselines (shared with the demo and the
# benchmarks).
from cnfmce.baselines import GPT4_SPLIT, train_same_data_bpe as train_hf_bpe  # noqa: E402


def iter_texts(paths: Sequence[Path]) -> Iterable[str]:
    for p in paths:
        for d in read_jsonl(p):
            yield d["text"]


def cached_hf_bpe(tag: str, name: str, paths: Sequence[Path], vocab_size: int,
                  log: Optional[List[Dict[str, Any]]] = None):
    """:func:`train_hf_bpe` on the documents of ``paths``, cached as
    ``experiments/out/<tag>/<name>.hf-tokenizer.json.gz``."""
    import tokenizers
    from tokenizers import Tokenizer as HFTokenizer
    d = OUT / tag
    d.mkdir(parents=True, exist_ok=True)
    tok_p = d / f"{name}.hf-tokenizer.json.gz"
    meta_p = d / f"{name}.params.json"
    params = {"paths": [str(p) for p in paths], "vocab_size": vocab_size, "split": GPT4_SPLIT,
              "tokenizers": tokenizers.__version__}
    meta = _load_json(meta_p)
    if tok_p.exists() and meta and meta.get("params") == params:
        if log is not None:
            log.append({"step": f"{tag}/{name}", "cached": True, "seconds": meta.get("seconds")})
        return HFTokenizer.from_str(gzip.decompress(tok_p.read_bytes()).decode("utf-8"))
    print(f"[{tag}] training HF BPE {name} (vocab_size={vocab_size:,}) ...", flush=True)
    t0 = time.perf_counter()
    tok = train_hf_bpe(iter_texts(paths), vocab_size)
    secs = time.perf_counter() - t0
    tmp = tok_p.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(tok.to_str().encode("utf-8"), 6, mtime=0))
    tmp.replace(tok_p)
    meta_p.write_text(json.dumps({"params": params, "seconds": round(secs, 1),
                                  "vocab_size": tok.get_vocab_size()}, indent=1))
    if log is not None:
        log.append({"step": f"{tag}/{name}", "cached": False, "seconds": round(secs, 1)})
    return tok


def show_token(s: str) -> str:
    """A token's text for a markdown code span: ⏎ newline, ⇥ tab, \\xNN other control characters,
    and the two characters that break tables or code spans replaced (| → ¦, ` → ˋ)."""
    out = []
    for ch in s:
        if ch == "\n":
            out.append("⏎")
        elif ch == "\t":
            out.append("⇥")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ch == "|":
            out.append("¦")
        elif ch == "`":
            out.append("ˋ")
        else:
            out.append(ch)
    return "".join(out)
