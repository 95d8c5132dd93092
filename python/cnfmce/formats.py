"""The files this package reads and writes, in one place (docs/spec.md section 3): the
project's tokenizer file, counts files, tiktoken files and Hugging Face ``tokenizer.json``, and
:func:`tokenizer_file_kind`, which tells which one a file is.

The project's own file (``Tokenizer.save``) is JSON, optionally gzip-compressed when the name ends
in ``.gz``::

    {
      "format": "cnfmce",              # fixed
      "version": 1,                    # format version
      "options": {"algorithm": "mce", "boundary_penalty": 0.05, "token_preference": true},
      "tokens": ["AA==", "AQ==", ...],  # base64 of each regular token's bytes
      "ids": [0, 1, ...],              # optional: the id of each entry of "tokens"
                                       #   (absent: the list index)
      "special_tokens": {"<|endoftext|>": 50000},
      "metadata": {...}                # free-form (training parameters, ...)
    }

``boundary_penalty`` is a number, or the string ``"inf"`` when partial crossings are forbidden.

Vocabularies of more than ``PACK_ABOVE`` tokens are written packed, so that loading them creates
no Python object per token::

      "tokens": {"packed": "<base64 of all token bytes, concatenated in order>",
                 "lengths": "<base64 of one little-endian uint32 length per token>",
                 "ids": "<base64 of one little-endian uint32 id per token>"}   # ids optional

Version 2 files may use either form; version 1 files use the list. Reading never executes
anything from the file.

A counts file (``cnfmce count``, :func:`cnfmce.save_counts`; gzip when the name ends in ``.gz``)
is text: a first line ``# cnfmce counts v1``, a second line ``# `` followed by a JSON object (how
the counts were made; may be ``{}``), then one ``<base64 bytes>\t<count>`` line per candidate,
best first (count descending, ties by bytes). A tiktoken file has one ``<base64 token> <rank>``
line per token. Both are read by the same line reader (:func:`_b64_int_lines`).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import math
import os
import re
import zlib
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Tuple, Union

from .errors import TokenizerFileError, load_json

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "PACK_ABOVE", "PackedTokens", "read_bytes", "write_bytes_atomic", "parse_tiktoken",
    "parse_hf", "parse_native", "parse_native_bytes", "dump_native", "bytes_to_unicode", "unicode_to_bytes",
    "tokenizer_file_kind", "TOKENIZER_FILE_KINDS", "inflate_limit", "MAX_INFLATED_BYTES",
    "COUNTS_MAGIC", "parse_counts", "dump_counts",
]

FORMAT_NAME = "cnfmce"
FORMAT_VERSION = 2
PACK_ABOVE = 300_000
MAX_ID = 2**32 - 1  # ids are u32 in the core; 2**32 - 1 is reserved


#: The most a compressed tokenizer or counts file may inflate to (2 GiB; a 5M-entry
#: vocabulary takes a few hundred MB) ...
MAX_INFLATED_BYTES = 2 << 30
#: ... and, past ``INFLATE_FREE_BYTES`` (64 MiB), at most ``MAX_INFLATE_RATIO`` (100) times its
#: compressed size (tokenizer files compress 2-5x; a gzip bomb 1000x). Checked while streaming.
MAX_INFLATE_RATIO = 100
INFLATE_FREE_BYTES = 64 << 20


def inflate_limit(compressed_size: int) -> int:
    """How many bytes a compressed file of ``compressed_size`` bytes may inflate to."""
    return min(MAX_INFLATED_BYTES, max(INFLATE_FREE_BYTES, MAX_INFLATE_RATIO * compressed_size))


def read_bytes(path: "os.PathLike[str] | str") -> bytes:
    """Reads a whole file, gunzipping ``.gz`` (or any gzip data); corrupt data and data that
    inflates past :func:`inflate_limit` (checked while streaming) raise
    :class:`TokenizerFileError`, a missing file ``FileNotFoundError``."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"no such file: {p}")
    if os.path.isdir(p):
        raise TokenizerFileError(f"{p} is a directory, not a tokenizer file")
    with open(p, "rb") as fh:
        magic = fh.read(2)
        if magic != b"\x1f\x8b":
            if p.endswith(".gz"):
                raise TokenizerFileError(f"{p}: named .gz but is not gzip data")
            return magic + fh.read()
        fh.seek(0)
        limit = inflate_limit(os.fstat(fh.fileno()).st_size)
        parts = []
        total = 0
        try:
            with gzip.GzipFile(fileobj=fh, mode="rb") as gz:
                while True:
                    chunk = gz.read(min(1 << 24, limit + 1 - total))
                    if not chunk:
                        break
                    total += len(chunk)
                    if total > limit:
                        raise TokenizerFileError(
                            f"{p}: inflates to more than {limit:,} bytes (the limit for a "
                            f"{os.fstat(fh.fileno()).st_size:,}-byte compressed file; see "
                            "cnfmce.formats.inflate_limit): refusing to read it")
                    parts.append(chunk)
        except (EOFError, OSError, zlib.error) as e:
            if isinstance(e, TokenizerFileError):
                raise
            raise TokenizerFileError(f"{p}: truncated or corrupt gzip data ({e})") from None
    return b"".join(parts)


