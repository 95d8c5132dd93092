"""Issue 13: before/after with the product itself (``cnfmce.train``), on the protocol's training
text, evaluated in-domain and held out by package, against the same-data byte-level BPE.

    python experiments/generalisation.py          # docs/results/generalisation.{json,md}
    python experiments/generalisation.py --render

*before*: the paper's algorithm with its fixed raw vocabulary, i.e. the state when issue 13 was
filed: ``cnfmce.train(paths, vocab_size=k, raw_vocab_size=5_000_000, selection="paper")``.
*default*: the defaults, ``cnfmce.train(paths, vocab_size=k)`` (the paper's selection, SPEC
section 4, with ``raw_vocab_size = RAW_VOCAB_PER_TOKEN * k``).
*after*: the chosen setting, ``cnfmce.train(paths, vocab_size=k, selection="refined")``.

``GEN_RUNS=mix-32k,mix-128k`` limits the runs (default: all of ``RUNS``) and
``GEN_CONFIGS=nonascii`` the configurations trained (default: all). A run or configuration not
redone keeps its numbers from the earlier ``generalisation.json``, with the core (src/ tree),
date and machine that made them; the page labels every column with its core and says which
configurations this run trained. A configuration retrained by a different core keeps the earlier
core's numbers beside it (``previous``: one column each).
``python experiments/generalisation.py --counts-check [32k 128k 250k]`` trains *nonascii* with
``cnfmce.train_from_counts`` from byte_fallback.py's cut counts (the shared cache's, as its pages
do), and from the same counts with every non-ASCII character's exact count added (a scan of the
training text), and compares both, token by token, with this page's ``cnfmce.train`` *nonascii* of
the same core (which must have been trained first); the result goes into generalisation.json
(``counts_check``, kept by later runs) and the page.
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
from typing import Any, Dict, List, Optional

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
    C.train_worker(out, lambda: cnfmce.train(paths, vocab_size=X.SIZES[size], progress=False,
                                             **CONFIGS[config]))


def run_stamp(res: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Date, machine (CPU) and repository commit of a run: this process's, or ``res``'s header."""
    if res is None:
        res = C.run_header(NAME, False)
    m = res.get("machine") or {}
    return {"date": res.get("date"), "cpu": m.get("cpu"), "commit": m.get("git_commit")}


def previous_list(r: Dict[str, Any]) -> Dict[str, List[Dict[str, Any]]]:
    """``{config: [earlier core's result, ...]}`` of a run (oldest first); JSON written before
    ``previous`` existed had only ``previous_after``."""
    prev = {c: list(v) for c, v in (r.get("previous") or {}).items()}
    if r.get("previous_after") and "after" not in prev:
        prev["after"] = [r["previous_after"]]
    return prev


def merge_run(o: Dict[str, Any], trained_now: Dict[str, Dict[str, Any]], core: str,
              old_stamp: Dict[str, Any], old_trained: List[str]) -> Dict[str, Any]:
    """The kept part of a run: every configuration of the earlier run ``o`` that this run does
    not train (``trained_now``: config -> its train record), with its provenance, and the earlier
    core's result of each configuration this run retrains with a different core."""
    r: Dict[str, Any] = {"train": {}, "eval": {}, "from_selection": {}, "source": {}, "previous": previous_list(o)}

    def kept_train(config: str) -> Dict[str, Any]:
        """The earlier run's train record of ``config``, stamped with that run when it trained it."""
        t = dict(o.get("train", {}).get(config, {}))
        if "run" not in t and config in old_trained:
            t["run"] = dict(old_stamp)
        return t
    for config, ev in o.get("eval", {}).items():
        if config == "bpe" or config in trained_now:
            continue
        r["eval"][config] = ev
        r["source"][config] = "kept"
        if config in o.get("from_selection", {}):
            r["from_selection"][config] = o["from_selection"][config]
        if config in o.get("train", {}):
            r["train"][config] = kept_train(config)
    for config, info in trained_now.items():
        o_core = o.get("train", {}).get(config, {}).get("params", {}).get("core")
        if o_core and o_core != core and config in o.get("eval", {}):
            r["previous"].setdefault(config, []).append({"core": o_core, "eval": o["eval"][config],
                                                         "train": kept_train(config)})
    return r


