"""Writes docs/cli.md from the command line's argparse definitions (cnfmce.cli.build_parser).

    python docs/make_cli.py            # rewrite docs/cli.md
    python docs/make_cli.py --check    # exit 1 if docs/cli.md is out of date

tests/test_docs.py checks that every subcommand and option of the parser is in docs/cli.md and
that every option docs/cli.md names exists.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "cli.md"

INTRO = """# The command line

`cnfmce COMMAND --help` prints the same. This page is generated from the parser
(`python docs/make_cli.py`); the Python API behind each command is in
[training.md](training.md), [encoding.md](encoding.md), [shards.md](shards.md) and
[ray.md](ray.md).

A tokenizer (`-t`) is a cnfmce file (`.json`, `.json.gz`), a `.tiktoken` file or a Hugging Face
`tokenizer.json`, encoded with cnfmce's MCE. `show`, `view` and `eval` also take specs:
`mce:PATH`, `fmm:PATH`, `tiktoken:NAME` (tiktoken's own BPE), `hf:PATH` (Hugging Face
`tokenizers`), `sp:PATH` (sentencepiece). Every INPUT is a path: `.txt` (one document per file),
`.jsonl`, `.jsonl.gz`, `.jsonl.zst`, `.parquet`.
"""


def subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def render() -> str:
    try:  # the installed package (a checkout's python/ has no compiled core unless built in place)
        import cnfmce  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(HERE.parent / "python"))
    from cnfmce.cli import build_parser
    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    parts = [INTRO, "```", parser.format_help().rstrip(), "```", ""]
    for name, sub in subcommands(parser).items():
        sub.prog = f"cnfmce {name}"
        parts += [f"## cnfmce {name}", "", "```", sub.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def main() -> None:
    text = render()
    if "--check" in sys.argv[1:]:
        sys.exit(0 if OUT.read_text(encoding="utf-8") == text else 1)
    OUT.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
