"""Issue 13: why CNF's Han (and Cyrillic, Greek, Hangul) tokens are worth less than the same-data
BPE's, and why CNF lacks the BPE tokens that would save the most.

    python experiments/script_tokens.py          # docs/results/script_tokens.{json,md}
    python experiments/script_tokens.py --render

For each size (32k, 128k) and each CNF vocabulary of the mix (*default* = the paper's selection with
raw_vocab_size = 10 x vocab_size, ``experiments/out/cnfx/mix/variants/m10x-<size>``; *nonascii* =
``selection="refined-non-ascii"``, ``experiments/out/gen/mix-<size>-nonascii``) next to the same-data
byte-level BPE of the same size (``cnfx.hf_bpe``):

* **script tokens** (every letter of the token in the script; surrounding spaces and punctuation
  allowed): how many each vocabulary has per length in script letters (1, 2, 3, 4+), and their usage
  on the script's **in-domain** and **held-out-by-package** evaluation text (zh for Han; the multi
  documents of the language for ru, el, ko): tokens of that length per 1,000 characters, and the
  characters they cover;
* **the BPE tokens CNF lacks**: each one's first-order saving on the in-domain text, ``usage in the
  BPE encoding x (tokens CNF needs for the token's bytes alone - 1)`` (the savings overlap, so their
  sum is an upper bound of what adding them all would save, not a reachable figure); for all of them and for the
  200 largest, *why* CNF lacks it, from the mix's counts (``experiments/out/cnfx/mix/raw.npz``: the
  top 10,000,000 candidates of ``cnfmce.count`` with the paper's rounds) and the raw filtering pass
  (``raw<m>.usage.npz``):

  - *forbidden*: not a CNF candidate (it crosses 3+ units, or 2 units without starting at a unit's
    start and ending at a unit's end: SPEC section 2);
  - *not counted (round threshold)*: longer than 12 bytes, so counted by round 2 or 3 only if it and
    its 12-byte prefix occur at least 80 times (its count in the training text is given);
  - *counted, below the 10M-th count*: valid, at most 12 bytes (round 1 counts every one), but with
    a count below that of the 10,000,000th candidate;
  - *counted, outside the raw top m*: in the 10M counts but after rank m (m = 10 x vocab_size);
  - *raw vocabulary, unused in the filtering pass*: in the raw vocabulary, usage 0 in its MCE pass
    (longer candidates took every occurrence);
  - *raw vocabulary, cut by the selection*: used in the raw pass, not kept by the selection.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import diagnosis as D  # noqa: E402
import protocol as P  # noqa: E402

NAME = "script_tokens"
GEN = C.OUT / "gen"
VARIANTS = X.OUT / "mix" / "variants"
SIZES = ["32k", "128k"]
# (label, evaluation category, language filter or None, script name of unicodedata)
SCRIPTS = [("Han (zh)", "zh", None, "CJK"), ("Cyrillic (ru)", "multi", "ru", "CYRILLIC"),
           ("Greek (el)", "multi", "el", "GREEK"), ("Hangul (ko)", "multi", "ko", "HANGUL")]
BUCKETS = ["1", "2", "3", "4+"]
TOP = 200
REASONS = ["forbidden", "not counted (round threshold)", "counted, below the 10M-th count",
           "counted, outside the raw top m", "raw vocabulary, unused in the filtering pass",
           "raw vocabulary, cut by the selection"]
ROUND1_MAX = 12
THRESHOLD = 80


def _script(ch: str) -> Optional[str]:
    try:
        return unicodedata.name(ch).split()[0]
    except ValueError:
        return None


def script_letters(t: bytes, script: str) -> int:
    """Number of letters of ``t`` when every letter of it is of ``script`` (0 otherwise, or when
    ``t`` is not valid UTF-8)."""
    try:
        s = t.decode("utf-8")
    except UnicodeDecodeError:
        return 0
    n = 0
    for c in s:
        if c.isalpha():
            if _script(c) != script:
                return 0
            n += 1
    return n


def bucket(n: int) -> str:
    return "4+" if n >= 4 else str(n)


_NOT_JOINING = {"CJK", "HIRAGANA", "KATAKANA", "BOPOMOFO"}


def _joins(c: str) -> bool:
    """SPEC section 2: a letter or mark whose script is not Han, Hiragana, Katakana or Bopomofo
    (unicodedata has no Script property; those characters' names start with the script)."""
    return unicodedata.category(c)[0] in "LM" and _script(c) not in _NOT_JOINING


def valid_candidate(t: bytes) -> bool:
    """Whether ``t`` can be a CNF candidate wherever it occurs as a whole: it spans at most two units
    of its own characters (always valid, SPEC section 2), or three or more that start and end with
    a non-joining character (then every occurrence starts and ends on unit boundaries). A 3+-unit
    token starting or ending with a letter is forbidden where that letter continues a word."""
    try:
        s = t.decode("utf-8")
    except UnicodeDecodeError:
        return True
    units = 0
    prev = False
    for c in s:
        j = _joins(c)
        if not (j and prev):
            units += 1
        prev = j
    return units <= 2 or not (_joins(s[0]) or _joins(s[-1]))


def encode_counts(tok: Any, texts: List[str], n_ids: int) -> np.ndarray:
    return D.encode_counts(tok, texts, n_ids)


def eval_texts(cat: str, lang: Optional[str], kind: str) -> List[str]:
    texts, langs = X.eval_docs(cat, kind)
    return [t for t, l in zip(texts, langs) if lang is None or l == lang]


def vocab_stats(tokens: Sequence[bytes], script: str, usage: Dict[str, np.ndarray],
                chars: Dict[str, int]) -> Dict[str, Any]:
    """Per bucket: vocabulary tokens, and per evaluation kind tokens per 1,000 characters and the
    share of the characters they cover."""
    nl = np.fromiter((script_letters(t, script) for t in tokens), dtype=np.int64, count=len(tokens))
    tchars = np.fromiter((len(t.decode("utf-8", "replace")) if nl[i] else 0 for i, t in enumerate(tokens)),
                         dtype=np.int64, count=len(tokens))
    out: Dict[str, Any] = {}
    for b in BUCKETS:
        sel = (nl >= 4) if b == "4+" else (nl == int(b))
        row = {"vocab": int(sel.sum())}
        for kind, u in usage.items():
            n = int(u[sel].sum())
            row[kind] = {"per_kchar": 1000 * n / chars[kind] if chars[kind] else None,
                         "cover": float((u[sel] * tchars[sel]).sum() / chars[kind]) if chars[kind] else None}
        out[b] = row
    # script tokens that carry context: any character that is not a letter or mark (space,
    # newline, punctuation, digit), e.g. CNF's "\n白居易\n" against the BPE's "白居易"
    ctx = np.fromiter((bool(nl[i]) and any(unicodedata.category(c)[0] not in "LM"
                                           for c in t.decode("utf-8", "replace"))
                       for i, t in enumerate(tokens)), dtype=bool, count=len(tokens))
    out["context"] = {"vocab": int(ctx.sum()), "of": int((nl > 0).sum())}
    for kind, u in usage.items():
        used = int(u[nl > 0].sum())
        out["context"][kind] = {"per_kchar": 1000 * int(u[ctx].sum()) / chars[kind] if chars[kind] else None,
                                "share_of_script_tokens_used": int(u[ctx].sum()) / used if used else None}
    for kind, u in usage.items():
        out.setdefault("all", {})[kind] = {"tokens": int(u.sum()), "chars": chars[kind],
                                           "cpt": chars[kind] / int(u.sum()) if u.sum() else None}
    return out


def default_vocab(size: str, bpe: Any) -> List[bytes]:
    """The paper's selection with m = 10 x vocab_size (``experiments/selection.py``'s ``m10x``,
    made when missing)."""
    p = VARIANTS / f"m10x-{size}.vocab.gz"
    if not p.exists():
        import selection as S
        S.run_variant(S.Corpus("mix", C.CATEGORIES, S.MAX_M), "m10x", S.VARIANTS["m10x"], size, bpe)
    return X.load_vocab(p)[0]


def nonascii_vocab(size: str) -> List[bytes]:
    """``cnfmce.train(mix, k, selection="refined-non-ascii")`` of ``experiments/generalisation.py``
    (trained when missing)."""
    import cnfmce
    p = GEN / f"mix-{size}-nonascii.run.cnfmce.json.gz"
    if not p.exists():
        import generalisation as G
        G.trained("mix", size, "nonascii")
    tb = cnfmce.Tokenizer.load(str(p)).token_bytes()
    return [tb[i] for i in sorted(tb)]


def run(args: Any) -> Dict[str, Any]:
    import cnfmce
    res = C.run_header(NAME, False)
    t0 = time.perf_counter()
    res["load_before"] = os.getloadavg()
    raw = X.raw_counts("mix", P.train_paths(), 10_000_000)
    cut10m = int(raw.counts[-1])
    res["count_at_10M"] = cut10m
    res["runs"] = {}
    for size in SIZES:
        k = X.SIZES[size]
        m = 10 * k
        bpe = X.hf_bpe("mix", P.train_paths(), k)
        bpe_toks = D.bpe_tokens(bpe)
        vocabs = {"default": default_vocab(size, bpe), "nonascii": nonascii_vocab(size)}
        run_: Dict[str, Any] = {"m": m, "count_at_m": int(raw.counts[m - 1]), "scripts": {}, "_vocabs": vocabs}
        for label, cat, lang, script in SCRIPTS:
            texts = {kind: eval_texts(cat, lang, kind) for kind in ("indomain", "heldout")}
            texts = {kd: v for kd, v in texts.items() if sum(map(len, v)) >= 20_000}
            chars = {kd: sum(map(len, v)) for kd, v in texts.items()}
            bpe_use = {kd: encode_counts(bpe, v, len(bpe_toks)) for kd, v in texts.items()}
            entry: Dict[str, Any] = {"chars": chars, "bpe": vocab_stats(bpe_toks, script, bpe_use, chars)}
            for vn, toks in vocabs.items():
                tok = cnfmce.Tokenizer.from_tokens(toks)
                use = {kd: encode_counts(tok, v, len(toks)) for kd, v in texts.items()}
                st = vocab_stats(toks, script, use, chars)
                have = set(toks)
                # BPE script tokens CNF lacks, by first-order saving on the in-domain text
                kd0 = "indomain" if "indomain" in texts else "heldout"
                miss = [(i, t) for i, t in enumerate(bpe_toks)
                        if t not in have and bpe_use[kd0][i] > 0 and script_letters(t, script)]
                pieces = tok.encode_bytes_batch([t for _, t in miss]) if miss else []
                rows = []
                for (i, t), p in zip(miss, pieces):
                    rows.append({"t": t, "use": int(bpe_use[kd0][i]), "cnf": len(p),
                                 "saved": int(bpe_use[kd0][i]) * (len(p) - 1)})
                rows.sort(key=lambda r: (-r["saved"], r["t"]))
                rows_all = rows
                st["missing"] = {"n": len(rows_all), "saved": sum(r["saved"] for r in rows_all),
                                 "bpe_tokens": int(bpe_use[kd0].sum()), "kind": kd0}
                st["_rows"] = rows_all
                entry[vn] = st
            run_["scripts"][label] = entry
        res["runs"][size] = run_
    # why: one scan of the 10M counts for every missing token
    want = {r["t"] for run_ in res["runs"].values() for e in run_["scripts"].values()
            for vn in ("default", "nonascii") if vn in e for r in e[vn]["_rows"]}
    found: Dict[bytes, Tuple[int, int]] = {}
    for j, t in enumerate(raw.tokens):
        if t in want:
            found[t] = (j, int(raw.counts[j]))
    train_text: Optional[str] = None
    for size, run_ in res["runs"].items():
        m = run_["m"]
        vocabs = run_.pop("_vocabs")
        raw_usage = X.cached_usage("mix", f"raw{m}", raw.ranked(m), P.train_paths(), grouped=False)["usage"]
        for label, e in run_["scripts"].items():
            for vn in ("default", "nonascii"):
                if vn not in e:
                    continue
                rows = e[vn].pop("_rows")
                longer = [c for c in vocabs[vn] if len(c) > 1]
                agg = {r: {"n": 0, "saved": 0} for r in REASONS}
                top = []
                for idx, r in enumerate(rows):
                    t = r["t"]
                    cnt = None
                    if t in found:
                        j, cnt = found[t]
                        if j >= m:
                            why = "counted, outside the raw top m"
                        elif raw_usage[j] == 0:
                            why = "raw vocabulary, unused in the filtering pass"
                        else:
                            why = "raw vocabulary, cut by the selection"
                        extra = {"rank": j, "count": cnt, "raw_usage": int(raw_usage[j]) if j < m else None}
                    elif not valid_candidate(t):
                        why, extra = "forbidden", {}
                    elif len(t) > ROUND1_MAX:
                        why, extra = "not counted (round threshold)", {}
                        if idx < TOP:
                            if train_text is None:
                                train_text = "\n".join(C.iter_texts(P.train_paths(["zh", "multi"])))
                            extra["count"] = train_text.count(t.decode("utf-8"))
                    else:
                        why, extra = "counted, below the 10M-th count", {}
                    agg[why]["n"] += 1
                    agg[why]["saved"] += r["saved"]
                    if idx < TOP:
                        # CNF tokens that contain it (e.g. the word with its following space)
                        sup = sorted((c for c in longer if len(c) > len(t) and t in c), key=lambda c: (len(c), c))
                        extra["superstrings"] = len(sup)
                        extra["shortest_superstring"] = sup[0].decode("utf-8", "replace") if sup else None
                        top.append({"token": t.decode("utf-8", "replace"), "bpe_use": r["use"], "cnf_tokens": r["cnf"],
                                    "saved": r["saved"], "why": why, **extra})
                e[vn]["missing"]["reasons"] = agg
                e[vn]["missing"]["top_with_superstring"] = {
                    "n": sum(1 for x in top if x["superstrings"]), "of": len(top),
                    "saved": sum(x["saved"] for x in top if x["superstrings"]), "saved_of": sum(x["saved"] for x in top)}
                e[vn]["missing"]["top"] = top
    res["load_after"] = os.getloadavg()
    res["runtime_s"] = round(time.perf_counter() - t0, 1)
    return res


# --- page -------------------------------------------------------------------------------------

def render(res: Dict[str, Any], md: Path) -> None:
    L = [C.header_md(res, "Script tokens: why CNF's Han, Cyrillic, Greek and Hangul tokens are worth less than the BPE's"), ""]
    L += [C.doc_body(__doc__), "",
          C.load_line(res) + f" Count of the 10,000,000th candidate: "
          f"{res['count_at_10M']:,}.", ""]
    L += ["## Findings", ""] + [f"* {x}" for x in findings(res)] + [""]
    L += ["What this says (the tables below hold the numbers):", "",
          "* **Han.** With about as many Han ids as the BPE (*nonascii*), CNF spends more of them on single "
          "characters (the character coverage) and on tokens that carry context (the newline, space or "
          "punctuation around a title or a word), and fewer on words of 2 and of 4+ characters. The BPE words it "
          "lacks at 128k are mostly counted but below the raw vocabulary's count cut (a few tens of occurrences "
          "in 124 MB) or in the raw vocabulary and cut by the selection; words counted by no round (5+ "
          "characters under the threshold of 80) are a small part. Re-ranking the raw vocabulary to bring the "
          "first kind in is worth about one point ([raw_rule.md](raw_rule.md)).",
          "* **Cyrillic, Greek, Hangul.** The missing BPE words are mostly in the raw vocabulary and cut by the "
          "selection, with a small usage in the raw filtering pass because longer candidates (the word with "
          "its space or punctuation) took their occurrences; most of the largest ones sit inside a longer CNF "
          "token, so their first-order saving overstates what CNF loses on running text.",
          ""]
    for size, run_ in res["runs"].items():
        L += [f"## {size} (m = {run_['m']:,} raw candidates; count of the m-th: {run_['count_at_m']:,})", ""]
        for label, e in run_["scripts"].items():
            names = ["bpe"] + [v for v in ("default", "nonascii") if v in e]
            kinds = list(e["chars"])
            L += [f"### {label}", "",
                  "Characters per token on the evaluation text: " + "; ".join(
                      f"{P.KIND_LABEL[kd]} ({e['chars'][kd]:,} chars) " + ", ".join(
                          f"{n} {C.f3(e[n]['all'][kd]['cpt'])}" for n in names) for kd in kinds) + ".", ""]
            hdr = ["letters", "vocabulary " + " / ".join(names)]
            for kd in kinds:
                lab = "in" if kd == "indomain" else "held"
                hdr += [f"{lab}: tokens per 1k chars", f"{lab}: chars covered"]
            rows = []
            for b in BUCKETS:
                r = [b, " / ".join(f"{e[n][b]['vocab']:,}" for n in names)]
                for kd in kinds:
                    r.append(" / ".join(C.f1(e[n][b][kd]["per_kchar"]) for n in names))
                    r.append(" / ".join(C.pct(e[n][b][kd]["cover"]) for n in names))
                rows.append(r)
            L += [C.md_table(hdr, rows), ""]
            L += ["Script tokens with context (a space, newline, punctuation or digit inside the token), " + " / ".join(names)
                  + ": " + " / ".join(f"{e[n]['context']['vocab']:,} of {e[n]['context']['of']:,}" for n in names)
                  + " ids; share of the script tokens used on the text: " + "; ".join(
                      f"{'in' if kd == 'indomain' else 'held'} " + " / ".join(
                          C.pct(e[n]["context"][kd]["share_of_script_tokens_used"]) for n in names) for kd in kinds) + ".", ""]
            for vn in names[1:]:
                ms = e[vn]["missing"]
                L += [f"BPE {label.split()[0]} tokens that *{vn}* lacks (used in the BPE's {P.KIND_LABEL[ms['kind']]} "
                      f"encoding): {ms['n']:,}, first-order saving {ms['saved']:,} tokens = "
                      f"{C.pct(ms['saved'] / ms['bpe_tokens'] if ms['bpe_tokens'] else None)} of the BPE's tokens on that text. Why:", ""]
                L += [C.md_table(["reason", "tokens", "saving", "share of the saving"],
                                 [[r, f"{a['n']:,}", f"{a['saved']:,}", C.pct(a["saved"] / ms["saved"] if ms["saved"] else None)]
                                  for r, a in ms["reasons"].items() if a["n"]]), ""]
                top = ms["top"][:12]
                L += ["The largest savings: " + "; ".join(
                    f"`{C.show_token(x['token'])}` ({x['saved']:,}: {x['why']}"
                    + (f", rank {x['rank']:,}, count {x['count']:,}" if "rank" in x else
                       f", count {x['count']:,}" if x.get("count") is not None else "")
                    + (f", raw usage {x['raw_usage']:,}" if x.get("raw_usage") is not None else "")
                    + (f"; CNF has `{C.show_token(x['shortest_superstring'])}`" if x.get("shortest_superstring") else "") + ")"
                    for x in top) + ".", ""]
                ws = ms.get("top_with_superstring")
                if ws:
                    L += [f"Of the {ws['of']} largest, {ws['n']} are inside a longer *{vn}* token (e.g. the word with "
                          f"the space or punctuation after it), {C.pct(ws['saved'] / ws['saved_of'] if ws['saved_of'] else None)} "
                          "of their first-order saving: on running text those occurrences need not cost CNF more tokens.", ""]
    md.write_text("\n".join(L))


def findings(res: Dict[str, Any]) -> List[str]:
    out = []
    for size, run_ in res["runs"].items():
        e = run_["scripts"].get("Han (zh)")
        if not e:
            continue
        names = ["bpe"] + [v for v in ("default", "nonascii") if v in e]
        out.append(f"{size} Han tokens by letters, " + " / ".join(names) + ": " + "; ".join(
            f"{b}: " + " / ".join(f"{e[n][b]['vocab']:,}" for n in names) for b in BUCKETS)
            + ". In-domain zh, tokens per 1,000 characters on 1-letter Han tokens: " + " / ".join(
            C.f1(e[n]["1"]["indomain"]["per_kchar"]) for n in names) + f" (raw top m cut at count {run_['count_at_m']:,})."
            + " Han ids with context (space, newline, punctuation or digit inside): " + " / ".join(
                f"{e[n]['context']['vocab']:,}" for n in names) + ".")
    for size, run_ in res["runs"].items():
        parts = []
        for label, e in run_["scripts"].items():
            ws = e.get("nonascii", {}).get("missing", {}).get("top_with_superstring")
            if ws and ws["saved_of"]:
                parts.append(f"{label.split()[0]} {C.pct(ws['saved'] / ws['saved_of'])}")
        if parts:
            out.append(f"{size}, nonascii: share of the {TOP} largest first-order savings on BPE tokens that sit inside a longer "
                       "CNF token (the word with its space or punctuation, so running text need not cost more): " + ", ".join(parts) + ".")
    for size, run_ in res["runs"].items():
        for label, e in run_["scripts"].items():
            parts = []
            for vn in ("default", "nonascii"):
                if vn not in e:
                    continue
                ms = e[vn]["missing"]
                if not ms["saved"]:
                    continue
                best = max(ms["reasons"].items(), key=lambda kv: kv[1]["saved"])
                parts.append(f"{vn}: {ms['n']:,} BPE tokens missing, saving {C.pct(ms['saved'] / ms['bpe_tokens'])}, "
                             f"{C.pct(best[1]['saved'] / ms['saved'])} of it '{best[0]}'")
            if parts:
                out.append(f"{size} {label}: " + "; ".join(parts) + ".")
    return out


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render)