def cores_of(res: Dict[str, Any]) -> List[str]:
    """Every core (src/ tree) whose numbers a result holds."""
    out: List[str] = []
    for r in res["runs"].values():
        recs = list(r.get("train", {}).values()) + [p["train"] for ps in previous_list(r).values() for p in ps]
        cs = [t.get("params", {}).get("core") for t in recs] + [t["core"] for t in r.get("trials", []) + r.get("scripts_trials", [])]
        out += [c for c in cs if c and c not in out]
    return out


def core_commits(res: Dict[str, Any]) -> Dict[str, Dict[str, str]]:
    """``{core: {"first", "last", "date"}}``: the oldest and newest commits of HEAD's history whose
    src/ tree is the core (the commit date of the oldest), for the page's labels."""
    want = set(cores_of(res))
    found: Dict[str, Dict[str, str]] = {}
    log = C._cmd(["git", "log", "--format=%H %T %cd", "--date=format:%Y-%m-%d %H:%M"]) or ""
    for line in log.splitlines():  # newest first
        h, _t, date = line.split(" ", 2)
        tree = C._cmd(["git", "rev-parse", f"{h}:src"])
        if tree in want:
            f = found.setdefault(tree, {"last": h[:7]})
            f.update(first=h[:7], date=date)
    return found


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
    info["run"] = run_stamp()  # when, where and from which commit it was trained
    base.with_suffix(".json").write_text(json.dumps(info))
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
    old_stamp: Dict[str, Any] = {}
    old_trained: List[str] = []
    try:  # runs and configurations of an earlier invocation that this one does not redo are kept
        old = json.loads((C.RESULTS / f"{NAME}.json").read_text())
        old_runs = old.get("runs", {})
        old_stamp, old_trained = run_stamp(old), list(old.get("trained", []))
        if old.get("counts_check"):  # made by --counts-check, not by this run
            res["counts_check"] = old["counts_check"]
        for k, v in old_runs.items():
            if tuple(k.split("-")) not in RUNS:
                res["runs"][k] = v
    except (OSError, ValueError):
        pass
    core = C._cmd(["git", "rev-parse", "HEAD:src"])
    res["core"] = core
    for corpus, size in RUNS:
        key = f"{corpus}-{size}"
        var = X.OUT / corpus / "variants"
        o = old_runs.get(key, {})
        trained_now = {config: trained(corpus, size, config) for config in CONFIGS}
        r = merge_run(o, trained_now, core, old_stamp, old_trained)
        try:  # the same BPE evaluated on the same sets by selection.py
            r["eval"]["bpe"] = json.loads((var / f"bpe-{size}.json").read_text())["eval"]
            r["bpe_source"] = f"selection.py's bpe-{size}"
        except (OSError, ValueError):
            bpe_cached = (X.OUT / corpus / f"bpe{X.SIZES[size] // 1000}k.hf-tokenizer.json.gz").exists()
            if not bpe_cached and "bpe" in o.get("eval", {}) and not os.environ.get("GEN_TRAIN_BPE"):
                # not cached here: the earlier run's evaluation of the same (deterministic) BPE
                r["eval"]["bpe"] = o["eval"]["bpe"]
                r["bpe_source"] = o.get("bpe_source") or "kept"
            else:
                bpe = X.hf_bpe(corpus, P.train_paths(cats_of(corpus)), X.SIZES[size])
                r["eval"]["bpe"] = X.evaluate_sets(bpe, cats=cats_of(corpus))
                r["bpe_source"] = "this run"
        for config in ALL_CONFIGS:
            if config in CONFIGS:
                info = trained_now[config]
                r["train"][config] = info
                tok = cnfmce.Tokenizer.load(str(OUT / f"{corpus}-{size}-{config}.run.cnfmce.json.gz"))
                if "fallback_prefixes" in tok.metadata:  # src/refine.rs step 6 (refined-non-ascii)
                    info = r["train"][config] = dict(info, fallback_prefixes=tok.metadata["fallback_prefixes"])
                r["eval"][config] = X.evaluate_sets(tok, cats=cats_of(corpus))
                r["source"][config] = "this run"
            elif config in SELECTION_EQUIV:
                vp = var / f"{SELECTION_EQUIV[config]}-{size}.json"
                if vp.exists() or config not in r["eval"]:
                    r["eval"][config] = json.loads(vp.read_text())["eval"]
                    r["from_selection"][config] = SELECTION_EQUIV[config]
                    r["source"][config] = "this run"
                    r["train"].pop(config, None)
            # any other configuration not trained by this run: the earlier run's (merge_run)
        r["eval"] = {c: r["eval"][c] for c in ["bpe"] + list(ALL_CONFIGS) if c in r["eval"]}
        r["trials"] = list(o.get("trials", []))
        # every earlier core's *scripts* (one exponent each), kept for the comparison
        r["scripts_trials"] = list(o.get("scripts_trials", []))
        o_s = o.get("train", {}).get("scripts", {})
        if "scripts" in CONFIGS and o_s.get("params", {}).get("core") not in (None, core) and "scripts" in o.get("eval", {}):
            r["scripts_trials"].append({"core": o_s["params"]["core"], "exponent": o_s.get("script_share_exponent"),
                                        "eval": o["eval"]["scripts"], "train": o_s})
            r["previous"].pop("scripts", None)  # shown in the exponent table instead
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
    res["cores"] = core_commits(res)
    res["load_after"] = os.getloadavg()
    res["runtime_s"] = round(time.perf_counter() - t_start, 1)
    return res


