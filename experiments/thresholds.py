"""Issue 13, item 3: do counting thresholds scaled to the corpus size beat the paper's 80?

The paper set the thresholds of its rounds 2 and 3 ((13-21, 80), (22-30, 80)) for 6.9M documents.
This trains ``cnfmce.train(paths, vocab_size=k, rounds=((1, 12, 0), (13, 21, T), (22, 30, T)),
selection=...)`` on the protocol's training text for a grid of T, one process each, one at a
time, and evaluates in-domain and held-out by package against the same-data BPE.

    python experiments/thresholds.py             # docs/results/thresholds.{json,md}
    python experiments/thresholds.py --render

``THR_RUNS=en-32k,mix-32k`` picks the corpora and sizes, ``THR_T=80,20,5`` the thresholds,
``THR_SELECTION=refined`` the selection (default ``refined``), ``THR_RAW_X=20`` the raw vocabulary
as a multiple of the vocabulary size (default: the trainer's), ``THR_NA_EXP=1.0`` the trainer's
``non_ascii_exponent`` and ``THR_HAN=0.15`` its ``raw_han_exponent`` (default: the trainer's). Tokenizers and timings are cached
under ``experiments/out/thresholds/``; results of earlier invocations are kept. The same-data BPE
is evaluated when its tokenizer is cached; otherwise its evaluation is read from
generalisation.json (the same BPE on the same sets; ``THR_TRAIN_BPE=1`` trains it instead).
``python experiments/thresholds.py --import-trial OTHER.json LABEL`` adds the runs of another
build's thresholds.json (a worktree with a changed constant of src/refine.rs) as trials.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import protocol as P  # noqa: E402

NAME = "thresholds"
OUT = C.OUT / "thresholds"
RUNS = [tuple(x.split("-")) for x in os.environ.get("THR_RUNS", "en-32k").split(",")]
THRESHOLDS = [int(x) for x in os.environ.get("THR_T", "80,40,20,10,5").split(",")]
SELECTION = os.environ.get("THR_SELECTION", "refined")
# raw_vocab_size as a multiple of vocab_size (default: the trainer's default, RAW_VOCAB_PER_TOKEN)
RAW_X = int(os.environ["THR_RAW_X"]) if os.environ.get("THR_RAW_X") else None
# the trainer's non_ascii_exponent and raw_han_exponent (default: its defaults)
NA_EXP = float(os.environ["THR_NA_EXP"]) if os.environ.get("THR_NA_EXP") else None
HAN = float(os.environ["THR_HAN"]) if os.environ.get("THR_HAN") else 0.0
TAG = SELECTION + (f"-m{RAW_X}x" if RAW_X else "") + (f"-e{NA_EXP:g}" if NA_EXP is not None else "") + \
    (f"-han{HAN:g}" if HAN else "")


def exponents() -> Dict[str, Any]:
    """The exponents given to the trainer (only those set)."""
    return ({"non_ascii_exponent": NA_EXP} if NA_EXP is not None else {}) | ({"raw_han_exponent": HAN} if HAN else {})
PAPER_T = 80


def cats_of(corpus: str) -> List[str]:
    return C.CATEGORIES if corpus == "mix" else [corpus]


def rounds_of(t: int):
    return ((1, 12, 0), (13, 21, t), (22, 30, t))


def worker(corpus: str, size: str, t: str, selection: str, out: str) -> None:
    import cnfmce
    paths = [str(p) for p in P.train_paths(cats_of(corpus))]
    raw = {"raw_vocab_size": RAW_X * X.SIZES[size]} if RAW_X else {}
    C.train_worker(out, lambda: cnfmce.train(paths, vocab_size=X.SIZES[size], rounds=rounds_of(int(t)),
                                             selection=selection, progress=False, **raw, **exponents()))


def trained(corpus: str, size: str, t: int) -> Dict[str, Any]:
    import cnfmce
    OUT.mkdir(parents=True, exist_ok=True)
    base = OUT / f"{corpus}-{size}-t{t}-{TAG}"
    meta_p = C.record_path(base)
    params = {"t": t, "selection": SELECTION, **({"raw_x": RAW_X} if RAW_X else {}), **exponents(),
              "cnfmce": cnfmce.__version__,
              "core": C._cmd(["git", "rev-parse", "HEAD:src"])}
    m = C.cached_training(base, params)
    if m is not None:
        return m
    gen = C.OUT / "gen" / f"{corpus}-{size}-after"
    if t == PAPER_T and SELECTION == "refined" and not RAW_X and not exponents():  # the paper's rounds: generalisation.py's *after* run
        try:
            g = json.loads(gen.with_suffix(".json").read_text())
            if g.get("params", {}).get("core") == params["core"] and g["params"].get("config") == {"selection": "refined"}:
                import shutil
                shutil.copyfile(str(gen) + ".run.cnfmce.json.gz", str(base) + ".run.cnfmce.json.gz")
                tok = cnfmce.Tokenizer.load(str(base) + ".run.cnfmce.json.gz")
                info = {"seconds": g["seconds"], "counting_s": g.get("counting_s"),
                        "round_stats": tok.metadata.get("counting", {}).get("round_stats") or [],
                        "raw_vocabulary": g.get("raw_vocabulary"), "peak_rss": g.get("peak_rss"),
                        "params": params, "from": "generalisation.py"}
                meta_p.write_text(json.dumps(info))
                return info
        except (OSError, ValueError, KeyError):
            pass
    print(f"[thr] training {corpus} {size} T={t} {SELECTION} ...", flush=True)
    info = C.run_training(__file__, [corpus, size, str(t), SELECTION], base, params,
                          f"{corpus} {size} T={t}")
    print(f"[thr] {corpus} {size} T={t}: {info['seconds']}s, cpu {info['cpu_s']}s", flush=True)
    return info


def bpe_eval(corpus: str, size: str):
    """The same-data BPE's evaluation and where it comes from: the cached BPE evaluated here or,
    when it is not cached, generalisation.json's evaluation of the same (deterministic) BPE on
    the same sets, rather than training it again."""
    cached = (X.OUT / corpus / f"bpe{X.SIZES[size] // 1000}k.hf-tokenizer.json.gz").exists()
    if not cached and not os.environ.get("THR_TRAIN_BPE"):
        try:
            return C.recorded_bpe_eval(corpus, size), "generalisation.json"
        except (OSError, ValueError, KeyError):
            pass
    bpe = X.hf_bpe(corpus, P.train_paths(cats_of(corpus)), X.SIZES[size])
    return X.evaluate_sets(bpe, cats=cats_of(corpus)), "this run"


def run(args: Any) -> Dict[str, Any]:
    import cnfmce
    res = C.run_header(NAME, False)
    t_start = time.perf_counter()
    res["load_before"] = os.getloadavg()
    res["selection"] = SELECTION
    res["runs"] = {}
    try:
        old = json.loads((C.RESULTS / f"{NAME}.json").read_text())
        res["runs"] = old.get("runs", {})
    except (OSError, ValueError):
        pass
    for corpus, size in RUNS:
        key = f"{corpus}-{size}-{TAG}"
        r = res["runs"].get(key, {"corpus": corpus, "size": size, "selection": SELECTION, "by_t": {}})
        if RAW_X:
            r["raw_x"] = RAW_X
        r.update(exponents())
        r["bpe"], r["bpe_source"] = bpe_eval(corpus, size)
        st = P.materialize()["stats"]
        r["train_bytes"] = sum(st[c]["train"]["bytes"] for c in cats_of(corpus))
        if "multi" in cats_of(corpus):  # for the languages of multi below the BPE
            r["train_chars"] = st["multi"]["train"]["lang_chars"]
        for t in THRESHOLDS:
            info = trained(corpus, size, t)
            tok = cnfmce.Tokenizer.load(str(OUT / f"{corpus}-{size}-t{t}-{TAG}.run.cnfmce.json.gz"))
            r["by_t"][str(t)] = {"train": info, "eval": X.evaluate_sets(tok, cats=cats_of(corpus))}
            g = []
            for kind in ("indomain", "heldout"):
                for cat in cats_of(corpus):
                    b = r["bpe"][kind][cat]["cpt"]
                    g.append(f"{kind[:2]}/{cat} {r['by_t'][str(t)]['eval'][kind][cat]['cpt'] / b - 1:+.1%}")
            print(f"[thr] {key} T={t}: " + " ".join(g), flush=True)
        res["runs"][key] = r
    res["load_after"] = os.getloadavg()
    res["runtime_s"] = round(time.perf_counter() - t_start, 1)
    return res


def multi_train_chars(r: Dict[str, Any]):
    """Training characters per language of multi for a mix run: recorded with the run, or (runs
    made before it was recorded) generalisation.json's, from the same protocol; None otherwise."""
    if "multi" not in cats_of(r["corpus"]):
        return None
    if "train_chars" in r:
        return r["train_chars"]
    try:
        return json.loads((C.RESULTS / "generalisation.json").read_text())["train_chars"]["multi"]
    except (OSError, ValueError, KeyError):
        return None


