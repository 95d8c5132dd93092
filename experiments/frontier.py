"""Issue 13: what the missed zh and multi targets would cost in ids, measured by moving ids between
scripts in the trained vocabularies (no training of the mix).

    python experiments/frontier.py          # docs/results/frontier.{json,md}
    python experiments/frontier.py --render

Starts from the vocabularies of ``experiments/generalisation.py`` (``experiments/out/gen/``:
*after* = ``selection="refined"``, *scripts* = ``selection="refined-scripts"``, shown with
*nonascii* = ``selection="refined-non-ascii"``, the rule these measurements led to) and builds, with
``cnfmce.Tokenizer.from_tokens``, vocabularies of the same size in which ``N`` ids change hands:

* *the letterless donor* (the idea of the previous session's closing note): the tokens of the
  small scripts (letters neither Latin nor none) that *scripts* has and *after* lacks are added to
  *after*, and as many tokens leave it: the least used letterless tokens (no letter; spaces,
  digits, punctuation, code runs) or the least used Latin tokens;
* *the zh frontier*: the ``N`` most used Han tokens (letters all CJK) of a vocabulary trained on
  the Chinese training text alone (``cnfmce.train(zh train, 80_000, selection="refined")``) that
  *after* lacks are added to *after*, and the ``N`` least used tokens of a donor class leave it.

"Least used" is the id order of the trained vocabulary (ids by the usage of its last pass, SPEC
section 4); added tokens get the last ids. It is a first-order measurement: the vocabulary is not
re-refined after the exchange (the trainer would re-measure usage and could do a little better).
Every vocabulary is evaluated, like the trained ones, on the in-domain and held-out-by-package sets
against the same-data byte-level BPE of the same size (``cnfx.hf_bpe``, cached).

*zh frontier, other base* (``python experiments/frontier.py --from TOKENIZER LABEL SIZE N,N,... [DONOR]``):
the same exchange on another trained vocabulary, e.g. thresholds.py's ``rounds`` with T = 20 in a
build with a changed constant, against generalisation.json's evaluation of the same BPE; the donor
*ASCII phrases* is the ASCII tokens with a space between two non-spaces (multi-word tokens of en,
sci, math and code).
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import languages as LG  # noqa: E402
import protocol as P  # noqa: E402

NAME = "frontier"
GEN = C.OUT / "gen"
OUT = C.OUT / "frontier"
ZH_VOCAB = 80_000
SIZES = ["32k", "128k", "250k"]
# ids given to Han tokens in the zh frontier, per size
HAN_STEPS = {"32k": [2_000, 4_000, 6_000], "128k": [7_000, 14_000, 21_000], "250k": [10_000, 20_000, 30_000]}
MIN_LANG_TRAIN_CHARS = 50_000
MIN_LANG_EVAL_CHARS = 20_000


def group(t: bytes) -> str:
    """``byte`` (one byte), ``bytes`` (not UTF-8), the script of the letters (``LATIN``, ``CJK``,
    ... as in ``languages.token_script``) or ``none`` (no letter, or letters of two scripts)."""
    if len(t) == 1:
        return "byte"
    try:
        s = t.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes"
    return LG.token_script(s) or "none"


def letterless(t: bytes) -> bool:
    """A multi-byte token with no letter at all (spaces, digits, punctuation, symbols)."""
    try:
        s = t.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return len(t) > 1 and not any(c.isalpha() for c in s)


DONORS: Dict[str, Callable[[bytes], bool]] = {
    "letterless": letterless,
    "Latin": lambda t: group(t) == "LATIN",
    "ASCII": lambda t: len(t) > 1 and t.isascii(),
    "all but Han": lambda t: group(t) not in ("byte", "bytes", "CJK"),
    "ASCII phrases": X.ascii_phrase,
}


def tokens_of(tok: Any) -> List[bytes]:
    tb = tok.token_bytes()
    return [tb[i] for i in sorted(tb)]


def exchange(vocab: List[bytes], add: Sequence[bytes], donor: Callable[[bytes], bool]) -> List[bytes]:
    """``vocab`` without its ``len(add)`` last (least used) tokens of the donor class, then ``add``."""
    n = len(add)
    idx = [i for i, t in enumerate(vocab) if donor(t)]
    if n > len(idx):
        raise ValueError(f"only {len(idx)} donor tokens for {n} ids")
    out = set(idx[len(idx) - n:]) if n else set()
    return [t for i, t in enumerate(vocab) if i not in out] + list(add)


def gains(ev: Dict[str, Any], bpe: Dict[str, Any]) -> Dict[str, Any]:
    g: Dict[str, Any] = {}
    for kind in ("indomain", "heldout"):
        g[kind] = {c: ev[kind][c]["cpt"] / bpe[kind][c]["cpt"] - 1 for c in C.CATEGORIES}
    return g


def langs_below(ev: Dict[str, Any], bpe: Dict[str, Any], train_chars: Dict[str, int]) -> Dict[str, List[str]]:
    """Languages of multi with more than MIN_LANG_TRAIN_CHARS training characters (and enough
    evaluation text) whose characters per token are below the BPE's."""
    out: Dict[str, List[str]] = {}
    for kind in ("indomain", "heldout"):
        out[kind] = []
        for lang, b in sorted(bpe[kind]["multi"]["langs"].items()):
            a = ev[kind]["multi"]["langs"].get(lang)
            if (train_chars.get(lang, 0) > MIN_LANG_TRAIN_CHARS and b["chars"] >= MIN_LANG_EVAL_CHARS and a
                    and a["cpt"] < b["cpt"]):
                out[kind].append(f"{lang} {a['cpt'] / b['cpt'] - 1:+.1%}")
    return out


