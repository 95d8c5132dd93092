"""The held-out-by-package protocol: which source packages of the shared corpora are kept out of
training, and the three document sets every compression experiment of issue 13 uses.

    python experiments/protocol.py          # writes docs/results/protocol.{json,md}
    python experiments/protocol.py --render # rewrite the page from the JSON

Unit of holding out: a *package family*, the ``source`` field with a trailing language code
removed (``deb:maint-guide-zh-cn`` -> ``deb:maint-guide``; the code must be a ``lang`` value of the
corpora, lower-cased, or ``zh-cn``/``zh-tw``/``pt-br``), so a held-out manual is held out with all
its translations, in every category it appears in (``deb:debian-handbook`` is in en, zh and
multi; ``pypi:django`` in en and code).

Choice (deterministic, no randomness beyond a fixed hash): families are ordered by
``sha256(SEED + family)``. Categories are filled in the order multi, zh, en, sci, math, code (the
most constrained first); for each, the families present in it are walked in hash order and one is
held out when, with it,

* the category's held-out share (train + test bytes) stays at most ``CAP`` (12%),
* every other category's share stays at most ``OTHER_CAP`` (15%),
* every language of zh and multi keeps at least ``KEEP_LANG`` (50%) of its training bytes.

The three sets, per category (files under ``experiments/out/protocol/``):

* ``train``: the category's ``train.jsonl.gz`` without the held-out families (what every
  vocabulary of these experiments is trained on);
* ``indomain``: its ``test.jsonl.gz`` without the held-out families (held-out documents of
  packages that are in training: *in-domain*);
* ``heldout``: every document (train and test files) of the held-out families (*held out by
  package*).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C  # noqa: E402

NAME = "protocol"
SEED = "cnfmce-heldout-v1:"
CAP = 0.12
OTHER_CAP = 0.15
KEEP_LANG = 0.5
FILL_ORDER = ["multi", "zh", "en", "sci", "math", "code"]
HUMAN_LANG_CATEGORIES = ("zh", "multi")
EXTRA_CODES = ("zh-cn", "zh-tw", "pt-br")
KINDS = ("train", "indomain", "heldout")
KIND_LABEL = {"indomain": "in-domain", "heldout": "held-out-by-package"}
OUT = C.OUT / "protocol"
VERSION = 1


def _corpus_key() -> List[List[Any]]:
    """Identifies the corpora files (path, size, mtime): the cache is rebuilt when they change."""
    key = []
    for cat in C.CATEGORIES:
        for split in ("train", "test"):
            p = C.corpus_path(cat, split)
            s = p.stat()
            key.append([str(p), s.st_size, int(s.st_mtime)])
    return key


def scan() -> Dict[str, Any]:
    """Bytes and characters per (source, category, split) and per (source, category, split, lang),
    cached in ``experiments/out/protocol/scan.json``."""
    OUT.mkdir(parents=True, exist_ok=True)
    p = OUT / "scan.json"
    key = _corpus_key()
    try:
        cached = json.loads(p.read_text())
        if cached.get("key") == key:
            return cached
    except (OSError, ValueError):
        pass
    rows: Dict[str, Dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for cat in C.CATEGORIES:
        for split in ("train", "test"):
            for d in C.read_jsonl(C.corpus_path(cat, split)):
                t = d["text"]
                k = "\t".join([d["source"], cat, split, d.get("lang") or ""])
                rows[k]["docs"] += 1
                rows[k]["chars"] += len(t)
                rows[k]["bytes"] += len(t.encode("utf-8", "surrogatepass"))
    out = {"key": key, "rows": [k.split("\t") + [v["docs"], v["chars"], v["bytes"]]
                                 for k, v in sorted(rows.items())]}
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(p)
    return out


def language_codes(sc: Dict[str, Any]) -> List[str]:
    codes = {r[3].lower() for r in sc["rows"] if r[3] and r[1] != "code"}
    codes.discard("code")
    codes.update(EXTRA_CODES)
    return sorted(codes, key=lambda c: (-len(c), c))


def family(source: str, codes: Sequence[str]) -> str:
    """``source`` without a trailing ``-<language code>`` (longest code first)."""
    for c in codes:
        if source.endswith("-" + c) and len(source) > len(c) + 1:
            return source[: -len(c) - 1]
    return source


def choose(sc: Dict[str, Any], seed: str = SEED, exclude: Sequence[str] = (),
           keep_lang: float = KEEP_LANG) -> Dict[str, Any]:
    """The held-out families and the bookkeeping that chose them (see the module docstring).
    ``seed``, ``exclude`` (families already held out by another set, which are not chosen and
    count against every language's share) and ``keep_lang`` (the share of each language's
    training bytes that must stay in training, counting ``exclude``) make other held-out sets
    (``experiments/defaults.py``'s test split) by the same rule."""
    codes = language_codes(sc)
    cat_total: Counter = Counter()         # category -> bytes (train + test)
    lang_train: Counter = Counter()        # (category, lang) -> training bytes
    fam_bytes: Dict[str, Counter] = defaultdict(Counter)       # family -> category -> bytes
    fam_lang_train: Dict[str, Counter] = defaultdict(Counter)  # family -> (cat, lang) -> train bytes
    members: Dict[str, set] = defaultdict(set)
    for src, cat, split, lang, _docs, _chars, nbytes in sc["rows"]:
        f = family(src, codes)
        members[f].add(src)
        cat_total[cat] += nbytes
        fam_bytes[f][cat] += nbytes
        if split == "train":
            lang_train[(cat, lang)] += nbytes
            fam_lang_train[f][(cat, lang)] += nbytes
    order = sorted(members, key=lambda f: hashlib.sha256((seed + f).encode()).hexdigest())
    held: Counter = Counter()
    held_lang: Counter = Counter()
    for f in exclude:
        held_lang.update(fam_lang_train[f])
    chosen: List[str] = []
    for cat in FILL_ORDER:
        for f in order:
            if f in chosen or f in exclude or not fam_bytes[f][cat]:
                continue
            add = fam_bytes[f]
            if held[cat] + add[cat] > CAP * cat_total[cat]:
                continue
            if any(held[o] + add[o] > OTHER_CAP * cat_total[o] for o in add):
                continue
            if any(held_lang[cl] + b > (1 - keep_lang) * lang_train[cl]
                   for cl, b in fam_lang_train[f].items() if cl[0] in HUMAN_LANG_CATEGORIES):
                continue
            held.update(add)
            held_lang.update(fam_lang_train[f])
            chosen.append(f)
    return {"families": sorted(chosen), "order_chosen": chosen,
            "sources": sorted(s for f in chosen for s in members[f]),
            "family_members": {f: sorted(members[f]) for f in chosen},
            "codes": codes}


def _params() -> Dict[str, Any]:
    return {"version": VERSION, "seed": SEED, "cap": CAP, "other_cap": OTHER_CAP,
            "keep_lang": KEEP_LANG, "fill_order": FILL_ORDER, "corpora": _corpus_key()}


def write_sets(d0: Path, kinds: Sequence[str], kind_of: Any) -> Tuple[Dict[str, Dict[str, str]], Dict[str, Any]]:
    """Writes every document of the shared train and test files of each category to
    ``d0/<cat>/<kind>.jsonl.gz``, ``kind_of(cat, split, doc)`` choosing the kind (files replaced
    atomically); returns (category -> kind -> path, category -> kind -> statistics)."""
    paths: Dict[str, Dict[str, str]] = {}
    stats: Dict[str, Dict[str, Any]] = {}
    for cat in C.CATEGORIES:
        d = d0 / cat
        d.mkdir(parents=True, exist_ok=True)
        paths[cat] = {k: str(d / f"{k}.jsonl.gz") for k in kinds}
        fhs = {k: gzip.open(str(d / f"{k}.jsonl.gz.tmp"), "wt", encoding="utf-8", compresslevel=5)
               for k in kinds}
        st = {k: {"docs": 0, "chars": 0, "bytes": 0, "langs": Counter(), "sources": Counter()}
              for k in kinds}
        for split in ("train", "test"):
            for doc in C.read_jsonl(C.corpus_path(cat, split)):
                kind = kind_of(cat, split, doc)
                fhs[kind].write(json.dumps(doc, ensure_ascii=False) + "\n")
                s = st[kind]
                s["docs"] += 1
                s["chars"] += len(doc["text"])
                s["bytes"] += len(doc["text"].encode("utf-8", "surrogatepass"))
                s["langs"][doc.get("lang") or ""] += len(doc["text"])
                s["sources"][doc["source"]] += 1
        for k, fh in fhs.items():
            fh.close()
            Path(paths[cat][k] + ".tmp").replace(paths[cat][k])
        stats[cat] = {k: {"docs": v["docs"], "chars": v["chars"], "bytes": v["bytes"],
                          "lang_chars": dict(sorted(v["langs"].items())),
                          "sources": len(v["sources"])} for k, v in st.items()}
    return paths, stats


def cached_sets(meta_p: Path, params: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The record ``meta_p`` of sets written earlier by :func:`write_sets` with the same
    ``params``, if every file it names still exists."""
    try:
        meta = json.loads(meta_p.read_text())
        if meta.get("params") == params and all(Path(p).exists() for c in meta["paths"].values()
                                                 for p in c.values()):
            return meta
    except (OSError, ValueError, KeyError):
        pass
    return None


def materialize() -> Dict[str, Any]:
    """Writes the three sets per category (once; cached with the parameters that made them) and
    returns ``{"choice": ..., "paths": {cat: {kind: path}}, "stats": ...}``."""
    OUT.mkdir(parents=True, exist_ok=True)
    meta_p = OUT / "split.json"
    params = _params()
    meta = cached_sets(meta_p, params)
    if meta is not None:
        return meta
    sc = scan()
    choice = choose(sc)
    held = set(choice["sources"])
    paths, stats = write_sets(OUT, KINDS, lambda cat, split, doc: "heldout" if doc["source"] in held
                              else ("train" if split == "train" else "indomain"))
    meta = {"params": params, "choice": choice, "paths": paths, "stats": stats}
    tmp = meta_p.with_suffix(".tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    tmp.replace(meta_p)
    return meta


def train_paths(cats: Sequence[str] = tuple(C.CATEGORIES)) -> List[Path]:
    """The protocol's training files of ``cats`` (default: the whole mix)."""
    m = materialize()
    return [Path(m["paths"][c]["train"]) for c in cats]


def eval_path(cat: str, kind: str) -> Path:
    if kind not in ("indomain", "heldout"):
        raise ValueError(f"kind must be 'indomain' or 'heldout', got {kind!r}")
    return Path(materialize()["paths"][cat][kind])


def load_eval(cat: str, kind: str) -> Tuple[List[str], List[str]]:
    """(texts, langs) of an evaluation set, in file order."""
    texts, langs = [], []
    for d in C.read_jsonl(eval_path(cat, kind)):
        texts.append(d["text"])
        langs.append(d.get("lang") or "")
    return texts, langs


# --- page -------------------------------------------------------------------------------------

def run(args: Any) -> Dict[str, Any]:
    t0 = time.perf_counter()
    res = C.run_header(NAME, False)
    m = materialize()
    res.update(params={k: v for k, v in m["params"].items() if k != "corpora"},
               choice=m["choice"], stats=m["stats"])
    res["runtime_s"] = round(time.perf_counter() - t0, 1)
    return res


def render(res: Dict[str, Any], md: Path) -> None:
    p = res["params"]
    st = res["stats"]
    ch = res["choice"]
    L = [C.header_md(res, "Evaluation protocol: held out by package, and in-domain"), ""]
    L += ["Every compression number of issue 13 (and, from now on, of the README) says which of two "
          "evaluation kinds it is:", "",
          "* **held-out-by-package**: text of source packages that no vocabulary of the experiment "
          "was trained on (the honest estimate of compression on new text of the same kind);",
          "* **in-domain**: held-out *documents* of packages that also have training documents (the "
          "shared corpora's `test.jsonl.gz`, which holds out groups of related documents, not "
          "packages), minus the held-out packages.", "",
          "Both are measured on vocabularies trained on the same text: all six `train.jsonl.gz` "
          "without the held-out packages.", "",
          "## How the packages are chosen", "",
          "The unit is a *package family*: the `source` field without a trailing language code "
          "(`deb:maint-guide-zh-cn` → `deb:maint-guide`), so a manual is held out with all its "
          "translations and in every category it appears in (some packages are in several: "
          "`deb:debian-handbook` in en, zh and multi, `pypi:django` in en and code). The code must "
          "be one of the corpora's `lang` values (lower-cased) or `zh-cn`, `zh-tw`, `pt-br`; the "
          "rule is mechanical, so `deb:fortunes-zh` (Chinese fortunes) joins `deb:fortunes`.", "",
          f"Families are ordered by `sha256(\"{p['seed']}\" + family)`. Categories are filled in "
          f"the order {', '.join(p['fill_order'])} (most constrained first): the families present "
          "in a category are walked in hash order, and one is held out when, with it, that "
          f"category's held-out share (train + test bytes) stays ≤ {p['cap']:.0%}, every other "
          f"category's ≤ {p['other_cap']:.0%}, and every language of zh and multi keeps ≥ "
          f"{p['keep_lang']:.0%} of its training bytes (so no language disappears from training). "
          "Implemented in `experiments/protocol.py` (`materialize()` writes the three sets under "
          "`experiments/out/protocol/<category>/{train,indomain,heldout}.jsonl.gz`).", "",
          "## The sets", ""]
    rows = []
    for cat in C.CATEGORIES:
        s = st[cat]
        tot = s["train"]["bytes"] + s["indomain"]["bytes"] + s["heldout"]["bytes"]
        rows.append([cat, f"{s['train']['docs']:,}", C.mb(s["train"]["bytes"]),
                     f"{s['indomain']['docs']:,}", C.mb(s["indomain"]["bytes"]),
                     f"{s['heldout']['docs']:,}", C.mb(s["heldout"]["bytes"]),
                     C.pct(s["heldout"]["bytes"] / tot), f"{s['heldout']['sources']}"])
    tr = sum(st[c]["train"]["bytes"] for c in C.CATEGORIES)
    L += [C.md_table(["category", "train docs", "train", "in-domain docs", "in-domain",
                      "held-out docs", "held-out", "held-out share", "held-out packages"], rows), "",
          f"Training text of the mix: {C.mb(tr)} (all shared training text: 142.7 MB).", ""]
    L += ["## Held-out families", "",
          f"{len(ch['families'])} families ({len(ch['sources'])} packages):", ""]
    fams = []
    for f in ch["families"]:
        mem = ch["family_members"][f]
        fams.append(f"`{f}`" + (f" ({len(mem)} packages)" if len(mem) > 1 or mem[0] != f else ""))
    L += [", ".join(fams), ""]
    L += ["## Languages of zh and multi", "",
          "Characters per set (a language with no held-out text has no held-out-by-package number).", ""]
    rows = []
    for cat in HUMAN_LANG_CATEGORIES:
        langs = sorted(set(st[cat]["train"]["lang_chars"]) | set(st[cat]["heldout"]["lang_chars"]),
                       key=lambda l: -st[cat]["train"]["lang_chars"].get(l, 0))
        for lang in langs:
            rows.append([f"{cat}/{lang}"] + [f"{st[cat][k]['lang_chars'].get(lang, 0):,}" for k in KINDS])
    L += [C.md_table(["language", "train chars", "in-domain chars", "held-out chars"], rows), ""]
    md.write_text("\n".join(L))


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render)
