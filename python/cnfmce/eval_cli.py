"""``cnfmce eval``: tokenizers x corpora in, a markdown table out.

::

    cnfmce eval TOKENIZER... --corpus FILE... [--max-docs N] [--by-lang] [--compare]
                [--json PATH] [--csv PATH] [--vocab-dir DIR] [--quiet]
    cnfmce eval -t TOKENIZER [-t TOKENIZER ...] [options] FILE...      # the same

The two forms are one command: with ``--corpus`` the positional arguments are tokenizers (and
``-t`` adds more); without it they are the corpus files and the tokenizers come with ``-t``. A
progress bar on stderr follows the evaluations (``--quiet``: none).

Each tokenizer is a spec (:func:`cnfmce.adapters.load_encoder`), optionally labelled
``LABEL=SPEC``:

* a cnfmce tokenizer file (``tok.save``), a ``.tiktoken`` file (cnfmce MCE over its ranks), a
  Hugging Face ``tokenizer.json`` (run by ``tokenizers``), a SentencePiece ``.model``;
* ``tiktoken:o200k_base`` (tiktoken's own BPE; ranks from ``--vocab-dir`` / ``$CNFMCE_VOCABS``
  when the file is there), ``hf:PATH``, ``sp:PATH``, and ``mce:PATH`` / ``fmm:PATH`` for cnfmce's
  encoders over any vocabulary file.

Each corpus ``FILE`` is a ``.jsonl`` / ``.jsonl.gz`` / ``.jsonl.zst`` / ``.txt`` / ``.parquet`` file
(read with :func:`cnfmce.corpus.iter_documents`), optionally labelled ``LABEL=PATH``; the first
``--max-docs`` documents are used. Every metric is defined in :mod:`cnfmce.evaluation`.
``--by-lang`` reads the ``"lang"`` field of JSON lines and adds the fairness Gini; ``--compare``
adds the pairwise distance / agreement table of the paper's section 4.5.

:func:`add_eval_parser` registers the subcommand on the ``cnfmce`` parser; :func:`main_eval` runs
it on its own (``main_eval(["-t", "tiktoken:o200k_base", "test.jsonl.gz"])``).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

__all__ = ["add_eval_parser", "build_eval_parser", "main_eval", "run_eval", "markdown_table",
           "read_corpus"]

# (result key, column title, scale, decimals)
COLUMNS: List[Tuple[str, str, float, int]] = [
    ("docs", "docs", 1, 0),
    ("chars_per_token", "chars/token", 1, 3),
    ("bytes_per_token", "bytes/token", 1, 3),
    ("tokens_per_kchar", "tokens/kchar", 1, 1),
    ("fertility", "fertility", 1, 3),
    ("vocab_utilization", "vocab util.", 1, 4),
    ("renyi_efficiency_2", "Rényi α=2", 1, 4),
    ("renyi_efficiency_2.5", "Rényi α=2.5", 1, 4),
    ("boundary_crossing_rate", "crossing %", 100, 3),
    ("boundary_crossing_rate_u3", "crossing u≥3 %", 100, 3),
    ("utf8_token_integrity", "UTF-8 integrity", 1, 4),
    ("multibyte_split_rate", "char split %", 100, 3),
    ("roundtrip_exact_match", "round-trip", 1, 4),
    ("three_digit_f1", "3-digit F1", 1, 4),
]
GINI_COLUMN = ("fairness_gini", "fairness Gini", 1, 4)
COMPARE_COLUMNS: List[Tuple[str, str, float, int]] = [
    ("docs", "docs", 1, 0),
    ("distance", "Dist. %", 100, 2),
    ("agreement", "Agree. %", 100, 2),
    ("distance_doc_mean", "Dist. doc mean %", 100, 2),
    ("agreement_docs_skipped", "docs not aligned", 1, 0),
]

_DESCRIPTION = ("Evaluate tokenizers on corpora: characters per token (paper Eq. 5), bytes per "
                "token, tokens per 1000 characters, fertility, vocabulary utilization, Rényi "
                "efficiency, word-unit boundary crossing, UTF-8 integrity, round trip and "
                "three-digit number alignment (definitions: cnfmce.evaluation). Prints a markdown "
                "table.")

_TOKENIZER_HELP = ("tokenizer spec, repeatable, optionally LABEL=SPEC: a cnfmce file, a .tiktoken "
                   "file (cnfmce MCE over it), a Hugging Face tokenizer.json (run by tokenizers), a "
                   "SentencePiece .model; or tiktoken:NAME (e.g. tiktoken:o200k_base), hf:PATH, "
                   "sp:PATH, mce:PATH, fmm:PATH")


_USAGE = ("%(prog)s TOKENIZER... --corpus FILE... [options]\n"
          "       %(prog)s -t TOKENIZER [-t TOKENIZER ...] [options] FILE...")
_CORPUS_HELP = ("documents to evaluate on, optionally LABEL=PATH: .jsonl / .jsonl.gz / .jsonl.zst "
                "(field \"text\"), .txt (one document per file), .parquet")


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("items", nargs="*", metavar="TOKENIZER|FILE",
                   help="the tokenizers when --corpus is given (" + _TOKENIZER_HELP + "); else the "
                        "corpus files")
    p.add_argument("--corpus", action="extend", nargs="+", default=None, metavar="FILE",
                   dest="corpus_files", help=_CORPUS_HELP)
    p.add_argument("-t", "--tokenizer", action="append", default=[], metavar="TOKENIZER",
                   dest="tokenizers", help="a tokenizer spec (repeatable), as the positional "
                                           "TOKENIZER; the form without --corpus needs it")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--max-docs", type=int, default=None, metavar="N",
                   help="use the first N documents of each corpus")
    p.add_argument("--by-lang", action="store_true",
                   help="read the \"lang\" field of JSON lines; add per-language token costs and "
                        "the fairness Gini")
    p.add_argument("--gini-unit", choices=["bytes", "chars"], default="bytes",
                   help="token cost unit of the fairness Gini: tokens per UTF-8 byte (default, as "
                        "TokEval) or per character")
    p.add_argument("--compare", action="store_true",
                   help="also compare every pair of tokenizers on each corpus (edit distance of "
                        "the id sequences / longer length, byte-level id agreement)")
    p.add_argument("--json", default=None, metavar="PATH", help="write all results as JSON")
    p.add_argument("--csv", default=None, metavar="PATH",
                   help="write one CSV row per tokenizer and corpus")
    p.add_argument("--vocab-dir", default=None, metavar="DIR",
                   help="where tiktoken:NAME finds NAME.tiktoken (default: $CNFMCE_VOCABS)")


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Registers ``eval`` on the subparsers of the ``cnfmce`` parser (``func`` is set, as for the
    other subcommands) and returns its parser."""
    p = subparsers.add_parser("eval", help="evaluate tokenizers on corpora (markdown table)",
                              description=_DESCRIPTION, usage=_USAGE)
    _add_arguments(p)
    p.set_defaults(func=run_eval)
    return p