def zh_vocab() -> List[bytes]:
    import cnfmce
    OUT.mkdir(parents=True, exist_ok=True)
    p = OUT / f"zh-{ZH_VOCAB // 1000}k-refined.cnfmce.json.gz"
    if not p.exists():
        print(f"[frontier] training the zh-only vocabulary ({ZH_VOCAB:,}) ...", flush=True)
        tok = cnfmce.train([str(x) for x in P.train_paths(["zh"])], vocab_size=ZH_VOCAB,
                           selection="refined", progress=False)
        tok.save(str(p))
    return tokens_of(cnfmce.Tokenizer.load(str(p)))


def zh_sources(toks: Dict[str, Any]) -> Dict[str, Any]:
    """Characters per token per source package of the zh evaluation sets, for every tokenizer."""
    out: Dict[str, Any] = {}
    for kind in ("indomain", "heldout"):
        docs = list(C.read_jsonl(P.eval_path("zh", kind)))
        per: Dict[str, Dict[str, Any]] = collections.OrderedDict()
        by_src: Dict[str, List[str]] = collections.defaultdict(list)
        for d in docs:
            by_src[d["source"]].append(d["text"])
        for src, texts in sorted(by_src.items(), key=lambda x: -sum(map(len, x[1]))):
            chars = sum(map(len, texts))
            per[src] = {"chars": chars, "cpt": {n: chars / sum(X.token_counts(t, texts)) for n, t in toks.items()}}
        out[kind] = per
    return out