def write_bytes_atomic(path: "os.PathLike[str] | str", data: bytes) -> None:
    """Writes ``data`` to ``path`` through a temporary file and a rename, so an interrupted write
    never leaves a partial file behind; gzip-compresses when the name ends in ``.gz``."""
    p = os.fspath(path)
    if p.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    tmp = f"{p}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _json_type(v: Any) -> str:
    """The JSON name of ``v``'s type, for error messages."""
    if v is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(v), type(v).__name__)


def _short_json(v: Any, n: int = 40) -> str:
    """``v`` as short text for an error message (JSON values can be huge or deeply nested)."""
    if isinstance(v, (dict, list)):
        return _json_type(v)
    r = repr(v)
    return r if len(r) <= n else r[:n] + "..."


# --- tiktoken -----------------------------------------------------------------------------------

def _b64_int_lines(data: bytes, p: str, sep: Optional[bytes], what: Tuple[str, str],
                   first_line: int = 1) -> Iterator[Tuple[int, bytes, int]]:
    """``(line number, bytes, n)`` for every ``<base64> <int>`` line of ``data`` (blank lines
    skipped; ``data``'s first line is line ``first_line`` of the file), the two fields split at
    ``sep`` (None: any whitespace); ``what`` names them in
    messages (``("token", "rank")``). A malformed line, an empty token or a negative number raises
    :class:`TokenizerFileError` naming the file and line."""
    a, b = what
    for lineno, line in enumerate(data.split(b"\n"), first_line):
        if not line.strip():
            continue
        parts = line.split(sep)
        if len(parts) != 2:
            shown = "\\t" if sep == b"\t" else " "
            raise TokenizerFileError(f"{p}:{lineno}: expected '<base64 {a}>{shown}<{b}>'")
        try:
            tok = base64.b64decode(parts[0], validate=True)
            n = int(parts[1])
        except (binascii.Error, ValueError):
            raise TokenizerFileError(f"{p}:{lineno}: bad base64 {a} or {b}") from None
        if n < 0 or not tok:
            raise TokenizerFileError(f"{p}:{lineno}: negative {b} or empty {a}")
        yield lineno, tok, n


def parse_tiktoken(path: "os.PathLike[str] | str") -> Tuple[List[int], List[bytes]]:
    """Parses a tiktoken file: one ``<base64 token> <rank>`` per line; rank = id."""
    p = os.fspath(path)
    ids: List[int] = []
    toks: List[bytes] = []
    for lineno, tok, rank in _b64_int_lines(read_bytes(p), p, None, ("token", "rank")):
        if rank >= MAX_ID:
            raise TokenizerFileError(f"{p}:{lineno}: rank {rank} is too large (ids are below {MAX_ID})")
        ids.append(rank)
        toks.append(tok)
    if not toks:
        raise TokenizerFileError(f"{p}: no tokens in file")
    return ids, toks


# --- counts files ---------------------------------------------------------------------------------

COUNTS_MAGIC = "# cnfmce counts v1"