# --- page -------------------------------------------------------------------------------------

def _g(a, b):
    return None if not a or not b else a / b - 1


# what an earlier core lacks, for the page's column labels (src/ tree prefix -> words)
CORE_NOTES = {"2fcb5ef6cc": "before step 6"}


def core_label(res: Dict[str, Any], core: Optional[str]) -> str:
    """``core 2fcb5ef6cc`` with the commits whose src/ tree it is (from ``res["cores"]``)."""
    if not core:
        return "not recorded"
    c = (res.get("cores") or {}).get(core)
    s = f"`{core[:10]}`"
    if c:
        s += f" (src/ of `{c['first']}`" + (f"..`{c['last']}`" if c["last"] != c["first"] else "") + f", {c['date']})"
    return s


def _cpu(name: Optional[str], default: str = "") -> str:
    """A run stamp's CPU name for the page: ``Intel(R) Xeon(R) Processor`` -> ``Intel Xeon``."""
    return (name or default).replace("(R)", "").replace(" Processor", "").strip()


def _stamp(t: Dict[str, Any]) -> str:
    st = t.get("run") or {}
    if not st.get("date"):
        return "an earlier run (date not recorded)"
    cpu = _cpu(st.get("cpu"))
    return f"{st['date']}" + (f", {cpu}" if cpu else "") + (f", HEAD `{st['commit']}`" if st.get("commit") else "")


def _prev_cols(r: Dict[str, Any]) -> List[tuple]:
    """(column label, config, earlier result) of every earlier core kept beside a retrained config."""
    out = []
    for config, ps in previous_list(r).items():
        if config not in r["eval"]:
            continue
        for pv in ps:
            note = CORE_NOTES.get(pv["core"][:10])
            out.append((f"{config}, core {pv['core'][:10]}" + (f" ({note})" if note else ""), config, pv))
    return out


