"""Issue 13: why some languages of ``multi`` stay below the same-data BPE (el, ru, ko, vi).

For the vocabularies trained by ``experiments/generalisation.py`` (``cnfmce.train`` on the
protocol's training mix) and the same-data byte-level BPE of the same size: how many tokens of
each language's script the vocabulary holds (by length in characters), and on the language's
in-domain and held-out-by-package evaluation text the share of tokens by length and the byte
pieces (a character split into bytes).

    python experiments/languages.py        # docs/results/languages.{json,md}
    python experiments/languages.py --render

``LANG_RUNS=mix-128k-after,...`` picks the tokenizers of ``experiments/out/gen/`` (default: every
mix tokenizer there); ``LANG_LANGS=el,ru,ko,vi`` the languages.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import sys
import unicodedata
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import protocol as P  # noqa: E402

NAME = "languages"
GEN = C.OUT / "gen"
LANGS = os.environ.get("LANG_LANGS", "el,ru,ko,vi").split(",")
SCRIPT = {"el": "GREEK", "ru": "CYRILLIC", "ko": "HANGUL", "vi": "LATIN", "ja": "CJK", "zh": "CJK"}
BUCKETS = ["byte piece", "1", "2-3", "4-7", "8+"]


def _script(ch: str) -> Optional[str]:
    try:
        return unicodedata.name(ch).split()[0]
    except ValueError:
        return None


def token_script(s: str) -> Optional[str]:
    """The script of a token whose letters all belong to one script (None otherwise)."""
    scripts = {_script(c) for c in s if c.isalpha()}
    return scripts.pop() if len(scripts) == 1 else None


def bucket(n_chars: int) -> str:
    return "1" if n_chars <= 1 else "2-3" if n_chars <= 3 else "4-7" if n_chars <= 7 else "8+"


def vocab_by_script(tokens: List[bytes], script: str) -> Dict[str, int]:
    out: Dict[str, int] = collections.Counter()
    for t in tokens:
        try:
            s = t.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if token_script(s) == script:
            out[bucket(len(s.strip()))] += 1
    out["total"] = sum(out.values())
    return dict(out)


def script_split(tokens: List[bytes]) -> Dict[str, int]:
    """Ids of the vocabulary per script (``token_script``): ``none`` for tokens without letters or
    with letters of two scripts, ``bytes`` for tokens that are not valid UTF-8."""
    out: Dict[str, int] = collections.Counter()
    for t in tokens:
        try:
            s = t.decode("utf-8")
        except UnicodeDecodeError:
            out["bytes"] += 1
            continue
        out[token_script(s) or "none"] += 1
    return dict(out)


def docs_of(kind: str, lang: str) -> List[str]:
    out = []
    with gzip.open(P.eval_path("multi", kind), "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d.get("lang") == lang:
                out.append(d["text"])
    return out


def encoded_shares(ids_of, tokens: List[bytes], texts: List[str]) -> Dict[str, Any]:
    dist: Dict[str, int] = collections.Counter()
    n = 0
    for t in texts:
        for i in ids_of(t):
            n += 1
            try:
                dist[bucket(len(tokens[i].decode("utf-8")))] += 1
            except UnicodeDecodeError:
                dist["byte piece"] += 1
    chars = sum(map(len, texts))
    return {"chars": chars, "tokens": n, "cpt": chars / n if n else None,
            "shares": {b: dist[b] / n for b in BUCKETS} if n else {}}


def run(args: Any) -> Dict[str, Any]:
    import cnfmce
    from cnfmce.adapters import as_encoder
    import time
    res = C.run_header(NAME, False)
    t0 = time.perf_counter()
    res["load_before"] = os.getloadavg()
    names = os.environ.get("LANG_RUNS")
    runs = names.split(",") if names else sorted(p.name[:-len(".run.cnfmce.json.gz")]
                                                  for p in GEN.glob("mix-*.run.cnfmce.json.gz"))
    res["runs"] = {}
    for name in runs:
        _, size, config = name.split("-")
        tok = cnfmce.Tokenizer.load(str(GEN / f"{name}.run.cnfmce.json.gz"))
        ctoks = [tok.id_to_token(i) for i in range(tok.vocab_size)]
        bpe = X.hf_bpe("mix", P.train_paths(), X.SIZES[size])
        benc = as_encoder(bpe)
        btoks = [benc.token_bytes(i) for i in range(bpe.get_vocab_size())]
        r: Dict[str, Any] = {"size": size, "config": config, "selection": tok.metadata.get("selection"),
                             "covered_characters": tok.metadata.get("covered_characters"),
                             "covered_beyond_cut": tok.metadata.get("covered_beyond_cut"), "langs": {},
                             "scripts": {"cnf": script_split(ctoks), "bpe": script_split(btoks)}}
        for lang in LANGS:
            sc = SCRIPT[lang]
            e: Dict[str, Any] = {"script": sc, "vocab": {"cnf": vocab_by_script(ctoks, sc),
                                                       "bpe": vocab_by_script(btoks, sc)}}
            for kind in ("indomain", "heldout"):
                texts = docs_of(kind, lang)
                if not texts:
                    continue
                e[kind] = {"cnf": encoded_shares(tok.encode, ctoks, texts),
                           "bpe": encoded_shares(lambda t: bpe.encode(t, add_special_tokens=False).ids, btoks, texts)}
            r["langs"][lang] = e
        res["runs"][name] = r
        print(f"[lang] {name}: " + ", ".join(
            f"{l} {v['vocab']['cnf']['total']}/{v['vocab']['bpe']['total']}" for l, v in r["langs"].items()), flush=True)
    res["load_after"] = os.getloadavg()
    res["runtime_s"] = round(time.perf_counter() - t0, 1)
    return res


def render(res: Dict[str, Any], md: Path) -> None:
    L = [C.header_md(res, "Languages of multi below the BPE: where their tokens go"), ""]
    L += ["Vocabularies of `experiments/generalisation.py` (`cnfmce.train` on the protocol's training mix, "
          "[generalisation.md](generalisation.md)) next to the same-data byte-level BPE of the same size. "
          "*Script tokens*: vocabulary tokens whose letters all belong to the language's script (vi: Latin, "
          "so the count is every Latin token), by length in characters (surrounding spaces not counted). "
          "Then, on the language's **in-domain** and **held-out-by-package** evaluation text, characters per "
          "token and the share of its tokens by length in characters (*byte piece*: a token that is not "
          "valid UTF-8, part of a character spelled in bytes).", ""]
    summary = []
    for name, r in res["runs"].items():
        parts = []
        for lang, e in r["langs"].items():
            c, b = e["vocab"]["cnf"].get("total", 0), e["vocab"]["bpe"].get("total", 0)
            gains = [f"{P.KIND_LABEL[k]} {C.pct(e[k]['cnf']['cpt'] / e[k]['bpe']['cpt'] - 1, sign=True)}"
                     for k in ("indomain", "heldout") if k in e]
            parts.append(f"{lang} {C.pct(c / b if b else None, 0)} ({', '.join(gains)})")
        summary.append(f"{r['size']}: " + "; ".join(parts))
    L += ["Script tokens of CNF as a share of the BPE's, with the gain in characters per token: "
          + ". ".join(summary) + ".", ""]
    L += ["## Ids per script", "",
          "Every vocabulary's ids by the script of their letters (*none*: no letter, or letters of two "
          "scripts; *bytes*: not valid UTF-8), CNF / the same-data BPE of the same size; the scripts with "
          "the most BPE ids:", ""]
    names = list(res["runs"])
    if names and all("scripts" in res["runs"][n] for n in names):
        first = res["runs"][names[0]]["scripts"]["bpe"]
        top = sorted(first, key=lambda k: -first[k])[:14]
        rows = []
        for sc in top:
            row = [sc]
            for n in names:
                c, b = res["runs"][n]["scripts"]["cnf"].get(sc, 0), res["runs"][n]["scripts"]["bpe"].get(sc, 0)
                row.append(f"{c:,} / {b:,} ({C.pct(c / b if b else None, 0)})")
            rows.append(row)
        L += [C.md_table(["script"] + [f"{res['runs'][n]['size']} {res['runs'][n]['config']}" for n in names], rows), ""]
    for name, r in res["runs"].items():
        L += [f"## {r['size']}, {r['config']} (selection=\"{r['selection']}\", "
              f"{r['covered_characters'] or 0:,} covered characters"
              + (f", {r['covered_beyond_cut']:,} of them below the raw vocabulary's cut" if r.get("covered_beyond_cut") is not None else "")
              + ")", ""]
        rows = []
        for lang, e in r["langs"].items():
            c, b = e["vocab"]["cnf"], e["vocab"]["bpe"]
            rows.append([lang, e["script"], f"{c.get('total', 0):,}", f"{b.get('total', 0):,}",
                         C.pct(c.get("total", 0) / b["total"] if b.get("total") else None)]
                        + [f"{c.get(k, 0):,} / {b.get(k, 0):,}" for k in BUCKETS[1:]])
        L += ["Script tokens in the vocabulary, CNF vs BPE:", "",
              C.md_table(["language", "script", "CNF", "BPE", "CNF / BPE"] + [f"{k} chars CNF / BPE" for k in BUCKETS[1:]], rows), ""]
        rows = []
        for lang, e in r["langs"].items():
            for kind in ("indomain", "heldout"):
                if kind not in e:
                    continue
                c, b = e[kind]["cnf"], e[kind]["bpe"]
                rows.append([lang, P.KIND_LABEL[kind], f"{c['chars']:,}", C.f3(c["cpt"]), C.f3(b["cpt"]),
                             C.pct(c["cpt"] / b["cpt"] - 1, sign=True)]
                            + [f"{C.pct(c['shares'][k])} / {C.pct(b['shares'][k])}" for k in BUCKETS])
        L += ["Evaluation text, CNF vs BPE:", "",
              C.md_table(["language", "evaluation", "chars", "CPT CNF", "CPT BPE", "gain"]
                         + [f"{k} CNF / BPE" for k in BUCKETS], rows), ""]
    md.write_text("\n".join(L))


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render)