def build_eval_parser(prog: str = "cnfmce eval") -> argparse.ArgumentParser:
    """A stand-alone parser for the ``eval`` arguments."""
    p = argparse.ArgumentParser(prog=prog, description=_DESCRIPTION, usage=_USAGE)
    _add_arguments(p)
    return p


# --- inputs ---------------------------------------------------------------------------------------

def _split_label(spec: str) -> Tuple[Optional[str], str]:
    """``LABEL=REST`` -> (LABEL, REST) when LABEL looks like a label (no path separator, no ':')."""
    label, sep, rest = spec.partition("=")
    if sep and label and rest and "/" not in label and os.sep not in label and ":" not in label \
            and not os.path.exists(spec):
        return label, rest
    return None, spec


def _corpus_label(path: str) -> str:
    """``.../corpora/en/test.jsonl.gz`` -> ``en/test``."""
    p = Path(path)
    name = p.name
    for ext in (".gz", ".zst", ".jsonl", ".ndjson", ".json", ".txt", ".parquet"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    parent = p.parent.name
    return f"{parent}/{name}" if parent else name


_JSONL = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".ndjson")


def _iter_jsonl_lang(path: str) -> Iterator[Tuple[str, Optional[str]]]:
    """(text, lang) of each JSON line, read as in :mod:`cnfmce.corpus`."""
    from .corpus import iter_jsonl_records
    for obj in iter_jsonl_records(path):
        lang = obj.get("lang")
        yield obj["text"], (lang if isinstance(lang, str) else None)


def read_corpus(path: str, max_docs: Optional[int] = None, with_lang: bool = False
                ) -> Tuple[List[str], Optional[List[Optional[str]]]]:
    """The first ``max_docs`` documents of ``path`` and, with ``with_lang``, their ``"lang"``
    fields (JSON lines only; None for other formats)."""
    from .corpus import iter_documents
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such corpus file: {path}")
    if with_lang and path.lower().endswith(_JSONL):
        pairs = list(itertools.islice(_iter_jsonl_lang(path), max_docs))
        return [t for t, _ in pairs], [lang for _, lang in pairs]
    docs = list(itertools.islice(iter_documents([Path(path)]), max_docs))
    return docs, ([None] * len(docs) if with_lang else None)


# --- output ---------------------------------------------------------------------------------------

def _fmt(v: Any, scale: float, decimals: int) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int) and scale == 1:
        return f"{v:,}" if decimals == 0 else f"{v:.{decimals}f}"
    return f"{float(v) * scale:.{decimals}f}"


def markdown_table(rows: Sequence[Dict[str, Any]], columns: Sequence[Tuple[str, str, float, int]],
                   lead: Sequence[Tuple[str, str]]) -> str:
    """A markdown table: ``lead`` columns (key, title) as text, then ``columns`` formatted."""
    head = [t for _, t in lead] + [c[1] for c in columns]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join(["---"] * len(lead) + ["---:"] * len(columns)) + "|"]
    for r in rows:
        cells = [str(r.get(k, "")) for k, _ in lead]
        cells += [_fmt(r.get(k), scale, dec) for k, _, scale, dec in columns]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def _write_csv(path: str, rows: Sequence[Dict[str, Any]]) -> None:
    keys: List[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in keys and not isinstance(v, (dict, list)):
                keys.append(k)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in keys})


