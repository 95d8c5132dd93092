"""Exceptions raised by cnfmce.

Every error is also an instance of the built-in exception a caller would expect, so code written
against ``ValueError``/``KeyError``/``OSError`` keeps working.
"""

from __future__ import annotations

import json
from typing import Any, Type, Union

__all__ = ["CnfmceError", "UnknownIdError", "TokenizerFileError", "CorpusError",
           "MissingPackageError"]


class CnfmceError(Exception):
    """Base class of the errors raised by cnfmce."""


class UnknownIdError(CnfmceError, KeyError, ValueError):
    """A token id that is neither a regular nor a special token of the tokenizer."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown token id"


class TokenizerFileError(CnfmceError, ValueError, OSError):
    """A tokenizer or counts file that is truncated, corrupt or of an unsupported kind."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "bad tokenizer file"


class CorpusError(CnfmceError, ValueError, OSError):
    """A training or evaluation input that cannot be read (bad encoding, malformed line, ...)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "bad corpus input"


class MissingPackageError(CnfmceError, ImportError):
    """An optional package a call needs is not installed; the message names the extra that
    installs it (``pip install "cnfmce[eval]"``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "an optional package is missing"


def require(module: str, extra: str, what: str) -> Any:
    """``import module``, or :class:`MissingPackageError` saying that ``what`` needs it and which
    extra of cnfmce installs it."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if getattr(e, "name", None) not in (None, module, module.split(".")[0]):
            raise  # the package is there but one of its own imports is broken: its error
        raise MissingPackageError(f"{what} needs the {module.split('.')[0]} package, which is not "
                                  f"installed: pip install \"cnfmce[{extra}]\"") from None


def load_json(data: Union[bytes, str], where: str, error: Type[CnfmceError], what: str = "JSON") -> Any:
    """``json.loads(data)``, every way it can fail raised as ``error`` naming ``where`` (a file, or
    ``file:line``): not UTF-8, nested too deeply, or malformed (with the decoder's own message)."""
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        raise error(f"{where}: {what} is not valid UTF-8") from None
    except RecursionError:
        raise error(f"{where}: {what} nested too deeply") from None
    except ValueError as e:
        raise error(f"{where}: malformed {what} ({e})") from None
