"""cnfmce: Counting-and-Filtering (CNF) vocabularies and Min-Cost Encoding (MCE).

>>> import cnfmce
>>> tok = cnfmce.Tokenizer.from_tiktoken("o200k_base.tiktoken")   # doctest: +SKIP
>>> tok.encode("hello world")                                      # doctest: +SKIP
>>> tok = cnfmce.train(["first document", "second document"], vocab_size=300)  # doctest: +SKIP
"""

from ._core import __version__
from .errors import CnfmceError, CorpusError, TokenizerFileError, UnknownIdError
from .shards import tokenize_corpus
from .tokenizer import Tokenizer
from .training import (DEFAULT_ROUNDS, Counts, count, load_counts, merge_counts, save_counts, train,
                       train_from_counts)

__all__ = [
    "__version__",
    "Tokenizer",
    "tokenize_corpus",
    "train",
    "count",
    "train_from_counts",
    "Counts",
    "save_counts",
    "load_counts",
    "merge_counts",
    "DEFAULT_ROUNDS",
    "CnfmceError",
    "CorpusError",
    "TokenizerFileError",
    "UnknownIdError",
]