def render(res: Dict[str, Any], md: Path) -> None:
    trained_cfgs = ", ".join(f"*{c}*" for c in res["trained"])
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
          "larger group / usage of the smaller) ^ `NON_ASCII_SHARE_EXPONENT`, src/refine.rs step 5, and, from step 6 on, "
          "the fallback prefixes: for every 3- or 4-byte character without a token of the raw vocabulary, the prefix of "
          "its bytes but the last, so that such a character costs 2 byte pieces instead of 3), measured beside it. "
          "Gains are in characters per token over "
          "the same-data byte-level BPE (HF `tokenizers`, GPT-4 split) of the same size; **bold** where the "
          "issue's target is missed by *after*.", "",
          f"**This run made {trained_cfgs}** with core {core_label(res, res.get('core'))} (trained, or the cached "
          "tokenizer of the same core reused) for the runs whose table *Columns* says *this run*; every other column "
          "is kept from an earlier run of this script, and *Columns* names the core (src/ tree) that trained each, "
          "when and on which machine. Token counts do not depend on the machine; training times do.", "",
          C.load_line(res, "runs (this run's trainings only)"), ""]
    for key, r in res["runs"].items():
        corpus, size = key.split("-")
        cats = cats_of(corpus)
        cfgs = [c for c in res["configs"] if c in r["eval"]]
        tg = TARGETS[corpus][size]
        src = r.get("source") or {}
        prevs = _prev_cols(r)
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
                for _lab, _c, pv in prevs:
                    row.append(C.pct(_g(pv["eval"][kind][cat]["cpt"], b), sign=True))
                row.append(C.pct(tg.get(cat), 0, sign=True) if cat in tg else "")
                rows.append(row)
        hdr = ["evaluation", "set", "BPE CPT"]
        for c in cfgs:
            hdr += [f"{c} CPT", f"{c} gain"]
        hdr += [f"{lab} gain" for lab, _c, _p in prevs]
        L += [C.md_table(hdr + ["target"], rows, "ll" + "r" * (len(hdr) - 1)), ""]
        # where every column comes from
        crow = []
        for c in cfgs:
            if c in r.get("from_selection", {}):
                crow.append([c, "this run" if src.get(c) == "this run" else "kept",
                             f"`experiments/selection.py` variant `{r['from_selection'][c]}` (same counts, same rule)", ""])
                continue
            t = r["train"].get(c, {})
            crow.append([c, src.get(c, "kept"), core_label(res, t.get("params", {}).get("core")), _stamp(t)])
        for lab, c, pv in prevs:
            crow.append([lab, "kept (earlier core)", core_label(res, pv["core"]), _stamp(pv.get("train", {}))])
        bs = r.get("bpe_source")
        L += ["Columns (*this run* = made by the run of this page's date: trained, or the cached tokenizer of the same "
              "core evaluated; *kept* = from the earlier generalisation.json):", "",
              C.md_table(["column", "numbers from", "core (src/ tree) or rule", "trained"], crow, "llll"), "",
              "BPE: the same-data BPE " + ({"this run": "evaluated by this run (trained, or its cached tokenizer)",
                                             None: "evaluated by the run that made this table"}.get(bs, f"evaluation from {bs}"))
              + ".", ""]
        trials = r.get("scripts_trials") or []
        if trials:
            b = r["eval"]["bpe"]
            cur = r["train"].get("scripts", {}).get("script_share_exponent")
            cur_core = r["train"].get("scripts", {}).get("params", {}).get("core", "")
            rows = []
            for t in trials + ([{"exponent": cur, "eval": r["eval"]["scripts"], "core": cur_core}] if "scripts" in r["eval"] else []):
                rows.append([f"{t['exponent']}", t["core"][:10] + (" (this page's *scripts*)" if t["core"] == cur_core else "")]
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

        def tline(lab: str, t: Dict[str, Any]) -> str:
            cpu = _cpu((t.get("run") or {}).get("cpu"), "machine not recorded")
            return (f"{lab} {t['seconds']:.0f} s ({t['counting_s']:.0f} / {t['filtering_s']:.0f} / "
                    f"{t['refining_s']:.0f} s), {t['peak_rss'] / 1e9:.2f} GB, raw vocabulary {t['raw_vocabulary']:,}"
                    + (f", {len(t['refining'])} refining passes, {t['covered_characters']:,} covered characters"
                       if t.get("refining") else "")
                    + (f", {t['fallback_prefixes']:,} fallback prefixes" if t.get("fallback_prefixes") is not None else "")
                    + f" [{cpu}]")
        L += ["Training (wall time of `cnfmce.train` in its process; counting / filtering / refining "
              "passes; peak RSS; [machine]; the cores are those of *Columns*): "
              + "; ".join([tline(c, trn[c]) for c in cfgs if c in trn]
                          + [tline(lab, pv["train"]) for lab, _c, pv in prevs if pv.get("train", {}).get("seconds")]) + ".", ""]
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
                        evs = [(c, r["eval"][c]) for c in cfgs] + [(lab, pv["eval"]) for lab, _c, pv in prevs]
                        for config, ev in evs:
                            al = ev[kind][cat]["langs"].get(lang)
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
                    if any_:
                        rows.append(row)
            names = cfgs + [lab for lab, _c, _p in prevs]
            L += [f"Per language (gain over the BPE; evaluation sets with at least {MIN_LANG_EVAL_CHARS:,} "
                  f"characters; bold: a multi language with more than {MIN_LANG_TRAIN_CHARS:,} training "
                  "characters below the BPE under *after*):", "",
                  C.md_table(["language", "train chars"] + [f"in-domain {c}" for c in names]
                             + [f"held-out {c}" for c in names], rows), ""]
    L += counts_check_md(res)
    md.write_text("\n".join(L))


def counts_check_md(res: Dict[str, Any]) -> List[str]:
    """The page's section of ``--counts-check``."""
    cc = res.get("counts_check") or {}
    sizes = [k for k in cc if not k.startswith("_")]
    if not sizes:
        return []
    st = cc["_stamp"]
    L = ["## cnfmce.train against train_from_counts over cut counts", "",
         "The byte_fallback pages ([byte_fallback.md](byte_fallback.md), [_128k](byte_fallback_128k.md), "
         "[_250k](byte_fallback_250k.md)) train with `cnfmce.train_from_counts` from counts cut to the best "
         "max(2,000,000, 20 x k) candidates, this page with `cnfmce.train`. Character coverage and the fallback "
         "prefixes (src/refine.rs steps 1 and 6) read the characters' counts: `cnfmce.train` has the exact count of "
         "every character it counted (kept beside the cut), `train_from_counts` only the characters of the counts it "
         "is given. `python experiments/generalisation.py --counts-check " + " ".join(sizes) + "` "
         f"({st['date']}, {_cpu(st.get('cpu'))}, HEAD `{st['commit']}`, "
         f"core {core_label(res, st.get('core'))}) trains *nonascii* with `train_from_counts` from those counts "
         "(*cut*: the byte_fallback pages' *nonascii-now*) and from the same counts with every non-ASCII character of "
         "the training text added with its number of occurrences (*cut + chars*; counted by a scan of the text, which "
         "gives every character already in the counts its count there, column *same count*), and compares both with "
         "this page's `cnfmce.train` *nonascii* of the same core, token by token.", ""]
    rows = []
    for size in sizes:
        r = cc[size]
        ref = r["reference"]
        for name, lab in (("cut", "cut"), ("cut_chars", "cut + chars")):
            v = r[name]
            d = v["vs_reference"]
            rows.append([size if name == "cut" else "", lab, f"{r['candidates'] + (r['chars_counted'] - r['chars_in_cut'] if name == 'cut_chars' else 0):,}",
                         f"{r['chars_in_cut'] if name == 'cut' else r['chars_counted']:,} of {r['chars_counted']:,}",
                         f"{r['chars_in_cut_same_count']:,} of {r['chars_in_cut']:,}" if name == "cut" else "",
                         f"{v['covered_characters']:,} ({v['covered_beyond_cut']:,})", f"{v['fallback_prefixes']:,}",
                         "identical (same tokens, same ids)" if d["identical"] else
                         f"{d['only_a']:,} tokens differ ({d['only_b_chars']:,} of its characters missing)"])
        rows.append(["", "`cnfmce.train`", "", "", "", f"{ref['covered_characters']:,} ({ref['covered_beyond_cut']:,})",
                     f"{ref['fallback_prefixes']:,}", ""])
    L += [C.md_table(["k", "counts", "candidates", "characters in them", "same count", "covered (beyond the cut)",
                      "fallback prefixes", "against `cnfmce.train`"], rows, "llrrrrrl"), ""]
    rows = []
    for size in sizes:
        run = res["runs"].get(f"mix-{size}", {})
        v = cc[size]["cut"]
        # this page's cnfmce.train *nonascii* of the check's core (a later run may have retrained it)
        same = [e for e, t in [(run.get("eval", {}).get("nonascii"), run.get("train", {}).get("nonascii", {}))]
                + [(pv["eval"], pv.get("train", {})) for pv in previous_list(run).get("nonascii", [])]
                if e and t.get("params", {}).get("core") == st.get("core")]
        if "eval" not in v or not same:
            continue
        b = run["eval"]["bpe"]
        for lab, e in (("cut (`train_from_counts`)", v["eval"]), ("`cnfmce.train`", same[0])):
            rows.append([size if e is v["eval"] else "", lab]
                        + [f"{C.pct(_g(e['indomain'][c]['cpt'], b['indomain'][c]['cpt']), 2, True)} / "
                           f"{C.pct(_g(e['heldout'][c]['cpt'], b['heldout'][c]['cpt']), 2, True)}" for c in C.CATEGORIES])
    if rows:
        L += ["Gain over the same-data BPE of *nonascii* trained both ways (in-domain / held-out-by-package):", "",
              C.md_table(["k", "training"] + C.CATEGORIES, rows, "ll" + "r" * len(C.CATEGORIES)), ""]
    # the same comparison before step 6, from the records: byte_fallback's *nonascii* (cut counts, the
    # build of its session's start) against this page's earlier-core *nonascii* (cnfmce.train)
    rows = []
    for size in sizes:
        try:
            bf = json.loads((C.RESULTS / f"byte_fallback{'' if size == '32k' else '_' + size}.json").read_text())
            bv, bb = bf["variants"]["nonascii"], bf["bpe"]["eval"]
        except (OSError, ValueError, KeyError):
            continue
        run = res["runs"].get(f"mix-{size}", {})
        pvs = [pv for pv in previous_list(run).get("nonascii", []) if CORE_NOTES.get(pv["core"][:10]) == "before step 6"]
        if not pvs:
            continue
        pv, b = pvs[-1], run["eval"]["bpe"]
        for lab, e, bpe, cov in ((f"cut: byte_fallback page's *nonascii* ({bv['doc']})", bv["eval"], bb,
                                  bv["train"].get("covered_characters")),
                                 (f"`cnfmce.train`: this page's *nonascii*, core `{pv['core'][:10]}`", pv["eval"], b,
                                  pv["train"].get("covered_characters"))):
            rows.append([size if e is bv["eval"] else "", lab, f"{cov or 0:,}"]
                        + [f"{C.pct(_g(e['indomain'][c]['cpt'], bpe['indomain'][c]['cpt']), 2, True)} / "
                           f"{C.pct(_g(e['heldout'][c]['cpt'], bpe['heldout'][c]['cpt']), 2, True)}" for c in C.CATEGORIES])
    if rows:
        L += ["Before step 6 (no fallback prefixes; from the earlier records, not retrained): the byte_fallback pages' "
              "*nonascii* (cut counts) against this page's *nonascii* of the core before step 6 (`cnfmce.train`), gain "
              "over the same-data BPE (in-domain / held-out-by-package) and covered characters:", "",
              C.md_table(["k", "training", "covered"] + C.CATEGORIES, rows, "llr" + "r" * len(C.CATEGORIES)), ""]
    same = [s_ for s_ in sizes if cc[s_]["cut_chars"]["vs_reference"]["identical"]]
    if same:
        L += [f"So at {', '.join(same)} the difference between the two trainings is the character counts alone: given "
              "every character's exact count, `train_from_counts` makes `cnfmce.train`'s vocabulary token for token. "
              "The cut counts lack the rarer characters, so coverage ranks fewer of them (at 32k its cap of k / 16 binds "
              "either way) and fewer characters get fallback prefixes.", ""]
    return L


# --- cnfmce.train against train_from_counts over cut counts (--counts-check) ---------------------

# the counts byte_fallback.py's pages train from: max(2M, 20 x k) candidates (the lead's shared cache)
BF_COUNTS = {"32k": "byte_fallback", "128k": "byte_fallback/m2560000", "250k": "byte_fallback/m5000000"}


def exact_char_counts(paths: List[Path]) -> Dict[bytes, int]:
    """Every non-ASCII character of the training text with its number of occurrences (UTF-8)."""
    from collections import Counter
    cnt: Counter = Counter()
    for p in paths:
        for d in C.read_jsonl(p):
            t = d["text"]
            if not t.isascii():
                cnt.update(t)
    return {ch.encode("utf-8"): n for ch, n in cnt.items() if ord(ch) >= 0x80}


def _vocab_diff(a: Any, b: Any) -> Dict[str, Any]:
    va, vb = a.get_vocab(), b.get_vocab()
    only_a, only_b = set(va) - set(vb), set(vb) - set(va)

    def one_char(t: bytes) -> bool:
        try:
            return len(t.decode("utf-8")) == 1 and len(t) > 1
        except UnicodeDecodeError:
            return False
    return {"identical": va == vb, "same_tokens": not only_a and not only_b,
            "only_a": len(only_a), "only_b": len(only_b),
            "only_a_chars": sum(map(one_char, only_a)), "only_b_chars": sum(map(one_char, only_b)),
            "a_chars": sum(map(one_char, va)), "b_chars": sum(map(one_char, vb))}


def counts_check(sizes: List[str]) -> None:
    """Trains *nonascii* with ``train_from_counts`` from byte_fallback.py's cut counts, as its pages
    do (*cut*), and from the same counts with every character's exact count added (*cut + chars*),
    and compares both with this page's ``cnfmce.train`` *nonascii* of the same core (module doc)."""
    import cnfmce
    mine_p = C.RESULTS / f"{NAME}.json"
    mine = json.loads(mine_p.read_text())
    core = C._cmd(["git", "rev-parse", "HEAD:src"])
    paths = P.train_paths()
    t0 = time.perf_counter()
    chars = exact_char_counts(paths)
    chars_s = time.perf_counter() - t0
    out: Dict[str, Any] = dict(mine.get("counts_check") or {})
    out["_stamp"] = run_stamp()
    out["_stamp"]["core"] = core
    for size in sizes:
        k = X.SIZES[size]
        rec = json.loads((OUT / f"mix-{size}-nonascii.json").read_text())
        if rec["params"]["core"] != core:
            raise SystemExit(f"mix-{size} nonascii was trained by core {rec['params']['core'][:10]}, not this "
                             f"one ({core[:10]}): run GEN_CONFIGS=nonascii python experiments/generalisation.py first")
        ref = cnfmce.Tokenizer.load(str(OUT / f"mix-{size}-nonascii.run.cnfmce.json.gz"))
        cdir = C.OUT / BF_COUNTS[size]
        cparams = json.loads((cdir / "counts.params.json").read_text())["params"]
        counts = dict(cnfmce.load_counts(str(cdir / "counts.tsv.gz")))
        in_cut = {t: n for t, n in chars.items() if t in counts}
        agree = sum(counts[t] == n for t, n in in_cut.items())
        aug = dict(counts)
        for t, n in chars.items():
            aug.setdefault(t, n)
        r: Dict[str, Any] = {"counts": BF_COUNTS[size], "counts_m": cparams["raw_vocab_size"],
                             "candidates": len(counts), "chars_counted": len(chars), "chars_in_cut": len(in_cut),
                             "chars_in_cut_same_count": agree, "chars_scan_s": round(chars_s, 1),
                             "reference": {k2: rec.get(k2) for k2 in ("covered_characters", "raw_vocabulary")}}
        r["reference"]["fallback_prefixes"] = ref.metadata.get("fallback_prefixes")
        r["reference"]["covered_beyond_cut"] = ref.metadata.get("covered_beyond_cut")
        for name, cts in (("cut", counts), ("cut_chars", aug)):
            print(f"[gen] counts check {size}: train_from_counts over {name} ({len(cts):,} candidates) ...", flush=True)
            t1 = time.perf_counter()
            tok = cnfmce.train_from_counts(cts, [str(p) for p in paths], vocab_size=k, raw_vocab_size=10 * k,
                                           selection="refined-non-ascii", progress=False)
            md = tok.metadata
            v = {"seconds": round(time.perf_counter() - t1, 1), "covered_characters": md.get("covered_characters"),
                 "covered_beyond_cut": md.get("covered_beyond_cut"), "fallback_prefixes": md.get("fallback_prefixes"),
                 "raw_vocabulary": md.get("raw_vocabulary"), "vs_reference": _vocab_diff(tok, ref)}
            if not v["vs_reference"]["identical"]:
                v["eval"] = X.evaluate_sets(tok)
            r[name] = v
            print(f"[gen] counts check {size} {name}: {v['covered_characters']} covered, "
                  f"{v['fallback_prefixes']} prefixes, vs cnfmce.train {v['vs_reference']}", flush=True)
            del tok
        out[size] = r
    mine = json.loads(mine_p.read_text())
    mine["counts_check"] = out
    C.write_json(mine_p, mine)
    render(mine, C.RESULTS / f"{NAME}.md")


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
    C.experiment_main(NAME, __doc__, run, render, commands={
        "--worker": worker, "--import-trial": import_trial,
        "--counts-check": lambda *sizes: counts_check(list(sizes) or ["32k", "128k", "250k"])})
