"""The defaults of ``cnfmce.train`` and the mapping of ``balance``, chosen on a validation split and
reported on a test split that no choice has looked at.

    python experiments/defaults.py split                      # make the four sets (cached)
    python experiments/defaults.py train mix 128k CONFIG...   # train (cached) and evaluate
    python experiments/defaults.py                            # the page from every run recorded
    python experiments/defaults.py --render                   # rewrite the page from the JSON

The split, by source package family (the unit of ``experiments/protocol.py``):

* ``val`` (validation): the families protocol.py holds out (``cnfmce-heldout-v1:``). Every earlier
  compression trial of docs/results/ was measured on them, so they are what chose settings
  before, and they stay the set that chooses them now;
* ``test``: families chosen by the same rule with another seed (``cnfmce-test-v1:``) among the
  others, every language of zh and multi keeping at least 40% of its training bytes (counting the
  validation families); no setting was measured on them before its choice was made;
* ``train``: the rest of the shared training files; ``indomain``: the rest of the shared test
  files (held-out documents of packages that are in training, the second view).

Every vocabulary is trained on ``train`` (all six categories: *mix*; or en alone), one training at
a time in its own process; gains are in characters per token over a byte-level BPE (HF
``tokenizers``, GPT-4 split) trained on the same text at the same size.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C  # noqa: E402
import protocol as P  # noqa: E402

NAME = "defaults"
OUT = C.OUT / "defaults"
TEST_SEED = "cnfmce-test-v1:"
TEST_KEEP_LANG = 0.4
KINDS = ("train", "indomain", "val", "test")
EVAL_KINDS = ("val", "test", "indomain")
KIND_LABEL = {"val": "validation", "test": "test", "indomain": "in-domain"}
SIZES = {"32k": 32_000, "128k": 128_000, "250k": 250_000}
CORPORA = {"mix": tuple(C.CATEGORIES), "en": ("en",)}
LANG_CATS = ("zh", "multi")
VERSION = 2


def rounds_t(t: int) -> List[List[int]]:
    return [[1, 12, 0], [13, 21, t], [22, 30, t]]


#: name -> keyword arguments of cnfmce.train ("t": the threshold of rounds 2 and 3; a config
#: without "t" and without "library" gets the paper's rounds, 80; "library": true passes only its
#: other keys, so the library's defaults decide the rest)
CONFIGS: Dict[str, Dict[str, Any]] = {
    "paper": {"selection": "paper"},
    "refined": {"selection": "refined"},
    "refined-t20": {"selection": "refined", "t": 20},
    **{f"na{e:g}-t20": {"selection": "refined-non-ascii", "non_ascii_exponent": e, "t": 20}
       for e in (0.0, 0.1, 0.25, 0.5, 0.75, 1.0)},
    "na0-t80": {"selection": "refined-non-ascii", "non_ascii_exponent": 0.0},
    "na1-t20-han0.15": {"selection": "refined-non-ascii", "non_ascii_exponent": 1.0, "t": 20,
                        "raw_han_exponent": 0.15},
    "na0.75-t20-han0.15": {"selection": "refined-non-ascii", "non_ascii_exponent": 0.75, "t": 20,
                           "raw_han_exponent": 0.15},
    # the library's settings: balance 0, the default, 1 (each the run of the grid configuration
    # it resolves to when there is one: resolved() and same_run())
    "balance0": {"library": True, "balance": 0.0},
    "default": {"library": True},
    "balance1": {"library": True, "balance": 1.0},
}


# --- the split ------------------------------------------------------------------------------------

def _params() -> Dict[str, Any]:
    return {"version": VERSION, "val": P._params(), "test_seed": TEST_SEED,
            "test_keep_lang": TEST_KEEP_LANG}


def split() -> Dict[str, Any]:
    """Writes the four sets per category under ``experiments/out/defaults/split/`` (once, cached
    with the parameters that made them) and returns their paths, families and statistics."""
    d0 = OUT / "split"
    d0.mkdir(parents=True, exist_ok=True)
    meta_p = d0 / "split.json"
    params = _params()
    meta = P.cached_sets(meta_p, params)
    if meta is not None:
        return meta
    sc = P.scan()
    val = P.choose(sc)
    test = P.choose(sc, seed=TEST_SEED, exclude=val["families"], keep_lang=TEST_KEEP_LANG)
    units = multi_test_units(sc, val["families"], test["families"])
    where = {s: "val" for s in val["sources"]}
    where.update({s: "test" for s in test["sources"]})
    paths, stats = P.write_sets(d0, KINDS, lambda cat, sp, doc: (
        where.get(doc["source"])
        or ("test" if cat == "multi" and (doc["source"], doc.get("lang") or "") in units else None)
        or ("train" if sp == "train" else "indomain")))
    meta = {"params": params, "val_families": val["families"], "test_families": test["families"],
            "multi_test_units": sorted(f"{a} ({b})" for a, b in units),
            "val_sources": val["sources"], "test_sources": test["sources"], "paths": paths,
            "stats": stats}
    tmp = meta_p.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    tmp.replace(meta_p)
    return meta


def multi_test_units(sc: Dict[str, Any], val_families: Sequence[str],
                     test_families: Sequence[str]) -> set:
    """The (source, language) units of multi's test set. Every multi family not held out for
    validation spans languages it dominates (LibreOffice's help is 60% of multi; Debian's
    reference and handbook and Apache's manual are most of the training text of id, tr, ar, fa,
    nb), so holding a whole family out takes a language out of training: multi's test set holds
    out *one language of a family* at a time instead (all its documents, train and test files), in
    ``sha256(TEST_SEED + family/lang)`` order, while multi's test share stays at most 12% and the
    language keeps at least 40% of its training bytes (counting validation). The family's other
    languages stay in training: translations of the same manuals, so commands, paths and names
    are shared with the test text (disclosed on the page)."""
    import hashlib
    codes = P.language_codes(sc)
    total = 0
    lang_train: Counter = Counter()
    unit_bytes: Counter = Counter()
    unit_train: Counter = Counter()
    unit_sources: Dict[Tuple[str, str], set] = {}
    held_lang: Counter = Counter()
    for src, cat, sp, lang, _d, _c, nb in sc["rows"]:
        if cat != "multi":
            continue
        total += nb
        f = P.family(src, codes)
        if sp == "train":
            lang_train[lang] += nb
            if f in val_families:
                held_lang[lang] += nb
        if f in val_families or f in test_families:
            continue
        u = (f, lang)
        unit_bytes[u] += nb
        unit_sources.setdefault(u, set()).add(src)
        if sp == "train":
            unit_train[u] += nb
    held = sum(nb for src, cat, _s, _l, _d, _c, nb in sc["rows"]
               if cat == "multi" and P.family(src, codes) in test_families)
    chosen = set()
    for u in sorted(unit_bytes, key=lambda u: hashlib.sha256((TEST_SEED + u[0] + "/" + u[1]).encode()).hexdigest()):
        f, lang = u
        if held + unit_bytes[u] > P.CAP * total:
            continue
        if held_lang[lang] + unit_train[u] > (1 - TEST_KEEP_LANG) * lang_train[lang]:
            continue
        held += unit_bytes[u]
        held_lang[lang] += unit_train[u]
        chosen.update((s, lang) for s in unit_sources[u])
    return chosen


def train_paths(corpus: str) -> List[Path]:
    m = split()
    return [Path(m["paths"][c]["train"]) for c in CORPORA[corpus]]


# --- training -------------------------------------------------------------------------------------

def train_kwargs(config: str) -> Dict[str, Any]:
    """The keyword arguments ``cnfmce.train`` gets for ``config``."""
    spec = dict(CONFIGS[config])
    if spec.pop("library", False):
        return spec
    t = spec.pop("t", None)
    spec["rounds"] = rounds_t(80 if t is None else t)
    return spec


def worker(corpus: str, size: str, config: str, out: str) -> None:
    import cnfmce
    paths = [str(p) for p in train_paths(corpus)]
    kw = train_kwargs(config)
    C.train_worker(out, lambda: cnfmce.train(paths, vocab_size=SIZES[size], progress=False, **kw))
    # what the library decided (rounds, exponents) for this run
    tok = cnfmce.Tokenizer.load(out + ".cnfmce.json.gz")
    info = json.loads(Path(out + ".json").read_text())
    md = tok.metadata
    info["rounds"] = md.get("counting", {}).get("rounds")
    info["non_ascii_exponent"] = md.get("non_ascii_exponent")
    info["raw_han_exponent"] = md.get("raw_han_exponent", 0.0)
    info["balance"] = md.get("balance")
    Path(out + ".json").write_text(json.dumps(info))


def resolved(corpus: str, size: str, config: str) -> Tuple[Any, ...]:
    """The settings ``cnfmce.train`` runs ``config`` with on ``corpus`` at ``size``: selection,
    exponents and rounds, the scaled threshold substituted (``TrainConfig.later_threshold``)."""
    from cnfmce.config import TrainConfig
    cfg = TrainConfig(vocab_size=SIZES[size], **train_kwargs(config))
    stats = split()["stats"]
    t = cfg.later_threshold(sum(stats[c]["train"]["bytes"] for c in CORPORA[corpus]))
    rounds = tuple((lo, hi, th if (i == 0 or t is None) else t)
                   for i, (lo, hi, th) in enumerate(cfg.rounds))
    return (cfg.selection, round(cfg.non_ascii_exponent or 0.0, 9), round(cfg.raw_han_exponent, 9),
            rounds, cfg.raw_vocab_size)


def same_run(corpus: str, size: str, config: str) -> Optional[str]:
    """The grid configuration whose settings ``config`` (a library one) resolves to, if any: the
    same settings train the same vocabulary (training is deterministic; tests/test_defaults.py
    checks that the defaults train what their resolved settings train), so its run stands for
    ``config``'s."""
    if not CONFIGS[config].get("library"):
        return None
    mine = resolved(corpus, size, config)
    for name, spec in CONFIGS.items():
        if not spec.get("library") and resolved(corpus, size, name) == mine:
            return name
    return None


