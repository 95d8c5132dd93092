"""Issue 13: the characters that fall back to bytes, and two selection trials, at 32k on the mix.

    python experiments/byte_fallback.py          # docs/results/byte_fallback.{json,md}
    python experiments/byte_fallback.py --render

``BF_BUILDS=label=DIR,label=DIR`` names other builds (an unpacked wheel: the directory to put on
``PYTHONPATH``) that train the variants whose ``build`` is that label (``VARIANTS``); the label
``installed`` is the build this script imports. ``BF_VARIANTS=a,b`` limits the variants trained.

Every vocabulary here is made by ``cnfmce.train_from_counts`` from one set of counts of the
protocol's training text ([protocol.md](protocol.md): all shared training text without the
held-out packages; ``cnfmce.count`` with the default rounds, the best max(2,000,000, 20 x k)
candidates kept), with ``vocab_size`` = k (32,000; ``BF_SIZE=128000`` writes the page
``byte_fallback_128k``) and ``raw_vocab_size`` = 10 x k (the default multiple), each in its own
process, one at a time. `train_from_counts` over these counts gives what `cnfmce.train` gives where
character coverage and the fallback prefixes see the same characters (checked: *refined* and
*nonascii* before step 6 at 32k equal generalisation.md's *after* and *nonascii* to the last
digit); at 128k and 250k, and with the fallback prefixes at every size, the cut counts lack rare
characters that `cnfmce.train` counts exactly, so coverage ranks fewer of them and fewer get
prefixes, and the figures differ a little from `cnfmce.train`'s (generalisation.md's counts
check: given every character's exact count, the same vocabulary token for token). Every
vocabulary sees the same
counts, so the variants differ by their selection alone. *Trials* are builds of main with one
constant of src/refine.rs changed (code not kept, described below); they are compared with the
same-data byte-level BPE (HF `tokenizers`, GPT-4 split) of the same size, on the protocol's
**in-domain** test sets and the **held-out-by-package** sets.

*Byte pieces* are tokens that are not valid UTF-8: the pieces of a character spelled by its bytes
(the byte fallback). A *fallback character* is a non-ASCII character of the evaluation text that
a vocabulary spells with byte pieces. For the fallback characters of the baseline (*refined*),
the reason it lacks them is read from the counts: *not in the raw vocabulary* (its count is below
the raw vocabulary's cut, the count of its 10 x k-th candidate), *in the raw vocabulary, not
covered* (in the raw vocabulary but after the character coverage of src/refine.rs step 1: beyond
its share cap of k / 16 characters), *covered* (kept by coverage; should not happen).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import protocol as P  # noqa: E402

SIZE = int(os.environ.get("BF_SIZE", "32000"))  # another size: its own page, byte_fallback_<k>k
NAME = "byte_fallback" if SIZE == 32_000 else f"byte_fallback_{SIZE // 1000}k"
OUT = C.OUT / "byte_fallback"
RAW = 10 * SIZE
COUNTS_M = max(2_000_000, 2 * RAW)  # the counts kept: above the raw vocabulary's cut
COUNTS_TAG = "byte_fallback" if COUNTS_M == 2_000_000 else f"byte_fallback/m{COUNTS_M}"
RUN_SUFFIX = "" if SIZE == 32_000 else f"-{SIZE // 1000}k"
CHAR_COVERAGE_SHARE = 1 / 16  # src/refine.rs (the baseline's coverage, for the reasons above)
CHAR_COVERAGE = 0.9997
# name -> the build that trains it and its selection; "doc" says what the build changes
VARIANTS: Dict[str, Dict[str, str]] = {
    "refined": {"build": "start", "selection": "refined", "base": None,
                "doc": "`selection=\"refined\"` of main at the session's start (`24df939`; the baseline)"},
    "nonascii": {"build": "start", "selection": "refined-non-ascii", "base": None,
                 "doc": "`selection=\"refined-non-ascii\"` of main at the session's start (`24df939`)"},
    "cut1": {"build": "cut1", "selection": "refined", "base": "refined",
             "doc": "*refined* with `CHAR_CUT_FACTOR = 1.0`: every character counted at least as often as the "
                    "raw vocabulary's cut is covered too (at most k / 8 characters in all)"},
    "cut1-nonascii": {"build": "cut1", "selection": "refined-non-ascii", "base": "nonascii",
                      "doc": "*nonascii* with `CHAR_CUT_FACTOR = 1.0`"},
    "prefixes": {"build": "pre", "selection": "refined", "base": "refined",
                 "doc": "*refined* with `FALLBACK_PREFIXES`: every character of 3 or 4 bytes missing from the raw "
                        "vocabulary adds the prefix of its bytes but the last to it (counted with the summed counts "
                        "of its characters), so a fallback character can cost 2 tokens instead of 3 or 4"},
    "prefixes-nonascii": {"build": "pre", "selection": "refined-non-ascii", "base": "nonascii",
                          "doc": "*nonascii* with `FALLBACK_PREFIXES`"},
    "prefixes-cov32": {"build": "pre32", "selection": "refined", "base": "refined",
                       "doc": "*prefixes* with `CHAR_COVERAGE_SHARE = 1/32` (at most k / 32 covered characters)"},
    "prefixes-cov0": {"build": "pre0", "selection": "refined", "base": "refined",
                      "doc": "*prefixes* with `CHAR_COVERAGE_SHARE = 0` (no covered characters)"},
    "hanpunct2": {"build": "hp2", "selection": "refined", "base": "refined",
                  "doc": "*refined* with `HAN_PUNCT_WEIGHT = 2`: tokens of one Han character with one or two "
                         "punctuation characters (`，我`, `了。`) have their usage and tokens saved doubled"},
    "hanpunct2-nonascii": {"build": "hp2", "selection": "refined-non-ascii", "base": "nonascii",
                           "doc": "*nonascii* with `HAN_PUNCT_WEIGHT = 2`"},
    "nonascii-now": {"build": "installed", "selection": "refined-non-ascii", "base": "nonascii",
                     "doc": "`selection=\"refined-non-ascii\"` of this build: src/refine.rs step 6, the fallback "
                            "prefixes (the kept change; the same rule as *prefixes-nonascii*)"},
}
EVAL_CATS = C.CATEGORIES
FALLBACK_CATS = ["zh", "multi"]
TOP_CHARS = 25


def builds() -> Dict[str, Optional[str]]:
    out: Dict[str, Optional[str]] = {"installed": None}
    for item in filter(None, os.environ.get("BF_BUILDS", "").split(",")):
        label, path = item.split("=", 1)
        out[label] = path
    return out


def build_id(path: Optional[str]) -> Dict[str, Any]:
    """The sha256 of the build's native module and its constants (read in a child process)."""
    import subprocess
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path
    code = ("import json, cnfmce, cnfmce._core as c; print(json.dumps({'so': c.__file__, 'consts': "
            "{k: getattr(c, k) for k in dir(c) if k.isupper() and isinstance(getattr(c, k), (int, float))}}))")
    r = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  check=True).stdout)
    r["sha256"] = hashlib.sha256(Path(r.pop("so")).read_bytes()).hexdigest()[:16]
    return r


