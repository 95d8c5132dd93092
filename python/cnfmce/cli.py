"""The ``cnfmce`` command line (SPEC section 5).

::

    cnfmce train -o TOKENIZER --vocab-size N [--balance B] [--raw-vocab-size M] [--selection paper|refined|refined-scripts|refined-non-ascii] [--non-ascii-exponent E] [--raw-han-exponent A] [--field text] [--threads T] INPUT...
    cnfmce count -o COUNTS [--raw-vocab-size M] [--field text] [--threads T] INPUT...
    cnfmce extend BASE -o TOKENIZER --new-tokens N [--raw-vocab-size M] [--field text] [--threads T] INPUT...
    cnfmce train -o TOKENIZER --vocab-size N --counts COUNTS INPUT...
    cnfmce encode -t TOKENIZER [INPUT...]     # one JSON list of ids per input document
    cnfmce demo                               # the main job on the small bundled corpus
    cnfmce eval TOKENIZER... --corpus FILE... # metrics table (see cnfmce.evaluation)
    cnfmce tokenize -t TOKENIZER -o OUTDIR --format megatron|llmc|npy [--eos TOKEN] [--bos TOKEN]
                    [--field text] [--shard-size 1GB] [--threads N] [--resume] INPUT...
    cnfmce show -t TOKENIZER [-t TOKENIZER ...] [--color | --no-color] [--ids] (TEXT | --file F)
    cnfmce view -t TOKENIZER [-t TOKENIZER ...] -o PAGE.html (--text TEXT | --file F)
    cnfmce --version

``train``, ``count``, ``extend`` and ``tokenize`` take ``--backend ray [--ray-address ADDR]`` to
run on a Ray cluster (``pip install "cnfmce[ray]"``, docs/ray.md): the same output as the local
run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, List, Optional, Sequence

from . import __version__
from ._core import DEFAULT_BALANCE, DEFAULT_BOUNDARY_PENALTY
from .errors import CnfmceError
from .loading import load_tokenizer_file as _load_tokenizer
from . import _end_deferred_interrupt

# the command's imports are done: a Ctrl-C held meanwhile acts now (in the `cnfmce` command only,
# numpy is imported first, still held: most commands need it, and its C import turns a
# KeyboardInterrupt into an ImportError with a traceback)
_end_deferred_interrupt(preload=("numpy",))

__all__ = ["main"]


def _input_paths(inputs: Sequence[str]) -> List[Path]:
    """The command line's inputs are always paths: each must be a readable corpus file with a
    supported extension (checked before any work, one-line errors)."""
    from .corpus import check_corpus_file
    return [Path(check_corpus_file(Path(p))) for p in inputs]


def _cmd_encode(args: argparse.Namespace) -> int:
    from .corpus import iter_file, iter_jsonl_stream
    stdin = not args.inputs or args.inputs == ["-"]
    if not os.path.exists(args.tokenizer):
        raise FileNotFoundError(f"no such tokenizer file: {args.tokenizer}")
    paths = [] if stdin else _input_paths(args.inputs)
    tok = _load_tokenizer(args.tokenizer)
    allowed = "all" if args.allow_special else frozenset()
    out = sys.stdout
    if stdin:
        if args.jsonl:
            for _, obj in iter_jsonl_stream(sys.stdin.buffer, "<stdin>"):
                out.write(json.dumps(tok.encode(obj["text"], allowed_special=allowed)) + "\n")
        else:
            data = sys.stdin.buffer.read()
            ids = tok.encode_bytes(data, allowed_special=allowed)
            out.write(json.dumps(ids) + "\n")
        out.flush()
        return 0
    batch: List[str] = []
    for path in paths:
        for doc in iter_file(path):
            batch.append(doc)
            if len(batch) >= 256:
                for ids in tok.encode_batch(batch, allowed_special=allowed, num_threads=args.threads):
                    out.write(json.dumps(ids) + "\n")
                batch = []
    for ids in tok.encode_batch(batch, allowed_special=allowed, num_threads=args.threads):
        out.write(json.dumps(ids) + "\n")
    out.flush()
    return 0


def _size(s: str) -> int:
    """Parses a positive byte size such as 8G, 512M, 1000000."""
    units = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
    t = s.strip().lower().rstrip("b")
    try:
        if t and t[-1] in units:
            v = int(float(t[:-1]) * units[t[-1]])
        else:
            v = int(t)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"not a size: {s!r} (e.g. 8G, 512M)") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive size, got {s!r}")
    return v


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {s!r}")
    return v


def _number_from(lo: float, hi: float, s: str) -> float:
    """A number from ``lo`` to ``hi`` on the command line."""
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not lo <= v <= hi:
        raise argparse.ArgumentTypeError(f"must be a number from {lo:g} to {hi:g}, got {s!r}")
    return v + 0.0


def _exponent(s: str) -> float:
    """An exponent of training: a number from 0 to 4."""
    return _number_from(0, 4, s)


def _balance(s: str) -> float:
    """--balance: a number from 0 to 1."""
    return _number_from(0, 1, s)


def _penalty(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r} (e.g. 0.05, or inf)") from None
    if v != v or v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (inf forbids partial crossings), got {s!r}")
    return v + 0.0  # -0.0 -> 0.0


def _rounds(s: str):
    """Parses rounds such as '1-12:0,13-21:80,22-30:80'."""
    out = []
    try:
        for part in s.split(","):
            lens, thr = part.split(":")
            lo, hi = lens.split("-")
            out.append((int(lo), int(hi), int(thr)))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad rounds {s!r}; expected e.g. 1-12:0,13-21:80,22-30:80") from None
    return tuple(out)


def _check_output(path: str) -> None:
    """Fails early when the output cannot be written (before hours of training)."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"the output is a directory: {path} (give a file name)")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise FileNotFoundError(f"the output directory does not exist: {d}")
    if not os.access(d, os.W_OK):
        raise PermissionError(f"cannot write to the output directory: {d}")
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise PermissionError(f"cannot overwrite the output file: {path}")