# --- running --------------------------------------------------------------------------------------

def _split_items(args: argparse.Namespace) -> Tuple[List[str], List[str]]:
    """(tokenizer specs, corpus specs) of either form of the command (module docstring)."""
    items = list(getattr(args, "items", None) or [])
    tokenizers = list(args.tokenizers or [])
    if getattr(args, "corpus_files", None):
        tokenizers += items
        corpora = list(args.corpus_files)
    else:
        corpora = items
    if not tokenizers:
        raise ValueError("no tokenizer: give TOKENIZER... --corpus FILE... (or -t TOKENIZER FILE...)")
    if not corpora:
        raise ValueError("no corpus file: give TOKENIZER... --corpus FILE... (or -t TOKENIZER FILE...)")
    return tokenizers, corpora


def _bar(total: int, quiet: bool) -> Any:
    """tqdm on stderr over the evaluations (one per tokenizer and corpus, one per compared pair)."""
    from tqdm.auto import tqdm
    return tqdm(total=total, desc="eval", unit="eval", file=sys.stderr, disable=quiet,
                dynamic_ncols=True, leave=True)


def run_eval(args: argparse.Namespace) -> int:
    """Runs ``cnfmce eval`` on parsed arguments; returns the exit status."""
    from .adapters import load_encoder
    from .evaluation import compare, evaluate

    if args.max_docs is not None and args.max_docs < 0:
        raise ValueError("--max-docs must be >= 0")
    tokenizer_specs, corpus_specs = _split_items(args)
    corpora = []
    for spec in corpus_specs:
        label, s = _split_label(spec)
        if not os.path.exists(s):  # before the tokenizers are loaded: a wrong path fails at once
            raise FileNotFoundError(f"no such corpus file: {s}")
        corpora.append((label or _corpus_label(s), s))
    encoders = []
    for spec in tokenizer_specs:
        label, s = _split_label(spec)
        encoders.append(load_encoder(s, name=label, vocab_dir=args.vocab_dir))

    results: List[Dict[str, Any]] = []
    comparisons: List[Dict[str, Any]] = []
    pairs = list(itertools.combinations(range(len(encoders)), 2)) if args.compare else []
    bar = _bar(len(corpora) * (len(encoders) + len(pairs)), getattr(args, "quiet", False))
    failed = True
    try:
        for label, path in corpora:
            bar.set_description(f"eval {label}: reading")
            docs, langs = read_corpus(path, args.max_docs, args.by_lang)
            encoded: Dict[int, List[List[int]]] = {}
            for k, enc in enumerate(encoders):
                bar.set_description(f"eval {label}: {enc.name}")
                ids: Optional[List[List[int]]] = None
                if args.compare:  # encoded once, kept for the pairwise comparison
                    ids = encoded[k] = enc.encode_batch(docs) if docs else []
                r = evaluate(enc, docs, langs=langs, gini_unit=args.gini_unit, encodings=ids)
                results.append({"corpus": label, "corpus_path": path, **r})
                bar.update(1)
            for i, j in pairs:
                bar.set_description(f"eval {label}: {encoders[i].name} vs {encoders[j].name}")
                c = compare(encoders[i], encoders[j], docs, encodings_a=encoded[i],
                            encodings_b=encoded[j])
                comparisons.append({"corpus": label, **c})
                bar.update(1)
        failed = False
    finally:
        if failed:  # no stale bar line before the error message
            bar.leave = False
        bar.close()

    columns = COLUMNS + ([GINI_COLUMN] if args.by_lang else [])
    out = [markdown_table(results, columns, [("tokenizer", "tokenizer"), ("corpus", "corpus")])]
    if comparisons:
        out.append(markdown_table(comparisons, COMPARE_COLUMNS,
                                  [("tokenizer_a", "A"), ("tokenizer_b", "B"), ("corpus", "corpus")]))
    sys.stdout.write("\n\n".join(out) + "\n")
    sys.stdout.flush()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"results": results, "comparisons": comparisons}, fh, indent=2,
                      ensure_ascii=False)
            fh.write("\n")
    if args.csv:
        _write_csv(args.csv, results)
    return 0


def main_eval(argv: Optional[Sequence[str]] = None) -> int:
    """``cnfmce eval`` as a function: parses ``argv`` (default ``sys.argv[1:]``), runs, and
    returns the exit status (errors are printed, not raised: status 1)."""
    from .errors import CnfmceError

    args = build_eval_parser().parse_args(argv)
    try:
        return run_eval(args)
    except KeyboardInterrupt:
        print("cnfmce eval: interrupted", file=sys.stderr)
        return 130
    except ImportError as e:
        print(f"cnfmce eval: error: {e} (pip install 'cnfmce[eval]')", file=sys.stderr)
        return 1
    except (CnfmceError, ValueError, TypeError, KeyError, OSError) as e:
        print(f"cnfmce eval: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main_eval())