def dump_counts(items: Iterable[Tuple[bytes, int]], info: Dict[str, Any]) -> bytes:
    """A counts file's bytes (uncompressed): ``items`` are ``(candidate, count)`` in the order
    to write (best first)."""
    lines = [COUNTS_MAGIC, "# " + json.dumps(info, ensure_ascii=True, default=str)]
    for tok, c in items:
        if not isinstance(tok, bytes) or not isinstance(c, int) or c < 0:
            raise TypeError("counts must map bytes to non-negative ints")
        lines.append(f"{base64.b64encode(tok).decode('ascii')}\t{c}")
    return ("\n".join(lines) + "\n").encode("ascii")


def parse_counts(path: "os.PathLike[str] | str") -> Tuple[Dict[str, Any], Dict[bytes, int]]:
    """Reads a counts file: ``(info, counts)``; a candidate listed twice gets the sum."""
    p = os.fspath(path)
    data = read_bytes(p)
    first, _, rest = data.partition(b"\n")
    if first.strip().decode("ascii", "replace") != COUNTS_MAGIC:
        raise TokenizerFileError(f"{p}: not a cnfmce counts file (first line must be {COUNTS_MAGIC!r})")
    info: Any = {}
    second, _, body = rest.partition(b"\n")
    first_line = 3
    if second.startswith(b"#"):
        info = load_json(second[1:].strip() or b"{}", f"{p}:2", TokenizerFileError, "JSON header")
    else:
        body, first_line = rest, 2
    out: Dict[bytes, int] = {}
    lines = body.split(b"\n")
    # comment lines after the header are skipped like blank ones
    kept = b"\n".join(b"" if line.startswith(b"#") else line for line in lines)
    for lineno, tok, c in _b64_int_lines(kept, p, b"\t", ("candidate", "count"), first_line):
        c += out.get(tok, 0)
        if c >= 2**64:
            raise TokenizerFileError(f"{p}:{lineno}: count {c} does not fit in 64 bits")
        out[tok] = c
    return (info if isinstance(info, dict) else {}), out


# --- Hugging Face tokenizer.json ------------------------------------------------------------------