def run(args: Any) -> Dict[str, Any]:
    import cnfmce
    res = C.run_header(NAME, False)
    t0 = time.perf_counter()
    res["load_before"] = os.getloadavg()
    train_chars = P.materialize()["stats"]["multi"]["train"]["lang_chars"]
    Z = zh_vocab()
    res["zh_vocab"] = {"vocab_size": ZH_VOCAB, "selection": "refined"}
    res["runs"] = {}
    sizes = os.environ.get("FRONTIER_SIZES", ",".join(SIZES)).split(",")
    for size in sizes:
        R = tokens_of(cnfmce.Tokenizer.load(str(GEN / f"mix-{size}-after.run.cnfmce.json.gz")))
        sp = GEN / f"mix-{size}-scripts.run.cnfmce.json.gz"
        S = tokens_of(cnfmce.Tokenizer.load(str(sp))) if sp.exists() else None
        bpe_tok = X.hf_bpe("mix", P.train_paths(), X.SIZES[size])
        bpe = X.evaluate_sets(bpe_tok)
        have = set(R)
        rows: List[Dict[str, Any]] = []

        def measure(label: str, kind: str, vocab: List[bytes], n: int, donor: Optional[str]) -> None:
            assert len(vocab) == len(R), (label, len(vocab), len(R))
            ev = X.evaluate_sets(cnfmce.Tokenizer.from_tokens(vocab))
            cnt = collections.Counter(group(t) if not letterless(t) else "letterless" for t in vocab)
            rows.append({"label": label, "kind": kind, "n": n, "donor": donor, "gain": gains(ev, bpe),
                         "below": langs_below(ev, bpe, train_chars),
                         "ids": {k: cnt.get(k, 0) for k in ("LATIN", "CJK", "letterless", "CYRILLIC", "GREEK", "HANGUL")}})
            g = rows[-1]["gain"]
            print(f"[frontier] {size} {label}: " + " ".join(f"{c} {g['indomain'][c]:+.1%}/{g['heldout'][c]:+.1%}"
                                                          for c in C.CATEGORIES), flush=True)

        measure("after", "trained", R, 0, None)
        np_ = GEN / f"mix-{size}-nonascii.run.cnfmce.json.gz"
        if np_.exists():  # the rule of src/refine.rs step 5, trained by generalisation.py
            measure("nonascii", "trained", tokens_of(cnfmce.Tokenizer.load(str(np_))), 0, None)
        if S is not None:
            measure("scripts", "trained", S, 0, None)
            small = [t for t in S if t not in have and group(t) not in ("LATIN", "none", "byte", "bytes")]
            han_s = [t for t in small if group(t) == "CJK"]
            for donor in ("letterless", "Latin"):
                measure(f"after + scripts' small-script tokens − {donor}", "letterless donor", exchange(R, small, DONORS[donor]),
                        len(small), donor)
            for donor in ("letterless", "Latin"):
                measure(f"after + scripts' Han tokens − {donor}", "letterless donor", exchange(R, han_s, DONORS[donor]),
                        len(han_s), donor)
        han = [t for t in Z if t not in have and group(t) == "CJK"]
        for n in HAN_STEPS[size]:
            for donor in ("Latin", "ASCII", "all but Han", "letterless"):
                if sum(map(DONORS[donor], R)) < n:
                    continue  # fewer donor tokens than ids to move
                measure(f"after + {n:,} Han − {donor}", "zh frontier", exchange(R, han[:n], DONORS[donor]), n, donor)
        res["runs"][size] = {"rows": rows, "bpe_cpt": {k: {c: bpe[k][c]["cpt"] for c in C.CATEGORIES} for k in bpe},
                             "zh_sources": zh_sources({"BPE": bpe_tok, "after": cnfmce.Tokenizer.from_tokens(R),
                                                       **({"scripts": cnfmce.Tokenizer.from_tokens(S)} if S else {})})}
    res["load_after"] = os.getloadavg()
    res["runtime_s"] = round(time.perf_counter() - t0, 1)
    return res


# --- page -------------------------------------------------------------------------------------

