"""Shared fixtures: where the shared corpora and vocabularies live, and tokenizers loaded once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import cnfmce

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CNFMCE_SHARED", str(REPO.parent / "shared")))


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (CNFMCE_REQUIRE_SHARED=1) a test skipped for missing shared data fails instead, so a
    misplaced ../shared cannot turn the suite green by skipping it."""
    outcome = yield
    rep = outcome.get_result()
    if os.environ.get("CNFMCE_REQUIRE_SHARED") and rep.skipped and call.excinfo is not None:
        msg = str(call.excinfo.value)
        if any(w in msg for w in ("CNFMCE_SHARED", "shared", "corpus not found", "missing")):
            rep.outcome = "failed"
            rep.longrepr = f"shared data is required here (CNFMCE_REQUIRE_SHARED=1): {msg}"
