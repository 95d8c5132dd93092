"""Issue 13: before/after with the product itself (``cnfmce.train``), on the protocol's training
text, evaluated in-domain and held out by package, against the same-data byte-level BPE.

    python experiments/generalisation.py          # docs/results/generalisation.{json,md}
    python experiments/generalisation.py --render

*before*: the paper's algorithm with its fixed raw vocabulary, i.e. the state when issue 13 was
filed: ``cnfmce.train(paths, vocab_size=k, raw_vocab_size=5_000_000, selection="paper")``.
*default*: the defaults, ``cnfmce.train(paths, vocab_size=k)`` (the paper's selection, SPEC
section 4, with ``raw_vocab_size = RAW_VOCAB_PER_TOKEN * k``).
*after*: the chosen setting, ``cnfmce.train(paths, vocab_size=k, selection="refined")``.

``GEN_RUNS=mix-32k,mix-128k`` limits the runs (default: all of ``RUNS``).
``python experiments/generalisation.py --import-trial OTHER.json LABEL [CONFIG]`` adds the results
of CONFIG (default ``after``) of another build's run of this script (e.g. a worktree with a changed
constant of src/refine.rs) to this page as a trial labelled LABEL, next to this build's.

Each training runs in its own process (peak memory from ``wait4``), one at a time, under ``nice``
when the caller uses it; tokenizers and timings are cached under ``experiments/out/gen/``.
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

NAME = "generalisation"
OUT = C.OUT / "gen"
CONFIGS = {"before": {"raw_vocab_size": 5_000_000, "selection": "paper"}, "default": {},
           "after": {"selection": "refined"}}
# measured beside *after* (issue 13, session 4): the script shares of src/refine.rs step 4
EXTRA_CONFIGS = {"scripts": {"selection": "refined-scripts"},
                 # session 5: the ASCII / non-ASCII share of src/refine.rs step 5 (docs/results/frontier.md)
                 "nonascii": {"selection": "refined-non-ascii"}}
RUNS = [("mix", "32k"), ("mix", "128k"), ("mix", "250k"), ("en", "32k")]
ALL_CONFIGS = dict(CONFIGS, **EXTRA_CONFIGS)
CONFIGS = dict(ALL_CONFIGS)
# the same rule computed by experiments/selection.py from the same counts (used for a config that
# this run does not train)
SELECTION_EQUIV = {"before": "paper", "default": "m10x"}
if os.environ.get("GEN_CONFIGS"):  # e.g. GEN_CONFIGS=after (the others then come from selection.py)
    CONFIGS = {c: CONFIGS[c] for c in os.environ["GEN_CONFIGS"].split(",")}
if os.environ.get("GEN_RUNS"):
    RUNS = [tuple(x.split("-")) for x in os.environ["GEN_RUNS"].split(",")]  # type: ignore[misc]
TARGETS = {  # issue 13: minimum gain over the same-data BPE
    "mix": {"32k": {"zh": 0.10, "multi": 0.10, "en": 0.30, "sci": 0.30, "math": 0.30, "code": 0.30},
            "128k": {"zh": 0.10, "multi": 0.10, "en": 0.30, "sci": 0.30, "math": 0.30, "code": 0.30},
            "250k": {"zh": 0.10, "multi": 0.10, "en": 0.35, "sci": 0.35, "math": 0.35, "code": 0.35}},
    "en": {"32k": {"en": 0.22}},
}
MIN_LANG_TRAIN_CHARS = 50_000
MIN_LANG_EVAL_CHARS = 20_000


def cats_of(corpus: str) -> List[str]:
    return C.CATEGORIES if corpus == "mix" else [corpus]


def worker(corpus: str, size: str, config: str, out: str) -> None:
    """Trains one configuration (in a child process) and writes its tokenizer and timings."""
    import cnfmce
    paths = [str(p) for p in P.train_paths(cats_of(corpus))]
    t0 = time.perf_counter()
    tok = cnfmce.train(paths, vocab_size=X.SIZES[size], progress=False, **CONFIGS[config])
    secs = time.perf_counter() - t0
    tok.save(out + ".cnfmce.json.gz")
    md = tok.metadata
    info = {"seconds": round(secs, 1), "counting_s": md.get("counting", {}).get("seconds"),
            "filtering_s": md.get("filtering", {}).get("seconds"),
            "refining_s": round(sum(r["seconds"] for r in md.get("refining", [])), 1),
            "refining": md.get("refining"), "raw_vocabulary": md.get("raw_vocabulary"),
            "covered_characters": md.get("covered_characters"), "selection": md.get("selection"),
            "raw_vocab_size": md.get("counting", {}).get("raw_vocab_size")}
    if md.get("selection") == "refined-scripts":
        info["script_share_exponent"] = cnfmce._core.SCRIPT_SHARE_EXPONENT
    if md.get("selection") == "refined-non-ascii":
        info["non_ascii_share_exponent"] = cnfmce._core.NON_ASCII_SHARE_EXPONENT
    Path(out + ".json").write_text(json.dumps(info))


def trained(corpus: str, size: str, config: str) -> Dict[str, Any]:
    import cnfmce
    OUT.mkdir(parents=True, exist_ok=True)
    base = OUT / f"{corpus}-{size}-{config}"
    params = {"config": CONFIGS[config], "cnfmce": cnfmce.__version__, "core": C._cmd(["git", "rev-parse", "HEAD:src"])}
    m = C.cached_training(base, params)
    if m is not None:
        return m
    print(f"[gen] training {corpus} {size} {config} ...", flush=True)
    info = C.run_training(__file__, [corpus, size, config], base, params, f"{corpus} {size} {config}")
    print(f"[gen] {corpus} {size} {config}: {info['seconds']}s, peak {info['peak_rss'] / 1e9:.2f} GB", flush=True)
    return info


def run(args: Any) -> Dict[str, Any]:
    import cnfmce
    res = C.run_header(NAME, False)
    t_start = time.perf_counter()
    res["bench_wait"] = C.wait_for_benches(max_minutes=float(os.environ.get("GEN_WAIT_MIN", "0")))
    res["load_before"] = os.getloadavg()
    res["configs"] = ALL_CONFIGS
    res["trained"] = list(CONFIGS)
    res["defaults"] = {"raw_vocab_per_token": cnfmce._core.RAW_VOCAB_PER_TOKEN}
    res["runs"] = {}
    old_runs: Dict[str, Any] = {}
    try:  # runs of an earlier invocation that this one does not redo (GEN_RUNS) are kept
        old = json.loads((C.RESULTS / f"{NAME}.json").read_text())
        old_runs = old.get("runs", {})
        res["runs"] = {k: v for k, v in old_runs.items() if tuple(k.split("-")) not in RUNS}
    except (OSError, ValueError):
        pass
    core = C._cmd(["git", "rev-parse", "HEAD:src"])
    for corpus, size in RUNS:
        key = f"{corpus}-{size}"
        r: Dict[str, Any] = {"train": {}, "eval": {}, "from_selection": {}}
        var = X.OUT / corpus / "variants"
        try:  # the same BPE evaluated on the same sets by selection.py
            r["eval"]["bpe"] = json.loads((var / f"bpe-{size}.json").read_text())["eval"]
        except (OSError, ValueError):
            bpe = X.hf_bpe(corpus, P.train_paths(cats_of(corpus)), X.SIZES[size])
            r["eval"]["bpe"] = X.evaluate_sets(bpe, cats=cats_of(corpus))
        o = old_runs.get(key, {})
        for config in ALL_CONFIGS:
            if config not in CONFIGS and config not in SELECTION_EQUIV:
                # not trained by this run: the earlier run's result, when there is one
                if config in o.get("eval", {}):
                    r["eval"][config] = o["eval"][config]
                    if config in o.get("train", {}):
                        r["train"][config] = o["train"][config]
                continue
            if config not in CONFIGS:
                v = json.loads((var / f"{SELECTION_EQUIV[config]}-{size}.json").read_text())
                r["eval"][config] = v["eval"]
                r["from_selection"][config] = SELECTION_EQUIV[config]
                continue
            info = trained(corpus, size, config)
            r["train"][config] = info
            tok = cnfmce.Tokenizer.load(str(OUT / f"{corpus}-{size}-{config}.run.cnfmce.json.gz"))
            r["eval"][config] = X.evaluate_sets(tok, cats=cats_of(corpus))
        # the *after* of the previous core (src/ tree) this run replaces, kept for the comparison
        o_core = o.get("train", {}).get("after", {}).get("params", {}).get("core")
        if "after" in CONFIGS and o_core and o_core != core and "after" in o.get("eval", {}):
            r["previous_after"] = {"core": o_core, "eval": o["eval"]["after"], "train": o["train"]["after"]}
        elif o.get("previous_after"):
            r["previous_after"] = o["previous_after"]
        r["trials"] = list(o.get("trials", []))
        # every earlier core's *scripts* (one exponent each), kept for the comparison
        r["scripts_trials"] = list(o.get("scripts_trials", []))
        o_s = o.get("train", {}).get("scripts", {})
        if "scripts" in CONFIGS and o_s.get("params", {}).get("core") not in (None, core) and "scripts" in o.get("eval", {}):
            r["scripts_trials"].append({"core": o_s["params"]["core"], "exponent": o_s.get("script_share_exponent"),
                                        "eval": o["eval"]["scripts"], "train": o_s})
        res["runs"][key] = r
        line = []
        for kind in ("indomain", "heldout"):
            for cat in cats_of(corpus):
                b = r["eval"]["bpe"][kind][cat]["cpt"]
                line.append(f"{cat} " + ">".join(f"{r['eval'][c][kind][cat]['cpt'] / b - 1:+.1%}"
                                                 for c in CONFIGS if c in r["eval"]))
            line.append("|")
        print(f"[gen] {key}: " + " ".join(line), flush=True)
    res["train_chars"] = {c: P.materialize()["stats"][c]["train"]["lang_chars"] for c in C.CATEGORIES}
    res["load_after"] = os.getloadavg()
    res["runtime_s"] = round(time.perf_counter() - t_start, 1)
    return res


# --- page -------------------------------------------------------------------------------------

def _g(a, b):
    return None if not a or not b else a / b - 1


def render(res: Dict[str, Any], md: Path) -> None:
    cfgs = list(res["configs"])
    L = [C.header_md(res, "Before and after: the product's training, in-domain and held out by package"), ""]
    L += ["Vocabularies trained by `cnfmce.train` on the protocol's training text ([protocol.md](protocol.md): "
          "all shared training text without the held-out packages), one process each, one at a time. "
          "*before* = the paper's algorithm with its fixed m = 5,000,000 (`raw_vocab_size=5_000_000, "
          "selection=\"paper\"`, the state when issue 13 was filed); *default* = "
          "`cnfmce.train(paths, vocab_size=k)` (the paper's selection, SPEC section 4, with raw_vocab_size = "
          f"{res['defaults']['raw_vocab_per_token']} x vocab_size); *after* = the chosen setting, "
          "`selection=\"refined\"` with the default raw_vocab_size; *scripts* = `selection=\"refined-scripts\"` "
          "(refined with each script's tokens saved weighted by (usage of the largest script / usage of "
          "the script) ^ `SCRIPT_SHARE_EXPONENT`, src/refine.rs step 4) and *nonascii* = `selection=\"refined-non-ascii\"` "
          "(refined with the tokens saved of the smaller of the ASCII and non-ASCII groups weighted by (usage of the "
          "larger group / usage of the smaller) ^ `NON_ASCII_SHARE_EXPONENT`, src/refine.rs step 5), measured beside it. "
          "Gains are in characters per token over "
          "the same-data byte-level BPE (HF `tokenizers`, GPT-4 split) of the same size; **bold** where the "
          "issue's target is missed by *after*.", "",
          C.load_line(res, "runs"), ""]
    for key, r in res["runs"].items():
        corpus, size = key.split("-")
        cats = cats_of(corpus)
        cfgs = [c for c in res["configs"] if c in r["eval"]]
        tg = TARGETS[corpus][size]
        L += [f"## {'mix of all training text' if corpus == 'mix' else 'English alone (en/train)'}, {size}", ""]
        rows = []
        for kind in ("indomain", "heldout"):
            for cat in cats:
                b = r["eval"]["bpe"][kind][cat]["cpt"]
                row = [P.KIND_LABEL[kind] if cat == cats[0] else "", cat, C.f3(b)]
                for config in cfgs:
                    a = r["eval"][config][kind][cat]["cpt"]
                    g = _g(a, b)
                    s = C.pct(g, sign=True)
                    if config == "after" and cat in tg and g is not None and g < tg[cat]:
                        s = f"**{s}**"
                    row += [C.f3(a), s]
                row.append(C.pct(tg.get(cat), 0, sign=True) if cat in tg else "")
                rows.append(row)
        hdr = ["evaluation", "set", "BPE CPT"]
        for c in cfgs:
            hdr += [f"{c} CPT", f"{c} gain"]
        prev = r.get("previous_after")
        if prev:
            hdr.append("after, previous core")
            for row, (kind, cat) in zip(rows, [(k, c) for k in ("indomain", "heldout") for c in cats]):
                row.insert(len(row) - 1, C.pct(_g(prev["eval"][kind][cat]["cpt"], r["eval"]["bpe"][kind][cat]["cpt"]), sign=True))
        L += [C.md_table(hdr + ["target"], rows, "ll" + "r" * (len(hdr) - 1)), ""]
        if prev:
            L += [f"*after, previous core*: the same command with the core of src/ tree `{prev['core'][:10]}` "
                  f"({prev['train'].get('covered_characters') or 0:,} covered characters, only those inside the raw "
                  "vocabulary's cut), replaced by this run's.", ""]
        trials = r.get("scripts_trials") or []
        if trials:
            b = r["eval"]["bpe"]
            cur = r["train"].get("scripts", {}).get("script_share_exponent")
            rows = []
            for t in trials + ([{"exponent": cur, "eval": r["eval"]["scripts"], "core": "this run"}] if "scripts" in r["eval"] else []):
                rows.append([f"{t['exponent']}", t["core"][:10]]
                            + [C.pct(_g(t["eval"][k][c]["cpt"], b[k][c]["cpt"]), sign=True)
                               for k in ("indomain", "heldout") for c in cats])
            L += ["*scripts* with each exponent tried (gain over the BPE; core = src/ tree of the build):", "",
                  C.md_table(["exponent", "core"] + [f"{'in' if k == 'indomain' else 'held'} {c}"
                                                     for k in ("indomain", "heldout") for c in cats], rows), ""]
        if r.get("trials"):
            b = r["eval"]["bpe"]
            rows = [[t["label"], t["core"][:10], f"{t['train'].get('covered_characters') or 0:,}"]
                    + [C.pct(_g(t["eval"][k][c]["cpt"], b[k][c]["cpt"]), sign=True)
                       for k in ("indomain", "heldout") for c in cats] for t in r["trials"]]
            for config in dict.fromkeys(t.get("config", "after") for t in r["trials"]):
                if config not in r["eval"]:
                    continue
                rows.append([f"{config} (this page)", r["train"].get(config, {}).get("params", {}).get("core", "")[:10],
                             f"{r['train'].get(config, {}).get('covered_characters') or 0:,}"]
                            + [C.pct(_g(r["eval"][config][k][c]["cpt"], b[k][c]["cpt"]), sign=True)
                               for k in ("indomain", "heldout") for c in cats])
            L += ["Configurations trained by other builds (`--import-trial`; core = src/ tree; gain over the BPE):", "",
                  C.md_table(["build", "core", "covered chars"] + [f"{'in' if k == 'indomain' else 'held'} {c}"
                                                                   for k in ("indomain", "heldout") for c in cats], rows), ""]
        trn = r["train"]
        if r.get("from_selection"):
            L += ["Not trained by this run, from the same rule computed by `experiments/selection.py` "
                  "on the same counts ([selection.md](selection.md)): " + ", ".join(
                      f"{c} = variant `{v}`" for c, v in r["from_selection"].items()) + ".", ""]
        L += ["Training (wall time of `cnfmce.train` in its process; counting / filtering / refining "
              "passes; peak RSS): " + "; ".join(
                  f"{c} {trn[c]['seconds']:.0f} s ({trn[c]['counting_s']:.0f} / {trn[c]['filtering_s']:.0f} / "
                  f"{trn[c]['refining_s']:.0f} s), {trn[c]['peak_rss'] / 1e9:.2f} GB, raw vocabulary "
                  f"{trn[c]['raw_vocabulary']:,}"
                  + (f", {len(trn[c]['refining'])} refining passes, {trn[c]['covered_characters']:,} covered characters"
                     if trn[c]["refining"] else "")
                  for c in cfgs if c in trn) + ".", ""]
        if corpus == "mix":
            rows = []
            for cat in P.HUMAN_LANG_CATEGORIES:
                train_chars = res["train_chars"][cat]
                langs = sorted(train_chars, key=lambda l: -train_chars[l])
                for lang in langs:
                    row = [f"{cat}/{lang}", f"{train_chars[lang]:,}"]
                    any_ = False
                    for kind in ("indomain", "heldout"):
                        bl = r["eval"]["bpe"][kind][cat]["langs"].get(lang)
                        for config in cfgs:
                            al = r["eval"][config][kind][cat]["langs"].get(lang)
                            if not bl or bl["chars"] < MIN_LANG_EVAL_CHARS or not al:
                                row.append("")
                                continue
                            any_ = True
                            g = _g(al["cpt"], bl["cpt"])
                            s = C.pct(g, sign=True)
                            if (config == "after" and cat == "multi" and train_chars[lang] > MIN_LANG_TRAIN_CHARS
                                    and g < 0):
                                s = f"**{s}**"
                            row.append(s)
                    if prev:
                        for kind in ("indomain", "heldout"):
                            bl = r["eval"]["bpe"][kind][cat]["langs"].get(lang)
                            pl = prev["eval"][kind][cat]["langs"].get(lang)
                            ok = bl and bl["chars"] >= MIN_LANG_EVAL_CHARS and pl
                            row.append(C.pct(_g(pl["cpt"], bl["cpt"]), sign=True) if ok else "")
                    if any_:
                        rows.append(row)
            L += [f"Per language (gain over the BPE; evaluation sets with at least {MIN_LANG_EVAL_CHARS:,} "
                  f"characters; bold: a multi language with more than {MIN_LANG_TRAIN_CHARS:,} training "
                  "characters below the BPE under *after*):", "",
                  C.md_table(["language", "train chars"] + [f"in-domain {c}" for c in cfgs]
                             + [f"held-out {c}" for c in cfgs]
                             + (["in-domain after, previous core", "held-out after, previous core"] if prev else []),
                             rows), ""]
    md.write_text("\n".join(L))


def import_trial(other: str, label: str, config: str = "after") -> None:
    """Adds the ``config`` runs of another build's generalisation.json as trials (module doc)."""
    mine_p = C.RESULTS / f"{NAME}.json"
    mine = json.loads(mine_p.read_text())
    theirs = json.loads(Path(other).read_text())
    for key, r in theirs["runs"].items():
        tr = r.get("train", {}).get(config)
        if key not in mine["runs"] or not tr or config not in r.get("eval", {}):
            continue
        mr = mine["runs"][key]
        if tr["params"]["core"] == mr.get("train", {}).get(config, {}).get("params", {}).get("core"):
            continue  # the same build as this page's
        trials = [t for t in mr.get("trials", []) if t["label"] != label]
        trials.append({"label": label, "config": config, "core": tr["params"]["core"], "eval": r["eval"][config],
                       "train": tr})
        mr["trials"] = trials
        print(f"[gen] {key}: trial {label} from core {tr['params']['core'][:10]}")
    C.write_json(mine_p, mine)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:6])
    elif len(sys.argv) > 1 and sys.argv[1] == "--import-trial":
        import_trial(*sys.argv[2:5])
    else:
        C.experiment_main(NAME, __doc__, run, render)