def render(res: Dict[str, Any], md: Path) -> None:
    L = [C.header_md(res, "Counting thresholds scaled to the corpus (issue 13, item 3)"), ""]
    L += ["`cnfmce.train(paths, vocab_size=k, rounds=((1, 12, 0), (13, 21, T), (22, 30, T)), "
          "selection=...)` on the protocol's training text ([protocol.md](protocol.md)), for thresholds T "
          f"around the paper's {PAPER_T}; gain in characters per token over the same-data byte-level BPE of "
          "the same size, **in-domain** and **held-out-by-package**. Each training in its own process, one "
          "at a time, under `nice`; `cpu` = user+system seconds of that process, load = 1-minute "
          "average before/after it.", ""]
    for key, r in res["runs"].items():
        cats = cats_of(r["corpus"])
        L += [f"## {r['corpus']} ({r['train_bytes'] / 1e6:.0f} MB of training text), {r['size']}, "
              f"selection=\"{r['selection']}\"" + (f", raw_vocab_size = {r['raw_x']} x vocab_size" if r.get("raw_x") else "")
              + "".join(f", {k}={r[k]:g}" for k in ("non_ascii_exponent", "raw_han_exponent") if k in r)
              + (f", {r['trial']}" if r.get("trial") else ""), ""]
        if r.get("trial"):
            cores = sorted({e["train"].get("params", {}).get("core", "")[:10] for e in r["by_t"].values()})
            L += [f"Trained by another build (core {', '.join(f'`{c}`' for c in cores)}: this repository with "
                  f"{r['trial']}; `python experiments/thresholds.py --import-trial OTHER.json LABEL`).", ""]
        train_chars = multi_train_chars(r)
        below = train_chars is not None
        if r.get("bpe_source") == "generalisation.json":
            L += ["BPE: its evaluation in [generalisation.json](generalisation.json) (the same BPE on the same "
                  "sets; its tokenizer was not cached on this machine)." + (
                      " *multi languages below the BPE*: languages with more than 50,000 training characters "
                      "and 20,000 evaluation characters (in = in-domain, held = held-out-by-package)."
                      if below else ""), ""]
        hdr = ["T"] + [f"in-domain {c}" for c in cats] + [f"held-out {c}" for c in cats] + \
              (["multi languages below the BPE"] if below else []) + \
              ["raw vocabulary", "round 2 / 3 retained", "wall s", "cpu s", "load"]
        rows = []
        for t in sorted(r["by_t"], key=int, reverse=True):
            e = r["by_t"][t]
            row = [t]
            for kind in ("indomain", "heldout"):
                for c in cats:
                    row.append(C.pct(e["eval"][kind][c]["cpt"] / r["bpe"][kind][c]["cpt"] - 1, sign=True))
            if below:
                import frontier as F
                lb = F.langs_below(e["eval"], r["bpe"], train_chars)
                row.append(", ".join([f"{x} in" for x in lb["indomain"]] + [f"{x} held" for x in lb["heldout"]]) or "none")
            tr = e["train"]
            rs = tr.get("round_stats") or []
            ret = " / ".join(f"{s.get('retained', 0):,}" for s in rs[1:]) if rs else ""
            reused = "load_before" not in tr  # generalisation.py's run of the paper's rounds
            row += [f"{tr.get('raw_vocabulary') or 0:,}", ret, f"{tr['seconds']:.0f}",
                    "—" if reused else f"{tr.get('cpu_s', 0):.0f}",
                    "(generalisation.py)" if reused else
                    f"{tr.get('load_before', [0])[0]:.1f}/{tr.get('load_after', [0])[0]:.1f}"]
            rows.append(row)
        L += [C.md_table(hdr, rows), ""]
        base = r["by_t"].get(str(PAPER_T))
        if base and len(r["by_t"]) > 1:  # a change needs another threshold beside the paper's
            parts = []
            for kind in ("indomain", "heldout"):
                d = []
                for c in cats:
                    b = r["bpe"][kind][c]["cpt"]
                    g0 = base["eval"][kind][c]["cpt"] / b - 1
                    d += [(e["eval"][kind][c]["cpt"] / b - 1 - g0, t, c) for t, e in r["by_t"].items() if t != str(PAPER_T)]
                lo_, hi_ = min(d), max(d)
                parts.append(f"{P.KIND_LABEL[kind]}: from {100 * lo_[0]:+.1f} points ({lo_[2]}, T = {lo_[1]}) to "
                             f"{100 * hi_[0]:+.1f} points ({hi_[2]}, T = {hi_[1]})")
            line = f"Change of the gain against T = {PAPER_T}, over the other thresholds and sets: " + "; ".join(parts) + "."
            cpu = {t: e["train"].get("cpu_s") for t, e in r["by_t"].items()}
            lo = min(r["by_t"], key=int)
            if cpu.get(str(PAPER_T)) and cpu.get(lo) and "load_before" in base["train"]:
                line += f" CPU time at T = {lo}: {cpu[lo] / cpu[str(PAPER_T)]:.2f}x that at T = {PAPER_T}."
            L += [line, ""]
    md.write_text("\n".join(L))