def _core_key() -> str:
    import cnfmce
    return cnfmce.__version__


def trained(corpus: str, size: str, config: str) -> Tuple[Path, Dict[str, Any]]:
    """(the tokenizer file, the training record) of ``config``, trained when not cached."""
    base = OUT / "runs" / f"{corpus}-{size}-{config}"
    base.parent.mkdir(parents=True, exist_ok=True)
    params = {"corpus": corpus, "size": size, "config": CONFIGS[config], "split": _params()}
    tok_p = Path(str(base) + ".run.cnfmce.json.gz")
    rec = C.cached_training(base, params)
    if rec is None or not tok_p.exists():
        print(f"[defaults] training {corpus} {size} {config} ...", flush=True)
        rec = C.run_training(__file__, [corpus, size, config], base, params,
                             f"{corpus} {size} {config}")
    return tok_p, rec


def bpe(corpus: str, size: str):
    return C.cached_hf_bpe("defaults", f"bpe-{corpus}-{size}", train_paths(corpus), SIZES[size])


# --- evaluation -----------------------------------------------------------------------------------

def eval_sets(corpus: str) -> Dict[str, Dict[str, List[Tuple[str, str]]]]:
    """kind -> category -> [(text, lang)]"""
    m = split()
    return {k: {c: [(d["text"], d.get("lang") or "") for d in C.read_jsonl(Path(m["paths"][c][k]))]
                for c in CORPORA[corpus]} for k in EVAL_KINDS}