def bytes_to_unicode() -> Dict[int, str]:
    """GPT-2's byte-to-unicode alphabet used by byte-level BPE vocabularies."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def unicode_to_bytes() -> Dict[str, int]:
    """The inverse of :func:`bytes_to_unicode`: each alphabet character to its byte."""
    return {c: b for b, c in bytes_to_unicode().items()}


def parse_hf(path: "os.PathLike[str] | str") -> Tuple[List[int], List[bytes], Dict[str, int]]:
    """Parses a byte-level BPE ``tokenizer.json``: ``model.vocab`` gives the regular tokens (GPT-2
    byte alphabet); ``added_tokens`` marked special become special tokens, other added tokens
    become regular tokens. Returns (ids, tokens, special_tokens)."""
    p = os.fspath(path)
    doc = load_json(read_bytes(p), p, TokenizerFileError)
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise TokenizerFileError(f"{p}: not a Hugging Face tokenizer.json (no \"model\")")
    model = doc["model"]
    mtype = model.get("type")
    vocab = model.get("vocab")
    if mtype not in (None, "BPE") or not isinstance(vocab, dict):
        raise TokenizerFileError(
            f"{p}: unsupported tokenizer.json: model type {mtype!r}; only byte-level BPE "
            "vocabularies (a \"vocab\" mapping in the GPT-2 byte alphabet) are supported")
    added = doc.get("added_tokens") or []
    if not isinstance(added, list):
        raise TokenizerFileError(f"{p}: \"added_tokens\" is not a list")
    for k, a in enumerate(added):
        if not isinstance(a, dict):
            raise TokenizerFileError(f"{p}: added_tokens[{k}] is {_json_type(a)}, not an object")
        if not isinstance(a.get("content"), str):
            raise TokenizerFileError(f"{p}: added_tokens[{k}]: \"content\" must be a string, "
                                     f"got {_json_type(a.get('content'))}")
        i = a.get("id")
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < MAX_ID:
            raise TokenizerFileError(f"{p}: added_tokens[{k}]: \"id\" must be an int in "
                                     f"[0, {MAX_ID}), got {_short_json(i)}")
    # Special added tokens may also be listed raw (not in the byte alphabet) in model.vocab, as in
    # DeepSeek's files: they are special tokens, not vocabulary entries.
    raw_specials = {(a.get("content"), a.get("id")) for a in added
                    if isinstance(a, dict) and a.get("special")}
    inverse = unicode_to_bytes()
    by_id: Dict[int, bytes] = {}
    for s, i in vocab.items():
        if not isinstance(s, str) or not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < MAX_ID:
            raise TokenizerFileError(f"{p}: model.vocab[{_short_json(s)}]: the id must be an int "
                                     f"in [0, {MAX_ID}), got {_short_json(i)}")
        if (s, i) in raw_specials:
            continue
        try:
            b = bytes(inverse[c] for c in s)
        except KeyError:
            raise TokenizerFileError(
                f"{p}: unsupported tokenizer.json: token {s!r} is not in the GPT-2 byte-level "
                "alphabet (only byte-level BPE vocabularies are supported)") from None
        if i in by_id:
            raise TokenizerFileError(f"{p}: id {i} is used twice in model.vocab")
        by_id[i] = b
    specials: Dict[str, int] = {}
    present = {b: i for i, b in by_id.items()}
    for a in added:
        content, i = a["content"], a["id"]
        b = content.encode("utf-8")
        if a.get("special"):
            if i in by_id:  # a special token listed in the model vocab too: it is special
                del present[by_id.pop(i)]
            specials[content] = i
        elif present.get(b) == i:
            continue
        elif b not in present and i not in by_id and b:
            by_id[i] = b
            present[b] = i
        else:
            specials[content] = i
    ids = sorted(by_id)
    return ids, [by_id[i] for i in ids], specials


# --- the project's own format -------------------------------------------------------------------

class PackedTokens(NamedTuple):
    """Tokens as one blob: ``data`` concatenated bytes, ``lengths`` and ``ids`` little-endian
    uint32 arrays (``ids`` None: ids are 0..n-1)."""
    data: bytes
    lengths: bytes
    ids: Optional[bytes]


TokenTable = Union[Tuple[List[int], List[bytes]], PackedTokens]


def dump_native(tokens: TokenTable, specials: Dict[str, int], options: Dict[str, Any],
                metadata: Optional[Dict[str, Any]] = None) -> bytes:
    """Serializes a tokenizer to the JSON format described in this module's docstring.

    ``tokens``: ``(ids, list of bytes)``, or :class:`PackedTokens` (written packed)."""
    opts = dict(options)
    if math.isinf(opts.get("boundary_penalty", 0.0)):
        opts["boundary_penalty"] = "inf"
    doc: Dict[str, Any] = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "options": opts}
    if isinstance(tokens, PackedTokens):
        packed = {"packed": base64.b64encode(tokens.data).decode("ascii"),
                  "lengths": base64.b64encode(tokens.lengths).decode("ascii")}
        if tokens.ids is not None:
            packed["ids"] = base64.b64encode(tokens.ids).decode("ascii")
        doc["tokens"] = packed
    else:
        ids, toks = tokens
        doc["tokens"] = [base64.b64encode(t).decode("ascii") for t in toks]
        if list(ids) != list(range(len(ids))):
            doc["ids"] = list(ids)
    doc["special_tokens"] = dict(specials)
    doc["metadata"] = metadata or {}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def parse_native(path: "os.PathLike[str] | str"
                 ) -> Tuple[Optional[List[int]], Any, Dict[str, int], Dict[str, Any], Dict[str, Any]]:
    """Reads a file written by ``Tokenizer.save``; returns (ids, tokens, specials, options,
    metadata); packed files give ``ids`` None and ``tokens`` a :class:`PackedTokens`."""
    p = os.fspath(path)
    return parse_native_bytes(read_bytes(p), p)


def parse_native_bytes(data: bytes, p: str = "<bytes>"
                       ) -> Tuple[Optional[List[int]], Any, Dict[str, int], Dict[str, Any], Dict[str, Any]]:
    """``parse_native`` on the file's (uncompressed) contents; ``p`` names it in errors."""
    doc = load_json(data, p, TokenizerFileError)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise TokenizerFileError(f"{p}: not a cnfmce tokenizer file (use Tokenizer.from_tiktoken "
                                 "or Tokenizer.from_hf for other formats)")
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FORMAT_VERSION:
        raise TokenizerFileError(f"{p}: unsupported format version {version!r} "
                                 f"(this cnfmce reads version {FORMAT_VERSION})")
    toks = doc.get("tokens")
    tokens: Any
    if isinstance(toks, dict) and version >= 2:
        try:
            tokens = PackedTokens(
                base64.b64decode(toks["packed"], validate=True),
                base64.b64decode(toks["lengths"], validate=True),
                base64.b64decode(toks["ids"], validate=True) if "ids" in toks else None)
        except (KeyError, binascii.Error, TypeError, ValueError):
            raise TokenizerFileError(f"{p}: packed \"tokens\" need base64 \"packed\" and "
                                     "\"lengths\" (and optionally \"ids\")") from None
        ids = None
    elif isinstance(toks, list):
        try:
            tokens = [base64.b64decode(t, validate=True) for t in toks]
        except (binascii.Error, TypeError, ValueError):
            raise TokenizerFileError(f"{p}: a token is not valid base64") from None
        ids = doc.get("ids", None)
        if ids is None:
            ids = list(range(len(tokens)))
        elif not isinstance(ids, list) or len(ids) != len(tokens) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_ID for i in ids):
            raise TokenizerFileError(f"{p}: \"ids\" must be a list of non-negative ints, one per token")
    else:
        raise TokenizerFileError(f"{p}: \"tokens\" missing or malformed")
    specials = doc.get("special_tokens", {})
    if not isinstance(specials, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_ID
            for k, v in specials.items()):
        raise TokenizerFileError(f"{p}: \"special_tokens\" must map strings to ids")
    options = doc.get("options", {})
    if not isinstance(options, dict):
        raise TokenizerFileError(f"{p}: \"options\" must be an object")
    options = dict(options)
    if options.get("boundary_penalty") == "inf":
        options["boundary_penalty"] = math.inf
    metadata = doc.get("metadata", {})
    return ids, tokens, specials, options, metadata if isinstance(metadata, dict) else {}