def _backend_options(args: argparse.Namespace) -> dict:
    """The keyword arguments --backend / --ray-address give train, count, extend and
    tokenize_corpus (none for the local backend); a clear error when Ray is not installed."""
    if args.backend != "ray":
        if args.ray_address is not None:
            raise ValueError("--ray-address needs --backend ray")
        return {}
    from .ray import _ray
    try:
        _ray()
    except ImportError as e:
        raise CnfmceError(f"--backend ray: {e}") from None
    return {"backend": "ray", "ray_address": args.ray_address}


def _cli_inputs(args: argparse.Namespace) -> List[Any]:
    """The inputs, checked before any work; with --backend ray, URIs and directories also pass
    (each worker reads its own blocks of them, see docs/ray.md)."""
    if args.backend == "ray":
        from .corpus import check_corpus_file
        return [p if "://" in p or os.path.isdir(p) else os.fspath(check_corpus_file(Path(p)))
                for p in args.inputs]
    return _input_paths(args.inputs)


def _train_config(args: argparse.Namespace) -> Any:
    """The :class:`cnfmce.config.TrainConfig` of ``cnfmce train`` / ``cnfmce count``."""
    from .config import TrainConfig
    if args.command == "count":
        from ._core import DEFAULT_COUNT_RAW_VOCAB_SIZE
        return TrainConfig(raw_vocab_size=(DEFAULT_COUNT_RAW_VOCAB_SIZE if args.raw_vocab_size is None
                                           else args.raw_vocab_size),
                           rounds=args.rounds, num_threads=args.threads,
                           progress=not args.quiet, memory_limit=args.memory_limit, field=args.field)
    return TrainConfig(vocab_size=args.vocab_size, raw_vocab_size=args.raw_vocab_size,
                       rounds=args.rounds, special_tokens=args.special_token,
                       algorithm=args.algorithm, boundary_penalty=args.boundary_penalty,
                       selection=args.selection, balance=args.balance,
                       non_ascii_exponent=args.non_ascii_exponent,
                       raw_han_exponent=args.raw_han_exponent, num_threads=args.threads,
                       progress=not args.quiet, memory_limit=args.memory_limit, field=args.field)


