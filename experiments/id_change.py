"""How many documents get different ids when MCE encodes with a published BPE vocabulary instead of
that vocabulary's own BPE: the share behind docs/encoding.md's warning.

    python experiments/id_change.py [--quick] [--render]

For each vocabulary (o200k_base through tiktoken; Qwen3.5 and Llama 3 through Hugging Face
`tokenizers`) and each shared test set, every document is encoded by the vocabulary's own
tokenizer (no special tokens added) and by cnfmce's MCE on the same vocabulary
(`Tokenizer.from_tiktoken` / `from_hf`); a document counts as changed when the two id lists
differ anywhere. Also prints the token counts of both. Writes docs/results/id_change.json and .md.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments"))
import common  # noqa: E402

import cnfmce  # noqa: E402
from cnfmce.adapters import load_encoder  # noqa: E402

VOCABS = {
    "o200k_base": ("tiktoken:o200k_base", lambda: cnfmce.Tokenizer.from_tiktoken(common.VOCABS / "o200k_base.tiktoken")),
    "Qwen3.5": (f"hf:{common.VOCABS / 'qwen3.5.tokenizer.json.gz'}",
                lambda: cnfmce.Tokenizer.from_hf(common.VOCABS / "qwen3.5.tokenizer.json.gz")),
    "Llama 3": (f"hf:{common.VOCABS / 'llama3.tokenizer.json.gz'}",
                lambda: cnfmce.Tokenizer.from_hf(common.VOCABS / "llama3.tokenizer.json.gz")),
}


def docs_of(category: str, limit: int):
    with gzip.open(common.CORPORA / category / "test.jsonl.gz", "rt", encoding="utf-8") as fh:
        out = [json.loads(line)["text"] for line in fh]
    return out[:limit]


CATEGORIES = ("en", "code", "zh", "multi")


def run(args) -> dict:
    """Every document of each test set (``--quick``: the first 20), both encoders."""
    limit = 20 if args.quick else 10 ** 9
    t0 = time.time()
    rows = []
    for name, (spec, mce_loader) in VOCABS.items():
        bpe = load_encoder(spec, vocab_dir=common.VOCABS)
        mce = mce_loader()
        for cat in CATEGORIES:
            docs = docs_of(cat, limit)
            a = bpe.encode_batch(docs)
            b = mce.encode_batch(docs)
            changed = sum(x != y for x, y in zip(a, b))
            rows.append({"vocabulary": name, "test_set": cat, "documents": len(docs), "changed": changed,
                         "share_changed": changed / len(docs), "bpe_tokens": sum(map(len, a)),
                         "mce_tokens": sum(map(len, b))})
            print(f"{name:11s} {cat:6s} {changed}/{len(docs)} documents changed "
                  f"({100 * changed / len(docs):.1f}%); tokens BPE {rows[-1]['bpe_tokens']:,} "
                  f"MCE {rows[-1]['mce_tokens']:,}", flush=True)
    return {"command": "python experiments/id_change.py" + (" --quick" if args.quick else ""), "rows": rows,
            "wall_s": round(time.time() - t0, 1)}


def render(res: dict, md: Path) -> None:
    lines = ["# MCE on a published vocabulary: how many documents get different ids", "",
             f"* Command: `{res['command'].strip()}`",
             "* Data: the shared test sets (`test.jsonl.gz` of each category), every document.",
             "* A document is *changed* when the vocabulary's own tokenizer (tiktoken for o200k_base, "
             "Hugging Face `tokenizers` for Qwen3.5 and Llama 3, no special tokens added) and cnfmce's "
             "MCE on the same vocabulary give different id lists.", "",
             "| vocabulary | test set | documents | changed | share changed | tokens (BPE) | tokens (MCE) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        lines.append(f"| {r['vocabulary']} | {r['test_set']} | {r['documents']:,} | {r['changed']:,} | "
                     f"{100 * r['share_changed']:.1f}% | {r['bpe_tokens']:,} | {r['mce_tokens']:,} |")
    md.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    common.experiment_main("id_change", __doc__, run, render)