def measure(count_tokens, sets) -> Dict[str, Any]:
    """kind -> {"cats": {cat: [chars, tokens]}, "langs": {cat/lang: [chars, tokens]}}"""
    out: Dict[str, Any] = {}
    for kind, cats in sets.items():
        rk: Dict[str, Any] = {"cats": {}, "langs": {}}
        for cat, docs in cats.items():
            n = count_tokens([t for t, _ in docs])
            rk["cats"][cat] = [sum(len(t) for t, _ in docs), int(sum(n))]
            if cat in LANG_CATS:
                by: Dict[str, List[int]] = {}
                for (t, lang), k in zip(docs, n):
                    a = by.setdefault(f"{cat}/{lang}", [0, 0])
                    a[0] += len(t)
                    a[1] += int(k)
                rk["langs"].update(by)
        out[kind] = rk
    return out


def evaluated(name: str, key: Any, count_tokens_factory, corpus: str) -> Dict[str, Any]:
    p = OUT / "eval" / f"{name}.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        rec = json.loads(p.read_text())
        if rec.get("key") == key:
            return rec["eval"]
    except (OSError, ValueError):
        pass
    print(f"[defaults] evaluating {name} ...", flush=True)
    ev = measure(count_tokens_factory(), eval_sets(corpus))
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "eval": ev}))
    tmp.replace(p)
    return ev


