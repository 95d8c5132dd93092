"""Issue 13: is a tuned configuration's gain spread over the source packages, or one package's?

    python experiments/by_source.py          # docs/results/by_source.{json,md}
    python experiments/by_source.py --render

The settings of the 250k recipe (``raw_han_exponent``, ``non_ascii_exponent``, T = 20) were
chosen on the evaluation sets themselves, in-domain and held-out-by-package, and the held-out zh
set is mostly one package (``deb:fortunes-zh``). This splits every evaluation set of the
protocol ([protocol.md](protocol.md)) by its documents' ``source`` package and gives, per package,
the gain in characters per token of each vocabulary over the same-data byte-level BPE of the same
size (trained here on the protocol's training mix, ``cnfx.hf_bpe``; its totals are checked against
generalisation.json's evaluation of the same BPE). Vocabularies: the ``cnfmce.train`` runs of
``experiments/thresholds.py`` cached under ``experiments/out/thresholds/`` (``BYSRC_TOKS`` =
``label=file;...`` relative to that directory, default the 250k recipe and the same call without
``raw_han_exponent``). Packages with fewer than ``MIN_CHARS`` characters in a set are pooled as
*other*.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import protocol as P  # noqa: E402

NAME = "by_source"
SIZE = os.environ.get("BYSRC_SIZE", "250k")
DEFAULT_TOKS = ("T = 20, non_ascii_exponent 1.0=mix-250k-t20-refined-non-ascii-e1.run.cnfmce.json.gz;"
                "T = 20, non_ascii_exponent 1.0, raw_han_exponent 0.15="
                "mix-250k-t20-refined-non-ascii-e1-han0.15.run.cnfmce.json.gz")
TOKS = [tuple(x.rsplit("=", 1)) for x in os.environ.get("BYSRC_TOKS", DEFAULT_TOKS).split(";") if x]
MIN_CHARS = 20_000
KINDS = ("indomain", "heldout")


def per_source(tok: Any, docs: List[Dict[str, Any]]) -> Dict[str, List[int]]:
    """{source: [characters, tokens]} of one evaluation set's documents."""
    n = X.token_counts(tok, [d["text"] for d in docs])
    out: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    for d, k in zip(docs, n):
        a = out[d.get("source") or ""]
        a[0] += len(d["text"])
        a[1] += k
    return dict(out)


def run(args: Any) -> Dict[str, Any]:
    import cnfmce
    res = C.run_header(NAME, False)
    t0 = time.perf_counter()
    res["load_before"] = os.getloadavg()
    k = X.SIZES[SIZE]
    bpe = X.hf_bpe("mix", P.train_paths(), k)
    res["size"] = SIZE
    res["vocabs"] = [lab for lab, _ in TOKS]
    res["files"] = {lab: f for lab, f in TOKS}
    sets: Dict[str, Dict[str, Any]] = {}
    recorded = C.recorded_bpe_eval("mix", SIZE)
    check = []
    docs = {f"{kind}/{cat}": list(C.read_jsonl(P.eval_path(cat, kind))) for kind in KINDS for cat in C.CATEGORIES}
    for kind in KINDS:
        for cat in C.CATEGORIES:
            b = per_source(bpe, docs[f"{kind}/{cat}"])
            ch, nt = sum(v[0] for v in b.values()), sum(v[1] for v in b.values())
            check.append({"set": f"{kind}/{cat}", "cpt": ch / nt, "recorded": recorded[kind][cat]["cpt"]})
            sets[f"{kind}/{cat}"] = {"bpe": b, "cnf": {}}
    for lab, f in TOKS:
        tok = cnfmce.Tokenizer.load(str(C.OUT / "thresholds" / f))
        for key, d in docs.items():
            sets[key]["cnf"][lab] = per_source(tok, d)
        print(f"[by_source] {lab}: done", flush=True)
    res["bpe_check"] = check
    res["sets"] = sets
    res["load_after"] = os.getloadavg()
    res["runtime_s"] = round(time.perf_counter() - t0, 1)
    return res


def _rows(s: Dict[str, Any], labs: List[str]):
    """(source, chars, BPE cpt, [gain per vocabulary]) per package, small ones pooled."""
    big, other = [], {"bpe": [0, 0], **{lab: [0, 0] for lab in labs}}
    for src, (ch, nt) in sorted(s["bpe"].items(), key=lambda x: -x[1][0]):
        if ch >= MIN_CHARS:
            big.append((src, ch, ch / nt, [ch / s["cnf"][lab][src][1] * nt / ch - 1 for lab in labs]))
        else:
            other["bpe"][0] += ch
            other["bpe"][1] += nt
            for lab in labs:
                other[lab][0] += ch
                other[lab][1] += s["cnf"][lab][src][1]
    if other["bpe"][0]:
        ch, nt = other["bpe"]
        big.append(("other", ch, ch / nt, [nt / other[lab][1] - 1 for lab in labs]))
    return big


def render(res: Dict[str, Any], md: Path) -> None:
    labs = res["vocabs"]
    L = [C.header_md(res, f"Gains per source package at {res['size']} (issue 13)"), "", C.doc_body(__doc__), ""]
    worst = max(abs(x["cpt"] / x["recorded"] - 1) for x in res["bpe_check"])
    L += [f"The BPE trained here against generalisation.json's evaluation of the same-data BPE: largest "
          f"difference in characters per token over the 12 sets {100 * worst:.3f}%.", ""]
    L += ["Vocabularies (`experiments/out/thresholds/`): " + "; ".join(
        f"**{chr(65 + i)}** = {lab} (`{res['files'][lab]}`)" for i, lab in enumerate(labs)), ""]
    summary, body = [], []
    for key, s in res["sets"].items():
        kind, cat = key.split("/")
        rows = _rows(s, labs)
        hdr = ["package", "characters", "BPE chars/token"] + [f"{chr(65 + i)} gain" for i in range(len(labs))]
        if len(labs) == 2:
            hdr.append("B - A (points)")
        out = []
        for src, ch, cpt, g in rows:
            r = [f"`{src}`" if src != "other" else f"other (< {MIN_CHARS:,} each)", f"{ch:,}", f"{cpt:.3f}"] + \
                [C.pct(x, sign=True) for x in g]
            if len(labs) == 2:
                r.append(f"{100 * (g[1] - g[0]):+.1f}")
            out.append(r)
        body += [f"## {P.KIND_LABEL[kind]}, {cat}", "", C.md_table(hdr, out), ""]
        named = [x for x in rows if x[0] != "other"]
        summary.append([f"{P.KIND_LABEL[kind]}", cat, str(len(named))]
                       + [f"{sum(x[3][i] > 0 for x in named)} / {len(named)}" for i in range(len(labs))]
                       + ([f"{sum(x[3][1] > x[3][0] for x in named)} / {len(named)}"] if len(labs) == 2 else []))
    hdr = ["set", "category", f"packages (>= {MIN_CHARS:,} characters)"] + \
          [f"{chr(65 + i)} above the BPE" for i in range(len(labs))] + (["B above A"] if len(labs) == 2 else [])
    L += ["## Summary", "", C.md_table(hdr, summary, "llr" + "r" * (len(hdr) - 3)), ""] + body
    md.write_text("\n".join(L))


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render)
