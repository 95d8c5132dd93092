"""Loading a tokenizer file whatever its kind (a cnfmce file, a tiktoken file or a Hugging Face
tokenizer.json), for the command line, :func:`cnfmce.tokenize_corpus` and the viewer."""

from __future__ import annotations

import os
from typing import Any, Union

__all__ = ["load_tokenizer_file"]


def load_tokenizer_file(path: Union[str, "os.PathLike[str]"]) -> Any:
    """The :class:`cnfmce.Tokenizer` in ``path``, its kind told apart by
    :func:`cnfmce.formats.tokenizer_file_kind`; a SentencePiece model is refused."""
    from .formats import tokenizer_file_kind
    from .tokenizer import Tokenizer
    kind = tokenizer_file_kind(path)
    if kind == "tiktoken":
        return Tokenizer.from_tiktoken(path)
    if kind == "hf":
        return Tokenizer.from_hf(path)
    if kind == "sentencepiece":
        raise ValueError(f"{path}: a SentencePiece model has no byte vocabulary cnfmce can encode "
                         "with (use a cnfmce, tiktoken or tokenizer.json file)")
    return Tokenizer.load(path)