def eval_cnf(corpus: str, size: str, config: str) -> Dict[str, Any]:
    import cnfmce
    tok_p, rec = trained(corpus, size, config)

    def factory():
        tok = cnfmce.Tokenizer.load(str(tok_p))
        return lambda texts: [len(x) for x in tok.encode_batch(texts)]
    return evaluated(f"{corpus}-{size}-{config}", [rec["params"], tok_p.stat().st_size], factory, corpus)


def eval_bpe(corpus: str, size: str) -> Dict[str, Any]:
    def factory():
        tok = bpe(corpus, size)
        return lambda texts: [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]
    key = json.loads((OUT / f"bpe-{corpus}-{size}.params.json").read_text())["params"] \
        if (OUT / f"bpe-{corpus}-{size}.params.json").exists() else None
    if key is None:
        bpe(corpus, size)
        key = json.loads((OUT / f"bpe-{corpus}-{size}.params.json").read_text())["params"]
    return evaluated(f"bpe-{corpus}-{size}", key, factory, corpus)


def train_cmd(corpus: str, size: str, *configs: str) -> None:
    """Trains (cached) and evaluates ``configs`` and the same-data BPE at ``size``."""
    if corpus not in CORPORA or size not in SIZES:
        raise SystemExit(f"corpus must be one of {sorted(CORPORA)}, size one of {sorted(SIZES)}")
    eval_bpe(corpus, size)
    for c in configs:
        if c not in CONFIGS:
            raise SystemExit(f"unknown config {c!r}; known: {', '.join(CONFIGS)}")
        same = same_run(corpus, size, c)
        if same is not None:
            print(f"{corpus} {size} {c}: the settings of {same}", flush=True)
            c = same
        eval_cnf(corpus, size, c)
        print(summary_line(corpus, size, c), flush=True)


def gains(ev: Dict[str, Any], base: Dict[str, Any], kind: str, part: str = "cats") -> Dict[str, float]:
    out = {}
    for k, (ch, n) in ev[kind][part].items():
        bch, bn = base[kind][part].get(k, (0, 0))
        if n and bn:
            out[k] = round(100 * ((ch / n) / (bch / bn) - 1), 2)
    return out


def summary_line(corpus: str, size: str, config: str) -> str:
    ev = eval_cnf(corpus, size, config)
    b = eval_bpe(corpus, size)
    parts = []
    for kind in ("val", "test"):
        g = gains(ev, b, kind)
        parts.append(kind + " " + " ".join(f"{c} {v:+.1f}" for c, v in g.items()))
    return f"{corpus} {size} {config}: " + " | ".join(parts)


# --- page -----------------------------------------------------------------------------------------

