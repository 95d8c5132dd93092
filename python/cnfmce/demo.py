"""``cnfmce demo``: the main job on the small corpus shipped with the package.

Trains a CNF vocabulary on nine tenths of the sample corpus, encodes the held-out tenth with MCE,
and compares characters per token with a byte-level BPE trained on the same data (Hugging Face
``tokenizers``, when installed) or, without it, with raw bytes.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from importlib import resources
from typing import Any, Dict, List, Optional, TextIO, Tuple

from .baselines import GPT4_SPLIT, train_same_data_bpe
from .tokenizer import Tokenizer
from .training import train

__all__ = ["load_sample", "run_demo", "GPT4_SPLIT"]

def load_sample() -> List[Dict[str, Any]]:
    """The sample corpus: dicts with ``text``, ``source``, ``kind`` and ``license``."""
    data = resources.files("cnfmce").joinpath("data/sample.jsonl.gz").read_bytes()
    return [json.loads(line) for line in gzip.decompress(data).splitlines() if line.strip()]


def split_sample(docs: List[Dict[str, Any]]) -> Tuple[List[str], List[str]]:
    """(train, held-out): every tenth document is held out."""
    train_docs = [d["text"] for i, d in enumerate(docs) if i % 10 != 0]
    test_docs = [d["text"] for i, d in enumerate(docs) if i % 10 == 0]
    return train_docs, test_docs


def _hf_bpe(train_docs: List[str], vocab_size: int) -> Optional[Any]:
    """The same-data byte-level BPE, or None without ``tokenizers``."""
    try:
        return train_same_data_bpe(train_docs, vocab_size)
    except ImportError:
        return None


def _segment(tok: Tokenizer, text: str) -> str:
    parts = [tok.id_to_token(i).decode("utf-8", "replace") for i in tok.encode(text)]
    return " | ".join(p.replace("\n", "\\n") for p in parts)


EXAMPLES = [
    "The server configuration file is read when the server starts.",
    "export function map<T, R>(project: (value: T, index: number) => R): OperatorFunction<T, R> {",
    "response = requests.get(url, params=params, timeout=self.timeout)",
]


def run_demo(vocab_size: int = 8192, output: Optional[str] = None, progress: bool = True,
             num_threads: Optional[int] = None, out: TextIO = sys.stdout) -> Dict[str, Any]:
    """Runs the demo and prints a report; returns the numbers."""
    docs = load_sample()
    train_docs, test_docs = split_sample(docs)
    nbytes = sum(len(d.encode("utf-8")) for d in train_docs)
    print(f"cnfmce demo: training a {vocab_size:,}-token CNF vocabulary on {len(train_docs)} documents "
          f"({nbytes / 1e6:.1f} MB of prose and code); {len(test_docs)} documents held out.",
          file=out, flush=True)
    t0 = time.perf_counter()
    # A raw vocabulary of ~10x the final size suits a corpus this small (the paper's 5M default
    # is for millions of documents; on a few MB it admits noise; see the README).
    tok = train(train_docs, vocab_size=vocab_size, raw_vocab_size=10 * vocab_size,
                num_threads=num_threads, progress=progress)
    t_train = time.perf_counter() - t0
    chars = sum(len(d) for d in test_docs)
    n_mce = sum(len(ids) for ids in tok.encode_batch(test_docs))
    result: Dict[str, Any] = {"vocab_size": tok.vocab_size, "train_seconds": round(t_train, 2),
                              "held_out_chars": chars, "cnfmce_tokens": n_mce,
                              "cnfmce_chars_per_token": chars / n_mce}
    rows = [("cnfmce CNF + MCE", n_mce)]
    t1 = time.perf_counter()
    bpe = _hf_bpe(train_docs, vocab_size)
    if bpe is not None:
        n_bpe = sum(len(e.ids) for e in bpe.encode_batch(test_docs, add_special_tokens=False))
        rows.append(("byte-level BPE (HF tokenizers, same data)", n_bpe))
        result.update(bpe_tokens=n_bpe, bpe_chars_per_token=chars / n_bpe,
                      bpe_train_seconds=round(time.perf_counter() - t1, 2))
    else:
        n_bytes = sum(len(d.encode("utf-8")) for d in test_docs)
        rows.append(("raw UTF-8 bytes (install `tokenizers` for a BPE baseline)", n_bytes))
        result.update(bytes=n_bytes)
    print(f"\ntrained in {t_train:.1f} s; held-out text: {chars:,} characters\n", file=out)
    print(f"| {'tokenizer':<60} | {'tokens':>9} | {'chars/token':>11} |", file=out)
    print(f"|{'-' * 62}|{'-' * 11}|{'-' * 13}|", file=out)
    for name, n in rows:
        print(f"| {name:<60} | {n:>9,} | {chars / n:>11.3f} |", file=out)
    if len(rows) > 1 and rows[1][0].startswith("byte-level"):
        gain = (chars / n_mce) / (chars / rows[1][1]) - 1
        print(f"\nCNF + MCE needs {100 * (1 - n_mce / rows[1][1]):.1f}% fewer tokens than BPE "
              f"({100 * gain:+.1f}% characters per token).", file=out)
    print("\nsegmentations (tokens separated by ' | '):", file=out)
    for ex in EXAMPLES:
        print(f"  {_segment(tok, ex)}", file=out)
    if output:
        tok.save(output)
        print(f"\nsaved the tokenizer to {output}", file=out)
    out.flush()
    return result
