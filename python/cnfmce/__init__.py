"""cnfmce: Counting-and-Filtering (CNF) vocabularies and Min-Cost Encoding (MCE).

>>> import cnfmce
>>> tok = cnfmce.Tokenizer.from_tiktoken("o200k_base.tiktoken")   # doctest: +SKIP
>>> tok.encode("hello world")                                      # doctest: +SKIP
"""

from ._core import __version__
from .errors import CnfmceError, CorpusError, TokenizerFileError, UnknownIdError
from .tokenizer import Tokenizer

__all__ = [
    "__version__",
    "Tokenizer",
    "CnfmceError",
    "CorpusError",
    "TokenizerFileError",
    "UnknownIdError",
]
