"""The ``cnfmce`` command line (SPEC section 5).

::

    cnfmce encode -t TOKENIZER [INPUT...]     # one JSON list of ids per input document
    cnfmce --version
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional, Sequence

from . import __version__
from .errors import CnfmceError

__all__ = ["main"]


def _load_tokenizer(path: str):
    from .tokenizer import Tokenizer
    from .formats import read_bytes
    low = path.lower()
    if low.endswith(".tiktoken") or low.endswith(".tiktoken.gz"):
        return Tokenizer.from_tiktoken(path)
    head = read_bytes(path)[:4096]
    if b'"format"' in head and b'"cnfmce"' in head:
        return Tokenizer.load(path)
    if b'"model"' in read_bytes(path):
        return Tokenizer.from_hf(path)
    return Tokenizer.load(path)


def _cmd_encode(args: argparse.Namespace) -> int:
    from .corpus import iter_file
    tok = _load_tokenizer(args.tokenizer)
    allowed = "all" if args.allow_special else frozenset()
    out = sys.stdout
    if not args.inputs or args.inputs == ["-"]:
        data = sys.stdin.buffer.read()
        if args.jsonl:
            for line in data.splitlines():
                if line.strip():
                    doc = json.loads(line)["text"]
                    out.write(json.dumps(tok.encode(doc, allowed_special=allowed)) + "\n")
        else:
            ids = tok.encode_bytes(data, allowed_special=allowed)
            out.write(json.dumps(ids) + "\n")
        return 0
    batch: List[str] = []
    for path in args.inputs:
        for doc in iter_file(path):
            batch.append(doc)
            if len(batch) >= 256:
                for ids in tok.encode_batch(batch, allowed_special=allowed):
                    out.write(json.dumps(ids) + "\n")
                batch = []
    for ids in tok.encode_batch(batch, allowed_special=allowed):
        out.write(json.dumps(ids) + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cnfmce", description="CNF vocabularies and min-cost encoding")
    p.add_argument("--version", action="version", version=f"cnfmce {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    e = sub.add_parser("encode", help="encode documents; one JSON list of ids per document")
    e.add_argument("-t", "--tokenizer", required=True,
                   help="tokenizer file (cnfmce JSON, .tiktoken, or a Hugging Face tokenizer.json)")
    e.add_argument("inputs", nargs="*", metavar="INPUT",
                   help=".txt / .jsonl / .jsonl.gz / .jsonl.zst / .parquet; none or '-': stdin")
    e.add_argument("--jsonl", action="store_true", help="stdin holds JSON lines with a \"text\" field")
    e.add_argument("--allow-special", action="store_true", help="match special tokens in the text")
    e.set_defaults(func=_cmd_encode)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("cnfmce: interrupted", file=sys.stderr)
        return 130
    except (CnfmceError, ValueError, TypeError, OSError) as e:
        print(f"cnfmce: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        try:
            sys.stdout.close()
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