def render(res: Dict[str, Any], md: Path) -> None:
    L = [C.header_md(res, "The ids the zh and multi targets would cost: exchanges in the trained vocabularies"), ""]
    L += [C.doc_body(__doc__), "",
          C.load_line(res), ""]
    cols = [(k, c) for k in ("indomain", "heldout") for c in C.CATEGORIES]
    L += ["## Findings", ""]
    for size, r in res["runs"].items():
        base = next(x for x in r["rows"] if x["label"] == "after")["gain"]
        d = lambda x, k, c: C.pct(x["gain"][k][c] - base[k][c], sign=True)  # noqa: E731
        parts = []
        for x in r["rows"]:
            if x["kind"] == "letterless donor" and "small-script" in x["label"]:
                parts.append(f"from {x['donor']} tokens, code {d(x, 'indomain', 'code')} / {d(x, 'heldout', 'code')}, "
                             f"zh held-out {d(x, 'heldout', 'zh')}, multi {d(x, 'indomain', 'multi')} / {d(x, 'heldout', 'multi')}")
        if parts:
            L.append(f"* {size}, the {next(x['n'] for x in r['rows'] if 'small-script' in x['label']):,} small-script ids "
                     "of *scripts* given to *after* (points against *after*, in-domain / held-out): " + "; ".join(parts) + ".")
        hit = [x for x in r["rows"] if x["kind"] == "zh frontier" and x["gain"]["indomain"]["zh"] >= 0.10]
        if hit:
            n = min(x["n"] for x in hit)
            L.append(f"* {size}, zh in-domain reaches +10% with {n:,} more Han ids; then, by donor (points against "
                     "*after*, in-domain / held-out): " + "; ".join(
                         f"{x['donor']}: en {d(x, 'indomain', 'en')} / {d(x, 'heldout', 'en')}, code {d(x, 'indomain', 'code')}"
                         f" / {d(x, 'heldout', 'code')}, multi {d(x, 'indomain', 'multi')} / {d(x, 'heldout', 'multi')}"
                         for x in hit if x["n"] == n) + ".")
        else:
            top = max((x for x in r["rows"] if x["kind"] == "zh frontier"), key=lambda x: x["gain"]["indomain"]["zh"], default=None)
            if top:
                L.append(f"* {size}, zh in-domain stays below +10% up to {top['n']:,} more Han ids "
                         f"({C.pct(top['gain']['indomain']['zh'], sign=True)}).")
        for base in sorted({x["base"] for x in r["rows"] if x.get("base")}):
            b0 = next((x for x in r["rows"] if x.get("base") == base and x["n"] == 0), None)
            for donor in sorted({x["donor"] for x in r["rows"] if x.get("base") == base and x["donor"]}):
                xs = [x for x in r["rows"] if x.get("base") == base and x["donor"] == donor]
                hit = [x for x in xs if x["gain"]["indomain"]["zh"] >= 0.10]
                if not hit or b0 is None:
                    continue
                x = min(hit, key=lambda x: x["n"])
                g = x["gain"]
                below = ", ".join(x["below"]["indomain"] + [f"{y} held-out" for y in x["below"]["heldout"]]) or "none"
                L.append(f"* {size}, from *{base}* (zh {C.pct(b0['gain']['indomain']['zh'], sign=True)} in-domain): "
                         f"+10% with {x['n']:,} Han ids from {donor} tokens: zh {C.pct(g['indomain']['zh'], sign=True)} / "
                         f"{C.pct(g['heldout']['zh'], sign=True)}, en {C.pct(g['indomain']['en'], sign=True)} / "
                         f"{C.pct(g['heldout']['en'], sign=True)}, code {C.pct(g['indomain']['code'], sign=True)} / "
                         f"{C.pct(g['heldout']['code'], sign=True)}, multi {C.pct(g['indomain']['multi'], sign=True)} / "
                         f"{C.pct(g['heldout']['multi'], sign=True)}; multi languages below the BPE: {below}.")
    L.append("")
    hdr = ["vocabulary", "ids moved"] + [f"{'in' if k == 'indomain' else 'held'} {c}" for k, c in cols] + [
        "Latin / Han / letterless ids", "multi languages below the BPE (in-domain; held-out)"]
    for size, r in res["runs"].items():
        L += [f"## {size}", "",
              "Gain in characters per token over the same-data BPE of the same size (in = in-domain, held = "
              "held-out-by-package); ids by the letters of the tokens; multi languages with more than "
              f"{MIN_LANG_TRAIN_CHARS:,} training characters and {MIN_LANG_EVAL_CHARS:,} evaluation characters.", ""]
        for kind in ("trained", "letterless donor", "zh frontier", "zh frontier, other base"):
            rows = []
            for x in r["rows"]:
                if x["kind"] != kind and not (kind in ("letterless donor", "zh frontier") and x["label"] == "after"):
                    continue
                b = x["below"]
                rows.append([x["label"], f"{x['n']:,}"] + [C.pct(x["gain"][k][c], sign=True) for k, c in cols]
                            + [f"{x['ids']['LATIN']:,} / {x['ids']['CJK']:,} / {x['ids']['letterless']:,}",
                               (", ".join(b["indomain"]) or "none") + "; " + (", ".join(b["heldout"]) or "none")])
            if len(rows) > 1 or kind == "trained":
                L += [f"**{kind}**", "", C.md_table(hdr, rows), ""]
        zs = r["zh_sources"]
        names = list(next(iter(next(iter(zs.values())).values()))["cpt"])
        rows = []
        for kind, per in zs.items():
            for src, v in per.items():
                rows.append([P.KIND_LABEL[kind], src, f"{v['chars']:,}", C.f3(v["cpt"]["BPE"])]
                            + [C.pct(v["cpt"][n] / v["cpt"]["BPE"] - 1, sign=True) for n in names if n != "BPE"])
        L += ["zh evaluation text per source package (characters per token of the BPE, gain of CNF):", "",
              C.md_table(["evaluation", "source", "chars", "BPE CPT"] + [f"{n} gain" for n in names if n != "BPE"],
                         rows), ""]
    md.write_text("\n".join(L))


