"""Issue 13, zh per source package: budget or method? (docs/results/zh_sources.md)

Step 1: CNF (selection paper / refined / refined-non-ascii) and the same-data byte-level BPE
(HF tokenizers, GPT-4 split, ``common.cached_hf_bpe``) trained on the Chinese training text alone
($CNFMCE_SHARED/corpora/zh/train.jsonl.gz) at 32k, evaluated in characters per token per source
package on zh/test.jsonl.gz (in-domain: the test documents of packages that are in training).

Artifacts are cached under experiments/out/zh_sources/.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

ZH = C.SHARED / "corpora" / "zh"
TRAIN = ZH / "train.jsonl.gz"
TEST = ZH / "test.jsonl.gz"
OUT = C.OUT / "zh_sources"
SELECTIONS = ["paper", "refined", "refined-non-ascii"]


def test_docs():
    docs = defaultdict(list)
    for l in gzip.open(TEST, "rt"):
        d = json.loads(l)
        docs[d["source"]].append(d["text"])
    return docs


def cnf(size: int, selection: str, counts_tag: str = "", rounds=None, raw=None):
    import cnfmce
    name = f"cnf{size // 1000}k-{selection}{counts_tag}"
    p = OUT / f"{name}.cnfmce.json"
    if p.exists():
        return cnfmce.Tokenizer.load(str(p))
    cp = OUT / f"counts{size // 1000}k{counts_tag}.cnfmce-counts"
    t0 = time.process_time(); w0 = time.perf_counter()
    if cp.exists():
        counts = cnfmce.load_counts(str(cp))
    else:
        kw = {}
        if rounds is not None:
            kw["rounds"] = rounds
        counts = cnfmce.count([str(TRAIN)], raw_vocab_size=raw or 10 * size, progress=False,
                              num_threads=2, **kw)
        cnfmce.save_counts(counts, str(cp))
    tok = cnfmce.train_from_counts(counts, [str(TRAIN)], vocab_size=size, selection=selection,
                                   progress=False, num_threads=2)
    tok.save(str(p))
    print(f"[zh_sources] {name}: {time.perf_counter() - w0:.0f}s wall, "
          f"{time.process_time() - t0:.0f}s cpu", flush=True)
    return tok


def bpe(size: int):
    return C.cached_hf_bpe("zh_sources", f"bpe{size // 1000}k", [TRAIN], size)


def ntok(tok, texts):
    import cnfmce
    if isinstance(tok, cnfmce.Tokenizer):
        return sum(len(x) for x in tok.encode_batch(texts))
    return sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))


def per_source(tok, docs):
    return {s: {"chars": sum(map(len, t)), "tokens": ntok(tok, t)} for s, t in docs.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=32_000)
    ap.add_argument("--selections", default=",".join(SELECTIONS))
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    docs = test_docs()
    res = {}
    b = bpe(a.size)
    res["bpe"] = per_source(b, docs)
    for sel in a.selections.split(","):
        res[sel] = per_source(cnf(a.size, sel), docs)
    (OUT / f"step1-{a.size // 1000}k.json").write_text(json.dumps(res, indent=1))
    srcs = sorted(docs, key=lambda s: -res["bpe"][s]["chars"])
    print("| source | chars | BPE CPT | " + " | ".join(k for k in res if k != "bpe") + " |")
    for s in srcs + ["ALL"]:
        if s == "ALL":
            agg = {k: {"chars": sum(v["chars"] for v in r.values()),
                       "tokens": sum(v["tokens"] for v in r.values())} for k, r in res.items()}
        else:
            agg = {k: r[s] for k, r in res.items()}
        bc = agg["bpe"]["chars"] / agg["bpe"]["tokens"]
        cells = [f"{(agg[k]['chars'] / agg[k]['tokens']) / bc - 1:+.1%}" for k in res if k != "bpe"]
        print(f"| {s} | {agg['bpe']['chars']:,} | {bc:.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
