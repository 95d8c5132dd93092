"""Optional dependencies: import one, or raise an ImportError that names the extra to install."""

from __future__ import annotations

import importlib
from typing import Any

# module -> the extra of pyproject.toml that installs it
EXTRA_OF = {
    "tiktoken": "eval", "tokenizers": "eval", "sentencepiece": "eval", "matplotlib": "eval",
    "pyarrow": "formats", "zstandard": "formats",
    "transformers": "hf", "jinja2": "hf",
    "ray": "ray",
}


def require(module: str, what: str) -> Any:
    """``importlib.import_module(module)``; when it is missing, an ImportError saying that
    ``what`` needs it and which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        extra = EXTRA_OF.get(top)
        hint = f'pip install "cnfmce[{extra}]"' if extra else f"pip install {top}"
        raise ImportError(f"{what} needs {top}: {hint}") from e