def counts_path() -> Path:
    return C.cached_counts(COUNTS_TAG, P.train_paths(), COUNTS_M)


def worker(selection: str, out: str) -> None:
    import cnfmce
    paths = [str(p) for p in P.train_paths()]
    C.train_worker(out, lambda: cnfmce.train_from_counts(str(counts_path()), paths, vocab_size=SIZE,
                                                         raw_vocab_size=RAW, selection=selection,
                                                         progress=False))


def trained(name: str, bld: Dict[str, Optional[str]]):
    import cnfmce
    v = VARIANTS[name]
    path = bld[v["build"]]
    OUT.mkdir(parents=True, exist_ok=True)
    base = OUT / (name + RUN_SUFFIX)
    counts_meta = json.loads((counts_path().parent / "counts.params.json").read_text())
    params = {"selection": v["selection"], "build": build_id(path), "counts": counts_meta["params"],
              "size": SIZE, "raw": RAW}
    info = C.cached_training(base, params)
    if info is None:
        print(f"[bf] training {name} ({v['build']}, {v['selection']}) ...", flush=True)
        # another build on PYTHONPATH; the installed one keeps the caller's PYTHONPATH
        with C.child_env({"PYTHONPATH": path} if path else {}):
            info = C.run_training(__file__, [v["selection"]], base, params, name)
        print(f"[bf] {name}: {info['seconds']}s", flush=True)
    return cnfmce.Tokenizer.load(str(base) + ".run.cnfmce.json.gz"), info


