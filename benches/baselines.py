"""Baseline tokenizers built offline from ``../shared/vocabs`` (no downloads).

* ``tiktoken_encoding(name)``: tiktoken's own ``o200k_base`` / ``cl100k_base`` definition (its
  official regex and special tokens), with the ranks read from the local ``.tiktoken`` file.
* ``hf_tokenizer(name)``: a Hugging Face ``tokenizers.Tokenizer`` from a local ``tokenizer.json``
  (``.gz`` files are decompressed in memory).
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

_SHARED = Path(os.environ.get("CNFMCE_SHARED", Path(__file__).resolve().parents[2] / "shared"))
VOCABS = Path(os.environ.get("CNFMCE_VOCABS", _SHARED / "vocabs"))

HF_FILES = {
    "qwen3.5": "qwen3.5.tokenizer.json.gz",
    "qwen2.5": "qwen2.5.tokenizer.json",
    "deepseek-v4": "deepseek-v4.tokenizer.json",
    "minimax-m3": "minimax-m3.tokenizer.json.gz",
    "llama3": "llama3.tokenizer.json.gz",
}
TIKTOKEN_FILES = {"o200k_base": "o200k_base.tiktoken", "cl100k_base": "cl100k_base.tiktoken"}


def vocab_path(name: str) -> Path:
    """The local file of a baseline vocabulary."""
    if name in TIKTOKEN_FILES:
        return VOCABS / TIKTOKEN_FILES[name]
    return VOCABS / HF_FILES[name]


def tiktoken_encoding(name: str):
    """A ``tiktoken.Encoding`` for ``o200k_base`` or ``cl100k_base`` from the local files."""
    import tiktoken
    import tiktoken.load
    from tiktoken_ext import openai_public

    local = str(vocab_path(name))
    real = tiktoken.load.load_tiktoken_bpe

    def load_local(_url: str, expected_hash: str | None = None):
        return real(local, expected_hash)

    openai_public.load_tiktoken_bpe = load_local
    try:
        spec = getattr(openai_public, name)()
    finally:
        openai_public.load_tiktoken_bpe = real
    return tiktoken.Encoding(**spec)


def hf_tokenizer(name_or_path: str):
    """A Hugging Face ``tokenizers.Tokenizer`` from a baseline name or a tokenizer.json path."""
    from tokenizers import Tokenizer as HFTokenizer

    p = vocab_path(name_or_path) if name_or_path in HF_FILES else Path(name_or_path)
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return HFTokenizer.from_str(data.decode("utf-8"))
