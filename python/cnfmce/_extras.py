"""Optional dependencies: import one, or raise an ImportError that names the extra to install."""

from __future__ import annotations

from typing import Any

from .errors import require as _require

# module -> the extra of pyproject.toml that installs it
EXTRA_OF = {
    "tiktoken": "eval", "tokenizers": "eval", "sentencepiece": "eval", "matplotlib": "eval",
    "pyarrow": "formats", "zstandard": "formats",
    "transformers": "hf", "jinja2": "hf",
    "ray": "ray",
}


def require(module: str, what: str) -> Any:
    """``importlib.import_module(module)``; when it is missing, a
    :class:`cnfmce.errors.MissingPackageError` (an ImportError) saying that ``what`` needs it and
    which extra to install (:data:`EXTRA_OF`)."""
    top = module.split(".")[0]
    return _require(module, EXTRA_OF.get(top, top), what)
