"""Building blocks of the issue-13 experiments (diagnosis, selection variants, defaults).

They drive the core primitives directly, so variants of CNF's filtering can be prototyped without
changing the core:

* :func:`raw_counts`: counts of the protocol's training text (``cnfmce.count``, once per setting),
  cached as arrays (``experiments/out/cnfx/<tag>/raw.npz``: candidates in counting rank, i.e. count
  descending, ties by bytes, and their counts); any smaller ``raw_vocab_size`` is a prefix.
* :func:`usage_pass`: one MCE pass of ``_core.Filter`` over documents with a given ranked token
  list (ids = position), returning the usage of every id, optionally per group of documents.
* :func:`tokenizer_from`: a :class:`cnfmce.Tokenizer` from tokens in id order.
* :func:`evaluate_sets`: characters per token of a tokenizer (cnfmce or HF BPE) on the protocol's
  in-domain and held-out-by-package sets, per category and per language.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C  # noqa: E402
import protocol as P  # noqa: E402

OUT = C.OUT / "cnfx"
SIZES = {"8k": 8_000, "16k": 16_000, "32k": 32_000, "64k": 64_000, "128k": 128_000,
         "250k": 250_000}
BATCH_BYTES = 4 << 20


# --- documents --------------------------------------------------------------------------------

def iter_docs(paths: Sequence[Path], step: int = 1) -> Iterable[Dict[str, Any]]:
    """The documents of ``paths`` in order; with ``step`` > 1, every ``step``-th one (0, step, ...)."""
    i = 0
    for p in paths:
        cat = Path(p).parent.name
        for d in C.read_jsonl(Path(p)):
            if i % step == 0:
                d["category"] = cat
                yield d
            i += 1


def batches(paths: Sequence[Path], key: Optional[Callable[[Dict[str, Any]], str]] = None,
            step: int = 1) -> Iterable[Tuple[Optional[str], List[str]]]:
    """(group, texts) batches of about ``BATCH_BYTES``; with ``key``, documents are grouped by
    ``key(doc)`` (all documents of a group in consecutive batches, groups in sorted order), which
    reads the files once per group... so only use it on the protocol's files (a few MB each)."""
    if key is None:
        batch: List[str] = []
        size = 0
        for d in iter_docs(paths, step):
            batch.append(d["text"])
            size += len(d["text"])
            if size >= BATCH_BYTES:
                yield None, batch
                batch, size = [], 0
        if batch:
            yield None, batch
        return
    groups: Dict[str, List[str]] = {}
    for d in iter_docs(paths, step):
        groups.setdefault(key(d), []).append(d["text"])
    for g in sorted(groups):
        texts = groups.pop(g)
        i = 0
        while i < len(texts):
            j, size = i, 0
            while j < len(texts) and (size < BATCH_BYTES or j == i):
                size += len(texts[j])
                j += 1
            yield g, texts[i:j]
            i = j


def cat_lang(d: Dict[str, Any]) -> str:
    """Group key: ``category`` for en/sci/math/code, ``category/lang`` for zh and multi."""
    c = d["category"]
    return f"{c}/{d.get('lang') or ''}" if c in P.HUMAN_LANG_CATEGORIES else c


def ascii_phrase(t: bytes) -> bool:
    """An ASCII token with a space between two non-spaces (several words: phrases of en, sci,
    math and code)."""
    return len(t) > 1 and t.isascii() and any(
        t[i] == 0x20 and t[i - 1] != 0x20 and t[i + 1] != 0x20 for i in range(1, len(t) - 1))


# --- counts as arrays -------------------------------------------------------------------------

class Raw:
    """A ranked raw vocabulary: ``tokens[i]`` (bytes) has count ``counts[i]``, best first."""

    def __init__(self, tokens: List[bytes], counts: np.ndarray, info: Dict[str, Any],
                 characters: Optional[Dict[bytes, int]] = None):
        self.tokens = tokens
        self.counts = counts
        self.info = info
        # every multi-byte character counting saw, with its exact count (cnfmce.Counts.characters;
        # None for a cache written before it was kept)
        self.characters = characters

    def __len__(self) -> int:
        return len(self.tokens)

    def ranked(self, m: Optional[int] = None) -> List[bytes]:
        """The raw vocabulary of SPEC section 4 for ``raw_vocab_size = m``: the first ``m``
        candidates, then the missing single bytes in byte order."""
        toks = self.tokens if m is None else self.tokens[:m]
        have = {t[0] for t in toks if len(t) == 1}
        return list(toks) + [bytes([b]) for b in range(256) if b not in have]