def _cmd_train(args: argparse.Namespace) -> int:
    from .training import run_train, run_train_from_counts
    _check_output(args.output)
    backend = _backend_options(args)
    inputs = _cli_inputs(args)
    if args.counts and not os.path.isfile(args.counts):
        raise FileNotFoundError(f"no such counts file: {args.counts}" if not os.path.exists(args.counts)
                                else f"the counts file is a directory: {args.counts}")
    if args.counts and (args.rounds is not None or args.memory_limit is not None):
        raise ValueError("--rounds and --memory-limit apply to counting; they cannot be combined "
                         "with --counts (the counts are already made)")
    config = _train_config(args)
    kind = backend.pop("backend", None)
    if args.counts:
        tok = run_train_from_counts(args.counts, inputs, config, kind, backend)
    else:
        tok = run_train(inputs, config, kind, backend)
    tok.save(args.output)
    if not args.quiet:
        print(f"wrote {args.output} ({tok.vocab_size:,} ids)", file=sys.stderr)
    return 0


def _cmd_count(args: argparse.Namespace) -> int:
    from .counts import save_counts
    from .training import run_count
    _check_output(args.output)
    backend = _backend_options(args)
    inputs = _cli_inputs(args)
    config = _train_config(args)
    kind = backend.pop("backend", None)
    counts = run_count(inputs, config, kind, backend)
    save_counts(counts, args.output)
    if not args.quiet:
        print(f"wrote {args.output} ({len(counts):,} candidates)", file=sys.stderr)
    return 0


# --- cnfmce extend (vocabulary extension, docs/extend.md) ---------------------------------------

def _cmd_extend(args: argparse.Namespace) -> int:
    from .extend import extend, load_base
    _check_output(args.output)
    backend = _backend_options(args)
    inputs = _cli_inputs(args)
    base = load_base(args.base)
    if args.special_token:
        from .tokenizer import Tokenizer
        if base.special_tokens:
            raise ValueError(f"{args.base} has special tokens already; --special-token is for a "
                             ".tiktoken base, which lists none")
        top = max(base.token_bytes()) + 1
        base = Tokenizer._build(*_with_specials(base, args.special_token, top))
    tok = extend(base, inputs, args.new_tokens, raw_vocab_size=args.raw_vocab_size,
                 rounds=args.rounds, num_threads=args.threads,
                 progress=not args.quiet, memory_limit=args.memory_limit, field=args.field,
                 **backend)
    tok.save(args.output)
    if not args.quiet:
        first = tok.metadata["extension"]["first_new_id"]
        n = tok.metadata["extension"]["new_tokens"]
        print(f"wrote {args.output} ({tok.vocab_size:,} ids: the base's and {n:,} new ones from "
              f"id {first:,})", file=sys.stderr)
    return 0


def _with_specials(base: Any, specials: Sequence[str], first: int) -> Any:
    """The arguments of ``Tokenizer._build`` for ``base`` with the special tokens ``S=ID`` (or
    ``S``: the ids from ``first`` on, in order)."""
    from .tokenizer import _check_options
    ids, toks = base._core.tokens()
    pairs = []
    for k, s in enumerate(specials):
        name, eq, num = s.rpartition("=")
        pairs.append((name.encode("utf-8"), int(num)) if eq and name and num.isdigit()
                     else (s.encode("utf-8"), first + k))
    opts = _check_options(base.algorithm, base.boundary_penalty, base.token_preference)
    return toks, ids, pairs, opts


