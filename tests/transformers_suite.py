"""Fetch transformers' common tokenizer test suite (``TokenizerTesterMixin``) from PyPI.

The suite lives in ``tests/test_tokenization_common.py`` of the transformers *source* distribution
(the wheel has no tests). This script downloads that sdist with pip, for exactly the transformers
version installed (so the suite matches the library it tests), and unpacks the three files the suite
needs into a cache directory::

    python tests/transformers_suite.py ~/.cache/cnfmce-transformers-tests
    # prints .../transformers-5.25.0/tests; then
    CNFMCE_TRANSFORMERS_TESTS=<that path> python -m pytest -q tests/test_hf_conformance.py

Nothing is copied into this repository. ``.ci/run`` runs the same command. The suite reads
``tests/fixtures/sample_text.txt`` in ``setUpClass`` (into ``cls._data``, which no test of the
common suite uses); the sdist does not ship it, so a short text of our own is written there.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Optional

#: The files of the sdist's tests/ directory that the common tokenizer suite imports.
SUITE_FILES = ("test_tokenization_common.py", "test_tokenizers_backend_mixin.py",
               "test_sentencepiece_backend_mixin.py")
ENV = "CNFMCE_TRANSFORMERS_TESTS"
PACKAGE = "transformers_common_tests"
SAMPLE_TEXT = "This is a sample text for the tokenizer tests.\nIt has two lines.\n"


def installed_version() -> str:
    import transformers
    return transformers.__version__


def fetch(cache: Path, version: Optional[str] = None) -> Path:
    """The tests/ directory of transformers ``version`` (default: the installed one) under ``cache``,
    downloaded from PyPI when it is not there yet."""
    version = version or installed_version()
    dest = cache / f"transformers-{version}" / "tests"
    if all((dest / f).is_file() for f in SUITE_FILES):
        return dest
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        f"transformers=={version}", "-d", tmp], check=True)
        sdists = [p for p in Path(tmp).iterdir() if p.name.endswith(".tar.gz")]
        if len(sdists) != 1:
            raise RuntimeError(f"expected one transformers sdist in {tmp}, found {sorted(os.listdir(tmp))}")
        staging = Path(tmp) / "tests"
        (staging / "fixtures").mkdir(parents=True)
        with tarfile.open(sdists[0]) as tar:
            for name in SUITE_FILES:
                member = f"transformers-{version}/tests/{name}"
                try:
                    f = tar.extractfile(member)
                except KeyError:
                    raise RuntimeError(f"{sdists[0].name} has no {member}") from None
                assert f is not None
                (staging / name).write_bytes(f.read())
        (staging / "fixtures" / "sample_text.txt").write_text(SAMPLE_TEXT, encoding="utf-8")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():  # a partial earlier copy
            import shutil
            shutil.rmtree(dest)
        os.replace(staging, dest)
    return dest


def load_suite(tests_dir: Path) -> ModuleType:
    """``test_tokenization_common`` imported from ``tests_dir`` as a module of a package of its own
    (its relative imports of the backend mixins resolve inside that directory)."""
    if PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_loader(PACKAGE, loader=None, is_package=True)
        assert spec is not None
        pkg = importlib.util.module_from_spec(spec)
        pkg.__path__ = [str(tests_dir)]  # type: ignore[attr-defined]
        sys.modules[PACKAGE] = pkg
    return importlib.import_module(f"{PACKAGE}.test_tokenization_common")


def main(argv: Optional[list] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cache", type=Path, help="cache directory (created if needed)")
    ap.add_argument("--version", help="transformers version (default: the installed one)")
    args = ap.parse_args(argv)
    print(fetch(args.cache, args.version))


if __name__ == "__main__":
    main()