def raw_counts(tag: str, paths: Sequence[Path], m: int,
               rounds: Sequence[Sequence[int]] = None, log: Optional[list] = None) -> Raw:
    """Counts of ``paths`` (``cnfmce.count`` with raw_vocab_size ``m`` and ``rounds``), cached."""
    import cnfmce
    rounds = [list(r) for r in (rounds or cnfmce.DEFAULT_ROUNDS)]
    d = OUT / tag
    d.mkdir(parents=True, exist_ok=True)
    npz = d / "raw.npz"
    meta_p = d / "raw.json"
    params = {"paths": [str(p) for p in paths], "m": m, "rounds": rounds,
              "cnfmce": cnfmce.__version__}
    try:
        meta = json.loads(meta_p.read_text())
    except (OSError, ValueError):
        meta = None
    if not (npz.exists() and meta and meta.get("params") == params):
        print(f"[{tag}] counting {len(paths)} file(s), m={m:,}, rounds={rounds} ...", flush=True)
        t0 = time.perf_counter()
        cn = cnfmce.count([str(p) for p in paths], raw_vocab_size=m, rounds=rounds,
                          memory_limit=C.MEMORY_LIMIT, progress=False)
        secs = time.perf_counter() - t0
        items = sorted(cn.items(), key=lambda kv: (-kv[1], kv[0]))
        info = dict(cn.info)
        chars = {t.decode("utf-8"): c for t, c in cn.characters.items()}
        del cn
        blob = b"".join(t for t, _ in items)
        lens = np.fromiter((len(t) for t, _ in items), dtype=np.int64, count=len(items))
        cnts = np.fromiter((c for _, c in items), dtype=np.int64, count=len(items))
        del items
        tmp = d / "raw.tmp.npz"
        np.savez(tmp, blob=np.frombuffer(blob, dtype=np.uint8), lens=lens, counts=cnts)
        tmp.replace(npz)
        meta = {"params": params, "seconds": round(secs, 1), "info": info, "kept": int(len(cnts)),
                "characters": chars}
        meta_p.write_text(json.dumps(meta, indent=1, default=str))
        print(f"[{tag}] counted in {secs:.0f}s: {len(cnts):,} candidates", flush=True)
    if log is not None:
        log.append({"step": f"{tag}/count", "seconds": meta["seconds"]})
    z = np.load(npz)
    blob = z["blob"].tobytes()
    ends = np.cumsum(z["lens"])
    starts = ends - z["lens"]
    toks = [blob[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
    chars = meta.get("characters")
    return Raw(toks, z["counts"], meta, None if chars is None else {k.encode("utf-8"): v for k, v in chars.items()})


# --- filtering primitives ----------------------------------------------------------------------

def make_filter(ranked: Sequence[bytes], num_threads: Optional[int] = None):
    """A ``_core.Filter`` whose ids are the positions of ``ranked`` (which must hold every single
    byte); filtering uses MCE with the default λ and ε."""
    from cnfmce import _core
    return _core.Filter(list(ranked), None, num_threads)


def usage_pass(ranked: Sequence[bytes], paths: Sequence[Path],
               key: Optional[Callable[[Dict[str, Any]], str]] = None,
               num_threads: Optional[int] = None, step: int = 1) -> Dict[str, Any]:
    """MCE over the documents of ``paths`` with vocabulary ``ranked`` (id = position).

    Returns ``{"usage": int64 array, "tokens": N, "bytes": B, "seconds": s}`` and, with ``key``,
    ``"groups": {group: {"ids", "counts" (sparse usage), "tokens", "bytes"}}``."""
    from cnfmce import _core
    t0 = time.perf_counter()
    flt = make_filter(ranked, num_threads)
    t_build = time.perf_counter() - t0
    groups: Dict[str, Any] = {}
    total = np.zeros(len(ranked), dtype=np.int64)
    ntok = nbytes = 0
    cur = None
    acc = None

    def close(g, blk):
        nonlocal total, ntok, nbytes
        u = np.asarray(blk.usage, dtype=np.int64)
        total += u
        ntok += blk.tokens
        nbytes += blk.bytes
        if key is not None:
            nz = np.nonzero(u)[0]
            groups[g] = {"ids": nz, "counts": u[nz], "tokens": blk.tokens, "bytes": blk.bytes}

    for g, texts in batches(paths, key, step):
        if acc is not None and g != cur:
            close(cur, acc)
            acc = None
        cur = g
        blk = flt.usage_of(texts)
        acc = blk if acc is None else acc.merge(blk)
    if acc is not None:
        close(cur, acc)
    out = {"usage": total, "tokens": ntok, "bytes": nbytes, "seconds": time.perf_counter() - t0,
           "build_seconds": t_build}
    if key is not None:
        out["groups"] = groups
    return out


def top_by(score: np.ndarray, ranked: Sequence[bytes], k: int,
           tiebreak_usage: Optional[np.ndarray] = None) -> List[bytes]:
    """The final vocabulary in id order: all 256 single bytes plus the ``k - 256`` multi-byte
    tokens of highest ``score`` (ties by bytes; among score-0 tokens, by position in ``ranked``,
    i.e. counting rank); ids by ``tiebreak_usage`` (default ``score``) descending, ties by bytes.
    With ``score`` = the usage of a filtering pass over the raw vocabulary this is exactly the
    core's ``Filter.select`` (SPEC section 4)."""
    n = len(ranked)
    single = np.fromiter((len(t) == 1 for t in ranked), dtype=bool, count=n)
    idx = np.nonzero(~single)[0]
    sc = np.asarray(score)[idx]
    order = np.argsort(-sc, kind="stable")  # stable: equal scores stay in counting rank
    need = max(0, k - 256)
    if need < len(order):
        cut = sc[order[need - 1]] if need > 0 else None
        if cut is None:
            chosen = []
        else:
            above = order[sc[order] > cut]
            tied = order[sc[order] == cut].tolist()
            if cut > 0:
                tied.sort(key=lambda i: ranked[idx[i]])
            chosen = list(idx[above]) + [idx[i] for i in tied[: need - len(above)]]
    else:
        chosen = list(idx[order])
    chosen = [int(i) for i in chosen] + [int(i) for i in np.nonzero(single)[0]]
    u = np.asarray(score if tiebreak_usage is None else tiebreak_usage)
    chosen.sort(key=lambda i: (-float(u[i]), ranked[i]))
    return [ranked[i] for i in chosen]


def cached_usage(tag: str, name: str, ranked: Sequence[bytes], paths: Sequence[Path],
                 grouped: bool = True, step: int = 1) -> Dict[str, Any]:
    """:func:`usage_pass` (grouped by :func:`cat_lang`), cached in
    ``experiments/out/cnfx/<tag>/<name>.usage.npz`` (the caller names the vocabulary uniquely)."""
    d = OUT / tag
    d.mkdir(parents=True, exist_ok=True)
    import hashlib
    h = hashlib.sha256()
    for t in ranked:
        h.update(len(t).to_bytes(1, "little"))
        h.update(t)
    params = {"vocab_sha": h.hexdigest(), "n": len(ranked), "paths": [str(x) for x in paths],
              "grouped": grouped}
    if step != 1:
        params["step"] = step
    # a grouped pass also serves ungrouped requests
    for g in ([True, False] if not grouped else [True]):
        pg = d / f"{name}.usage{'' if g else '-flat'}.npz"
        try:
            meta = json.loads(pg.with_suffix(".json").read_text())
        except (OSError, ValueError):
            continue
        if pg.exists() and meta.get("params") == dict(params, grouped=g):
            z = np.load(pg)
            out = {"usage": z["usage"], "tokens": meta["tokens"], "bytes": meta["bytes"],
                   "seconds": meta["seconds"], "build_seconds": meta["build_seconds"]}
            if grouped:
                out["groups"] = {gr: {"ids": z[f"i:{gr}"], "counts": z[f"c:{gr}"], **meta["groups"][gr]}
                                 for gr in meta["groups"]}
            return out
    p = d / f"{name}.usage{'' if grouped else '-flat'}.npz"
    meta_p = p.with_suffix(".json")
    print(f"[{tag}] usage pass {name} ({len(ranked):,} tokens) ...", flush=True)
    r = usage_pass(ranked, paths, cat_lang if grouped else None, step=step)
    arrs = {"usage": r["usage"]}
    gm = {}
    for g, v in r.get("groups", {}).items():
        arrs[f"i:{g}"] = v["ids"]
        arrs[f"c:{g}"] = v["counts"]
        gm[g] = {"tokens": v["tokens"], "bytes": v["bytes"]}
    tmp = p.with_suffix(".tmp.npz")
    np.savez(tmp, **arrs)
    tmp.replace(p)
    meta_p.write_text(json.dumps({"params": params, "tokens": r["tokens"], "bytes": r["bytes"],
                                  "seconds": round(r["seconds"], 1),
                                  "build_seconds": round(r["build_seconds"], 1), "groups": gm}))
    print(f"[{tag}] usage pass {name}: {r['seconds']:.0f}s", flush=True)
    return r


def tokenizer_from(tokens: Sequence[bytes]):
    import cnfmce
    return cnfmce.Tokenizer.from_tokens(list(tokens))


def save_vocab(path: Path, tokens: Sequence[bytes], meta: Dict[str, Any]) -> None:
    import base64
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt") as fh:
        fh.write(json.dumps(meta) + "\n")
        for t in tokens:
            fh.write(base64.b64encode(t).decode() + "\n")
    tmp.replace(path)


def load_vocab(path: Path) -> Tuple[List[bytes], Dict[str, Any]]:
    import base64
    with gzip.open(path, "rt") as fh:
        meta = json.loads(fh.readline())
        toks = [base64.b64decode(line.strip()) for line in fh if line.strip()]
    return toks, meta


# --- evaluation ---------------------------------------------------------------------------------

_EVAL: Dict[Tuple[str, str], Tuple[List[str], List[str]]] = {}


def eval_docs(cat: str, kind: str) -> Tuple[List[str], List[str]]:
    if (cat, kind) not in _EVAL:
        _EVAL[(cat, kind)] = P.load_eval(cat, kind)
    return _EVAL[(cat, kind)]


def is_cnf(tok: Any) -> bool:
    import cnfmce
    return isinstance(tok, cnfmce.Tokenizer)


def token_counts(tok: Any, texts: List[str]) -> List[int]:
    """Tokens per document: a cnfmce Tokenizer or an HF tokenizers.Tokenizer."""
    if is_cnf(tok):
        return [len(x) for x in tok.encode_batch(texts)]
    encs = tok.encode_batch(texts, add_special_tokens=False)
    return [len(e.ids) for e in encs]


def evaluate_sets(tok: Any, kinds: Sequence[str] = ("indomain", "heldout"),
                  cats: Sequence[str] = tuple(C.CATEGORIES)) -> Dict[str, Any]:
    """``{kind: {cat: {"chars", "tokens", "cpt", "langs": {lang: {chars, tokens, cpt}}}}}``."""
    out: Dict[str, Any] = {}
    for kind in kinds:
        out[kind] = {}
        for cat in cats:
            texts, langs = eval_docs(cat, kind)
            n = token_counts(tok, texts)
            per: Dict[str, List[int]] = {}
            for t, l, k in zip(texts, langs, n):
                a = per.setdefault(l, [0, 0])
                a[0] += len(t)
                a[1] += k
            ch = sum(len(t) for t in texts)
            nt = sum(n)
            out[kind][cat] = {"chars": ch, "tokens": nt, "cpt": ch / nt if nt else None,
                              "langs": {l: {"chars": a[0], "tokens": a[1],
                                            "cpt": a[0] / a[1] if a[1] else None}
                                        for l, a in sorted(per.items())}}
    return out


def hf_bpe(tag: str, paths: Sequence[Path], size: int, log: Optional[list] = None):
    """The same-data byte-level BPE of ``paths`` at ``size`` (cached by ``common.cached_hf_bpe``)."""
    return C.cached_hf_bpe(f"cnfx/{tag}", f"bpe{size // 1000}k", paths, size, log)


# --- token classes and scripts -------------------------------------------------------------------

LANG_SCRIPT = {"zh": "Han", "zh-Hant": "Han", "ja": "Japanese", "ko": "Hangul", "ru": "Cyrillic",
               "el": "Greek", "km": "Khmer", "dz": "Tibetan", "fa": "Arabic", "ar": "Arabic",
               "hi": "Devanagari"}
SCRIPTS = ["Latin", "Cyrillic", "Greek", "Han", "Hiragana", "Katakana", "Hangul", "Khmer",
           "Tibetan", "Arabic", "Devanagari", "Ethiopic", "Thai"]
_SCRIPT_CACHE: Dict[str, str] = {}


def group_script(group: str) -> str:
    """The writing system of an evaluation/training group (``en``, ``multi/ja``, ...)."""
    if "/" not in group:
        return "ASCII-heavy (en/sci/math/code)"
    lang = group.split("/", 1)[1]
    s = LANG_SCRIPT.get(lang, "Latin")
    return "Japanese (kana + Han)" if s == "Japanese" else s


def char_script(ch: str) -> str:
    s = _SCRIPT_CACHE.get(ch)
    if s is None:
        import regex
        s = "other"
        for name in SCRIPTS:
            if regex.match(r"\p{Script=" + name + "}", ch):
                s = name
                break
        else:
            if regex.match(r"[\p{Script=Common}\p{Script=Inherited}]", ch):
                s = "common"
        _SCRIPT_CACHE[ch] = s
    return s


def token_script(b: bytes) -> str:
    """``partial`` (not valid UTF-8: byte pieces of characters), ``ASCII``, else the script of the
    first non-ASCII letter-like character (``common`` when there is none: symbols, punctuation)."""
    if b.isascii():
        return "ASCII"
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return "partial"
    for ch in s:
        if ord(ch) > 127:
            sc = char_script(ch)
            if sc != "common":
                return "Japanese" if sc in ("Hiragana", "Katakana") else sc
    return "common"


CLASSES = ["byte piece", "1 char", "2-3 chars", "4-7 chars", "8+ chars"]


def token_class(b: bytes) -> Tuple[str, bool]:
    """(length class, multi-word): ``byte piece`` when the token is not valid UTF-8 (a fallback to
    bytes of a character), else its length in characters; multi-word when a whitespace character
    separates two non-whitespace characters."""
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return "byte piece", False
    n = len(s)
    cls = "1 char" if n == 1 else "2-3 chars" if n <= 3 else "4-7 chars" if n <= 7 else "8+ chars"
    core = s.strip()
    multi = any(c.isspace() for c in core)
    return cls, multi


def class_table(tokens: Sequence[bytes]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per token id: class index (into CLASSES), multi-word flag, length in characters (bytes for
    byte pieces)."""
    cls = np.empty(len(tokens), dtype=np.int8)
    multi = np.zeros(len(tokens), dtype=bool)
    nch = np.empty(len(tokens), dtype=np.int32)
    for i, b in enumerate(tokens):
        c, m = token_class(b)
        cls[i] = CLASSES.index(c)
        multi[i] = m
        try:
            nch[i] = len(b.decode("utf-8"))
        except UnicodeDecodeError:
            nch[i] = 0
    return cls, multi, nch


# --- the cost of doing without a token ------------------------------------------------------------

def alt_costs(cands: Sequence[bytes], vocab_tok: Any, chunk: int = 200_000) -> np.ndarray:
    """For every candidate ``t``: the fewest tokens of ``vocab_tok`` (a cnfmce Tokenizer) that
    spell ``t`` without using ``t`` itself: ``min over character boundaries p`` of
    ``len(enc(t[:p])) + len(enc(t[p:]))`` (so a single character costs its UTF-8 length, the byte
    fallback). Candidates that are not valid UTF-8 (single bytes) get 1."""
    out = np.ones(len(cands), dtype=np.int32)
    pieces: List[str] = []
    owner: List[int] = []
    splits: List[int] = []

    def flush():
        if not pieces:
            return
        lens = [len(x) for x in vocab_tok.encode_batch(pieces)]
        # pieces come in (prefix, suffix) pairs
        best: Dict[int, int] = {}
        for j in range(0, len(lens), 2):
            o = owner[j // 2]
            v = lens[j] + lens[j + 1]
            if v < best.get(o, 1 << 30):
                best[o] = v
        for o, v in best.items():
            out[o] = v
        pieces.clear()
        owner.clear()

    for i, b in enumerate(cands):
        try:
            s = b.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(s) == 1:
            out[i] = len(b)
            continue
        for p in range(1, len(s)):
            pieces.append(s[:p])
            pieces.append(s[p:])
            owner.append(i)
        if len(pieces) >= chunk:
            flush()
    flush()
    return out
