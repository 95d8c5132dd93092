"""The README's "Use with transformers" example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def section_code(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, f"README has no section {title!r}"
    blocks = re.findall(r"```python\n(.*?)```", m.group(1), re.S)
    assert blocks, f"README section {title!r} has no python example"
    return blocks[0]


def test_use_with_transformers_example_runs(tmp_path):
    pytest.importorskip("transformers")
    code = section_code("Use with transformers")
    assert len(code.strip().splitlines()) <= 14
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "A dog"
    assert lines[0].startswith("(2, ")
    assert (tmp_path / "my-tokenizer" / "tokenizer_config.json").exists()