def import_trial(other: str, label: str) -> None:
    """Adds the runs of another build's thresholds.json (e.g. a worktree with a changed constant of
    src/refine.rs) to this page, each under its key with `` / LABEL`` and the label shown."""
    mine_p = C.RESULTS / f"{NAME}.json"
    mine = json.loads(mine_p.read_text())
    theirs = json.loads(Path(other).read_text())
    # (run, threshold, core) already on this page, a trial's run under its own key
    have = {(k.split(" / ")[0], t, e["train"].get("params", {}).get("core"))
            for k, x in mine["runs"].items() for t, e in x["by_t"].items()}
    for key, r in theirs["runs"].items():
        if r.get("trial"):
            continue  # a trial that build imported itself
        # only what that build trained and this page lacks (not this page's own runs, which that
        # build's file copies, nor entries without a recorded core)
        by_t = {t: e for t, e in r["by_t"].items()
                if e["train"].get("params", {}).get("core") is not None
                and (key, t, e["train"]["params"]["core"]) not in have}
        if not by_t:
            continue
        cores = {e["train"]["params"]["core"] for e in by_t.values()}
        k = f"{key} / {label}"
        mine["runs"][k] = dict(r, by_t=dict(mine["runs"].get(k, {}).get("by_t", {}), **by_t), trial=label)
        print(f"[thr] {key}: trial {label} from core(s) {', '.join(sorted(c[:10] for c in cores if c))}")
    C.write_json(mine_p, mine)


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render,
                      commands={"--worker": worker, "--import-trial": import_trial})
