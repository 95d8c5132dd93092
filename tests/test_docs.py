"""The user documentation stays true: docs/cli.md matches the parser both ways, every relative link
of README.md and docs/*.md resolves, and every optional feature names the extra to install."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cnfmce.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
CLI_MD = REPO / "docs" / "cli.md"

# Pages other parts of the project add (the README links them already); listed here only while
# they are missing from this checkout. A page that exists is checked like any other.
PENDING_PAGES: set = set()


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def _sections(text: str):
    """{subcommand: its section of docs/cli.md}."""
    parts = re.split(r"^## cnfmce (\S+)\n", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_cli_md_documents_every_subcommand_and_option():
    text = CLI_MD.read_text(encoding="utf-8")
    sections = _sections(text)
    subs = _subcommands(build_parser())
    assert set(sections) == set(subs), "docs/cli.md and the parser list different subcommands (python docs/make_cli.py)"
    for name, sub in subs.items():
        have = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", sections[name]))
        want = {o for a in sub._actions for o in a.option_strings}
        assert want <= have, (name, "missing from docs/cli.md", sorted(want - have))
        assert have <= want, (name, "in docs/cli.md but not in the parser", sorted(have - want))
        for a in sub._actions:
            if not a.option_strings and a.metavar:  # positional arguments
                assert str(a.metavar) in sections[name], (name, a.metavar)


def test_cli_md_is_the_generated_page():
    r = subprocess.run([sys.executable, str(REPO / "docs" / "make_cli.py"), "--check"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(Path(__import__("cnfmce").__file__).resolve().parent.parent)))
    assert r.returncode == 0, "docs/cli.md is out of date: run python docs/make_cli.py\n" + r.stderr[-2000:]


def _pages():
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")) + sorted((REPO / "docs" / "results").glob("*.md"))


def test_relative_links_resolve():
    bad = []
    checked = 0
    for page in _pages():
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#")[0]
            dest = (page.parent / path).resolve()
            rel = dest.relative_to(REPO).as_posix() if dest.is_relative_to(REPO) else str(dest)
            checked += 1
            if not dest.exists() and rel not in PENDING_PAGES:
                bad.append(f"{page.relative_to(REPO)}: {target}")
    assert checked > 50
    assert not bad, bad


def test_readme_links_the_user_guide():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    for page in ("docs/training.md", "docs/encoding.md", "docs/transformers.md", "docs/shards.md",
                 "docs/ray.md", "docs/cli.md", "docs/spec.md", "docs/glossary.md", "docs/results/README.md"):
        assert f"]({page}" in text, page


# --- optional features name their extra ---------------------------------------------------------------

_BLOCK = textwrap.dedent("""
    import importlib.abc, sys
    BLOCKED = set(sys.argv[1].split(","))
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"No module named {name!r} (blocked by the test)")
    for m in list(sys.modules):
        if m.split(".")[0] in BLOCKED:
            del sys.modules[m]
    sys.meta_path.insert(0, Block())
    import cnfmce
""")

CASES = {
    # feature: (blocked modules, code, the extra its ImportError must name)
    "transformers": ("transformers", "cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)]).to_transformers()", "hf"),
    "chat templates": ("jinja2", "cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)]).to_transformers("
                       "chat_template='{{ messages[0][\\'content\\'] }}').apply_chat_template([{'role': 'user', 'content': 'hi'}], tokenize=False)", "hf"),
    "ray backend": ("ray", "cnfmce.train(['a b c'], vocab_size=300, backend='ray', progress=False)", "ray"),
    "parquet input": ("pyarrow", "cnfmce.train([sys.argv[2] + '/x.parquet'], vocab_size=300, progress=False)", "formats"),
    "zstd input": ("zstandard", "cnfmce.train([sys.argv[2] + '/x.jsonl.zst'], vocab_size=300, progress=False)", "formats"),
    "parquet counts": ("pyarrow", "cnfmce.train_from_counts(sys.argv[2] + '/c.parquet', ['a b'], vocab_size=300, progress=False)", "formats"),
    "tiktoken baseline": ("tiktoken", "from cnfmce.adapters import load_encoder; load_encoder('tiktoken:o200k_base')", "eval"),
    "tokenizers baseline": ("tokenizers", "from cnfmce.adapters import load_encoder; load_encoder('hf:' + sys.argv[2] + '/t.json')", "eval"),
    "sentencepiece baseline": ("sentencepiece", "from cnfmce.adapters import load_encoder; load_encoder('sp:' + sys.argv[2] + '/t.model')", "eval"),
}


@pytest.mark.parametrize("feature", sorted(CASES))
def test_optional_feature_names_its_extra(feature, tmp_path):
    blocked, code, extra = CASES[feature]
    for name in ("x.parquet", "x.jsonl.zst", "c.parquet", "t.json", "t.model"):
        (tmp_path / name).write_bytes(b"not read: the import fails first")
    script = _BLOCK + f"""
try:
    {code}
except ImportError as e:
    print("IMPORTERROR:" + str(e))
except Exception as e:
    print("OTHER:" + type(e).__name__ + ": " + str(e))
"""
    env = dict(os.environ, PYTHONPATH=str(Path(__import__("cnfmce").__file__).resolve().parent.parent))
    r = subprocess.run([sys.executable, "-c", script, blocked, str(tmp_path)], capture_output=True, text=True,
                       timeout=300, env=env)
    out = r.stdout + r.stderr
    assert f'cnfmce[{extra}]' in out, (feature, out[-2000:])


def test_vocab_size_counts_as_documented():
    """README / docs/encoding.md: cnfmce's vocab_size counts every id, special tokens included;
    the transformers wrapper's counts the regular tokens, its len() every id."""
    import cnfmce
    docs = ["The cat sat on the mat.", "The dog sat on the log.", "A cat and a dog."] * 50
    tok = cnfmce.train(docs, vocab_size=300, special_tokens=["<|endoftext|>"], progress=False)
    assert tok.vocab_size == len(tok) == tok.n_vocab == 300
    assert tok.special_tokens == {"<|endoftext|>": 299}
    pytest.importorskip("transformers")
    hf = tok.to_transformers()
    assert hf.vocab_size == 299 and len(hf) == 300
