"""transformers' own common tokenizer test suite (``TokenizerTesterMixin``), unmodified, on
``cnfmce.hf.CnfmceTokenizer`` in several configurations.

The suite is not part of this repository: ``tests/transformers_suite.py`` fetches it from the
transformers sdist on PyPI (the installed version) and ``CNFMCE_TRANSFORMERS_TESTS`` points here at
its ``tests`` directory (``.ci/run`` does both). Without the variable this module is skipped.

Tests that do not apply to a tokenizer of this kind are skipped below with their reason; the same
list is in docs/transformers.md.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
import unittest
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

import cnfmce  # noqa: E402
from cnfmce.demo import load_sample  # noqa: E402
from cnfmce.hf import CnfmceTokenizer  # noqa: E402
from conftest import SHARED  # noqa: E402
from transformers_suite import ENV, load_suite  # noqa: E402

_DIR = os.environ.get(ENV)
if not _DIR:
    pytest.skip(f"{ENV} is not set (python tests/transformers_suite.py CACHE_DIR prints the directory "
                "of transformers' common tokenizer tests)", allow_module_level=True)
import parameterized  # noqa: E402,F401  (the suite imports it; the test extra installs it)

if not Path(_DIR, "test_tokenization_common.py").is_file():
    raise RuntimeError(f"{ENV}={_DIR} has no test_tokenization_common.py")

_SUITE_VERSION = Path(_DIR).resolve().parent.name.partition("-")[2]
if _SUITE_VERSION != transformers.__version__:
    raise RuntimeError(f"{ENV} holds the tests of transformers {_SUITE_VERSION!r}, but transformers "
                       f"{transformers.__version__} is installed (python tests/transformers_suite.py "
                       "CACHE_DIR fetches the installed version's)")

TokenizerTesterMixin = load_suite(Path(_DIR)).TokenizerTesterMixin

# Skipped tests and why (the same list, with more detail, is in docs/transformers.md).
NOT_APPLICABLE = {
    "test_maximum_encoding_length_single_input":
        "asserts the python backend's overflow format (one truncated sequence and an "
        "`overflowing_tokens` list) for tokenizers that are not TokenizersBackend; CnfmceTokenizer "
        "returns overflow as fast tokenizers do (one row per stride window, "
        "`overflow_to_sample_mapping`), which tests/test_hf_fast.py checks with this test's "
        "assertions for fast tokenizers",
    "test_maximum_encoding_length_pair_input":
        "asserts the python backend's overflow format (`overflowing_tokens`) for pairs; "
        "CnfmceTokenizer returns fast tokenizers' stride windows (checked in tests/test_hf_fast.py "
        "with this test's assertions for fast tokenizers)",
    "test_tokenizer_store_full_signature":
        "the `tokenizer=` argument is an in-memory cnfmce.Tokenizer; like `vocab_file`, which the "
        "test exempts, it is saved as the vocabulary file (cnfmce_tokenizer.json), not as a "
        "configuration value",
}

_CACHE: dict = {}


def _sample_docs() -> list:
    return [d["text"] for d in load_sample()]


def trained_core() -> cnfmce.Tokenizer:
    """A small CNF vocabulary trained on the bundled sample corpus."""
    if "trained" not in _CACHE:
        _CACHE["trained"] = cnfmce.train(_sample_docs(), vocab_size=2000, raw_vocab_size=20000,
                                         progress=False)
    return _CACHE["trained"]


def gapped_core() -> cnfmce.Tokenizer:
    """A vocabulary whose ids have gaps: o200k_base (ids 199998 and 200000 unused below
    ``<|endoftext|>`` at 199999 ... ) when the shared vocabularies are there, else the trained
    vocabulary with every seventh id left unused, read through the tiktoken format."""
    if "gapped" not in _CACHE:
        o200k = SHARED / "vocabs" / "o200k_base.tiktoken"
        if o200k.is_file():
            core = cnfmce.Tokenizer.from_tiktoken(o200k, special_tokens={"<|endoftext|>": 199999})
        else:
            if os.environ.get("CNFMCE_REQUIRE_SHARED"):
                raise RuntimeError(f"{o200k} is required (CNFMCE_REQUIRE_SHARED=1)")
            core = generated_gapped_core()
        _CACHE["gapped"] = core
    return _CACHE["gapped"]


def generated_gapped_core() -> cnfmce.Tokenizer:
    base = trained_core()
    ids, toks = base._core.tokens()
    order = [t for _, t in sorted(zip(ids, toks))]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "gapped.tiktoken"
        lines, i = [], 0
        for t in order:
            if i % 7 == 6:
                i += 1  # an unused id
            lines.append(f"{base64.b64encode(t).decode()} {i}")
            i += 1
        path.write_text("\n".join(lines) + "\n")
        return cnfmce.Tokenizer.from_tiktoken(path, special_tokens={"<|endoftext|>": i + 1})


class _CnfmceSuite(TokenizerTesterMixin):
    tokenizer_class = CnfmceTokenizer
    test_seq2seq = True
    test_tokenizer_from_extractor = False
    core = staticmethod(trained_core)
    hf_kwargs: dict = {}

    @classmethod
    def setUpClass(cls) -> None:
        # The tokenizer saved in a local directory is the suite's "pretrained" tokenizer: the tests
        # that loop over `tokenizers_list` (and test_local_files_only) load it with AutoTokenizer.
        cls._saved = tempfile.mkdtemp()
        cls.tokenizer_class(tokenizer=cls.core(), **cls.hf_kwargs).save_pretrained(cls._saved)
        cls.from_pretrained_id = [cls._saved]
        cls.from_pretrained_kwargs = {"trust_remote_code": True}
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        shutil.rmtree(cls._saved, ignore_errors=True)


def _not_applicable(cls):
    for name, reason in NOT_APPLICABLE.items():
        if hasattr(cls, name):
            setattr(cls, name, unittest.skip(reason)(getattr(cls, name)))
    return cls


@_not_applicable
class TestTrained(_CnfmceSuite, unittest.TestCase):
    """A small trained vocabulary with an end-of-text and a padding token."""
    hf_kwargs = {"eos_token": "<|endoftext|>", "pad_token": "<|pad|>"}


@_not_applicable
class TestTrainedBosEos(_CnfmceSuite, unittest.TestCase):
    """The same vocabulary with bos/eos added to every sequence and an unknown token."""
    hf_kwargs = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
                 "add_bos_token": True, "add_eos_token": True}


@_not_applicable
class TestGapped(_CnfmceSuite, unittest.TestCase):
    """A vocabulary with unused ids below len(tok) (o200k_base with the shared data)."""
    core = staticmethod(gapped_core)
    hf_kwargs = {"eos_token": "<|endoftext|>", "pad_token": "<|pad|>"}
