"""Ablation of MCE's cost terms (paper section 3.2, Eqs. 2-3): the boundary penalty λ and the token
preference ε.

1. Encoding time: the mix128k vocabulary from experiments/compression.py encoded with MCE at
   λ ∈ {0, 0.05, 0.2, ∞} (∞: no partial crossing of a unit boundary at all) × ε on/off, and FMM
   for reference, on every test set: characters per token and boundary-crossing rates (u≥2 and
   u≥3).
2. Training time: λ also drives the filtering pass. On en (counts of experiments/scaling.py), 32k
   vocabularies filtered with λ_train ∈ {0, 0.05, 0.2, ∞}, each encoded with every λ_enc.

    python experiments/ablation.py [--quick] [--render]

Writes docs/results/ablation.{json,md} (quick: experiments/out/quick-results/).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C  # noqa: E402

NAME = "ablation"
LAMBDAS = {"0": 0.0, "0.05": 0.05, "0.2": 0.2, "inf": float("inf")}
KEEP = ["docs", "chars", "tokens", "chars_per_token", "tokens_per_kchar", "boundary_crossing_rate",
        "boundary_crossing_rate_u3", "token_length_bytes", "distinct_ids", "vocab_utilization"]
QUICK_TEST_CHARS = 300_000
TRAIN_SIZE = {"full": 32_000, "quick": 4_000}
REF = "mce λ=0.05 ε=on"


def configs() -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for lk, lv in LAMBDAS.items():
        for eps in (True, False):
            out[f"mce λ={lk} ε={'on' if eps else 'off'}"] = {
                "algorithm": "mce", "boundary_penalty": lv, "token_preference": eps, "lambda": lk, "eps": eps}
    out["fmm"] = {"algorithm": "fmm", "boundary_penalty": 0.05, "token_preference": True,
                  "lambda": None, "eps": None}
    return out


def run(quick: bool, with_training: bool) -> Dict[str, Any]:
    from cnfmce.adapters import as_encoder
    from cnfmce.evaluate import compare, evaluate
    import scaling
    res = C.run_header(NAME, quick)
    t_start = time.perf_counter()
    res["bench_wait"] = None if quick else C.wait_for_benches()
    log: List[Dict[str, Any]] = []
    mix = C.mix_tokenizers(quick, log)
    base = mix["mix128k"]
    res["vocab"] = {"name": "mix128k", "vocab_size": base.vocab_size,
                    "made": mix["_info"]["vocabs"]["mix128k"]}
    top = base.vocab_size - 1  # ε(t) = 0.1 / (10 + 10000 / (1 + 0.01 t)), largest at the last id
    res["eps_max"] = {"id": top, "eps": 0.1 / (10 + 10000 / (1 + 0.01 * top))}
    cfgs = configs()
    res["configs"] = {k: {kk: v[kk] for kk in ("algorithm", "lambda", "eps")} for k, v in cfgs.items()}
    res["test_sets"] = {}
    res["results"] = {}
    max_chars = QUICK_TEST_CHARS if quick else None
    for cat in C.CATEGORIES:
        docs, _ = C.load_docs(cat, "test", max_chars)
        res["test_sets"][cat] = C.text_stats(docs)
        res["results"][cat] = {}
        ref_enc = None
        ref_ids = None
        for name, c in cfgs.items():
            tok = base.with_options(algorithm=c["algorithm"], boundary_penalty=c["boundary_penalty"],
                                    token_preference=c["token_preference"])
            t0 = time.perf_counter()
            enc = as_encoder(tok, name)
            ids = enc.encode_batch(docs)
            r = evaluate(enc, docs, encodings=ids)
            row = {k: r[k] for k in KEEP}
            if name == REF:
                ref_enc, ref_ids = enc, ids
            row["seconds"] = round(time.perf_counter() - t0, 1)
            res["results"][cat][name] = row
            res["results"][cat][name]["_ids"] = ids
        for name, row in res["results"][cat].items():  # segmentation change against the default
            ids = row.pop("_ids")
            if name != REF:
                cmp = compare(ref_enc, as_encoder(base, name), docs, encodings_a=ref_ids, encodings_b=ids)
                row["vs_default"] = {"distance": cmp["distance"], "agreement": cmp["agreement"]}
        print(f"{cat:6s} " + "  ".join(f"{n.replace('mce ', '')}: {r['chars_per_token']:.3f}"
                                       for n, r in res["results"][cat].items()), flush=True)
    # training-time λ on en
    if with_training:
        cfg = scaling.QUICK if quick else scaling.FULL
        tag = "en-quick" if quick else "en"
        paths = scaling.train_paths(quick, cfg)
        counts_p = C.cached_counts(tag, paths, cfg["count_m"], log)
        size = TRAIN_SIZE["quick" if quick else "full"]
        docs, _ = C.load_docs("en", "test", max_chars)
        tr: Dict[str, Any] = {"size": size, "raw_vocab_size": cfg["fixed_m"],
                              "counts": C._load_json(C.OUT / tag / "counts.params.json"),
                              "train_set": C.paths_stats(paths), "test_set": C.text_stats(docs),
                              "results": {}}
        for lt, lv in LAMBDAS.items():
            tok = C.cached_cnf(tag, f"cnf-{size}-lambda{lt}", counts_p, paths, size, log,
                               memo_counts=True, raw_vocab_size=cfg["fixed_m"], boundary_penalty=lv)
            row: Dict[str, Any] = {"filtering": tok.metadata.get("filtering")}
            for le, lev in LAMBDAS.items():
                r = evaluate(as_encoder(tok.with_options(boundary_penalty=lev), f"{lt}/{le}"), docs)
                row[le] = {k: r[k] for k in KEEP}
            tr["results"][lt] = row
            print(f"train λ={lt}: " + "  ".join(f"enc λ={le} {row[le]['chars_per_token']:.3f}"
                                                for le in LAMBDAS), flush=True)
        res["training_lambda"] = tr
    res["training"] = {"steps": log}
    res["runtime_s"] = round(time.perf_counter() - t_start, 1)
    return res


# --- rendering ------------------------------------------------------------------------------------

def _p(x: Any, d: int = 3) -> str:
    return "—" if x is None else f"{100 * x:.{d}f}"


def render(res: Dict[str, Any], md: Path) -> None:
    R = res["results"]
    names = list(res["configs"])
    ref = "mce λ=0.05 ε=on"
    lines = [C.header_md(res, "Ablation: boundary penalty λ and token preference ε")]
    lines.append("## Data and parameters\n")
    lines.append(f"* Vocabulary: mix128k from [compression](compression.md) ({res['vocab']['vocab_size']:,} "
                 f"ids, filtered with the default λ = 0.05, ε on{'; quick: the 8k quick vocabulary' if res['quick'] else ''}). "
                 "Only the encoding options change: `tok.with_options(boundary_penalty=λ, "
                 "token_preference=ε)`; λ = ∞ forbids every partial crossing of a unit boundary "
                 "(u = 2 too), λ = 0 makes two-unit partial crossings free (u ≥ 3 stays forbidden).")
    lines.append("* ε(t) = 0.1 / (10 + 10000 / (1 + 0.01 · id)) when on (SPEC section 2).")
    lines.append("* Boundary crossing: tokens touching u ≥ 2 word-like units that do not both start "
                 "and end on unit boundaries, per token (u≥2), and the same with u ≥ 3 (u≥3); see "
                 "[fixed_vocab](fixed_vocab.md) for why the paper's 0% is the u≥3 count.")
    lines.append("* Test sets: " + ", ".join(f"{c} ({C.n_(s['chars'])} characters)"
                                             for c, s in res["test_sets"].items()) + ".\n")
    lines.append("## Characters per token\n")
    lines.append(f"Change relative to the default ({ref}) in parentheses.\n")
    rows = []
    for n in names:
        rows.append([n] + [f"{C.f3(R[c][n]['chars_per_token'])} "
                           f"({C.pct(R[c][n]['chars_per_token'] / R[c][ref]['chars_per_token'] - 1, 2, True)})"
                           for c in C.CATEGORIES])
    lines.append(C.md_table(["encoding"] + C.CATEGORIES, rows))
    if "vs_default" in R["en"][names[0]]:
        lines.append("\n## How much the segmentation changes\n")
        lines.append(f"Agreement with the default ({ref}): % of bytes covered by a token with the "
                     "same id (Distance in parentheses: normalised edit distance of the id sequences, %).\n")
        rows = [[n] + [f"{_p(R[c][n]['vs_default']['agreement'], 1)} ({_p(R[c][n]['vs_default']['distance'], 1)})"
                       if "vs_default" in R[c][n] else "—" for c in C.CATEGORIES] for n in names]
        lines.append(C.md_table(["encoding"] + C.CATEGORIES, rows))
    lines.append("\n## Boundary crossing (% of tokens): u≥2 / u≥3\n")
    rows = [[n] + [f"{_p(R[c][n]['boundary_crossing_rate'])} / {_p(R[c][n]['boundary_crossing_rate_u3'])}"
                   for c in C.CATEGORIES] for n in names]
    lines.append(C.md_table(["encoding"] + C.CATEGORIES, rows))
    tr = res.get("training_lambda")
    if tr:
        lines.append(f"\n## λ at training time (en, {tr['size']:,} ids)\n")
        ts = tr["train_set"]
        lines.append(f"Counts of en/train ({C.mb(ts['bytes'])}, shared with [scaling](scaling.md)), "
                     f"filtered at {tr['size']:,} ids from the top {tr['raw_vocab_size']:,} "
                     "candidates with λ_train (the λ of the filtering pass), then each vocabulary "
                     "encodes en/test with every λ_enc. CPT, and u≥2 crossing % in parentheses:\n")
        rows = []
        for lt, row in tr["results"].items():
            rows.append([f"λ_train = {lt}"] + [f"{C.f3(row[le]['chars_per_token'])} "
                                               f"({_p(row[le]['boundary_crossing_rate'], 2)})"
                                               for le in LAMBDAS])
        lines.append(C.md_table(["vocabulary"] + [f"λ_enc = {le}" for le in LAMBDAS], rows))
    lines.append("\n## Reading the numbers\n")
    lines.append(discussion(res))
    md.write_text("\n".join(lines) + "\n")


def discussion(res: Dict[str, Any]) -> str:
    R = res["results"]
    cats = C.CATEGORIES
    ref = "mce λ=0.05 ε=on"

    def d(n: str, c: str) -> float:
        return R[c][n]["chars_per_token"] / R[c][ref]["chars_per_token"] - 1

    def rel(n: str) -> str:
        if all(abs(d(n, c)) < 5e-5 for c in cats):
            return "unchanged on every set (|Δ| < 0.005%)"
        return ", ".join(f"{c} {C.pct(d(n, c), 2, True)}" for c in cats)

    def cross(n: str, key: str = "boundary_crossing_rate") -> str:
        return ", ".join(f"{c} {_p(R[c][n][key], 2)}%" for c in cats)
    out = []
    if res["quick"]:
        out.append("*Quick run: 8k vocabulary, 300k-character test slices.*\n")
    out.append(f"* **λ = 0 vs 0.05.** Making two-unit partial crossings free: CPT {rel('mce λ=0 ε=on')}; "
               f"u≥2 crossings {cross('mce λ=0 ε=on')} (λ = 0.05: {cross(ref)}). Any λ < 1 is "
               "smaller than the cost of one token, so it can only decide between segmentations "
               "with (nearly) the same number of tokens: it picks, among those, the one with the "
               "fewest partial crossings.")
    out.append(f"* **λ = 0.2.** CPT {rel('mce λ=0.2 ε=on')}; u≥2 crossings {cross('mce λ=0.2 ε=on')}.")
    out.append(f"* **λ = ∞ (no partial crossing of any unit boundary).** CPT {rel('mce λ=inf ε=on')}; "
               f"u≥2 crossings {cross('mce λ=inf ε=on')} (0 by construction). This is the price of "
               "the strict rule: tokens such as `s.` or `␣a` + word start can no longer be used.")
    out.append(f"* **ε off.** At λ = 0.05: CPT {rel('mce λ=0.05 ε=off')}, u≥2 crossings "
               f"{cross('mce λ=0.05 ε=off')}; at λ = 0: CPT {rel('mce λ=0 ε=off')}, u≥2 crossings "
               f"{cross('mce λ=0 ε=off')}. ε(t) grows with the id and is at most "
               f"{res['eps_max']['eps']:.5f} per token in this vocabulary (id {res['eps_max']['id']:,}), "
               "so it only breaks ties between segmentations of equal count and penalty"
               + (": it changes no count, but it does decide many segmentations (agreement of ε off "
                  "with the default: " + ", ".join(
                      f"{c} {_p(R[c]['mce λ=0.05 ε=off']['vs_default']['agreement'], 1)}%" for c in cats)
                  + " of bytes): with ε off, ties go to the longest first token (SPEC's tie "
                  "rule), so a word tends to take the space after it (`thread␣` + `␣␣␣¦` instead "
                  "of `thread` + `␣␣␣␣¦`); with ε on, the more frequent (lower-id) pieces win."
                  if "vs_default" in R["en"]["mce λ=0.05 ε=off"] else "."))
    out.append(f"* **FMM** for reference: CPT {rel('fmm')} relative to MCE; u≥2 crossings "
               f"{cross('fmm')}; u≥3 crossings {cross('fmm', 'boundary_crossing_rate_u3')}.")
    u3 = max(R[c][n]["boundary_crossing_rate_u3"] for c in cats for n in R[c] if n.startswith("mce"))
    out.append(f"* The largest u≥3 crossing rate over all MCE configurations and sets is {_p(u3)}%: "
               "the cost forbids those crossings whatever λ.")
    tr = res.get("training_lambda")
    if tr:
        dd = tr["results"]
        diag = {lt: dd[lt][lt]["chars_per_token"] for lt in dd}
        out.append("* **λ at training time** (vocabulary filtered and used with the same λ): "
                   + ", ".join(f"λ = {lt}: {C.f3(v)}" for lt, v in diag.items())
                   + " CPT on en/test. With the default vocabulary (λ_train = 0.05), changing only "
                   "λ_enc gives " + ", ".join(f"{le}: {C.f3(dd['0.05'][le]['chars_per_token'])}"
                                              for le in LAMBDAS) + ".")
    return "\n".join(out)


def main() -> None:
    C.experiment_main(NAME, __doc__, lambda a: run(a.quick, not a.no_training), render,
                      flags=[("--no-training", "skip the training-time λ part")])


if __name__ == "__main__":
    main()
