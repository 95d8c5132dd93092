"""Issue 13: screening rules for which counted candidates make the raw vocabulary (the top m).

    python experiments/raw_rule.py --sizes 32k --rules base,na0.5     # prints gains, caches results
    python experiments/raw_rule.py --render                           # docs/results/raw_rule.{md,json}

The mix's counts (``experiments/out/cnfx/mix/raw.npz``: the top 10,000,000 candidates of
``cnfmce.count`` with the paper's rounds) are re-ranked by a rule, the first m = 10 x vocab_size
become the raw vocabulary (with their true counts), and ``cnfmce.train_from_counts`` filters it with
``selection`` on the protocol's training mix; evaluated in-domain and held-out-by-package against
the same-data BPE of the same size. Rules:

* ``base``: count descending (the product; reproduces ``cnfmce.train``);
* ``nohannl`` / ``nohanctx``: candidates with a Han character and a newline (``nohannl``) or any
  character that is not a letter or mark (``nohanctx``) are left out (a Han-specific candidate rule);
* ``naA``: candidates with a non-ASCII byte rank by count x (ASCII count mass / non-ASCII count
  mass) ^ A, the masses summed over the 10M counted candidates (the raw vocabulary's equivalent of
  ``selection="refined-non-ascii"``); ``hanA``: the same weight for the candidates with a Han
  character only; ``naA-phB``: the same, with the multi-word ASCII candidates
  (a space between two non-spaces) ranked by count x B; ``RULE-mN``: the rule with a raw vocabulary
  of N x vocab_size candidates (default 10).

``--t T`` counts with ``rounds=((1, 12, 0), (13, 21, T), (22, 30, T))`` (cached separately); a cache
that keeps the exact count of every counted character gives them to ``train_from_counts``, so that
``base`` is ``cnfmce.train`` token for token (the refined selections rank every character).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import protocol as P  # noqa: E402

OUT = X.OUT / "mix" / "raw_rule"
SELECTIONS = {"nonascii": "refined-non-ascii", "refined": "refined", "paper": "paper"}


def non_ascii_mask(raw: X.Raw) -> np.ndarray:
    return np.fromiter((not t.isascii() for t in raw.tokens), dtype=bool, count=len(raw.tokens))


def raw_vocab(raw: X.Raw, na: np.ndarray, rule: str, m: int, covered_cap: int) -> Dict[bytes, int]:
    counts = raw.counts.astype(np.float64)
    if rule == "base":
        score = counts
    elif rule.startswith("na"):
        # naA, or naA-phB: the multi-word ASCII candidates (a space between two non-spaces) also
        # rank by count x B (B < 1 leaves their places to the others)
        a, _, b = rule[2:].partition("-ph")
        ratio = counts[~na].sum() / counts[na].sum()
        score = counts * np.where(na, ratio ** float(a), 1.0)
        if b:
            ph = np.fromiter((X.ascii_phrase(t) for t in raw.tokens), dtype=bool, count=len(raw.tokens))
            score = score * np.where(ph, float(b), 1.0)
    elif rule.startswith("han"):
        # hanA: only the candidates with a Han character rank by count x (ASCII count mass /
        # non-ASCII count mass) ^ A (the other non-ASCII candidates by their count)
        a = float(rule[3:])
        ratio = counts[~na].sum() / counts[na].sum()
        han = np.fromiter((_has_han(t) for t in raw.tokens), dtype=bool, count=len(raw.tokens))
        score = counts * np.where(han, ratio ** a, 1.0)
    elif rule in ("nohannl", "nohanctx"):
        # a Han-specific candidate rule: drop candidates with a Han character and a newline
        # (nohannl) or with a Han character and any space, newline or punctuation (nohanctx)
        drop = np.fromiter((_han_context(t, rule == "nohanctx") for t in raw.tokens), dtype=bool, count=len(raw.tokens))
        score = np.where(drop, -1.0, counts)
    else:
        raise ValueError(rule)
    order = np.lexsort((np.arange(len(score)), -score))[:m]  # ties: counting rank (count, bytes)
    order.sort()
    out = {raw.tokens[i]: int(raw.counts[i]) for i in order.tolist()}
    # cnfmce.train's character coverage ranks every counted character, also those below the cut;
    # train_from_counts ranks the characters of the counts it is given: so give it the best
    # covered_cap characters (the cap binds at 32k and 128k on this mix), as training would add them
    added = 0
    for i, t in enumerate(raw.tokens):
        if added >= covered_cap:
            break
        if 1 < len(t) <= 4 and _one_char(t):
            added += 1
            out.setdefault(t, int(raw.counts[i]))
    return out


def _has_han(t: bytes) -> bool:
    if t.isascii():
        return False
    return any("\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" for c in t.decode("utf-8", "ignore"))


def _han_context(t: bytes, any_context: bool) -> bool:
    if len(t) < 4 or not _has_han(t):
        return False
    try:
        s = t.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if any_context:
        return any(not (c.isalpha() or unicodedata.category(c)[0] == "M") for c in s)
    return "\n" in s


def _one_char(t: bytes) -> bool:
    try:
        return len(t.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


GAIN_CATS = ("en", "sci", "math", "code", "zh", "multi")


def ids_of(path: Path) -> Dict[str, int]:
    """Multi-byte non-ASCII ids and Han ids (every letter Han) of a trained vocabulary."""
    import cnfmce
    import languages as LG
    toks = list(cnfmce.Tokenizer.load(str(path)).token_bytes().values())
    han = 0
    for t in toks:
        try:
            han += LG.token_script(t.decode("utf-8")) == "CJK"
        except UnicodeDecodeError:
            pass
    return {"non_ascii": sum(1 for t in toks if len(t) > 1 and not t.isascii()), "han": han}


def render() -> None:
    """docs/results/raw_rule.{json,md} from every cached result (base first, then by rule)."""
    rows = []
    for p in sorted(OUT.glob("*.json")):
        r = json.loads(p.read_text())
        bpe_ev = bpe_eval(r["size"])
        g = {kd: {c: r["eval"][kd][c]["cpt"] / bpe_ev[kd][c]["cpt"] - 1 for c in GAIN_CATS} for kd in r["eval"]}
        below = []
        for kd in r["eval"]:
            for lang, b in sorted(bpe_ev[kd]["multi"]["langs"].items()):
                a = r["eval"][kd]["multi"]["langs"].get(lang)
                if a and b["chars"] >= 20_000 and a["cpt"] < b["cpt"]:
                    below.append(f"{lang} {'in' if kd == 'indomain' else 'held'} {a['cpt'] / b['cpt'] - 1:+.1%}")
        rows.append({k: r[k] for k in ("rule", "size", "selection", "raw_non_ascii", "m", "seconds", "cpu_s", "load")}
                    | {"t": r.get("t"), "build": r.get("build"), "core": r.get("core"),
                       "gain": g, "below": below, "ids": ids_of(p.with_suffix(".cnfmce.json.gz"))})
    # rows of an earlier render whose cached results are not on this machine are kept
    js, md, _ = C.result_paths("raw_rule", False)
    key = lambda x: (x["size"], x["selection"], x["rule"], x.get("t"), x.get("build"))  # noqa: E731
    try:
        have = {key(x) for x in rows}
        rows += [x for x in json.loads(js.read_text())["rows"] if key(x) not in have]
    except (OSError, ValueError, KeyError):
        pass
    size_order = {s: i for i, s in enumerate(X.SIZES)}
    rows.sort(key=lambda x: (size_order[x["size"]], x.get("t") or 80, x.get("build") or "", x["selection"],
                             x["rule"] != "base", x["rule"]))
    res = C.run_header("raw_rule", False)
    res["command"] = ("python experiments/raw_rule.py --sizes 32k,128k --rules base,na0.1,na0.25,na0.5,nohannl,nohanctx "
                      "(and --selection refined); at 250k, in a build with NON_ASCII_SHARE_EXPONENT = 1.0: "
                      "--sizes 250k --t 20 --rules base,na0.1,na0.15,na0.25,na0.5,na0.15-ph0.5,na0.12-ph0.25,na0.15-m13,na0.12-m13")
    res["runtime_s"] = sum(x["seconds"] for x in rows)
    res["rows"] = rows
    C.write_json(js, res)
    L = [C.header_md(res, "Which counted candidates make the raw vocabulary: non-ASCII weighting and a Han rule (screened)"), "",
         C.doc_body(__doc__), "",
         "Gain in characters per token over the same-data byte-level BPE of the same size (in = in-domain, held = "
         "held-out-by-package); *points* = the change against `base` with the same selection; training = "
         "`train_from_counts` wall / CPU seconds (filtering and refining only: counting is shared) and the 1-minute load "
         "before/after.", ""]
    bkey = lambda x: (x["size"], x["selection"], x.get("t"), x.get("build"))  # noqa: E731
    base = {bkey(x): x for x in rows if x["rule"] == "base"}
    hdr = ["size", "T", "build", "selection", "rule", "raw non-ASCII", "non-ASCII / Han ids"] + [f"{'in' if kd == 'indomain' else 'held'} {c}"
                                                          for kd in ("indomain", "heldout") for c in GAIN_CATS] + [
        "multi languages below the BPE", "training s (cpu)", "load"]
    out = []
    for x in rows:
        b = base.get(bkey(x))
        cells = []
        for kd in ("indomain", "heldout"):
            for c in GAIN_CATS:
                v = C.pct(x["gain"][kd][c], sign=True)
                if b is not None and b is not x:
                    v += f" ({100 * (x['gain'][kd][c] - b['gain'][kd][c]):+.1f})"
                cells.append(v)
        out.append([x["size"], x.get("t") or 80, x.get("build") or "this repository", f"`{x['selection']}`",
                    f"`{x['rule']}`", f"{x['raw_non_ascii']:,}",
                    f"{x['ids']['non_ascii']:,} / {x['ids']['han']:,}"] + cells
                   + [", ".join(x["below"]) or "none", f"{x['seconds']:.0f} ({x['cpu_s']:.0f})",
                      f"{x['load'][0][0]:.1f}/{x['load'][1][0]:.1f}"])
    L += [C.md_table(hdr, out), "", "## Findings", ""] + [f"* {f}" for f in FINDINGS] + [""]
    md.write_text("\n".join(L))
    print(f"wrote {js}, {md}")


FINDINGS = [
    "`base` reproduces `cnfmce.train(..., selection=\"refined-non-ascii\")` of generalisation.md: "
    "exactly at 32k, within 0.2 points at 128k (the character coverage ranks the characters given to "
    "`train_from_counts`: the 10M counts' best k/16, as training ranks every counted one).",
    "With `refined-non-ascii`, weighting the non-ASCII candidates' counts moves ids to the non-ASCII "
    "scripts (32k, `na0.5`: 11,960 non-ASCII ids instead of 9,838, 6,828 Han ids instead of 5,502): at "
    "32k zh gains 2.6 to 4.9 points in-domain and 3.4 to 6.1 held out, multi 0.1 to 0.8, but en, sci, "
    "math and code lose 0.4 to 2.3 points; only `na0.1` stays within one point (0.4 to 1.0).",
    "At 128k the same rule gives zh +0.9 to +1.1 points in-domain and +1.1 to +1.2 held out, multi "
    "+0.1 to +0.4, and costs sci held out 1.2 (`na0.25`) and 1.5 points (`na0.1`): the Han words the "
    "raw vocabulary's cut leaves out at 128k (counts 20-30, [script_tokens.md](script_tokens.md)) are "
    "worth about one point once they are in, and that point is what the Han ids the rule adds buy at the "
    "exchange rate of [frontier.md](frontier.md): `na0.25` has 1,790 more Han ids than `base` for +1.1 "
    "points of zh (0.6 per 1,000 ids), the frontier's 7,000 Han ids from a zh-only vocabulary gave +5.0 "
    "points in-domain (0.7 per 1,000) at a similar cost to the ASCII categories, so better candidates do "
    "not change the exchange rate between the groups. No exponent keeps en, sci, math and code within one "
    "point at both sizes, so no option was built.",
    "A Han-specific candidate rule does not help either: leaving out the candidates that join Han "
    "characters to a newline (`nohannl`) costs zh 0.5 / 0.1 points at 32k, and leaving out every Han "
    "candidate with a space, newline, punctuation or digit in it (`nohanctx`, the BPE's pre-tokenization "
    "keeps at most one such character in front) costs zh 5.1 / 2.4 points while en, sci, math and code "
    "gain 0.2 to 0.7: CNF's Han tokens with context are worth their ids.",
    "**At 250k** (counted with T = 20, in a build with `NON_ASCII_SHARE_EXPONENT` = 1.0; every "
    "counted character's exact count given to `train_from_counts`, so `base` is `cnfmce.train` of that "
    "build token for token: the *thresholds* row of targets.md) the raw vocabulary's cut is what holds "
    "zh back: `na0.15` meets every 250k category target, in-domain and held-out (zh +10.3% / +17.1%, "
    "en +42.1% / +35.7%, sci +44.7% / +37.9%, math +54.2% / +45.6%, code +47.8% / +38.7%, multi +19.2% "
    "/ +12.9%; `base`: zh +6.3% / +15.9%), the first rule that does at any size, but it takes Basque "
    "below the BPE (eu -2.3% in-domain; `base` +0.4%, `na0.1` -1.0% with zh +9.4%). Ranking the "
    "multi-word ASCII candidates lower as well (`-ph`), or a larger raw vocabulary (`-m13`: 13 x "
    "vocab_size), only moves more ids to the non-ASCII scripts: zh +12.0% to +12.9%, en held-out "
    "+33.3% to +34.4% (below +35%), eu -3.1% to -3.5%. Basque, mostly ASCII words, pays for every "
    "id the rule gives Chinese.",
    "`hanA` (only the candidates with a Han character weighted) is now the trainer's "
    "`raw_han_exponent` (src/raw_cut.rs): `cnfmce.train(..., rounds=((1, 12, 0), (13, 21, 20), (22, 30, 20)), "
    "selection=\"refined-non-ascii\", non_ascii_exponent=1.0, raw_han_exponent=0.15)` at 250k gives zh "
    "+10.5% / +17.5%, en +42.5% / +36.0%, multi +18.2% / +12.3% with eu -1.1% in-domain and ko -0.1% "
    "held-out below the BPE, every 250k category target met; `raw_han_exponent=0.1` zh +9.4% with eu "
    "-0.7% ([thresholds.md](thresholds.md)). Weighting only the Han candidates costs Basque less than "
    "weighting every non-ASCII candidate (`na0.15`: eu -2.3%).",
    "With `refined` (no group weights) the extra candidates do little: zh +1.4 to +3.5 points in-domain "
    "at 32k at a cost of up to 3.5 points on the ASCII categories, and -0.2 / -0.4 at 128k, with el and "
    "ru further below the BPE.",
]


def bpe_eval(size: str) -> Dict[str, Any]:
    """The same-data BPE's evaluation: selection.py's cache, or generalisation.json's (the same
    BPE on the same sets) when that cache is not on this machine."""
    p = X.OUT / "mix" / "variants" / f"bpe-{size}.json"
    if p.exists():
        return json.loads(p.read_text())["eval"]
    return C.recorded_bpe_eval("mix", size)


def main() -> None:
    import cnfmce
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="32k")
    ap.add_argument("--rules", default="base,na0.5")
    ap.add_argument("--selection", default="nonascii", choices=list(SELECTIONS))
    ap.add_argument("--t", type=int, default=None,
                    help="threshold T of counting rounds 2 and 3 (default: the paper's rounds)")
    ap.add_argument("--render", action="store_true", help="only write docs/results/raw_rule.{json,md} from the cache")
    args = ap.parse_args()
    if args.render:
        render()
        return
    OUT.mkdir(parents=True, exist_ok=True)
    rounds = None if args.t is None else ((1, 12, 0), (13, 21, args.t), (22, 30, args.t))
    tag = "mix" if args.t is None else f"mix-t{args.t}"
    raw = X.raw_counts(tag, P.train_paths(), 10_000_000, rounds)
    na = non_ascii_mask(raw)
    paths = [str(p) for p in P.train_paths()]
    for size in args.sizes.split(","):
        k = X.SIZES[size]
        bpe_ev = bpe_eval(size)
        for rule in args.rules.split(","):
            name = f"{rule}-{args.selection}-{size}" + ("" if args.t is None else f"-t{args.t}")
            p = OUT / f"{name}.json"
            if p.exists():
                r = json.loads(p.read_text())
            else:
                # with the exact counts of every counted character (a cache that keeps them),
                # train_from_counts ranks them as cnfmce.train does; otherwise the best k/16
                # ``RULE-mN``: a raw vocabulary of N x vocab_size candidates instead of 10 x
                base_rule, _, mult = rule.partition("-m")
                m = (int(mult) if mult else 10) * k
                rv = raw_vocab(raw, na, base_rule, m, 0 if raw.characters is not None else k // 16)
                if raw.characters is not None:
                    rv = cnfmce.Counts(rv.items(), characters=raw.characters)
                load0 = os.getloadavg()
                t0 = time.perf_counter()
                c0 = time.process_time()
                tok = cnfmce.train_from_counts(rv, paths, vocab_size=k, selection=SELECTIONS[args.selection],
                                               progress=False)
                secs = time.perf_counter() - t0
                tok.save(str(OUT / f"{name}.cnfmce.json.gz"))
                ev = X.evaluate_sets(tok)
                r = {"rule": rule, "size": size, "selection": SELECTIONS[args.selection], "t": args.t,
                     "core": C._cmd(["git", "rev-parse", "HEAD:src"]),
                     "raw_non_ascii": int(sum(not t.isascii() for t in rv)), "m": m,
                     "seconds": round(secs, 1), "cpu_s": round(time.process_time() - c0, 1),
                     "load": [load0, os.getloadavg()], "eval": ev}
                C.write_json(p, r)
            ev = r["eval"]
            g = {kd: {c: ev[kd][c]["cpt"] / bpe_ev[kd][c]["cpt"] - 1 for c in C.CATEGORIES} for kd in ev}
            print(f"{name:28s} raw non-ASCII {r['raw_non_ascii']:>9,} | " + " ".join(
                f"{c} {g['indomain'][c]:+.1%}/{g['heldout'][c]:+.1%}" for c in C.CATEGORIES), flush=True)
            below = []
            for kd in ev:
                for lang, b in bpe_ev[kd]["multi"]["langs"].items():
                    a = ev[kd]["multi"]["langs"].get(lang)
                    if a and b["chars"] >= 20_000 and a["cpt"] < b["cpt"]:
                        below.append(f"{kd[:4]}:{lang} {a['cpt'] / b['cpt'] - 1:+.1%}")
            print("    below the BPE: " + (", ".join(below) or "none"), flush=True)


if __name__ == "__main__":
    main()