# --- which kind of tokenizer file ---------------------------------------------------------------

TOKENIZER_FILE_KINDS = ("cnfmce", "tiktoken", "hf", "sentencepiece")
_NATIVE_RE = re.compile(rb'"format"\s*:\s*"cnfmce"')
_HF_RE = re.compile(rb'"model"\s*:\s*\{')
_TIKTOKEN_LINE_RE = re.compile(rb"\A\s*[A-Za-z0-9+/]+={0,2} \d+\s*(\n|\Z)")


def tokenizer_file_kind(path: "os.PathLike[str] | str", data: Optional[bytes] = None) -> str:
    """Which loader reads the tokenizer file ``path``: ``"tiktoken"`` (name ends in
    ``.tiktoken`` / ``.tiktoken.gz``, or lines of ``<base64> <rank>``), ``"sentencepiece"``
    (``.model``), ``"cnfmce"`` (a JSON object with ``"format": "cnfmce"`` anywhere in it, the
    key order does not matter), ``"hf"`` (a JSON object with a ``"model"`` object). Raises
    :class:`TokenizerFileError` for a file of none of these kinds, ``FileNotFoundError`` for a
    missing one. ``data``: the file's (inflated) contents when already read. The command line
    and :func:`cnfmce.adapters.load_encoder` both use this."""
    p = os.fspath(path)
    low = p.lower()
    if low.endswith((".tiktoken", ".tiktoken.gz")):
        return "tiktoken"
    if low.endswith(".model"):
        if not os.path.isfile(p):
            raise FileNotFoundError(f"no such file: {p}")
        return "sentencepiece"
    if data is None:
        data = read_bytes(p)
    head = data[:64].lstrip()
    if head.startswith(b"{"):
        if _NATIVE_RE.search(data):
            return "cnfmce"
        if _HF_RE.search(data):
            return "hf"
    elif _TIKTOKEN_LINE_RE.match(data):
        return "tiktoken"
    raise TokenizerFileError(f"{p}: not a tokenizer file this package reads (a cnfmce file, a "
                             "tiktoken file or a Hugging Face tokenizer.json)")