# --- segmentation ---------------------------------------------------------------------------------

def bpe_token_bytes(tok) -> Dict[int, bytes]:
    from cnfmce.formats import unicode_to_bytes
    dec = unicode_to_bytes()
    return {i: bytes(dec[c] for c in s) for s, i in tok.get_vocab().items()}


def encode_ids(tok, texts: List[str]) -> List[np.ndarray]:
    if X.is_cnf(tok):
        return [np.asarray(x, dtype=np.int64) for x in tok.encode_batch(texts)]
    return [np.asarray(e.ids, dtype=np.int64) for e in tok.encode_batch(texts, add_special_tokens=False)]


def vocab_bytes(tok) -> Dict[int, bytes]:
    return dict(tok.token_bytes()) if X.is_cnf(tok) else bpe_token_bytes(tok)


def is_piece(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


def fallback(tok) -> Dict[str, Any]:
    """Per kind, category and language: tokens, byte pieces, fallback characters; per kind and
    category (zh, multi): the fallback characters by script and the most frequent ones."""
    tb = vocab_bytes(tok)
    n = max(tb) + 1
    piece = np.zeros(n, dtype=bool)
    for i, b in tb.items():
        piece[i] = is_piece(b)
    out: Dict[str, Any] = {}
    for kind in ("indomain", "heldout"):
        out[kind] = {}
        for cat in EVAL_CATS:
            texts, langs = X.eval_docs(cat, kind)
            encs = encode_ids(tok, texts)
            per: Dict[str, List[int]] = {}
            chars: Counter = Counter()
            for t, lang, ids in zip(texts, langs, encs):
                m = piece[ids]
                a = per.setdefault(lang, [0, 0, 0, 0])
                a[0] += len(t)
                a[1] += len(ids)
                a[2] += int(m.sum())
                if not m.any() or cat not in FALLBACK_CATS:
                    continue
                run = bytearray()
                for i, p in zip(ids.tolist(), m.tolist()):
                    if p:
                        run += tb[i]
                    elif run:
                        for ch in run.decode("utf-8", "ignore"):
                            if ord(ch) > 127:
                                chars[ch] += 1
                        run = bytearray()
                if run:
                    for ch in run.decode("utf-8", "ignore"):
                        if ord(ch) > 127:
                            chars[ch] += 1
                a[3] = a[3]  # characters are counted per category below
            r: Dict[str, Any] = {
                "chars": sum(a[0] for a in per.values()), "tokens": sum(a[1] for a in per.values()),
                "pieces": sum(a[2] for a in per.values()),
                "langs": {l: {"chars": a[0], "tokens": a[1], "pieces": a[2]} for l, a in sorted(per.items())}}
            if cat in FALLBACK_CATS:
                by_script: Counter = Counter()
                for ch, c in chars.items():
                    by_script[X.char_script(ch)] += c
                r["fallback_chars"] = sum(chars.values())
                r["fallback_distinct"] = len(chars)
                r["fallback_by_script"] = dict(by_script.most_common())
                r["fallback_top"] = chars.most_common(400)
            out[kind][cat] = r
    return out


# --- why the baseline lacks them -------------------------------------------------------------------

def char_ranks(counts) -> Tuple[Dict[str, int], Dict[str, int], int]:
    """(count of every multi-byte character of the counts, its rank among them (0 = most
    frequent), the raw vocabulary's cut: the count of the RAW-th candidate)."""
    chars: List[Tuple[int, bytes]] = []
    allc = np.fromiter((c for _, c in counts.items()), dtype=np.int64)
    cut = int(np.sort(allc)[::-1][RAW - 1]) if len(allc) >= RAW else 0
    for t, c in counts.items():
        if 2 <= len(t) <= 4:
            try:
                s = t.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if len(s) == 1:
                chars.append((c, t))
    chars.sort(key=lambda x: (-x[0], x[1]))
    cnt = {t.decode(): c for c, t in chars}
    rank = {t.decode(): i for i, (_, t) in enumerate(chars)}
    return cnt, rank, cut


def coverage_size(cnt: Dict[str, int], rank: Dict[str, int], k: int) -> int:
    """How many characters the baseline's coverage keeps (src/refine.rs covered_characters)."""
    cap = min(int(k * CHAR_COVERAGE_SHARE), k - 256)
    total = sum(cnt.values())
    acc = 0
    for i, ch in enumerate(sorted(cnt, key=rank.get)):
        if acc >= CHAR_COVERAGE * total or i >= cap:
            return i
        acc += cnt[ch]
    return len(cnt)


def reason(ch: str, cnt, rank, cut: int, ncov: int, in_vocab: bool) -> str:
    if in_vocab:
        return "in the vocabulary (used inside longer pieces only)"
    c = cnt.get(ch)
    if c is None or c < cut:
        return "not in the raw vocabulary"
    if rank[ch] >= ncov:
        return "in the raw vocabulary, not covered, cut by the selection"
    return "covered"


def run(args: Any) -> Dict[str, Any]:
    import cnfmce
    res = C.run_header(NAME, False)
    if SIZE != 32_000:  # the page of another size is made by this script with BF_SIZE
        res["command"] = f"BF_SIZE={SIZE} python experiments/byte_fallback.py"
    t0 = time.perf_counter()
    res["load_before"] = os.getloadavg()
    bld = builds()
    only = [v for v in os.environ.get("BF_VARIANTS", "").split(",") if v]
    names = [v for v in VARIANTS if (not only or v in only) and VARIANTS[v]["build"] in bld]
    old: Dict[str, Any] = {}
    try:
        old = json.loads((C.RESULTS / f"{NAME}.json").read_text())
    except (OSError, ValueError):
        pass
    res["size"], res["raw"], res["counts_m"] = SIZE, RAW, COUNTS_M
    res["variants"] = {}
    res["train_chars"] = {c: P.materialize()["stats"][c]["train"]["lang_chars"] for c in C.CATEGORIES}
    bpe = X.hf_bpe("mix", P.train_paths(), SIZE)
    res["bpe"] = {"eval": X.evaluate_sets(bpe), "fallback": fallback(bpe)}
    for name in VARIANTS:
        if name not in names:
            if name in old.get("variants", {}):  # measured by an earlier run (its build)
                res["variants"][name] = dict(old["variants"][name], doc=VARIANTS[name]["doc"],
                                             base=VARIANTS[name]["base"], build=VARIANTS[name]["build"])
            continue
        tok, info = trained(name, bld)
        res["variants"][name] = {"doc": VARIANTS[name]["doc"], "build": VARIANTS[name]["build"],
                                 "base": VARIANTS[name]["base"],
                                 "selection": VARIANTS[name]["selection"], "train": info,
                                 "eval": X.evaluate_sets(tok), "fallback": fallback(tok),
                                 "vocab_chars": _vocab_char_stats(tok)}
        line = []
        for kind in ("indomain", "heldout"):
            for cat in C.CATEGORIES:
                b = res["bpe"]["eval"][kind][cat]["cpt"]
                line.append(f"{cat} {res['variants'][name]['eval'][kind][cat]['cpt'] / b - 1:+.2%}")
            line.append("|")
        print(f"[bf] {name}: " + " ".join(line), flush=True)
    # why the baseline lacks its fallback characters
    counts = cnfmce.load_counts(str(counts_path()))
    cnt, rank, cut = char_ranks(counts)
    ncov = coverage_size(cnt, rank, SIZE)
    res["raw_cut_count"], res["covered_n"], res["chars_counted"] = cut, ncov, len(cnt)
    res["chars_at_least"] = {str(n): sum(1 for c in cnt.values() if c >= n)
                             for n in (50, 100, 158, 200, 300, 500, 1000, 2000, cut)}
    res["covered_min_count"] = min(cnt[ch] for ch in cnt if rank[ch] < ncov) if ncov else None
    bpe_chars = [b.decode() for b in bpe_token_bytes(bpe).values() if not is_piece(b) and len(b.decode()) == 1
                 and len(b) > 1]
    bc = sorted(cnt.get(ch, 0) for ch in bpe_chars)
    res["bpe_char_tokens"] = {"n": len(bpe_chars), "count_p5": bc[len(bc) // 20] if bc else None,
                              "count_p1": bc[len(bc) // 100] if bc else None, "count_min": bc[0] if bc else None,
                              "han": sum(1 for ch in bpe_chars if X.char_script(ch) == "Han")}
    base = res["variants"].get("refined")
    if base:
        tok = cnfmce.Tokenizer.load(str(OUT / ("refined" + RUN_SUFFIX)) + ".run.cnfmce.json.gz")
        vocab = {b for b in tok.token_bytes().values()}
        bv = set(bpe_token_bytes(bpe).values())
        why: Dict[str, Any] = {}
        for kind in ("indomain", "heldout"):
            why[kind] = {}
            for cat in FALLBACK_CATS:
                agg: Counter = Counter()
                top = []
                bfb = dict(res["bpe"]["fallback"][kind][cat]["fallback_top"])
                for ch, n in base["fallback"][kind][cat]["fallback_top"]:
                    r = reason(ch, cnt, rank, cut, ncov, ch.encode() in vocab)
                    agg[r] += n
                    if len(top) < TOP_CHARS:
                        top.append({"char": ch, "fallback": n, "bpe_fallback": bfb.get(ch, 0),
                                    "script": X.char_script(ch), "count": cnt.get(ch), "rank": rank.get(ch),
                                    "in_bpe": ch.encode() in bv, "reason": r})
                why[kind][cat] = {"by_reason_top400": dict(agg), "top": top}
        res["why"] = why
    res["load_after"] = os.getloadavg()
    res["runtime_s"] = round(time.perf_counter() - t0, 1)
    return res


def _vocab_char_stats(tok) -> Dict[str, Any]:
    """Single multi-byte characters of the vocabulary, by script."""
    by: Counter = Counter()
    for b in tok.token_bytes().values():
        if len(b) > 1 and not is_piece(b) and len(b.decode()) == 1:
            by[X.char_script(b.decode())] += 1
    return {"single_chars": sum(by.values()), "by_script": dict(by.most_common())}


# --- page -----------------------------------------------------------------------------------------

def _g(a, b):
    return None if not a or not b else a / b - 1


def render(res: Dict[str, Any], md: Path) -> None:
    L = [C.header_md(res, f"Byte fallback and selection trials at {res['size'] // 1000}k on the mix (issue 13)"), "",
         C.doc_body(__doc__), "", C.load_line(res), ""]
    names = list(res["variants"])
    bpe = res["bpe"]
    L += ["## Findings", ""]
    base = "refined" if "refined" in res["variants"] else names[0]
    for kind, kname in (("indomain", "in-domain"), ("heldout", "held-out-by-package")):
        fb, fc = bpe["fallback"][kind]["zh"], res["variants"][base]["fallback"][kind]["zh"]
        ntok = res["variants"][base]["eval"][kind]["zh"]["tokens"]
        if not fb["fallback_chars"] or not fc["fallback_chars"]:
            continue
        excess = fc["pieces"] - fb["pieces"]
        per = fc["pieces"] / fc["fallback_chars"] - fb["pieces"] / fb["fallback_chars"]
        L.append(f"* {kname} zh: *{base}* spells {fc['fallback_chars']:,} characters with byte pieces, the BPE "
                 f"{fb['fallback_chars']:,}; but each costs *{base}* {fc['pieces'] / fc['fallback_chars']:.2f} pieces "
                 f"and the BPE {fb['pieces'] / fb['fallback_chars']:.2f} (its vocabulary has the byte pairs that begin "
                 f"characters). Of *{base}*'s {excess:,} more byte pieces ({100 * excess / ntok:.1f}% of its tokens on the "
                 f"set), the higher cost per character accounts for {fb['fallback_chars'] * per:,.0f} and the "
                 f"difference in fallback characters for {excess - fb['fallback_chars'] * per:,.0f}.")
    if "prefixes" in res["variants"]:
        L += ["* Covering more characters (*cut1*: every character of the raw vocabulary) or giving the tokens of a Han "
          "character with its punctuation priority (*hanpunct2*) moves a few tenths of a point between the "
          "categories (table below); the fallback prefixes (*prefixes*) raise zh by several points on both "
          "evaluations and multi a little, and cost en, sci, math and code a few tenths of a point (more than the "
          "0.1% noise the issue allows): they are kept in the opt-in `selection=\"refined-non-ascii\"` "
              "(*nonascii-now*), not in `\"refined\"`. `\"paper\"` is unchanged."]
    L.append("")
    L += ["## Variants", ""]
    L += [f"* *{n}*: {v['doc']} (build `{v['build']}`, native module sha256 `{v['train']['params']['build']['sha256']}`; "
          f"training {v['train']['seconds']} s, {v['train'].get('covered_characters')} covered characters)"
          for n, v in res["variants"].items()]
    L += ["", "## Characters per token, gain over the BPE", ""]
    rows = []
    for kind, kname in (("indomain", "in-domain"), ("heldout", "held-out-by-package")):
        for cat in C.CATEGORIES:
            b = bpe["eval"][kind][cat]["cpt"]
            rows.append([kname if cat == C.CATEGORIES[0] else "", cat, C.f3(b)]
                        + [C.pct(_g(res["variants"][n]["eval"][kind][cat]["cpt"], b), 2, sign=True) for n in names])
    L += [C.md_table(["evaluation", "set", "BPE CPT"] + names, rows), ""]
    L += ["Change of each trial against its base (*refined* or *nonascii*), in points of gain over the BPE "
          "(in-domain / held-out-by-package):", ""]
    rows = []
    for n in names:
        base = res["variants"][n].get("base")
        if not base or base not in res["variants"]:
            continue
        row = [n, base]
        for cat in C.CATEGORIES:
            d = []
            for kind in ("indomain", "heldout"):
                b = bpe["eval"][kind][cat]["cpt"]
                d.append(100 * (res["variants"][n]["eval"][kind][cat]["cpt"] - res["variants"][base]["eval"][kind][cat]["cpt"]) / b)
            row.append(f"{d[0]:+.2f} / {d[1]:+.2f}")
        below = []
        for kind in ("indomain", "heldout"):
            for lang, bl in bpe["eval"][kind]["multi"]["langs"].items():
                if bl["chars"] < 20_000 or res["train_chars"]["multi"].get(lang, 0) <= 50_000:
                    continue
                if res["variants"][n]["eval"][kind]["multi"]["langs"][lang]["cpt"] < bl["cpt"]:
                    below.append(f"{lang} ({'in' if kind == 'indomain' else 'held'})")
        row.append(", ".join(below) or "none")
        rows.append(row)
    L += [C.md_table(["trial", "base"] + C.CATEGORIES + ["multi languages below the BPE"], rows), ""]
    L += ["Byte pieces per fallback character (all byte pieces of the set / its fallback characters):", ""]
    rows = []
    for kind, kname in (("indomain", "in-domain"), ("heldout", "held-out-by-package")):
        for cat in FALLBACK_CATS:
            cell = lambda f: f"{f['pieces'] / f['fallback_chars']:.2f} ({f['fallback_chars']:,} chars)" if f["fallback_chars"] else ""  # noqa: E731
            rows.append([kname, cat, cell(bpe["fallback"][kind][cat])]
                        + [cell(res["variants"][n]["fallback"][kind][cat]) for n in names])
    L += [C.md_table(["evaluation", "set", "BPE"] + names, rows), ""]
    L += ["## Byte pieces per 1,000 characters of the evaluation text", ""]
    rows = []
    for kind, kname in (("indomain", "in-domain"), ("heldout", "held-out-by-package")):
        for cat in C.CATEGORIES:
            f = bpe["fallback"][kind][cat]
            rows.append([kname if cat == C.CATEGORIES[0] else "", cat, f"{f['chars']:,}", C.f1(1000 * f["pieces"] / f["chars"])]
                        + [C.f1(1000 * res["variants"][n]["fallback"][kind][cat]["pieces"] / f["chars"]) for n in names])
    L += [C.md_table(["evaluation", "set", "chars", "BPE"] + names, rows), ""]
    L += ["Per language of zh and multi (evaluation sets of at least 20,000 characters; byte pieces per 1,000 "
          "characters, then the gain in characters per token over the BPE):", ""]
    rows = []
    for kind, kname in (("indomain", "in-domain"), ("heldout", "held-out-by-package")):
        for cat in FALLBACK_CATS:
            for lang, bl in bpe["fallback"][kind][cat]["langs"].items():
                if bl["chars"] < 20_000:
                    continue
                tc = res["train_chars"][cat].get(lang, 0)
                row = [kname, f"{cat}/{lang}", f"{tc:,}", f"{bl['chars']:,}", C.f1(1000 * bl["pieces"] / bl["chars"])]
                row += [C.f1(1000 * res["variants"][n]["fallback"][kind][cat]["langs"][lang]["pieces"] / bl["chars"])
                        for n in names]
                bc = bpe["eval"][kind][cat]["langs"][lang]["cpt"]
                for n in names:
                    g = _g(res["variants"][n]["eval"][kind][cat]["langs"][lang]["cpt"], bc)
                    s = C.pct(g, 1, sign=True)
                    row.append(f"**{s}**" if g is not None and g < 0 and cat == "multi" and tc > 50_000 else s)
                rows.append(row)
    L += [C.md_table(["evaluation", "language", "train chars", "eval chars", "pieces BPE"]
                     + [f"pieces {n}" for n in names] + [f"gain {n}" for n in names], rows), ""]
    L += ["Bold: a multi language with more than 50,000 training characters below the BPE.", ""]
    L += ["## Fallback characters by script", "",
          "Non-ASCII characters of the evaluation text spelled with byte pieces (zh and multi):", ""]
    rows = []
    for kind, kname in (("indomain", "in-domain"), ("heldout", "held-out-by-package")):
        for cat in FALLBACK_CATS:
            scripts = list(bpe["fallback"][kind][cat]["fallback_by_script"])
            for n in names:
                scripts += [s for s in res["variants"][n]["fallback"][kind][cat]["fallback_by_script"] if s not in scripts]
            for s in scripts[:6]:
                rows.append([kname, cat, s, f"{bpe['fallback'][kind][cat]['fallback_by_script'].get(s, 0):,}"]
                            + [f"{res['variants'][n]['fallback'][kind][cat]['fallback_by_script'].get(s, 0):,}" for n in names])
    L += [C.md_table(["evaluation", "set", "script", "BPE"] + names, rows), ""]
    if res.get("why"):
        L += ["## Why *refined* lacks them", "",
              f"From the counts: {res['chars_counted']:,} multi-byte characters among the {res['counts_m']:,} "
              f"candidates kept; the raw vocabulary's cut (count of the {res['raw']:,}th candidate) is "
              f"{res['raw_cut_count']:,}; the coverage of src/refine.rs keeps {res['covered_n']:,} characters "
              f"(count at least {res['covered_min_count']:,}). Characters with at least N occurrences: "
              + ", ".join(f"N = {int(k):,}: {v:,}" for k, v in res["chars_at_least"].items()) + ". "
              f"The BPE has {res['bpe_char_tokens']['n']:,} single multi-byte characters as tokens "
              f"({res['bpe_char_tokens']['han']:,} Han); their training counts: minimum "
              f"{res['bpe_char_tokens']['count_min']:,}, 1st percentile {res['bpe_char_tokens']['count_p1']:,}, "
              f"5th percentile {res['bpe_char_tokens']['count_p5']:,}.", ""]
        for n in names:
            vc = res["variants"][n]["vocab_chars"]
            L.append(f"* *{n}*: {vc['single_chars']:,} single multi-byte characters ("
                     + ", ".join(f"{s} {c:,}" for s, c in list(vc["by_script"].items())[:6]) + ")")
        L += ["", "Fallback characters of *refined* (its 400 most frequent per set) by reason:", ""]
        rows = []
        for kind, kname in (("indomain", "in-domain"), ("heldout", "held-out-by-package")):
            for cat in FALLBACK_CATS:
                for r, c in res["why"][kind][cat]["by_reason_top400"].items():
                    rows.append([kname, cat, r, f"{c:,}"])
        L += [C.md_table(["evaluation", "set", "reason", "fallback occurrences"], rows), ""]
        for kind, kname in (("indomain", "in-domain"), ("heldout", "held-out-by-package")):
            for cat in FALLBACK_CATS:
                L += [f"The most frequent fallback characters of *refined*, {kname} {cat}:", ""]
                rows = [[x["char"], x["script"], f"{x['fallback']:,}", f"{x['bpe_fallback']:,}",
                         "" if x["count"] is None else f"{x['count']:,}", "" if x["rank"] is None else f"{x['rank']:,}",
                         "yes" if x["in_bpe"] else "no", x["reason"]] for x in res["why"][kind][cat]["top"]]
                L += [C.md_table(["char", "script", "fallbacks refined", "fallbacks BPE", "training count",
                                  "rank among chars", "BPE token", "reason"], rows), ""]
    md.write_text("\n".join(L))


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render, commands={"--worker": worker})