def from_base(path: str, label: str, size: str, steps: str, donor: str = "ASCII") -> None:
    """Adds to frontier.json's ``size`` run the zh frontier of another base vocabulary (a
    tokenizer file, e.g. one trained by thresholds.py in a build with a changed constant): its
    tokens plus the ``n`` most used Han tokens of the Chinese-only vocabulary it lacks, minus its
    ``n`` least used ``donor`` tokens, for every ``n`` of ``steps`` (``10000,20000``), and the base
    itself; evaluated against generalisation.json's evaluation of the same-data BPE of that size."""
    import cnfmce
    js = C.RESULTS / f"{NAME}.json"
    res = json.loads(js.read_text())
    train_chars = P.materialize()["stats"]["multi"]["train"]["lang_chars"]
    bpe = C.recorded_bpe_eval("mix", size)
    base_tok = cnfmce.Tokenizer.load(path)
    B = tokens_of(base_tok)
    Z = zh_vocab()
    have = set(B)
    han = [t for t in Z if t not in have and group(t) == "CJK"]
    # this base's earlier rows with the same donor (and the base itself) are replaced
    rows = [x for x in res["runs"][size]["rows"] if not (x.get("base") == label and x["donor"] in (donor, None))]
    core = base_tok.metadata.get("core") or ""

    def add(lab: str, vocab: List[bytes], n: int, d: Optional[str]) -> None:
        ev = X.evaluate_sets(cnfmce.Tokenizer.from_tokens(vocab))
        cnt = collections.Counter(group(t) if not letterless(t) else "letterless" for t in vocab)
        rows.append({"label": lab, "kind": "zh frontier, other base", "base": label, "n": n, "donor": d,
                     "gain": gains(ev, bpe), "below": langs_below(ev, bpe, train_chars),
                     "ids": {k: cnt.get(k, 0) for k in ("LATIN", "CJK", "letterless", "CYRILLIC", "GREEK", "HANGUL")}})
        g = rows[-1]["gain"]
        print(f"[frontier] {size} {lab}: " + " ".join(f"{c} {g['indomain'][c]:+.1%}/{g['heldout'][c]:+.1%}"
                                                      for c in C.CATEGORIES), rows[-1]["below"], flush=True)

    add(label, B, 0, None)
    for n in (int(x) for x in steps.split(",")):
        add(f"{label} + {n:,} Han − {donor}", exchange(B, han[:n], DONORS[donor]), n, donor)
    mine = [x for x in rows if x.get("base") == label]  # the base first, then by donor and ids moved
    rows = [x for x in rows if x.get("base") != label] + sorted(mine, key=lambda x: (x["donor"] or "", x["n"]))
    res["runs"][size]["rows"] = rows
    res.setdefault("other_bases", {})[label] = {"path": Path(path).name, "size": size, "core": core,
                                                "date": C.run_header(NAME, False)["date"]}
    C.write_json(js, res)


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render, commands={"--from": from_base})
