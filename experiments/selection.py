"""Issue 13, item 2: variants of CNF's selection, measured against the paper's algorithm and the
same-data BPE, on the protocol's in-domain and held-out-by-package sets.

    python experiments/selection.py                       # the variants of VARIANTS_DEFAULT
    python experiments/selection.py --variants paper,two-pass --sizes 128k
    python experiments/selection.py --render              # rewrite the page from the JSON

Every variant keeps counting (Algorithm 1) and MCE; none merges or runs EM. A variant is a dict:

* ``m``: raw vocabulary size, an int or ``"<f>x"`` (a multiple of the vocabulary size);
* ``rounds``: counting rounds (default: the paper's);
* ``passes``: expansion factors of extra filtering passes: ``[2]`` keeps the top ``2k`` of the
  first pass, encodes the training text again with them and takes the top ``k`` of that pass;
* ``score``: ``usage`` (the paper) or ``saved`` (usage times the tokens the text would need more
  without the token: ``usage(t) * (alt(t) - 1)``, ``alt`` from :func:`cnfx.alt_costs` against the
  vocabulary of the last pass);
* ``coverage``: every character whose count in the raw vocabulary is at least this gets a token
  before anything else (like the 256 bytes).

Results are cached per (variant, size) under ``experiments/out/cnfx/<corpus>/variants/`` so runs
can be resumed and extended; the page shows every cached result of the variants listed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import protocol as P  # noqa: E402

NAME = "selection"
MAX_M = 10_000_000

VARIANTS: Dict[str, Dict[str, Any]] = {
    "paper": {"m": 5_000_000},
    "m10x": {"m": "10x"},
    "two-pass": {"m": "10x", "passes": [2]},
    "saved": {"m": "10x", "score": "saved"},
    "two-pass-saved": {"m": "10x", "passes": [2], "score": "saved"},
    "two-pass-1.5": {"m": "10x", "passes": [1.5]},
    "two-pass-4": {"m": "10x", "passes": [4]},
    "three-pass": {"m": "10x", "passes": [4, 2]},
    "four-pass": {"m": "10x", "passes": [4, 2, 1.4]},
    "three-pass-saved": {"m": "10x", "passes": [4, 2], "score": "saved"},
}
VARIANTS["gradual-saved"] = {"m": "10x", "passes": [2, 1.4, 1.15], "score": "saved"}
VARIANTS["gradual"] = {"m": "10x", "passes": [2, 1.4, 1.15]}
for _st in (1, 2, 4, 8):
    VARIANTS[f"gsc5-s{_st}"] = {"m": "10x", "passes": [2, 1.4, 1.15], "score": "saved",
                                "coverage": 5, "step": _st}
for _cap in (16, 12, 8):
    VARIANTS[f"gsq-{_cap}"] = {"m": "10x", "passes": [2, 1.4, 1.15], "score": "saved",
                               "coverage_q": 0.9997, "coverage_cap": 1 / _cap}
    VARIANTS[f"gq-{_cap}"] = {"m": "10x", "passes": [2, 1.4, 1.15],
                              "coverage_q": 0.9997, "coverage_cap": 1 / _cap}
for _mult in (5, 10, 20, 40):
    VARIANTS[f"refined-m{_mult}x"] = {"m": f"{_mult}x", "passes": [2, 1.4, 1.15], "score": "saved",
                                      "coverage_q": 0.9997, "coverage_cap": 1 / 16}
    VARIANTS[f"paper-m{_mult}x"] = {"m": f"{_mult}x"}
for _n in (5, 20, 50):
    VARIANTS[f"tps-cov{_n}"] = {"m": "10x", "passes": [2], "score": "saved", "coverage": _n}
for _b, _tag in (("category", "cat"), ("doc-script", "docscript"), ("token-script", "tokscript"),
                 ("lang", "lang")):
    for _a in (0.25, 0.5, 0.75, 1.0):
        VARIANTS[f"tps-{_tag}{_a}"] = {"m": "10x", "passes": [2], "score": "saved", "balance": _b,
                                       "alpha": _a}
VARIANTS_DEFAULT = list(VARIANTS)


def resolve_m(m: Any, k: int) -> int:
    if isinstance(m, str) and m.endswith("x"):
        return int(round(float(m[:-1]) * k))
    return int(m)


class Corpus:
    """The training text of one experiment (the protocol's mix, or en alone), its counts, the
    usage passes (cached) and the vocabularies of each variant."""

    def __init__(self, tag: str, cats: Sequence[str], max_m: int):
        self.tag = tag
        self.cats = list(cats)
        self.paths = P.train_paths(cats)
        self.max_m = max_m
        self._raw: Optional[X.Raw] = None
        self.log: List[Dict[str, Any]] = []

    @property
    def raw(self) -> X.Raw:
        if self._raw is None:
            self._raw = X.raw_counts(self.tag, self.paths, self.max_m, log=self.log)
        return self._raw

    def char_counts(self) -> Dict[bytes, int]:
        """Counts of the single-character candidates of the raw vocabulary."""
        out = {}
        for t, c in zip(self.raw.tokens, self.raw.counts.tolist()):
            if len(t) <= 4:
                try:
                    if len(t.decode("utf-8")) == 1:
                        out[t] = c
                except UnicodeDecodeError:
                    pass
        return out

    def build(self, name: str, v: Dict[str, Any], size: str) -> Dict[str, Any]:
        """The vocabulary (tokens in id order) of variant ``v`` at ``size``, with its timings."""
        k = X.SIZES[size]
        m = resolve_m(v.get("m", "10x"), k)
        if v.get("rounds"):
            raise NotImplementedError("rounds variants need their own counts (see defaults.py)")
        if m > len(self.raw):
            raise ValueError(f"m={m:,} exceeds the cached counts ({len(self.raw):,})")
        t0 = time.perf_counter()
        ranked = self.raw.ranked(m)
        grouped = bool(v.get("balance")) and v["balance"] != "token-script"
        up = X.cached_usage(self.tag, f"raw{m}", ranked, self.paths, grouped=grouped)
        secs = {"pass1": up["seconds"]}
        vocab = ranked
        usage = self._weighted(v, up, vocab)
        protected: List[bytes] = []
        if v.get("coverage"):
            cc = self.char_counts()
            protected = sorted(t for t, c in cc.items() if c >= v["coverage"] and len(t) > 1)
        if v.get("coverage_q"):
            # the most frequent multi-byte characters until they cover coverage_q of all multi-byte
            # character occurrences, at most coverage_cap * k of them
            cc = sorted(((c, t) for t, c in self.char_counts().items() if len(t) > 1),
                        key=lambda x: (-x[0], x[1]))
            tot = sum(c for c, _ in cc)
            cap = int(v.get("coverage_cap", 1.0) * k)
            acc = 0
            for c, t in cc:
                if acc >= v["coverage_q"] * tot or len(protected) >= cap:
                    break
                protected.append(t)
                acc += c
            protected.sort()
        for j, f in enumerate(v.get("passes", [])):
            keep = int(round(f * k))
            nxt = X.top_by(self._score(v, usage, vocab, keep, protected, last=False), vocab, keep,
                           tiebreak_usage=usage)
            nxt = self._protect(nxt, protected, keep, usage, vocab)
            up = X.cached_usage(self.tag, f"{name}-{size}-pass{j + 2}", nxt, self.paths, grouped=grouped,
                                step=int(v.get("step", 1)))
            secs[f"pass{j + 2}"] = up["seconds"]
            vocab = nxt
            usage = self._weighted(v, up, vocab)
        score = self._score(v, usage, vocab, k, protected, last=True)
        final = X.top_by(score, vocab, k, tiebreak_usage=usage)
        final = self._protect(final, protected, k, usage, vocab)
        secs["total_incl_cached"] = time.perf_counter() - t0
        return {"tokens": final, "m": m, "seconds": secs}

    @staticmethod
    def _weighted(v: Dict[str, Any], up: Dict[str, Any], vocab: Sequence[bytes]) -> np.ndarray:
        """The usage of a pass, reweighted per group when the variant balances: group g's usage
        is multiplied by ``(T_g / T) ** -alpha`` (T_g: its tokens in the pass), normalised so the
        total stays T. Groups: ``category`` (the input file), ``lang`` (category/lang),
        ``doc-script`` (the writing system of the document's language; Latin-script languages and
        en/sci/math/code are one group), ``token-script`` (the script of the token itself)."""
        bal = v.get("balance")
        if not bal:
            return up["usage"]
        alpha = float(v.get("alpha", 0.5))
        if bal == "token-script":
            u = up["usage"].astype(np.float64)
            scr = np.array([_tscript(t) for t in vocab])
            names = sorted(set(scr.tolist()))
            tg = {n: u[scr == n].sum() for n in names}
            tot = sum(tg.values())
            w = {n: (tg[n] / tot) ** -alpha if tg[n] > 0 else 0.0 for n in names}
            z = tot / sum(w[n] * tg[n] for n in names)
            wt = np.array([w[n] * z for n in scr.tolist()])
            return u * wt
        def key(g: str) -> str:
            if bal == "category":
                return g.split("/")[0]
            if bal == "lang":
                return g
            if bal == "doc-script":
                s_ = X.group_script(g)
                return "Latin" if s_ in ("Latin", "ASCII-heavy (en/sci/math/code)") else s_
            raise ValueError(bal)
        tg: Dict[str, float] = {}
        for g, gv in up["groups"].items():
            tg[key(g)] = tg.get(key(g), 0.0) + float(gv["counts"].sum())
        tot = sum(tg.values())
        w = {n: (t / tot) ** -alpha for n, t in tg.items() if t > 0}
        z = tot / sum(w[n] * tg[n] for n in w)
        out = np.zeros(len(vocab), dtype=np.float64)
        for g, gv in up["groups"].items():
            out[gv["ids"]] += gv["counts"] * (w[key(g)] * z)
        return out

    def _score(self, v, usage, vocab, k, protected, last: bool) -> np.ndarray:
        if v.get("score", "usage") == "usage":
            return usage
        # "saved": alternative cost against the current vocabulary, for the candidates that can
        # matter (the top 2k by usage and every single character)
        order = np.argsort(-usage, kind="stable")
        cand = set(order[: 2 * k].tolist())
        for i, t in enumerate(vocab):
            if 1 < len(t) <= 4 and usage[i] > 0:
                try:
                    if len(t.decode("utf-8")) == 1:
                        cand.add(i)
                except UnicodeDecodeError:
                    pass
        cand = sorted(cand)
        tok = X.tokenizer_from(X.top_by(usage, vocab, 2 * k) if len(vocab) > 2 * k else vocab)
        alt = X.alt_costs([vocab[i] for i in cand], tok)
        sc = np.zeros(len(vocab), dtype=np.float64)
        sc[cand] = usage[cand] * np.maximum(alt.astype(np.int64) - 1, 0)
        return sc

    @staticmethod
    def _protect(tokens: List[bytes], protected: List[bytes], k: int, usage, vocab) -> List[bytes]:
        """Puts every protected token into ``tokens`` (dropping the lowest-ranked others)."""
        if not protected:
            return tokens
        have = set(tokens)
        missing = [t for t in protected if t not in have]
        if not missing:
            return tokens
        pset = set(protected)
        out = list(tokens)
        drop = len(missing)
        i = len(out) - 1
        while drop and i >= 0:
            if len(out[i]) > 1 and out[i] not in pset:
                out.pop(i)
                drop -= 1
            i -= 1
        pos = {t: j for j, t in enumerate(vocab)}
        out += missing
        out.sort(key=lambda t: (-int(usage[pos[t]]) if t in pos else 0, t))
        return out[:k]


def _tscript(t: bytes) -> str:
    s_ = X.token_script(t)
    return "Latin" if s_ in ("ASCII", "Latin", "common", "partial") else s_


def result_path(tag: str, name: str, size: str) -> Path:
    return X.OUT / tag / "variants" / f"{name}-{size}.json"


def run_variant(corp: Corpus, name: str, v: Dict[str, Any], size: str, bpe: Any) -> Dict[str, Any]:
    rp = result_path(corp.tag, name, size)
    try:
        r = json.loads(rp.read_text())
        if r.get("variant") == v:
            return r
    except (OSError, ValueError):
        pass
    print(f"[{corp.tag}] {name} {size} ...", flush=True)
    b = corp.build(name, v, size)
    tok = X.tokenizer_from(b["tokens"])
    X.save_vocab(rp.with_suffix(".vocab.gz"), b["tokens"], {"variant": v, "size": size})
    r = {"variant": v, "size": size, "m": b["m"], "seconds": b["seconds"],
         "eval": X.evaluate_sets(tok, cats=corp.cats)}
    C.write_json(rp, r)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default=",".join(VARIANTS_DEFAULT))
    ap.add_argument("--sizes", default="32k,128k,250k")
    ap.add_argument("--corpus", default="mix", choices=["mix"] + C.CATEGORIES)
    ap.add_argument("--render", action="store_true")
    args = ap.parse_args()
    names = args.variants.split(",")
    sizes = args.sizes.split(",")
    cats = C.CATEGORIES if args.corpus == "mix" else [args.corpus]
    corp = Corpus(args.corpus, cats, MAX_M if args.corpus == "mix" else 5_000_000)

    if not args.render:
        for size in sizes:
            bpe = X.hf_bpe(args.corpus, corp.paths, X.SIZES[size], corp.log)
            bp = X.OUT / args.corpus / "variants" / f"bpe-{size}.json"
            if not bp.exists():
                C.write_json(bp, {"size": size, "eval": X.evaluate_sets(bpe, cats=cats)})
            for n in names:
                r = run_variant(corp, n, VARIANTS[n], size, bpe)
                summary(corp.tag, n, size, r, json.loads(bp.read_text()))


def summary(tag: str, name: str, size: str, r: Dict[str, Any], bpe: Dict[str, Any]) -> None:
    parts = []
    for kind in ("indomain", "heldout"):
        for cat, e in r["eval"][kind].items():
            b = bpe["eval"][kind][cat]["cpt"]
            parts.append(f"{cat} {e['cpt'] / b - 1:+.1%}")
        parts.append("|")
    print(f"[{tag}] {name:18s} {size:5s} " + " ".join(parts), flush=True)


if __name__ == "__main__":
    main()