def run(args: Any) -> Dict[str, Any]:
    t0 = time.perf_counter()
    res = C.run_header(NAME, False)
    m = split()
    res.update(split={k: m[k] for k in ("val_families", "test_families", "stats")},
               params=_params())
    runs: Dict[str, Any] = {}
    for rec_p in sorted((OUT / "runs").glob("*.json")):
        if rec_p.name.endswith(".run.json"):
            continue
        rec = json.loads(rec_p.read_text())
        pr = rec.get("params", {})
        corpus, size = pr.get("corpus"), pr.get("size")
        config = rec_p.name[len(f"{corpus}-{size}-"):-len(".json")]
        if config not in CONFIGS or CONFIGS[config] != pr.get("config"):
            continue
        ev = eval_cnf(corpus, size, config)
        b = eval_bpe(corpus, size)
        runs.setdefault(f"{corpus}-{size}", {"bpe": b, "configs": {}})["configs"][config] = {
            "eval": ev, "train": {k: rec.get(k) for k in (
                "seconds", "counting_s", "filtering_s", "refining_s", "peak_rss", "cpu_s",
                "raw_vocabulary", "rounds", "non_ascii_exponent", "raw_han_exponent", "balance",
                "selection", "load_before", "load_after")}}
    for run_key, r in runs.items():
        corpus, size = run_key.split("-", 1)
        for name in LIBRARY:
            same = same_run(corpus, size, name)
            if name not in r["configs"] and same in r["configs"]:
                r["configs"][name] = dict(r["configs"][same], same_as=same)
    res["runs"] = runs
    res["resolved"] = {f"{k}/{name}": list(resolved(*k.split("-", 1), name)) for k in runs for name in LIBRARY}
    import cnfmce
    train_bytes = sum(m["stats"][c]["train"]["bytes"] for c in C.CATEGORIES)
    res["library"] = {"default_balance": cnfmce._core.DEFAULT_BALANCE,
                      "anchors": [list(a) for a in cnfmce._core.BALANCE_ANCHORS],
                      "train_bytes": train_bytes,
                      "threshold_of_train": cnfmce._core.scaled_threshold(train_bytes)}
    res["split"]["multi_test_units"] = m.get("multi_test_units", [])
    notes = OUT / "notes.md"
    res["notes"] = notes.read_text().splitlines() if notes.exists() else []
    res["runtime_s"] = round(time.perf_counter() - t0, 1)
    return res


#: the configurations of the page's tables: the library's three settings, then the references
LIBRARY = ("balance0", "default", "balance1")
REFERENCES = ("refined", "paper")
LABEL = {"balance0": "`balance=0`", "default": "default", "balance1": "`balance=1`",
         "refined": '`selection="refined"`', "paper": '`selection="paper"` (the paper\'s rounds)'}
MIN_LANG_CHARS = 50_000  # a language of multi counts for the targets above this many training chars


def _gain(ev: Dict[str, Any], base: Dict[str, Any], kind: str, key: str, part: str = "cats") -> Optional[float]:
    a, b = ev[kind][part].get(key), base[kind][part].get(key)
    if not a or not b or not a[1] or not b[1]:
        return None
    return (a[0] / a[1]) / (b[0] / b[1]) - 1


def _g(x: Optional[float]) -> str:
    return C.pct(x, 1, sign=True)


def _below(ev, base, kind, lang_train) -> str:
    out = []
    for key in sorted(ev[kind]["langs"]):
        if not key.startswith("multi/") or lang_train.get(key.split("/", 1)[1], 0) <= MIN_LANG_CHARS:
            continue
        g = _gain(ev, base, kind, key, "langs")
        if g is not None and g < 0:
            out.append(f"{key.split('/', 1)[1]} {_g(g)}")
    return ", ".join(out) or "none"


def _config_text(name: str) -> str:
    spec = CONFIGS[name]
    if spec.get("library"):
        rest = {k: v for k, v in spec.items() if k != "library"}
        return "`cnfmce.train(paths, vocab_size=k" + "".join(f", {k}={v}" for k, v in rest.items()) + ")`"
    parts = [f'selection="{spec["selection"]}"']
    if "non_ascii_exponent" in spec:
        parts.append(f"non_ascii_exponent={spec['non_ascii_exponent']:g}")
    if spec.get("raw_han_exponent"):
        parts.append(f"raw_han_exponent={spec['raw_han_exponent']:g}")
    parts.append(f"T={spec.get('t', 80)}")
    return ", ".join(parts)


ASCII_CATS = ("en", "sci", "math", "code")


