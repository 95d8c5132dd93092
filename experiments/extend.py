"""Vocabulary extension: o200k_base (and Qwen3.5) + 32,768 new tokens, against the other ways of
growing a published vocabulary, in characters per token on the shared test sets and on the
held-out-by-package sets (experiments/protocol.py).

    nice -n 10 python experiments/extend.py            # docs/results/extend.{json,md}
    python experiments/extend.py --render
    EXTEND_STEPS=o200k-ext,o200k-eval python experiments/extend.py   # some steps only

Every vocabulary is trained on the protocol's training text (all six categories, the held-out
package families removed), so the held-out sets are text of packages no training saw. Steps
(each trained in its own process, peak memory from ``wait4``; results cached under
``experiments/out/extend/``; the JSON keeps the steps of earlier runs):

* ``o200k-ext``: ``cnfmce.extend(o200k_base, train, 32_768)``;
* ``o200k-eval``: o200k_base's BPE (tiktoken), MCE on o200k_base, the extension (MCE);
* ``union``: o200k_base + the 32,768 most used tokens o200k lacks of a CNF 128k vocabulary trained
  alone on the same text (``selection="refined"``), with MCE;
* ``addtok``: the extension's new tokens added to o200k_base's Hugging Face tokenizer with
  ``add_tokens`` (the naive route: added tokens are matched before the BPE sees the text);
* ``bpecont``: a BPE continued from o200k_base's merges on the same text with 32,768 new tokens
  (the ``bpe-continue`` package);
* ``scratch``: a CNF vocabulary of the same total size trained from scratch (refined selection);
* ``qwen-ext``, ``qwen-eval``: the same with Qwen3.5 as the base (its BPE run by ``tokenizers``);
* ``raw40``: ``extend`` with 40 counted candidates per new token, and
  ``selection="refined-non-ascii"`` with 10 (both trained with ``--worker`` and measured beside
  the run, when 10 was the default);
* ``drift``: how far MCE on the base moves from the base's BPE (docs/extend.md's warning);
* ``val``: the default number of counted candidates per new token (10, 20 or 40), chosen on the
  validation part of ``experiments/defaults.py``'s split (trained on its training part), with
  that split's naive union beside it, and 20 with train's rounds scaled to the text (threshold
  20 instead of the paper's 80 in rounds 2 and 3). The rows "(the former default)" are the runs with 10,
  measured before the default became 20.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C  # noqa: E402
import protocol as P  # noqa: E402

NAME = "extend"
OUT = C.OUT / "extend"
NEW = 32_768
CATS = list(C.CATEGORIES)
SETS = ("test", "heldout")
ALL_STEPS = ["o200k-ext", "o200k-eval", "drift", "union", "addtok", "bpecont", "qwen-ext", "qwen-eval",
             "scratch", "raw40", "val"]
# The counted candidates per new token compared on the validation split (step ``val``).
VAL_RAW = (10, 20, 40)


def _shared() -> Path:
    return Path(os.environ.get("CNFMCE_SHARED", str(C.REPO.parent / "shared")))


def o200k_path() -> Path:
    return _shared() / "vocabs" / "o200k_base.tiktoken"


def qwen_path() -> Path:
    return _shared() / "vocabs" / "qwen3.5.tokenizer.json.gz"


def o200k():
    import cnfmce
    return cnfmce.Tokenizer.from_tiktoken(o200k_path(), special_tokens={"<|endoftext|>": 199999,
                                                                         "<|endofprompt|>": 200018})


def qwen():
    import cnfmce
    return cnfmce.Tokenizer.from_hf(qwen_path())


def train_paths() -> List[Path]:
    return P.train_paths()


# --- evaluation sets ------------------------------------------------------------------------------

def eval_sets() -> Dict[str, Dict[str, List[Any]]]:
    """{"test/en": {"texts": [...], "langs": [...]}, "heldout/en": ...}."""
    out = {}
    for cat in CATS:
        docs = list(C.read_jsonl(C.corpus_path(cat, "test")))
        out[f"test/{cat}"] = {"texts": [d["text"] for d in docs], "langs": [d.get("lang") or "" for d in docs]}
        docs = list(C.read_jsonl(P.eval_path(cat, "heldout")))
        out[f"heldout/{cat}"] = {"texts": [d["text"] for d in docs], "langs": [d.get("lang") or "" for d in docs]}
    return out


def measure(encode_batch, sets: Dict[str, Dict[str, List[Any]]]) -> Dict[str, Any]:
    """chars/token per set, and per language of the multi sets."""
    res: Dict[str, Any] = {}
    for name, s in sets.items():
        texts = s["texts"]
        counts: List[int] = []
        for i in range(0, len(texts), 256):
            counts.extend(len(x) for x in encode_batch(texts[i:i + 256]))
        chars = sum(len(t) for t in texts)
        r = {"chars": chars, "tokens": sum(counts), "cpt": chars / max(1, sum(counts))}
        if name.endswith("/multi"):
            per: Dict[str, List[int]] = {}
            for t, n, lang in zip(texts, counts, s["langs"]):
                e = per.setdefault(lang, [0, 0])
                e[0] += len(t)
                e[1] += n
            r["langs"] = {k: v[0] / max(1, v[1]) for k, v in sorted(per.items())}
        res[name] = r
    return res


def cnf_batch(tok):
    return lambda texts: tok.encode_batch(texts)


def tiktoken_o200k():
    from cnfmce.adapters import load_encoder
    return load_encoder(f"tiktoken:{o200k_path()}")


# --- workers (one process each) -------------------------------------------------------------------

def _done(out: str, info: Dict[str, Any], t0: float) -> None:
    info.update(seconds=round(time.perf_counter() - t0, 1),
                peak_rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    Path(out + ".run.json").write_text(json.dumps(info))


def worker(args: Sequence[str]) -> None:
    import cnfmce
    # python extend.py --worker KIND [EXTRA...] OUT.run (common.run_training's order)
    kind, out, extra = args[0], args[-1][:-len(".run")], args[1:-1]
    t0 = time.perf_counter()
    paths = train_paths()
    if kind in ("o200k-ext", "qwen-ext", "o200k-ext-raw40", "o200k-ext-nonascii"):
        base = qwen() if kind == "qwen-ext" else o200k()
        # o200k-ext-raw40: 40 new candidates per new token counted instead of the default 10
        raw = 40 * NEW if kind == "o200k-ext-raw40" else None
        sel = "refined-non-ascii" if kind == "o200k-ext-nonascii" else "refined"
        tok = cnfmce.extend(base, paths, NEW, raw_vocab_size=raw, selection=sel, progress=True,
                            memory_limit=C.MEMORY_LIMIT)
        tok.save(out)
        _done(out, {"metadata": {k: tok.metadata[k] for k in ("counting", "extend_passes", "used_new_tokens")}}, t0)
    elif kind in ("cnf128k", "scratch"):
        size = 128_000 if kind == "cnf128k" else int(extra[0])
        tok = cnfmce.train(paths, vocab_size=size, selection="refined", memory_limit=C.MEMORY_LIMIT)
        tok.save(out)
        _done(out, {"vocab_size": size}, t0)
    elif kind == "bpecont":
        from bpe_continue import continue_training
        txt = OUT / "train.txt"
        if not txt.exists():
            with open(str(txt) + ".tmp", "w", encoding="utf-8") as fh:
                for p in paths:
                    for d in C.read_jsonl(p):
                        fh.write(d["text"].replace("\n", " ") + "\n")
            os.replace(str(txt) + ".tmp", txt)
        base = hf_o200k()
        n0 = base.get_vocab_size(with_added_tokens=True)
        ext = continue_training(base, files=[str(txt)], vocab_size=n0 + NEW, show_progress=False)
        ext.save(out)
        _done(out, {"base_size": n0, "size": ext.get_vocab_size(with_added_tokens=True)}, t0)
    elif kind == "val-ext":
        # step val: extend on the training part of experiments/defaults.py's split
        import defaults as D
        raw = int(extra[0]) * NEW
        # extra[1] "t20": rounds 2 and 3 at threshold 20 (train's default rounds scaled to this
        # corpus) instead of the paper's 80
        kw = {"rounds": D.rounds_t(20)} if extra[1:] == ["t20"] else {}
        tok = cnfmce.extend(o200k(), [str(p) for p in D.train_paths("mix")], NEW, raw_vocab_size=raw,
                            progress=True, memory_limit=C.MEMORY_LIMIT, **kw)
        tok.save(out)
        _done(out, {"metadata": {k: tok.metadata[k] for k in ("counting", "extend_passes", "used_new_tokens")}}, t0)
    else:
        raise SystemExit(f"unknown worker {kind}")


def run_worker(kind: str, out: Path, *extra: str) -> Dict[str, Any]:
    """The worker ``kind`` in its own process (common.run_training), writing ``out``; the record
    of an earlier run with the same arguments is reused while ``out`` exists."""
    params = {"kind": kind, "extra": list(extra)}
    if "ext" in kind:
        import cnfmce
        params["extend_raw_per_new_token"] = cnfmce.EXTEND_RAW_PER_NEW_TOKEN  # the default it ran with
    rec = C.cached_training(Path(out), params)
    if rec is not None and Path(out).exists():
        return rec
    return C.run_training(__file__, [kind, *extra], Path(out), params, kind)


def hf_o200k():
    """o200k_base as a Hugging Face tokenizer (transformers' TikTokenConverter, tiktoken's regex)."""
    from transformers.convert_slow_tokenizer import TikTokenConverter
    enc = tiktoken_o200k().encoding
    conv = TikTokenConverter(vocab_file=str(o200k_path()), pattern=enc._pat_str,
                             extra_special_tokens=None)
    tok = conv.converted()
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    return tok


# --- steps ----------------------------------------------------------------------------------------

def step_o200k_ext(res: Dict[str, Any]) -> None:
    res["train"]["o200k-ext"] = run_worker("o200k-ext", OUT / "o200k-ext.json.gz")


def step_o200k_eval(res: Dict[str, Any], sets) -> None:
    import cnfmce
    base = o200k()
    tt = tiktoken_o200k()
    ext = cnfmce.Tokenizer.load(OUT / "o200k-ext.json.gz")
    ev = res["eval"]
    ev["o200k-bpe"] = measure(tt.encode_batch, sets)
    ev["o200k-mce"] = measure(cnf_batch(base), sets)
    ev["o200k-ext"] = measure(cnf_batch(ext), sets)


def step_o200k_raw40(res: Dict[str, Any], sets) -> None:
    import cnfmce
    res["train"]["o200k-ext-raw40"] = run_worker("o200k-ext-raw40", OUT / "o200k-ext-raw40.json.gz")
    res["eval"]["o200k-ext-raw40"] = measure(cnf_batch(cnfmce.Tokenizer.load(OUT / "o200k-ext-raw40.json.gz")), sets)


def union_of(base, cnf):
    """``base`` + the ``NEW`` most used tokens of the CNF vocabulary ``cnf`` that ``base`` lacks
    (a CNF vocabulary's ids are in order of usage), new ids after o200k_base's largest."""
    import cnfmce
    have = set(base.token_bytes().values())
    ranked = [t for i, t in sorted(cnf.token_bytes().items()) if t not in have][:NEW]
    ids, toks = base._core.tokens()
    first = 200019
    toks = list(toks) + ranked
    ids = list(ids) + list(range(first, first + len(ranked)))
    return cnfmce.Tokenizer._build(toks, ids, base._core.specials(), base._core.options), len(ranked)


def step_val(res: Dict[str, Any]) -> None:
    """How many counted candidates per new token ``extend`` keeps by default, chosen on the
    validation part of experiments/defaults.py's split (trained on its training part); the
    naive union there is o200k_base + the top of that split's CNF 128k (``selection="refined"``)."""
    import cnfmce
    import defaults as D
    sets = D.eval_sets("mix")
    val = res.setdefault("val", {})

    def measured(enc) -> Dict[str, Any]:  # enc: anything with encode_batch
        return D.measure(lambda texts: [len(x) for x in enc.encode_batch(texts)], sets)

    base = o200k()
    val["o200k-bpe"] = measured(tiktoken_o200k())
    val["o200k-mce"] = measured(base)
    tok_p, _ = D.trained("mix", "128k", "refined")
    val["union"] = measured(union_of(base, cnfmce.Tokenizer.load(tok_p))[0])
    for k, *more in [(k,) for k in VAL_RAW] + [(20, "t20")]:
        name = f"ext-raw{k}" + "".join(f"-{m}" for m in more)
        out = OUT / f"val-{name}.json.gz"
        res["train"][f"val-{name}"] = run_worker("val-ext", out, str(k), *more)
        val[name] = measured(cnfmce.Tokenizer.load(out))


def step_union(res: Dict[str, Any], sets) -> None:
    import cnfmce
    res["train"]["cnf128k"] = run_worker("cnf128k", OUT / "cnf128k.json.gz")
    union, n = union_of(o200k(), cnfmce.Tokenizer.load(OUT / "cnf128k.json.gz"))
    res["union_tokens"] = n
    res["eval"]["union"] = measure(cnf_batch(union), sets)


def step_addtok(res: Dict[str, Any], sets) -> None:
    import cnfmce
    from tokenizers import AddedToken
    ext = cnfmce.Tokenizer.load(OUT / "o200k-ext.json.gz")
    first = ext.metadata["extension"]["first_new_id"]
    new = [ext.id_to_token(first + k) for k in range(ext.metadata["extension"]["new_tokens"])]
    strs = []
    for t in new:
        try:
            strs.append(t.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    tok = hf_o200k()
    tok.add_tokens([AddedToken(s, normalized=False) for s in strs])
    res["addtok_tokens"] = {"added": len(strs), "not_utf8": len(new) - len(strs)}
    res["eval"]["addtok"] = measure(lambda b: [e.ids for e in tok.encode_batch(b, add_special_tokens=False)], sets)


def step_bpecont(res: Dict[str, Any], sets) -> None:
    from tokenizers import Tokenizer as HF
    res["train"]["bpecont"] = run_worker("bpecont", OUT / "bpecont.json")
    tok = HF.from_file(str(OUT / "bpecont.json"))
    res["eval"]["bpecont"] = measure(lambda b: [e.ids for e in tok.encode_batch(b, add_special_tokens=False)], sets)


def step_scratch(res: Dict[str, Any], sets) -> None:
    import cnfmce
    size = o200k().vocab_size + NEW
    res["train"]["scratch"] = run_worker("scratch", OUT / "scratch.json.gz", str(size))
    tok = cnfmce.Tokenizer.load(OUT / "scratch.json.gz")
    res["eval"]["scratch"] = measure(cnf_batch(tok), sets)


def hf_qwen():
    from tokenizers import Tokenizer as HF
    return HF.from_str(gzip.decompress(qwen_path().read_bytes()).decode("utf-8"))


def step_qwen_ext(res: Dict[str, Any]) -> None:
    res["train"]["qwen-ext"] = run_worker("qwen-ext", OUT / "qwen-ext.json.gz")


def step_qwen_eval(res: Dict[str, Any], sets) -> None:
    import cnfmce
    hq = hf_qwen()
    ev = res["eval"]
    ev["qwen-bpe"] = measure(lambda b: [e.ids for e in hq.encode_batch(b, add_special_tokens=False)], sets)
    ev["qwen-mce"] = measure(cnf_batch(qwen()), sets)
    ev["qwen-ext"] = measure(cnf_batch(cnfmce.Tokenizer.load(OUT / "qwen-ext.json.gz")), sets)


def _spans(lengths: Sequence[int]) -> set:
    s, at = set(), 0
    for n in lengths:
        s.add((at, at + n))
        at += n
    return s


def drift(bpe_batch, tok, bpe_bytes, sets) -> Dict[str, Any]:
    """Share of the BPE's tokens that MCE on the same vocabulary does not produce (same bytes at
    the same place), and share of documents whose ids differ."""
    out = {}
    for cat in CATS:
        texts = sets[f"test/{cat}"]["texts"]
        toks = diff_toks = docs_diff = 0
        for i in range(0, len(texts), 256):
            b = bpe_batch(texts[i:i + 256])
            m = tok.encode_batch(texts[i:i + 256])
            for x, y in zip(b, m):
                if x != y:
                    docs_diff += 1
                sx = _spans([len(bpe_bytes(t)) for t in x])
                sy = _spans([len(tok.id_to_token(t)) for t in y])
                toks += len(x)
                diff_toks += len(sx - sy)
        out[cat] = {"docs": len(texts), "docs_differ": docs_diff / max(1, len(texts)),
                    "tokens": toks, "tokens_differ": diff_toks / max(1, toks)}
    return out


def step_drift(res: Dict[str, Any], sets) -> None:
    tt = tiktoken_o200k()
    res["drift"] = {"o200k": drift(tt.encode_batch, o200k(), tt.encoding.decode_single_token_bytes, sets)}
    if qwen_path().exists():
        hq = hf_qwen()
        q = qwen()
        res["drift"]["qwen3.5"] = drift(lambda b: [e.ids for e in hq.encode_batch(b, add_special_tokens=False)],
                                        q, q.id_to_token, sets)


# --- driver and page ------------------------------------------------------------------------------

def run(args: Any) -> Dict[str, Any]:
    js, _, _ = C.result_paths(NAME, False)
    try:
        res = json.loads(js.read_text())
    except (OSError, ValueError):
        res = {}
    res.update(C.run_header(NAME, False))
    res.setdefault("train", {})
    res.setdefault("eval", {})
    res.setdefault("not_run", [])
    OUT.mkdir(parents=True, exist_ok=True)
    steps = os.environ.get("EXTEND_STEPS", ",".join(ALL_STEPS)).split(",")
    sets = eval_sets()
    res["sets"] = {k: {"docs": len(v["texts"]), "chars": sum(len(t) for t in v["texts"])} for k, v in sets.items()}
    fns = {"o200k-ext": lambda: step_o200k_ext(res), "o200k-eval": lambda: step_o200k_eval(res, sets),
           "drift": lambda: step_drift(res, sets), "union": lambda: step_union(res, sets),
           "addtok": lambda: step_addtok(res, sets), "bpecont": lambda: step_bpecont(res, sets),
           "scratch": lambda: step_scratch(res, sets), "qwen-ext": lambda: step_qwen_ext(res),
           "qwen-eval": lambda: step_qwen_eval(res, sets), "raw40": lambda: step_o200k_raw40(res, sets),
           "val": lambda: step_val(res)}
    for s in steps:
        print(f"== {s}", flush=True)
        t0 = time.perf_counter()
        fns[s]()
        res.setdefault("step_seconds", {})[s] = round(time.perf_counter() - t0, 1)
        res["not_run"] = [x for x in ALL_STEPS if x not in res.get("step_seconds", {})]
        C.write_json(js, res)  # every finished step is kept
    return res


LABELS = {"o200k-bpe": "o200k_base BPE", "o200k-mce": "MCE on o200k_base", "o200k-ext": "**extend** (o200k + 32,768)",
          "o200k-ext-raw40": "extend, raw_vocab_size 40 x 32,768",
          "o200k-ext-raw10": "extend, raw_vocab_size 10 x 32,768 (the former default)",
          "o200k-ext-nonascii": "extend, raw_vocab_size 10 x 32,768, selection refined-non-ascii",
          "union": "naive union (o200k + CNF 128k top 32,768)", "addtok": "add_tokens (naive)",
          "bpecont": "continued BPE (bpe-continue)", "scratch": "CNF from scratch, same size",
          "qwen-bpe": "Qwen3.5 BPE", "qwen-mce": "MCE on Qwen3.5", "qwen-ext": "**extend** (Qwen3.5 + 32,768)",
          "qwen-ext-raw10": "extend, raw_vocab_size 10 x 32,768 (the former default)"}
VAL_LABELS = {"o200k-mce": "MCE on o200k_base", "union": "naive union (o200k + that split's CNF 128k top 32,768)",
              **{f"ext-raw{k}": f"extend, {k} candidates per new token" for k in VAL_RAW},
              "ext-raw20-t20": "extend, 20 per new token, rounds 2 and 3 at threshold 20 (train's rounds scaled to this text)"}


def render_val(val: Dict[str, Any]) -> List[str]:
    """The tables of step ``val``: gains over o200k_base's BPE on the validation and test parts of
    experiments/defaults.py's split."""
    if "o200k-bpe" not in val:
        return []
    lines = ["### Choosing the candidates per new token (experiments/defaults.py's split)\n",
             "Every vocabulary of these two tables is trained on the training part of `experiments/defaults.py`'s "
             "split (106.7 MB, without its validation and test families). Its validation part is the held-out "
             "package families of the tables above: they chose the default of `extend` "
             "(`cnfmce.EXTEND_RAW_PER_NEW_TOKEN` = 20, the only setting ahead of the naive union on every "
             "category there), so the held-out tables above are not an independent measurement of that "
             "choice. Its test part is families no choice looked at (the zh test set is one package of "
             "classical poetry).\n"]
    for kind, title in (("val", "Validation (chose the default)"), ("test", "Test (no choice looked at it)")):
        base = val["o200k-bpe"][kind]["cats"]
        rows = []
        for k, label in VAL_LABELS.items():
            if k not in val:
                continue
            cats = val[k][kind]["cats"]
            rows.append([label] + [C.pct((cats[c][0] / cats[c][1]) / (base[c][0] / base[c][1]) - 1, sign=True)
                                   for c in CATS])
        lines.append(f"{title}, change vs o200k_base BPE:\n")
        lines.append(C.md_table(["vocabulary"] + CATS, rows))
        lines.append("")
    return lines


def render(res: Dict[str, Any], md: Path) -> None:
    lines = [C.header_md(res, "Vocabulary extension: o200k_base + 32,768 CNF tokens"), C.doc_body(__doc__), ""]
    ev = res.get("eval", {})
    for kind, title in (("heldout", "Held-out-by-package sets"), ("test", "Shared test sets")):
        for ref_name, group in (("o200k-bpe", [k for k in LABELS if not k.startswith("qwen")]),
                                ("qwen-bpe", [k for k in LABELS if k.startswith("qwen")])):
            names = [k for k in group if k in ev]
            if ref_name not in ev or len(names) < 2:
                continue
            lines.append(f"### {title}: characters per token (change vs {LABELS[ref_name]})\n")
            rows = []
            for k in names:
                row = [LABELS[k]]
                for cat in CATS:
                    v = ev[k][f"{kind}/{cat}"]["cpt"]
                    r = ev[ref_name][f"{kind}/{cat}"]["cpt"]
                    row.append(f"{v:.3f}" if k == ref_name else f"{v:.3f} ({C.pct(v / r - 1, sign=True)})")
                rows.append(row)
            lines.append(C.md_table(["vocabulary"] + CATS, rows))
            lines.append("")
    for base_name, ext_name, mce_name in (("o200k", "o200k-ext", "o200k-mce"), ("qwen3.5", "qwen-ext", "qwen-mce")):
        if ext_name in ev and mce_name in ev and "langs" in ev[ext_name].get("heldout/multi", {}):
            lines.append(f"### Languages of the held-out multi set ({base_name}): chars/token, extend vs MCE on the base\n")
            e, m = ev[ext_name]["heldout/multi"]["langs"], ev[mce_name]["heldout/multi"]["langs"]
            rows = [[lang or "?", f"{m[lang]:.3f}", f"{e[lang]:.3f}", C.pct(e[lang] / m[lang] - 1, sign=True)] for lang in e]
            lines.append(C.md_table(["language", "MCE on base", "extend", "change"], rows))
            lines.append("")
    lines += render_val(res.get("val", {}))
    tr = res.get("train", {})
    if tr:
        lines.append("### Training time and peak memory\n")
        rows = [[k, f"{v.get('seconds', 0):.0f} s", f"{v.get('cpu_s', 0):.0f} s", C.mb(v.get("peak_rss"))]
                for k, v in tr.items()]
        lines.append(C.md_table(["run", "wall", "CPU", "peak RSS"], rows))
        lines.append("\nWall times on a 2-core machine shared with other jobs (load average from about 3 to about 20 during "
                     "these runs); CPU: user + system seconds of the run's process from ``wait4`` (0: a "
                     "variant trained by hand with ``--worker``, whose CPU time was not recorded).\n")
    if res.get("drift"):
        lines.append("### MCE on the base vs the base's BPE (shared test sets)\n")
        rows = []
        for b, d in res["drift"].items():
            for cat, x in d.items():
                rows.append([b, cat, C.pct(x["tokens_differ"]), C.pct(x["docs_differ"])])
        lines.append(C.md_table(["base", "set", "BPE tokens MCE does not produce", "documents with other ids"], rows))
        lines.append("")
    if res.get("addtok_tokens"):
        a = res["addtok_tokens"]
        lines.append(f"add_tokens: {a['added']:,} of the new tokens added as strings ({a['not_utf8']:,} are not valid UTF-8 and cannot be added).\n")
    if res.get("not_run"):
        lines.append("Not run: " + ", ".join(res["not_run"]) + ".\n")
    md.write_text("\n".join(lines) + "\n")


def eval_variant(kind: str) -> None:
    """Measures a variant trained by hand (``--worker KIND OUT``) and adds it to the JSON (run it
    when no full run is writing the JSON)."""
    import cnfmce
    js, md, _ = C.result_paths(NAME, False)
    res = json.loads(js.read_text())
    out = OUT / f"{kind}.json.gz"
    res["train"][kind] = run_worker(kind, out)
    res["eval"][kind] = measure(cnf_batch(cnfmce.Tokenizer.load(out)), eval_sets())
    C.write_json(js, res)
    render(res, md)


if __name__ == "__main__":
    C.experiment_main(NAME, __doc__, run, render,
                      commands={"--worker": lambda *a: worker(a), "--eval-variant": eval_variant})