def _add_extend(sub: Any, inputs_help: str) -> None:
    x = sub.add_parser("extend", help="add CNF tokens to an existing vocabulary, keeping every id")
    x.add_argument("base", metavar="BASE", help="the vocabulary to extend: a cnfmce file, a .tiktoken file or a tokenizer.json")
    x.add_argument("-o", "--output", required=True, help="tokenizer file to write (.json or .json.gz)")
    x.add_argument("--new-tokens", type=_positive_int, required=True, metavar="N", help="new tokens to add (ids after the base's largest)")
    x.add_argument("--raw-vocab-size", type=_positive_int, default=None, metavar="M", help="new candidates kept by counting (default: a multiple of N)")
    x.add_argument("--special-token", action="append", default=[], metavar="S",
                   help="a special token of a .tiktoken base, S or S=ID (repeatable; without =ID the ids "
                        "after its last token), e.g. '<|endoftext|>=199999' for o200k_base")
    x.add_argument("--memory-limit", type=_size, default=None, metavar="SIZE", help="memory bound for counting, e.g. 8G")
    x.add_argument("--rounds", type=_rounds, default=None, help="counting rounds, e.g. 1-12:0,13-21:80,22-30:80")
    x.add_argument("--field", default="text", help="JSON field / parquet column with the text (default text)")
    x.add_argument("inputs", nargs="+", metavar="INPUT", help=inputs_help)
    _add_common(x)
    _add_backend(x)
    x.set_defaults(func=_cmd_extend)


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo
    run_demo(vocab_size=args.vocab_size, output=args.output, progress=not args.quiet,
             num_threads=args.threads)
    return 0


def _viewer_input(args: argparse.Namespace, text: Optional[str]) -> str:
    from .viewer import read_text_file
    if (text is None) == (args.file is None):
        raise ValueError("give the text or --file F (one of them)")
    return read_text_file(args.file) if args.file is not None else text  # type: ignore[return-value]


def _segmentations(args: argparse.Namespace, text: str):
    from .viewer import load_viewer_encoder, segment
    segs = []
    names: dict = {}
    for spec in args.tokenizer:
        seg = segment(load_viewer_encoder(spec), text)
        n = names.get(seg.name, 0)
        names[seg.name] = n + 1
        if n:
            seg.name = f"{seg.name} ({n + 1})"
        segs.append(seg)
    return segs


def _use_color(args: argparse.Namespace, stream: Any) -> bool:
    """Colours with --color; never with --no-color or $NO_COLOR set (no-color.org); else only
    when ``stream`` is a terminal (no escape codes in a pipe or a file)."""
    if args.no_color:
        return False
    if args.color:
        return True
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _cmd_show(args: argparse.Namespace) -> int:
    from .viewer import render_terminal
    text = _viewer_input(args, args.text)
    out = render_terminal(_segmentations(args, text), color=_use_color(args, sys.stdout), ids=args.ids)
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0


def _cmd_view(args: argparse.Namespace) -> int:
    from .formats import write_bytes_atomic
    from .viewer import render_html
    _check_output(args.output)
    text = _viewer_input(args, args.text)
    title = args.title or ("cnfmce segmentation of " + os.path.basename(args.file) if args.file
                           else "cnfmce segmentation")
    page = render_html(_segmentations(args, text), text, title=title)
    write_bytes_atomic(args.output, page.encode("utf-8"))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _token_arg(v: Optional[str]):
    """--eos/--bos: digits are an id, anything else a token's text."""
    if v is None:
        return None
    return int(v) if v.strip().isdigit() else v


def _cmd_tokenize(args: argparse.Namespace) -> int:
    from .shards import MANIFEST, read_manifest, tokenize_corpus
    backend = _backend_options(args)
    inputs = _cli_inputs(args)  # before loading the tokenizer: a wrong path fails at once
    tok = _load_tokenizer(args.tokenizer)
    eos = None if args.no_eos else ("auto" if args.eos is None else _token_arg(args.eos))
    try:
        m = tokenize_corpus(tok, inputs, args.output, format=args.format, eos=eos,
                            bos=_token_arg(args.bos), field=args.field, shard_size=args.shard_size,
                            num_threads=args.threads, resume=args.resume, dtype=args.dtype,
                            progress=not args.quiet, **backend)
    except KeyboardInterrupt:
        try:
            n = len(read_manifest(args.output)["shards"])
        except (OSError, ValueError):
            n = 0
        print(f"cnfmce: interrupted; {n} complete shard{'s' if n != 1 else ''} kept in "
              f"{args.output} (listed in {MANIFEST}); run the same command with --resume to "
              "continue", file=sys.stderr)
        return 130  # said once (main would print "interrupted" again)
    if m["eos_id"] is None and not args.no_eos and not args.quiet:
        print("note: no end-of-document token (the tokenizer has no known eos special token); "
              "documents are not separated: pass --eos TOKEN or an id", file=sys.stderr)
    return 0


