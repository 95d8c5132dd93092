"""The README runs as written: every code block, in order, in a fresh directory holding the files
the blocks name (made from tests/fixtures), and the page follows the rules of a product page."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import fixture_path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"


def blocks(text: str):
    """(language, code) of every fenced block, in order."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)]


def readme_workdir(d: Path) -> None:
    """The files the README's examples name: data/*.jsonl.gz, o200k_base.tiktoken (here the
    fixture BPE in tiktoken's format) and a Hugging Face tokenizer.json (the same BPE)."""
    (d / "data").mkdir()
    for c in ("en", "code", "zh", "multi"):
        shutil.copy(fixture_path("corpora", c, "train.jsonl.gz"), d / "data" / f"{c}.jsonl.gz")
    shutil.copy(fixture_path("vocabs", "bpe8k.tiktoken"), d / "o200k_base.tiktoken")
    (d / "tokenizer.json").write_bytes(gzip.decompress(fixture_path("vocabs", "bpe8k.tokenizer.json.gz").read_bytes()))


def test_readme_is_short_and_has_no_development_history():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert not re.search(r"\bissues? #?\d+|#\d{2,}\b", text, re.I), "issue numbers"
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "dates"
    assert not re.search(r"`[0-9a-f]{7,40}`", text), "commit or tree hashes"
    assert not re.search(r"trial build|build `", text, re.I), "trial builds"
    # the two set-up commands come first
    first = blocks(text)[0]
    assert first[0] == "bash"
    cmds = [ln.split("#")[0].strip() for ln in first[1].splitlines() if ln.strip()]
    assert cmds == ["pip install . && cnfmce demo",
                    'pip install ".[test]" && cargo test -q && python -m pytest -q tests']
    # the places the other features' pages fill
    for heading, link in (("Extending an existing vocabulary", "docs/extend.md"), ("Serving", "docs/serving.md"),
                          ("Speed", "benches/README.md")):
        m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## )", text, re.S | re.M)
        assert m and link in m.group(1), heading


def test_every_code_block_runs(tmp_path):
    """The python blocks run as one script, in order (so a name used in one block is defined by an
    earlier one); then every shell block, in order, in the same directory. `pip install` lines
    (the environment itself) and the set-up block are what CI runs; `cnfmce demo` has its own tests."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    text = README.read_text(encoding="utf-8")
    bs = blocks(text)
    assert bs[0][0] == "bash"
    python = [code for lang, code in bs if lang == "python"]
    shell = [code for lang, code in bs[1:] if lang == "bash"]
    assert len(python) >= 5 and len(shell) >= 3
    readme_workdir(tmp_path)
    env = dict(os.environ)
    here = str(Path(__import__("cnfmce").__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([here, env.get("PYTHONPATH", "")])
    script = "\n".join(python)
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                       timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.strip().splitlines()
    assert out[0] == "8000"              # print(tok.vocab_size)
    assert out[-1] == "A dog"            # print(auto.decode(...))
    assert (tmp_path / "my.tokenizer.json.gz").exists() and (tmp_path / "counts.tsv.gz").exists()
    assert (tmp_path / "my-tokenizer" / "tokenizer_config.json").exists()
    prelude = f'cnfmce() {{ "{sys.executable}" -m cnfmce.cli "$@"; }}\nset -e\n'
    for code in shell:
        lines = [ln for ln in code.splitlines() if not ln.strip().startswith("pip install")]
        if not any(ln.strip() for ln in lines):
            continue
        r = subprocess.run(["bash", "-c", prelude + "\n".join(lines)], cwd=tmp_path, capture_output=True,
                           text=True, timeout=900, env=env)
        assert r.returncode == 0, (code, r.stderr[-3000:])
    assert (tmp_path / "shards" / "manifest.json").exists()
    assert (tmp_path / "page.html").exists()
    assert (tmp_path / "results.json").exists()
