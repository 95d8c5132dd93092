"""Issue 13, item 1: why CNF loses its edge on Chinese and multilingual text -- measurements.

    python experiments/diagnosis.py           # writes docs/results/diagnosis.{json,md}
    python experiments/diagnosis.py --render  # rewrite the page from the JSON

Vocabularies: the paper's CNF (counting with rounds (1-12, 0), (13-21, 80), (22-30, 80), raw
vocabulary m = 5,000,000, one MCE filtering pass, top-k by usage) and the same-data byte-level BPE
(HF ``tokenizers``, GPT-4 split), both trained on the protocol's training mix
(``experiments/protocol.py``: all shared training text without the held-out packages), at 32k,
128k and 250k. Evaluated on the in-domain and the held-out-by-package sets.

Everything is computed with the core primitives (``cnfmce.count``, ``_core.Filter``); the CNF
vocabularies are bit-identical to ``cnfmce.train_from_counts`` (checked in
``experiments/cnfx.py``'s ``top_by``).
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cnfx as X  # noqa: E402
import common as C  # noqa: E402
import protocol as P  # noqa: E402

NAME = "diagnosis"
PAPER_M = 5_000_000
SIZES = {s: X.SIZES[s] for s in ("32k", "128k", "250k")}
KINDS = ("indomain", "heldout")
MIN_LANG_CHARS = 20_000  # per-language CPT only where the evaluation set has this much text


def groups_of(stats: Dict[str, Any], kind: str) -> List[str]:
    out = []
    for cat in C.CATEGORIES:
        if cat in P.HUMAN_LANG_CATEGORIES:
            out += [f"{cat}/{l}" for l in stats[cat][kind]["lang_chars"]]
        else:
            out.append(cat)
    return out


def encode_counts(tok: Any, texts: List[str], n_ids: int) -> np.ndarray:
    """Occurrences of every id in the encodings of ``texts``."""
    cnt = np.zeros(n_ids, dtype=np.int64)
    step = 256
    for i in range(0, len(texts), step):
        chunk = texts[i:i + step]
        if X.is_cnf(tok):
            ids = tok.encode_batch(chunk)
        else:
            ids = [e.ids for e in tok.encode_batch(chunk, add_special_tokens=False)]
        flat = np.fromiter((i for x in ids for i in x), dtype=np.int64)
        if len(flat):
            cnt += np.bincount(flat, minlength=n_ids)[:n_ids]
    return cnt


def bpe_tokens(hf: Any) -> List[bytes]:
    """The bytes of every id of a byte-level HF BPE (GPT-2 byte alphabet)."""
    from cnfmce.adapters import as_encoder
    enc = as_encoder(hf)
    return [enc.token_bytes(i) for i in range(hf.get_vocab_size())]


def class_breakdown(cnt: np.ndarray, tokens: Sequence[bytes], tables) -> Dict[str, Any]:
    cls, multi, nch = tables
    n = int(cnt.sum())
    out = {"tokens": n}
    for ci, name in enumerate(X.CLASSES):
        sel = cls == ci
        out[name] = float(cnt[sel].sum() / n) if n else None
    out["multi-word"] = float(cnt[multi].sum() / n) if n else None
    bytes_total = sum(int(c) * len(tokens[i]) for i, c in zip(np.nonzero(cnt)[0], cnt[cnt > 0]))
    out["bytes"] = bytes_total
    return out


def run(args: Any) -> Dict[str, Any]:
    import cnfmce  # noqa: F401
    res = C.run_header(NAME, False)
    t_start = time.perf_counter()
    res["bench_wait"] = C.wait_for_benches()
    split = P.materialize()
    stats = split["stats"]
    paths = P.train_paths()
    log: List[Dict[str, Any]] = []
    raw = X.raw_counts("mix", paths, 10_000_000, log=log)
    ranked = raw.ranked(PAPER_M)
    up = X.cached_usage("mix", f"raw{PAPER_M}", ranked, paths)
    res["raw"] = {"candidates_counted": len(raw), "m": PAPER_M, "count_seconds": raw.info["seconds"],
                  "filter_seconds": round(up["seconds"], 1), "filter_tokens": int(up["tokens"]),
                  "filter_bytes": int(up["bytes"])}
    vocabs = {s: X.top_by(up["usage"], ranked, k) for s, k in SIZES.items()}
    bpes = {s: X.hf_bpe("mix", paths, k, log) for s, k in SIZES.items()}
    bpe_toks = {s: bpe_tokens(b) for s, b in bpes.items()}
    toks = {s: X.tokenizer_from(v) for s, v in vocabs.items()}

    # 1. compression per category and language
    res["cpt"] = {s: {"cnf": X.evaluate_sets(toks[s]), "bpe": X.evaluate_sets(bpes[s])} for s in SIZES}

    # 2. where the tokens go: token classes of the evaluation encodings, per group
    res["classes"] = {}
    for s in ("32k", "128k", "250k"):
        tabs = {"cnf": X.class_table(vocabs[s]), "bpe": X.class_table(bpe_toks[s])}
        res["classes"][s] = {}
        for kind in KINDS:
            res["classes"][s][kind] = {}
            for cat in C.CATEGORIES:
                texts, langs = X.eval_docs(cat, kind)
                by: Dict[str, List[str]] = defaultdict(list)
                for t, l in zip(texts, langs):
                    by[f"{cat}/{l}" if cat in P.HUMAN_LANG_CATEGORIES else cat].append(t)
                for g, tx in by.items():
                    if sum(map(len, tx)) < MIN_LANG_CHARS:
                        continue
                    row = {}
                    for name, tok, tl, tab in (("cnf", toks[s], vocabs[s], tabs["cnf"]),
                                               ("bpe", bpes[s], bpe_toks[s], tabs["bpe"])):
                        cnt = encode_counts(tok, tx, len(tl))
                        row[name] = class_breakdown(cnt, tl, tab)
                        row[name]["chars"] = sum(map(len, tx))
                    res["classes"][s][kind][g] = row

    # 3. the raw vocabulary and the final vocabularies by script, against the training text
    def by_script(tokens: Sequence[bytes], counts=None) -> Dict[str, Any]:
        n: Dict[str, int] = defaultdict(int)
        mass: Dict[str, int] = defaultdict(int)
        for i, t in enumerate(tokens):
            sc = X.token_script(t)
            n[sc] += 1
            if counts is not None:
                mass[sc] += int(counts[i])
        return {"n": dict(n), "mass": dict(mass) if counts is not None else None}

    train_chars: Dict[str, int] = defaultdict(int)
    train_bytes_script: Dict[str, int] = defaultdict(int)
    for cat in C.CATEGORIES:
        for lang, ch in stats[cat]["train"]["lang_chars"].items():
            g = f"{cat}/{lang}" if cat in P.HUMAN_LANG_CATEGORIES else cat
            train_chars[X.group_script(g)] += ch
    for g, v in up["groups"].items():
        train_bytes_script[X.group_script(g)] += int(v["bytes"])
    res["scripts"] = {
        "train_chars": dict(train_chars), "train_bytes": dict(train_bytes_script),
        "raw": by_script(ranked[:PAPER_M], raw.counts[:PAPER_M]),
        "cnf": {s: by_script(v) for s, v in vocabs.items()},
        "bpe": {s: by_script(v) for s, v in bpe_toks.items()},
    }

    # 4. filtering per group: what each language uses in the raw pass, what survives the cut,
    #    and the share of the final vocabulary each language "owns" (fractional, by usage)
    tot_usage = up["usage"].astype(np.float64)
    pos = {t: i for i, t in enumerate(ranked)}
    filt: Dict[str, Any] = {"groups": {}}
    kept_ids = {s: np.array(sorted(pos[t] for t in v), dtype=np.int64) for s, v in vocabs.items()}
    kept_mask = {}
    for s, ids in kept_ids.items():
        m = np.zeros(len(ranked), dtype=bool)
        m[ids] = True
        kept_mask[s] = m
    raw_tabs = None
    for g, v in sorted(up["groups"].items()):
        ids, cnts = v["ids"], v["counts"]
        row: Dict[str, Any] = {"bytes": int(v["bytes"]), "raw_tokens": int(v["tokens"]),
                               "distinct_used": int(len(ids)), "kept": {}}
        for s in SIZES:
            km = kept_mask[s][ids]
            row["kept"][s] = {"distinct_kept": int(km.sum()),
                              "usage_on_kept": float(cnts[km].sum() / max(1, cnts.sum())),
                              "raw_share_of_vocab": float((cnts[km] / tot_usage[ids][km]).sum())}
        filt["groups"][g] = row
    # classes of what each group used in the raw pass, kept vs dropped at 128k
    tabs_raw_cls = {}
    for g, v in up["groups"].items():
        ids, cnts = v["ids"], v["counts"]
        acc = defaultdict(lambda: [0, 0])
        for i, c in zip(ids.tolist(), cnts.tolist()):
            key = X.token_class(ranked[i])
            name = "multi-word" if key[1] else key[0]
            a = acc[name]
            a[0] += c
            if kept_mask["128k"][i]:
                a[1] += c
        tabs_raw_cls[g] = {k: {"usage": a[0], "kept_usage": a[1]} for k, a in acc.items()}
    filt["raw_classes_128k"] = tabs_raw_cls
    # re-encode the training text with each final vocabulary: the tokens each group needs, and
    # each group's fractional share of the vocabulary; the same for the BPE
    filt["final"] = {}
    for s in SIZES:
        uf = X.cached_usage("mix", f"ref{PAPER_M}-{s}", vocabs[s], paths)
        tot = uf["usage"].astype(np.float64)
        fin = {}
        for g, v in uf["groups"].items():
            nz = tot[v["ids"]] > 0
            fin[g] = {"tokens": int(v["tokens"]), "bytes": int(v["bytes"]),
                      "share_of_vocab": float((v["counts"][nz] / tot[v["ids"]][nz]).sum())}
        filt["final"][s] = fin
    filt["bpe_final"] = {}
    for s in SIZES:
        n_ids = len(bpe_toks[s])
        per = {}
        counts_by_group = {}
        for g, texts in X.batches(paths, X.cat_lang):
            c = counts_by_group.setdefault(g, np.zeros(n_ids, dtype=np.int64))
            c += encode_counts(bpes[s], texts, n_ids)
            per.setdefault(g, {"bytes": 0})
            per[g]["bytes"] += sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
        tot = sum(counts_by_group.values()).astype(np.float64)
        for g, c in counts_by_group.items():
            nz = (c > 0) & (tot > 0)
            per[g]["tokens"] = int(c.sum())
            per[g]["share_of_vocab"] = float((c[nz] / tot[nz]).sum())
        filt["bpe_final"][s] = per
    res["filtering"] = filt
    res["training"] = log
    res["protocol"] = {"train_bytes": sum(stats[c]["train"]["bytes"] for c in C.CATEGORIES)}
    res["runtime_s"] = round(time.perf_counter() - t_start, 1)
    return res


# --- page ---------------------------------------------------------------------------------------

ASCII_GROUPS = ("en", "sci", "math", "code")


def findings(res: Dict[str, Any]) -> List[str]:
    """The page's conclusions, every number taken from ``res``."""
    out = []
    g = lambda s, kind, cat: _gain(res["cpt"][s]["cnf"][kind][cat]["cpt"], res["cpt"][s]["bpe"][kind][cat]["cpt"])
    parts = []
    for s in SIZES:
        parts.append(f"{s}: zh {C.pct(g(s, 'indomain', 'zh'), sign=True)} / {C.pct(g(s, 'heldout', 'zh'), sign=True)}, "
                     f"multi {C.pct(g(s, 'indomain', 'multi'), sign=True)} / {C.pct(g(s, 'heldout', 'multi'), sign=True)}")
    en = [g(s, k, c) for s in SIZES for k in KINDS for c in ASCII_GROUPS]
    out.append("* **The gap grows as the vocabulary shrinks.** CNF's gain over the same-data BPE "
               "(in-domain / held-out-by-package) is " + "; ".join(parts) + f", while en, sci, math and code "
               f"gain {C.pct(min(en), sign=True)} to {C.pct(max(en), sign=True)}. The paper's fixed m = 5,000,000 "
               "is 156x the vocabulary at 32k.")
    losers = []
    for lang, a in res["cpt"]["128k"]["cnf"]["indomain"]["multi"]["langs"].items():
        b = res["cpt"]["128k"]["bpe"]["indomain"]["multi"]["langs"][lang]
        if a["chars"] >= MIN_LANG_CHARS and a["cpt"] < b["cpt"]:
            losers.append((a["cpt"] / b["cpt"] - 1, lang))
    losers.sort()
    out.append(f"* **Who loses** (in-domain, 128k): {len(losers)} languages of multi are below the BPE: "
               + ", ".join(f"{l} {C.pct(x, sign=True)}" for x, l in losers)
               + ". They are the non-Latin scripts and the smaller, morphologically rich Latin-script "
               "languages (many distinct word forms, each rare); the large Western European languages win.")
    cl = res["classes"]["128k"]["heldout"]
    bp = [f"{k.split('/')[1]} {C.pct(cl[k]['cnf']['byte piece'])} vs {C.pct(cl[k]['bpe']['byte piece'])}"
          for k in ("multi/ko", "multi/vi", "multi/ja", "zh/zh") if k in cl]
    out.append("* **Characters fall back to bytes.** Share of byte-piece tokens (a character spelled by "
               "its UTF-8 bytes), held-out-by-package, 128k, CNF vs BPE: " + ", ".join(bp) + ". "
               "A character that is mostly used inside longer candidates has a small usage of its own "
               "in the filtering pass over the raw vocabulary, so the cut drops it; once the longer "
               "candidates are cut too, the text needs 2-3 byte tokens per character.")
    f = res["filtering"]
    cnf_a = sum(f["final"]["128k"][k]["share_of_vocab"] for k in ASCII_GROUPS)
    bpe_a = sum(f["bpe_final"]["128k"][k]["share_of_vocab"] for k in ASCII_GROUPS)
    small = [k for k, v in f["groups"].items() if k.startswith("multi/") and 0.3e6 < v["bytes"] < 0.5e6]
    ratios = sorted(f["final"]["128k"][k]["share_of_vocab"] / f["bpe_final"]["128k"][k]["share_of_vocab"]
                    for k in small if k in f["bpe_final"]["128k"])
    med = ratios[len(ratios) // 2] if ratios else None
    out.append(f"* **The big ASCII groups take the vocabulary.** At 128k, en, sci, math and code own "
               f"{cnf_a:,.0f} CNF tokens vs {bpe_a:,.0f} BPE tokens (fractional ownership by usage); "
               f"the {len(small)} multi languages of 0.3-0.5 MB get a median {C.pct(med, 0)} of the "
               "vocabulary share the BPE gives them. CNF's multi-word tokens (repeated phrases, "
               "indentation, markup) are used often in the big groups, so a usage ranking prefers them "
               "to the sub-words the small languages need.")
    sc = res["scripts"]
    rn = sum(sc["raw"]["n"].values())
    tc = sum(sc["train_chars"].values())
    out.append(f"* **Counting already leans the same way.** ASCII candidates are "
               f"{C.pct(sc['raw']['n'].get('ASCII', 0) / rn)} of the raw vocabulary and "
               f"{C.pct(sc['raw']['mass'].get('ASCII', 0) / sum(sc['raw']['mass'].values()))} of its count mass, "
               f"for {C.pct(sc['train_chars'].get('ASCII-heavy (en/sci/math/code)', 0) / tc)} of the training "
               "characters in en/sci/math/code (plus the ASCII letters of the Latin-script languages).")
    def surv(k):
        v = f["groups"][k]
        fin = f["final"]["128k"][k]
        return (fin["bytes"] / fin["tokens"]) / (v["bytes"] / v["raw_tokens"])
    big = [surv(k) for k in ASCII_GROUPS]
    sm = sorted(surv(k) for k in small)
    out.append(f"* **The cut costs the small languages most.** Bytes per token on the training text "
               f"with the 128k vocabulary, relative to the raw vocabulary's filtering pass: en/sci/math/code "
               f"keep {C.pct(min(big), 0)}-{C.pct(max(big), 0)}, the small multi languages "
               f"{C.pct(sm[0], 0)}-{C.pct(sm[-1], 0)}. Their raw-pass usage sits on whole words of 4+ "
               "characters that are each rare (kept at 128k: "
               + ", ".join(f"{k.split('/')[1]} {C.pct(f['raw_classes_128k'][k]['4-7 chars']['kept_usage'] / f['raw_classes_128k'][k]['4-7 chars']['usage'], 0)}"
                           for k in ("multi/fi", "multi/tr", "multi/et") if k in f["raw_classes_128k"])
               + f" of the usage on 4-7-character tokens, en "
               f"{C.pct(f['raw_classes_128k']['en']['4-7 chars']['kept_usage'] / f['raw_classes_128k']['en']['4-7 chars']['usage'], 0)}), "
               "while the sub-words that would replace them were barely used in that pass (their "
               "occurrences were taken by the longer candidates) and are cut as well: one filtering "
               "pass ranks tokens by a usage measured with a vocabulary 40x larger than the result.")
    return out


def _gain(a, b):
    return None if not a or not b else a / b - 1


def render(res: Dict[str, Any], md: Path) -> None:
    L = [C.header_md(res, "Diagnosis: where CNF loses its edge on Chinese and multilingual text"), ""]
    r = res["raw"]
    L += [f"Vocabularies trained on the protocol's training mix ({C.mb(res['protocol']['train_bytes'])}: "
          "all shared training text without the held-out packages, see [protocol.md](protocol.md)): "
          f"the paper's CNF (rounds (1–12, 0), (13–21, 80), (22–30, 80); m = {r['m']:,} raw "
          "candidates; one MCE filtering pass; the top k by usage) and the same-data byte-level BPE "
          "(HF `tokenizers`, GPT-4 split), at 32k, 128k and 250k ids. Every number names its "
          "evaluation kind: **in-domain** (held-out documents of packages that are in training) or "
          "**held-out-by-package** (packages no vocabulary saw).", ""]
    L += ["## Findings", ""] + findings(res) + [""]
    # 1
    L += ["## 1. The gap", "", "Characters per token, CNF (paper settings) / same-data BPE, and the gain.", ""]
    rows = []
    for kind in KINDS:
        for cat in C.CATEGORIES:
            row = [P.KIND_LABEL[kind] if cat == "en" else "", cat]
            for s in SIZES:
                a = res["cpt"][s]["cnf"][kind][cat]["cpt"]
                b = res["cpt"][s]["bpe"][kind][cat]["cpt"]
                row += [f"{C.f3(a)} / {C.f3(b)}", C.pct(_gain(a, b), sign=True)]
            rows.append(row)
    hdr = ["evaluation", "set"]
    for s in SIZES:
        hdr += [f"{s} CNF / BPE", f"{s} gain"]
    L += [C.md_table(hdr, rows, "ll" + "r" * 6), ""]
    # per language
    L += ["### Per language (zh and multi)", "",
          f"Gain of CNF over the same-data BPE in characters per token, languages with at least "
          f"{MIN_LANG_CHARS:,} characters in the evaluation set; training characters from the protocol's training mix.", ""]
    rows = []
    langs = []
    for cat in P.HUMAN_LANG_CATEGORIES:
        for lang in res["cpt"]["128k"]["cnf"]["indomain"][cat]["langs"]:
            langs.append((cat, lang))
    # training chars per group from the filtering stats (bytes) and CPT dicts
    for cat, lang in sorted(langs, key=lambda cl: (cl[0] != "zh", -res["filtering"]["groups"].get(f"{cl[0]}/{cl[1]}", {}).get("bytes", 0))):
        g = f"{cat}/{lang}"
        row = [g, X.group_script(g), C.mb(res["filtering"]["groups"].get(g, {}).get("bytes"))]
        any_ = False
        for kind in KINDS:
            for s in SIZES:
                a = res["cpt"][s]["cnf"][kind][cat]["langs"].get(lang)
                b = res["cpt"][s]["bpe"][kind][cat]["langs"].get(lang)
                if a and a["chars"] >= MIN_LANG_CHARS:
                    row.append(C.pct(_gain(a["cpt"], b["cpt"]), sign=True))
                    any_ = True
                else:
                    row.append("")
        if any_:
            rows.append(row)
    hdr = ["language", "script", "train"] + [f"{'in-dom' if k == 'indomain' else 'held-out'} {s}"
                                               for k in KINDS for s in SIZES]
    L += [C.md_table(hdr, rows, "lll" + "r" * 6), ""]
    # 2 classes
    L += ["## 2. Where the tokens go", "",
          "Share of the evaluation tokens by kind, CNF / BPE at 128k: *byte piece* = a token that is "
          "not valid UTF-8 (a character split into bytes); then tokens of 1, 2–3, 4–7 and 8+ "
          "characters; *multi-word* (a subset of the others) = a whitespace between two "
          "non-whitespace characters. Per group with at least 20,000 characters.", ""]
    for kind in KINDS:
        L += [f"**{P.KIND_LABEL[kind]}**", ""]
        rows = []
        cl = res["classes"]["128k"][kind]
        for g in sorted(cl, key=lambda g: (g.startswith(("zh", "multi")), g)):
            a, b = cl[g]["cnf"], cl[g]["bpe"]
            row = [g, C.f3(a["chars"] / a["tokens"]), C.f3(b["chars"] / b["tokens"])]
            for name in X.CLASSES + ["multi-word"]:
                row.append(f"{C.pct(a[name])} / {C.pct(b[name])}")
            rows.append(row)
        L += [C.md_table(["group", "CPT CNF", "CPT BPE"] + X.CLASSES + ["multi-word"], rows), ""]
    # 3 scripts
    sc = res["scripts"]
    L += ["## 3. The raw vocabulary and the final vocabularies by script", "",
          "Candidates of the raw vocabulary (top 5,000,000 by count), their share of the total count, "
          "and the tokens of the final vocabularies, by script of the token (its first non-ASCII "
          "letter-like character; *ASCII* = only ASCII bytes; *partial* = not valid UTF-8; "
          "*common* = non-ASCII symbols and punctuation), next to each script's share of the "
          "training characters (en, sci, math and code counted as ASCII).", ""]
    names = sorted(set(sc["raw"]["n"]) | set(sc["cnf"]["128k"]["n"]) | set(sc["bpe"]["128k"]["n"]),
                   key=lambda k: -sc["raw"]["n"].get(k, 0))
    tc = dict(sc["train_chars"])
    tcs = {"ASCII": tc.pop("ASCII-heavy (en/sci/math/code)", 0)}
    for k, v in tc.items():
        key = {"Japanese (kana + Han)": "Japanese"}.get(k, k)
        tcs[key] = tcs.get(key, 0) + v
    tot_c = sum(tcs.values())
    rn = sum(sc["raw"]["n"].values())
    rm = sum(sc["raw"]["mass"].values())
    rows = []
    for k in names:
        row = [k, C.pct(tcs.get(k, 0) / tot_c) if k in tcs else "", C.pct(sc["raw"]["n"].get(k, 0) / rn),
               C.pct(sc["raw"]["mass"].get(k, 0) / rm)]
        for s in SIZES:
            row.append(f"{sc['cnf'][s]['n'].get(k, 0):,} / {sc['bpe'][s]['n'].get(k, 0):,}")
        rows.append(row)
    L += [C.md_table(["script", "training chars", "raw candidates", "raw count mass"]
                     + [f"{s} CNF / BPE tokens" for s in SIZES], rows), ""]
    # 4 filtering
    f = res["filtering"]
    L += ["## 4. Filtering per language", "",
          "Per training group: its bytes; in the paper's filtering pass over the raw vocabulary, "
          "the share of its token usage that falls on tokens kept at 32k / 128k / 250k; its "
          "fractional share of the vocabulary (Σ over tokens of the group's share of the token's "
          "usage), for CNF (re-encoding the training text with the final vocabulary) and for the "
          "BPE (encoding it with the BPE), at 128k; and bytes per token of the training text with "
          "the raw vocabulary and with the final one (how much of the raw pass survives the cut).",
          ""]
    rows = []
    tb = sum(v["bytes"] for v in f["groups"].values())
    for g, v in sorted(f["groups"].items(), key=lambda kv: -kv[1]["bytes"]):
        fin = f["final"]["128k"].get(g)
        bp = f["bpe_final"]["128k"].get(g)
        rows.append([g, C.mb(v["bytes"]), C.pct(v["bytes"] / tb),
                     " / ".join(C.pct(v["kept"][s]["usage_on_kept"], 0) for s in SIZES),
                     f"{fin['share_of_vocab']:,.0f}" if fin else "",
                     f"{bp['share_of_vocab']:,.0f}" if bp else "",
                     C.f3(v["bytes"] / v["raw_tokens"]), C.f3(fin["bytes"] / fin["tokens"]) if fin else "",
                     C.f3(bp["bytes"] / bp["tokens"]) if bp else ""])
    L += [C.md_table(["group", "train", "share", "usage on kept 32k/128k/250k",
                      "vocab share CNF 128k", "vocab share BPE 128k", "B/token raw pass",
                      "B/token CNF 128k", "B/token BPE 128k"], rows), ""]
    # kept per class
    L += ["Usage in the raw filtering pass by token kind, and the share of it on tokens kept at 128k:", ""]
    rows = []
    kinds = ["byte piece", "1 char", "2-3 chars", "4-7 chars", "8+ chars", "multi-word"]
    for g, v in sorted(f["raw_classes_128k"].items(), key=lambda kv: -f["groups"][kv[0]]["bytes"]):
        tot = sum(a["usage"] for a in v.values())
        row = [g]
        for k in kinds:
            a = v.get(k)
            row.append(f"{C.pct(a['usage'] / tot, 0)} ({C.pct(a['kept_usage'] / a['usage'], 0)})" if a and a["usage"] else "")
        rows.append(row)
    L += [C.md_table(["group"] + [f"{k} (kept)" for k in kinds], rows), ""]
    md.write_text("\n".join(L))


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render)