def _add_tokenize_parser(sub) -> None:
    from .shards import DEFAULT_SHARD_SIZE, FORMATS
    k = sub.add_parser("tokenize", help="tokenize a corpus into token shards (Megatron, llm.c, npy)")
    k.add_argument("-t", "--tokenizer", required=True,
                   help="tokenizer file (cnfmce JSON, .tiktoken, or a Hugging Face tokenizer.json)")
    k.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="directory for the shards and manifest.json")
    k.add_argument("--format", required=True, choices=FORMATS, help="megatron (.bin + .idx), llmc (llm.c .bin), npy")
    k.add_argument("--eos", default=None, metavar="TOKEN",
                   help="end-of-document token (its text, or an id) after every document "
                        "(default: the tokenizer's eos special token when it has one)")
    k.add_argument("--no-eos", action="store_true", help="no end-of-document token")
    k.add_argument("--bos", default=None, metavar="TOKEN", help="a token (text or id) before every document")
    k.add_argument("--field", default="text", help="JSON field / parquet column with the text (default text)")
    k.add_argument("--shard-size", default=str(DEFAULT_SHARD_SIZE), metavar="SIZE",
                   help="bytes of tokens per shard, e.g. 1GB, 256MB (default 1GB)")
    k.add_argument("--dtype", default="auto", choices=("auto", "uint16", "uint32"),
                   help="token type (auto: uint16 when every id fits, else uint32)")
    k.add_argument("--resume", action="store_true", help="continue an interrupted run in OUTDIR")
    k.add_argument("inputs", nargs="+", metavar="INPUT",
                   help=".txt / .jsonl / .jsonl.gz / .jsonl.zst / .parquet")
    _add_common(k)
    _add_backend(k)
    k.set_defaults(func=_cmd_tokenize)


def _add_viewer_parsers(sub) -> None:
    tok_help = ("a cnfmce file, a .tiktoken file or a tokenizer.json (cnfmce over that vocabulary); "
                "or mce:PATH, fmm:PATH, tiktoken:NAME|PATH, hf:PATH, sp:PATH; repeat for side by side")
    s = sub.add_parser("show", help="show the segmentation of a text in the terminal")
    s.add_argument("-t", "--tokenizer", action="append", required=True, metavar="TOKENIZER", help=tok_help)
    s.add_argument("text", nargs="?", default=None, metavar="TEXT", help="the text (or --file)")
    s.add_argument("--file", default=None, metavar="F", help="read the text from this UTF-8 file")
    s.add_argument("--no-color", action="store_true",
                   help="no ANSI colours: tokens separated by | (the default when the output is "
                        "not a terminal or NO_COLOR is set)")
    s.add_argument("--color", action="store_true",
                   help="ANSI colours even when the output is not a terminal (e.g. piped into a pager that shows colours)")
    s.add_argument("--ids", action="store_true", help="also print the token ids")
    s.set_defaults(func=_cmd_show)

    v = sub.add_parser("view", help="write the segmentation as one self-contained HTML page")
    v.add_argument("-t", "--tokenizer", action="append", required=True, metavar="TOKENIZER", help=tok_help)
    v.add_argument("-o", "--output", required=True, metavar="PAGE.html", help="the page to write")
    v.add_argument("--text", default=None, help="the text (or --file)")
    v.add_argument("--file", default=None, metavar="F", help="read the text from this UTF-8 file")
    v.add_argument("--title", default=None, help="the page title")
    v.set_defaults(func=_cmd_view)


