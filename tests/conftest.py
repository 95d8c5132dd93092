"""Shared fixtures: the small corpora and vocabulary shipped in tests/fixtures, the large shared
corpora and vocabularies, and tokenizers loaded once.

Two tiers. The default run (``python -m pytest -q tests``) needs nothing outside the repository
and stays quick: tests read ``tests/fixtures`` (see its NOTICE.md and build.py). The extra tier,
deselected unless ``-m`` is given, holds two markers:

* ``shared``: tests that need the large shared corpora or the published vocabularies
  (``CNFMCE_SHARED``, default ``../shared``); a test using one of the fixtures in
  ``SHARED_FIXTURES`` is marked automatically.
* ``slow``: the long variants of checks whose shorter variant runs by default (the rest of the
  random trials, larger cases, the other output formats on Ray).

``python -m pytest -q -m "shared or slow" tests`` runs that tier (CI does, with the data
present); ``-m shared`` or ``-m slow`` runs one of the two."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import cnfmce

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CNFMCE_SHARED", str(REPO.parent / "shared")))
FIXTURES = REPO / "tests" / "fixtures"
# Fixtures that read the shared data: a test using one belongs to the shared tier.
SHARED_FIXTURES = frozenset({"o200k", "qwen", "shared_dir", "tiktoken_o200k", "hf_qwen", "o200k_pair",
                             "o200k_vocab", "qwen_fmm"})


def pytest_configure(config):
    config.addinivalue_line("markers", "shared: needs the large shared corpora or published vocabularies "
                                       "(CNFMCE_SHARED); deselected unless -m is given (-m shared runs them)")
    config.addinivalue_line("markers", "slow: the long variant of a check whose shorter variant runs by default; "
                                       "deselected unless -m is given (-m slow runs them)")


@pytest.hookimpl(tryfirst=True)
def pytest_ignore_collect(collection_path, config):
    """transformers' common tokenizer suite (tests/test_hf_conformance.py) is fetched from PyPI by
    .ci/run (``CNFMCE_TRANSFORMERS_TESTS``); a checkout without it leaves that module out instead
    of reporting it skipped. In CI (``CNFMCE_REQUIRE_SHARED=1``) it is always collected, so a
    missing suite fails there."""
    if (collection_path.name == "test_hf_conformance.py" and not os.environ.get("CNFMCE_TRANSFORMERS_TESTS")
            and not os.environ.get("CNFMCE_REQUIRE_SHARED")):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    """Marks the tests that use a shared-data fixture ``shared``; without ``-m``, deselects the
    extra tier (``shared`` and ``slow``), so a clone without the data neither runs nor skips those
    tests, and the default run stays quick."""
    for item in items:
        if SHARED_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("shared"):
            item.add_marker(pytest.mark.shared)
    if config.option.markexpr:
        return
    extra = [it for it in items if it.get_closest_marker("shared") or it.get_closest_marker("slow")]
    if extra:
        config.hook.pytest_deselected(items=extra)
        items[:] = [it for it in items if not (it.get_closest_marker("shared") or it.get_closest_marker("slow"))]


def fixture_path(*parts: str) -> Path:
    """A file under tests/fixtures (always present)."""
    p = FIXTURES.joinpath(*parts)
    assert p.exists(), f"test fixture missing: {p} (rebuild with tests/fixtures/build.py)"
    return p


def ctrl_c_as_in_a_terminal() -> None:
    """``preexec_fn`` for a child that a test interrupts with SIGINT: SIGINT back to its default
    disposition. A shell starts background jobs with SIGINT ignored and children inherit that
    (Python then installs no KeyboardInterrupt handler), so a suite started with ``... &`` would
    otherwise test a Ctrl-C that no terminal sends."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def shared_path(*parts: str) -> Path:
    """A file under the shared directory; skips the test when it is missing."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"shared data not found: {p} (set CNFMCE_SHARED to the shared directory)")
    return p


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared directory not found: {SHARED} (set CNFMCE_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def o200k() -> cnfmce.Tokenizer:
    return cnfmce.Tokenizer.from_tiktoken(shared_path("vocabs", "o200k_base.tiktoken"),
                                          special_tokens={"<|endoftext|>": 199999})


@pytest.fixture(scope="session")
def qwen() -> cnfmce.Tokenizer:
    return cnfmce.Tokenizer.from_hf(shared_path("vocabs", "qwen3.5.tokenizer.json.gz"))


@pytest.fixture(scope="session")
def bpe() -> cnfmce.Tokenizer:
    """An o200k-like vocabulary from the fixtures: a byte-level BPE of 8,192 ranks (o200k_base's
    pre-tokenization) in tiktoken's format, with ``<|endoftext|>`` at 8192."""
    return cnfmce.Tokenizer.from_tiktoken(fixture_path("vocabs", "bpe8k.tiktoken"),
                                          special_tokens={"<|endoftext|>": 8192})


@pytest.fixture(scope="session")
def bpe_hf() -> cnfmce.Tokenizer:
    """The same BPE as a Hugging Face ``tokenizer.json`` (NFC normaliser, as Qwen's; added tokens
    ``<|endoftext|>``, ``<|im_start|>``, ``<|im_end|>`` at 8192-8194)."""
    return cnfmce.Tokenizer.from_hf(fixture_path("vocabs", "bpe8k.tokenizer.json.gz"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (CNFMCE_REQUIRE_SHARED=1) a test skipped for missing shared data fails instead, so a
    misplaced ../shared cannot turn the suite green by skipping it; with CNFMCE_REQUIRE_TORCH=1
    the same holds for a test skipped because torch is not installed."""
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get("CNFMCE_REQUIRE_SHARED") and rep.skipped and call.excinfo is not None:
        msg = str(call.excinfo.value)
        if any(w in msg for w in ("CNFMCE_SHARED", "shared", "corpus not found", "missing")):
            rep.outcome = "failed"
            rep.longrepr = f"shared data is required here (CNFMCE_REQUIRE_SHARED=1): {msg}"
    if os.environ.get("CNFMCE_REQUIRE_TORCH") and rep.skipped and call.excinfo is not None:
        msg = str(call.excinfo.value)
        if "torch" in msg.lower():
            rep.outcome = "failed"
            rep.longrepr = f"torch is required here (CNFMCE_REQUIRE_TORCH=1): {msg}"