def _targets(res: Dict[str, Any]) -> List[str]:
    """The targets the defaults were asked to meet, against the test split."""
    runs = res["runs"]
    lang_train = res["split"]["stats"]["multi"]["train"]["lang_chars"]
    rows: List[List[str]] = []

    kind = "test"

    def g(run_key: str, name: str, cat: str) -> Optional[float]:
        r = runs.get(run_key)
        if not r or name not in r["configs"]:
            return None
        return _gain(r["configs"][name]["eval"], r["bpe"], kind, cat)

    def row(what: str, got: str, ok: Optional[bool]) -> None:
        if kind == "test":
            rows.append([what, got, "n/a" if ok is None else ("met" if ok else "missed")])
        else:
            rows[len(val_rows)].insert(2, got)
            val_rows.append(ok)

    val_rows: List[Optional[bool]] = []

    def fill() -> None:
        nonlocal kind
        for size, floor in (("128k", 0.36), ("250k", 0.42)):
            k = f"mix-{size}"
            worst = [(c, (g(k, "default", c) or 0) - (g(k, "refined", c) or 0)) for c in C.CATEGORIES
                     if g(k, "default", c) is not None and g(k, "refined", c) is not None]
            if worst:
                c, d = min(worst, key=lambda x: x[1])
                row(f"{size} default: no category more than 0.3 points below `selection=\"refined\"`",
                    f"lowest difference {100 * d:+.1f} points ({c})", d >= -0.003)
            vals = [(c, g(k, "default", c)) for c in ASCII_CATS]
            if all(v is not None for _, v in vals):
                c, v = min(vals, key=lambda x: x[1])
                row(f"{size} default: en, sci, math, code at least +{100 * floor:.0f}%", f"lowest {_g(v)} ({c})",
                    v >= floor)
        for size, zh, multi, floor in (("128k", 0.12, 0.075, 0.35), ("250k", 0.15, 0.085, 0.40)):
            k = f"mix-{size}"
            for cat, want in (("zh", zh), ("multi", multi)):
                v = g(k, "balance1", cat)
                if v is not None:
                    row(f"{size} `balance=1`: {cat} at least +{100 * want:.1f}%", _g(v), v >= want)
            vals = [(c, g(k, "balance1", c)) for c in ASCII_CATS]
            if all(v is not None for _, v in vals):
                c, v = min(vals, key=lambda x: x[1])
                row(f"{size} `balance=1`: en, sci, math, code at least +{100 * floor:.0f}%", f"lowest {_g(v)} ({c})",
                    v >= floor)
            r = runs.get(k)
            if r and "balance1" in r["configs"]:
                below = _below(r["configs"]["balance1"]["eval"], r["bpe"], kind, lang_train)
                row(f"{size} `balance=1`: no language of multi with more than {MIN_LANG_CHARS:,} training "
                    "characters below the BPE", below, below == "none")
        v = g("en-32k", "default", "en")
        if v is not None:
            row("32k on en alone: default at least +22%", _g(v), v >= 0.22)
        for size in ("32k", "128k", "250k"):
            r = runs.get(f"mix-{size}")
            if r and "default" in r["configs"] and "paper" in r["configs"]:
                a = r["configs"]["default"]["train"].get("seconds")
                b = r["configs"]["paper"]["train"].get("seconds")
                if a and b:
                    row(f"{size}: training time of the default at most 1.2x the paper's run (the previous "
                        "default)", f"{a / b:.2f}x ({C.f1(a)} s / {C.f1(b)} s)", a / b <= 1.2)

    fill()
    kind = "val"
    fill()

    if not rows:
        return []
    return ["\n## Targets, on the test split\n",
            "The targets were written against other held-out sets and vocabularies trained on all the "
            "training text; *met* judges the test split (the validation value beside it, for scale).\n",
            C.md_table(["target", "test", "validation", ""], rows)]