def _add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="run here (local, the default) or on a Ray cluster (ray: needs "
                        "cnfmce[ray]; the same output; INPUT may then also be a URI or a "
                        "directory; see docs/ray.md)")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="with --backend ray: the cluster's head, host:port, ray://host:port or "
                        "auto (default: $RAY_ADDRESS, else a Ray started on this machine)")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=_positive_int, default=None, metavar="T", help="worker threads (default: all cores)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


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
    e.add_argument("--threads", type=_positive_int, default=None, metavar="T",
                   help="worker threads (default: all cores)")
    e.set_defaults(func=_cmd_encode)

    inputs_help = ".txt (one document per file), .jsonl / .jsonl.gz / .jsonl.zst (field \"text\"), .parquet"
    t = sub.add_parser("train", help="train a CNF vocabulary (counting and filtering)")
    t.add_argument("-o", "--output", required=True, help="tokenizer file to write (.json or .json.gz)")
    t.add_argument("--vocab-size", type=_positive_int, required=True, metavar="N", help="ids in the result, bytes and specials included")
    t.add_argument("--raw-vocab-size", type=_positive_int, default=None, metavar="M", help="candidates kept by counting (default: a multiple of --vocab-size, see docs/spec.md; with --counts: all)")
    t.add_argument("--counts", default=None, help="skip counting: use this counts file (from `cnfmce count`)")
    t.add_argument("--special-token", action="append", default=[], metavar="S", help="a special token (repeatable); gets the last ids")
    t.add_argument("--memory-limit", type=_size, default=None, metavar="SIZE", help="memory bound for counting, e.g. 8G (default: a sixth of the RAM, at least 1G)")
    t.add_argument("--rounds", type=_rounds, default=None,
                   help="counting rounds, e.g. 1-12:0,13-21:80,22-30:80 (the paper's; default: these lengths "
                        "with the threshold of the last two scaled to the corpus, 20 to 80; with --selection "
                        "paper, the paper's)")
    t.add_argument("--algorithm", choices=["mce", "fmm"], default="mce", help="encoding algorithm saved with the tokenizer")
    t.add_argument("--balance", type=_balance, default=None, metavar="B",
                   help="0 to 1: how many ids go to the non-ASCII part of the mix (Chinese, other "
                        "scripts, accented words): 0 ranks tokens by tokens saved over the mix as "
                        "it is, 1 gives the ASCII and non-ASCII parts an equal say (default "
                        f"{DEFAULT_BALANCE:g}; raise it for a multilingual vocabulary)")
    t.add_argument("--selection", choices=["paper", "refined", "refined-scripts", "refined-non-ascii"], default=None,
                   help="how the vocabulary is chosen (default: refined-non-ascii with the exponents "
                        "--balance sets): the paper's single filtering pass (paper, with the paper's "
                        "rounds unless --rounds is given), refined (character coverage, refining "
                        "passes, tokens saved), refined-scripts (refined with tokens saved normalised "
                        "by each script's share) or refined-non-ascii (refined with the tokens saved "
                        "of the smaller of the ASCII and non-ASCII groups weighted up by their usage "
                        "ratio)")
    t.add_argument("--non-ascii-exponent", type=_exponent, default=None, metavar="E",
                   help="with --selection refined-non-ascii, instead of --balance: the power of the "
                        "usage ratio that weighs the smaller group (1 weighs both groups equally)")
    t.add_argument("--raw-han-exponent", type=_exponent, default=None, metavar="A",
                   help="Han-weighted raw cut: candidates with a Han character rank by count x "
                        "(ASCII count / non-ASCII count)^A among 4x --raw-vocab-size counted "
                        "candidates (default: what --balance sets, else 0, the paper's cut by "
                        "count; see docs/spec.md)")
    t.add_argument("--boundary-penalty", type=_penalty, default=DEFAULT_BOUNDARY_PENALTY, metavar="LAMBDA",
                   help=f"λ (default {DEFAULT_BOUNDARY_PENALTY})")
    t.add_argument("--field", default="text", help="JSON field / parquet column with the text (default text)")
    t.add_argument("inputs", nargs="+", metavar="INPUT", help=inputs_help)
    _add_common(t)
    _add_backend(t)
    t.set_defaults(func=_cmd_train)

    c = sub.add_parser("count", help="the counting phase only: write a counts file")
    c.add_argument("-o", "--output", required=True, help="counts file to write (.tsv or .tsv.gz)")
    c.add_argument("--raw-vocab-size", type=_positive_int, default=None, metavar="M", help="candidates to keep (default 5,000,000)")
    c.add_argument("--memory-limit", type=_size, default=None, metavar="SIZE", help="memory bound, e.g. 8G (default: a sixth of the RAM, at least 1G)")
    c.add_argument("--rounds", type=_rounds, default=None,
                   help="counting rounds, e.g. 1-12:0,13-21:80,22-30:80 (the paper's; default: these lengths "
                        "with the threshold of the last two scaled to the corpus, 20 to 80, as train's)")
    c.add_argument("--field", default="text", help="JSON field / parquet column with the text (default text)")
    c.add_argument("inputs", nargs="+", metavar="INPUT", help=inputs_help)
    _add_common(c)
    _add_backend(c)
    c.set_defaults(func=_cmd_count)

    _add_extend(sub, inputs_help)

    d = sub.add_parser("demo", help="train on the bundled sample corpus and compare with BPE")
    d.add_argument("--vocab-size", type=_positive_int, default=8192, metavar="N", help="vocabulary size (default 8192)")
    d.add_argument("-o", "--output", default=None, help="also save the trained tokenizer here")
    _add_common(d)
    d.set_defaults(func=_cmd_demo)

    from .eval_cli import add_eval_parser
    add_eval_parser(sub)
    _add_tokenize_parser(sub)
    _add_viewer_parsers(sub)
    return p


