"""Same-data baselines: a byte-level BPE trained with Hugging Face ``tokenizers`` on the same
documents, to compare a CNF vocabulary with (``cnfmce demo``, ``benches/train.py`` and the
experiments under ``experiments/`` all use this one definition).

The BPE uses the GPT-4 (cl100k_base) pre-tokenization regex, then GPT-2's byte-level alphabet,
``BpeTrainer`` with all 256 bytes as the initial alphabet and no special tokens. Needs the optional
``tokenizers`` package (``pip install 'cnfmce[eval]'``).
"""

from __future__ import annotations

from typing import Any, Iterable, Tuple

__all__ = ["GPT4_SPLIT", "bpe_tokenizer_and_trainer", "train_same_data_bpe"]

# The GPT-4 (cl100k_base) pre-tokenization pattern.
GPT4_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def bpe_tokenizer_and_trainer(vocab_size: int) -> Tuple[Any, Any]:
    """An untrained byte-level BPE ``tokenizers.Tokenizer`` and its ``BpeTrainer`` (call
    ``tok.train_from_iterator(docs, trainer)``); raises ImportError without ``tokenizers``."""
    from tokenizers import Regex, Tokenizer as HFTokenizer, decoders, models, pre_tokenizers, trainers
    tok = HFTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GPT4_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tok, trainer


def train_same_data_bpe(docs: Iterable[str], vocab_size: int) -> Any:
    """A byte-level BPE of ``vocab_size`` trained on ``docs`` (a ``tokenizers.Tokenizer``)."""
    tok, trainer = bpe_tokenizer_and_trainer(vocab_size)
    tok.train_from_iterator(docs, trainer)
    return tok