def render(res: Dict[str, Any], md: Path) -> None:
    out = [C.header_md(res, "Defaults and `balance`: chosen on validation, reported on test")]
    out.append(C.doc_body(__doc__))
    st = res["split"]["stats"]
    out.append("\n## The split\n")
    rows = []
    for cat in C.CATEGORIES:
        rows.append([cat] + [f"{st[cat][k]['docs']:,} / {C.mb(st[cat][k]['bytes'])}" for k in KINDS])
    out.append(C.md_table(["category", "train (docs / text)", "in-domain", "validation", "test"], rows))
    out.append(f"\nValidation: {len(res['split']['val_families'])} package families (protocol.py's "
               f"held-out set); test: {len(res['split']['test_families'])} families by the same rule "
               f"(seed `{TEST_SEED}`) and, for multi, {len(res['split'].get('multi_test_units', []))} "
               "single languages of a family (`multi_test_units` in the JSON). Training text: "
               f"{C.mb(sum(st[c]['train']['bytes'] for c in C.CATEGORIES))}.")
    lang_train = {k: v for k, v in st["multi"]["train"]["lang_chars"].items()}
    lib = res.get("library", {})
    if lib:
        out.append("\n## The library's settings\n")
        out.append(f"`cnfmce._core.DEFAULT_BALANCE` = {lib['default_balance']:g}; "
                   "`cnfmce._core.BALANCE_ANCHORS` (vocab_size, non-ASCII exponent, raw Han exponent at "
                   "balance 1) = " + ", ".join(f"({k:,}, {e:g}, {h:g})" for k, e, h in lib["anchors"])
                   + f"; the rounds after the first get `scaled_threshold` of the corpus: "
                   f"{lib['threshold_of_train']} for these {C.mb(lib['train_bytes'])} of training text.")
    for kind, title in (("val", "Validation (chooses)"), ("test", "Test (reports)"),
                        ("indomain", "In-domain (second view)")):
        out.append(f"\n## {title}\n")
        if kind == "val":
            out.append("Every configuration trained, gain in characters per token over the same-data BPE "
                       "on the validation split; *multi below* lists the languages of multi with more "
                       f"than {MIN_LANG_CHARS:,} training characters whose gain is negative.\n")
        for run_key in sorted(res["runs"], key=lambda k: (k.split("-")[0] != "mix", SIZES.get(k.split("-")[1], 0))):
            r = res["runs"][run_key]
            corpus = run_key.split("-")[0]
            cats = CORPORA[corpus]
            names = [c for c in CONFIGS if c in r["configs"] and not r["configs"][c].get("same_as")] \
                if kind == "val" else \
                [c for c in LIBRARY + REFERENCES if c in r["configs"]]
            if not names:
                continue
            out.append(f"\n### {corpus}, {run_key.split('-')[1]}\n")
            rows = []
            for name in names:
                ev = r["configs"][name]["eval"]
                label = LABEL.get(name, _config_text(name))
                if r["configs"][name].get("same_as"):
                    label += f" (= {_config_text(r['configs'][name]['same_as'])})"
                gs = [_gain(ev, r["bpe"], kind, c) for c in cats]
                row = [label] + [_g(g) for g in gs]
                if corpus == "mix":
                    row.append(_g(sum(gs) / len(gs)) if None not in gs else "")
                    row.append(_below(ev, r["bpe"], kind, lang_train))
                if kind != "indomain":
                    tr = r["configs"][name]["train"]
                    row.append(C.f1(tr.get("seconds")))
                rows.append(row)
            hdr = ["configuration"] + list(cats) + (["mean", "multi below"] if corpus == "mix" else []) \
                + (["train s"] if kind != "indomain" else [])
            out.append(C.md_table(hdr, rows))
    per_lang = [(k, r) for k, r in res["runs"].items() if k.startswith("mix-")
                and any(c in r["configs"] for c in LIBRARY)]
    if per_lang:
        out.append("\n## Languages of multi, test split\n")
        for run_key, r in per_lang:
            names = [c for c in LIBRARY if c in r["configs"]]
            langs = sorted({k for c in names for k in r["configs"][c]["eval"]["test"]["langs"]
                            if k.startswith("multi/")})
            rows = []
            for key in langs:
                lang = key.split("/", 1)[1]
                ch = r["bpe"]["test"]["langs"].get(key, [0, 0])[0]
                rows.append([lang, f"{lang_train.get(lang, 0):,}", f"{ch:,}"]
                            + [_g(_gain(r["configs"][c]["eval"], r["bpe"], "test", key, "langs")) for c in names])
            out.append(f"\n### {run_key.split('-')[1]}\n")
            out.append(C.md_table(["language", "train chars", "test chars"] + [LABEL[c] for c in names], rows))
    out.extend(_targets(res))
    if res.get("notes"):
        out.append("\n## Notes\n")
        out.extend(res["notes"])
    md.write_text("\n".join(out) + "\n", encoding="utf-8")


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render,
                      commands={"split": lambda: print(json.dumps(
                          {k: v for k, v in split().items() if k != "paths"}, indent=1)[:4000]),
                          "train": train_cmd, "--worker": worker})