# Options whose value may look like a negative number or size ("-5G"): argparse would take it
# for an option; "--opt=-5G" reaches the option's type check, which gives a clear message.
_VALUE_OPTIONS = ("--memory-limit", "--boundary-penalty", "--vocab-size", "--raw-vocab-size",
                  "--threads", "--max-docs")
_NEGATIVE = re.compile(r"-(\d|\.\d|inf)", re.IGNORECASE)


def _join_negative_values(argv: Sequence[str]) -> List[str]:
    out: List[str] = []
    k = 0
    argv = list(argv)
    while k < len(argv):
        a = argv[k]
        if a == "--":
            out.extend(argv[k:])
            break
        if a in _VALUE_OPTIONS and k + 1 < len(argv) and _NEGATIVE.match(argv[k + 1]):
            out.append(f"{a}={argv[k + 1]}")
            k += 2
            continue
        out.append(a)
        k += 1
    return out


def _one_line_warning(message: Any, category: Any, filename: str, lineno: int,
                      file: Any = None, line: Optional[str] = None) -> None:
    """Warnings as one line (the default shows a source line that looks like a traceback)."""
    try:
        print(f"cnfmce: warning: {message}", file=file or sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _silence_stdout() -> None:
    """After a broken pipe (``cnfmce encode ... | head``): point stdout at /dev/null so that the
    interpreter's final flush does not print another error."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        parser = build_parser()  # imports the subcommands' modules (numpy among them)
    except KeyboardInterrupt:
        print("cnfmce: interrupted", file=sys.stderr)
        return 130
    args = parser.parse_args(_join_negative_values(sys.argv[1:] if argv is None else argv))
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    old_showwarning = warnings.showwarning
    warnings.showwarning = _one_line_warning
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("cnfmce: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. piped into head): stop quietly, as other filters do
        _silence_stdout()
        return 0
    except (CnfmceError, ValueError, TypeError, OSError) as e:
        print(f"cnfmce: error: {e}", file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = old_showwarning


if __name__ == "__main__":
    sys.exit(main())
