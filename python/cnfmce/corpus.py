"""Reading documents from files and iterables, streamed (never loaded whole).

Supported files: ``.txt`` / ``.txt.gz`` / ``.md`` / ``.text`` (one document per file),
``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``, ``.json.gz``, ``.ndjson`` (one JSON object per line,
field ``"text"``), ``.parquet`` (column ``"text"``, needs ``pyarrow``). Files must be UTF-8;
invalid UTF-8, corrupt compressed data and malformed lines raise
:class:`cnfmce.errors.CorpusError` naming the file and line.

``field`` (default ``"text"``) names another JSON field / parquet column. ``progress``, when given,
is called now and then with the number of bytes of the file (as stored, compressed or not) read
so far, for progress bars with an ETA.

**Paths or documents** — the one rule used by :func:`cnfmce.train`, :func:`cnfmce.count`,
:func:`cnfmce.train_from_counts` and :func:`iter_documents` (see :func:`classify_inputs`):

1. ``cnfmce.Documents(items)``: every item is a document, whatever it looks like.
2. An ``os.PathLike`` (``pathlib.Path``) is always a path.
3. A ``str`` is a *path string* when it is one line of at most 4096 characters and

   * names an existing file or directory (other than ``.`` and ``..``); or
   * contains no whitespace and ends in one of :data:`CORPUS_EXTENSIONS` or starts with
     ``/``, ``./``, ``../`` or ``~/`` (such a string that names no file raises
     ``FileNotFoundError`` instead of being trained on).

   Any other ``str`` is a document.
4. A single ``str`` / ``os.PathLike`` is one input file; a single str that is not a path string
   raises ``TypeError`` (wrap one document in a list).
5. A ``list`` or ``tuple`` is a list of paths when all its items are paths (2, 3), a list of
   documents when none is; a list mixing both raises ``ValueError``.
6. Any other iterable (a generator, an iterator, a ``datasets`` column, ...) yields documents;
   a ``PathLike`` in it raises ``TypeError``.

So a list of file names can never silently become a corpus, and a list of documents that look
like file names is passed as ``cnfmce.Documents([...])`` (or as an iterator).

Paths must be files with a supported extension: a missing path raises ``FileNotFoundError``, a
directory, an unreadable file or an unknown extension :class:`~cnfmce.errors.CorpusError`
(before any work starts).
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from pathlib import Path
from typing import (IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple,
                    Union)

from .errors import CorpusError, load_json

__all__ = ["PathLike", "Inputs", "CORPUS_EXTENSIONS", "Documents", "corpus_kind", "classify_inputs",
           "check_corpus_file", "is_path_list", "iter_documents", "iter_file", "iter_jsonl_records",
           "iter_jsonl_stream", "iter_documents_located", "describe_location", "open_binary",
           "parse_jsonl_line"]

PathLike = Union[str, "os.PathLike[str]"]
Inputs = Union[Iterable[str], Sequence[PathLike], "Documents"]

_JSONL = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".ndjson")
_TEXT = (".txt", ".txt.gz", ".md", ".text")
#: The file name endings read as corpus files (case-insensitive).
CORPUS_EXTENSIONS: Tuple[str, ...] = _TEXT + _JSONL + (".parquet",)
_MAX_PATH_CHARS = 4096
_PATH_PREFIXES = ("/", "./", "../", "~/")
# Raised on corrupt compressed data while streaming (zlib.error is not an OSError).
_READ_ERRORS = (EOFError, OSError, zlib.error)


class Documents:
    """Marks ``items`` as documents (never paths), e.g. ``cnfmce.train(cnfmce.Documents(lines))``
    for strings that look like file names. A list or tuple is read again for every pass; any
    other iterable is read once (training spools it to a temporary file)."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[str]):
        if isinstance(items, (str, bytes)):
            raise TypeError("Documents takes an iterable of str, not a single string "
                            "(wrap one document in a list)")
        try:
            iter(items)
        except TypeError:
            raise TypeError(f"Documents takes an iterable of str, got {type(items).__name__}") from None
        self.items = items

    def __iter__(self) -> Iterator[str]:
        return iter(self.items)

    def __repr__(self) -> str:
        n = f"{len(self.items)} documents" if isinstance(self.items, (list, tuple)) else "iterable"
        return f"Documents({n})"


def corpus_kind(path: PathLike) -> Optional[str]:
    """``"text"``, ``"jsonl"`` or ``"parquet"`` from the name of a corpus file, None for a name
    with no supported extension (:data:`CORPUS_EXTENSIONS`)."""
    low = os.fspath(path).lower()
    if low.endswith(".parquet"):
        return "parquet"
    if low.endswith(_JSONL):
        return "jsonl"
    if low.endswith(_TEXT):
        return "text"
    return None


def _is_path_string(s: str) -> bool:
    if not s or len(s) > _MAX_PATH_CHARS or "\n" in s or "\r" in s or "\0" in s:
        return False
    if s.split() == [s] and (s.lower().endswith(CORPUS_EXTENSIONS) or s.startswith(_PATH_PREFIXES)):
        return True  # looks like a path: it must exist (checked later)
    if s in (".", ".."):
        return False
    try:
        return os.path.exists(s)
    except (OSError, ValueError):
        return False


def _short(s: str, n: int = 60) -> str:
    return repr(s if len(s) <= n else s[:n] + "...")


_HINT = ("pass documents that look like file names as cnfmce.Documents([...]) or as an "
         "iterator; see cnfmce.corpus for the rule")


def classify_inputs(inputs: Any) -> Tuple[str, Any]:
    """Applies the module's paths-or-documents rule: ``("paths", [path, ...])`` (checked with
    :func:`check_corpus_file`), ``("documents", list_or_tuple)`` (re-readable) or
    ``("iterable", iterable)`` (read once). Raises ``TypeError``, ``ValueError``,
    ``FileNotFoundError`` or :class:`CorpusError` as the rule says."""
    if isinstance(inputs, Documents):
        items = inputs.items
        return ("documents", items) if isinstance(items, (list, tuple)) else ("iterable", items)
    if isinstance(inputs, os.PathLike):
        return "paths", [check_corpus_file(inputs)]
    if isinstance(inputs, bytes):
        raise TypeError("inputs must be an iterable of str documents or a list of paths, not bytes")
    if isinstance(inputs, str):
        if _is_path_string(inputs):
            return "paths", [check_corpus_file(inputs)]
        raise TypeError("inputs must be an iterable of documents or a list of paths, not a single "
                        "string that names no file (wrap one document in a list)")
    if isinstance(inputs, (list, tuple)):
        first_path = first_doc = None
        for k, x in enumerate(inputs):
            if isinstance(x, os.PathLike) or (isinstance(x, str) and _is_path_string(x)):
                if first_path is None:
                    first_path = k
            elif isinstance(x, str):
                if first_doc is None:
                    first_doc = k
            else:
                raise TypeError(f"document {k} is {type(x).__name__}, expected str (or a path)")
            if first_path is not None and first_doc is not None:
                raise ValueError(
                    f"inputs mix file paths and documents: item {first_path} "
                    f"({_short(os.fspath(inputs[first_path]))}) is a path, item {first_doc} "
                    f"({_short(inputs[first_doc])}) is not; pass only paths, or {_HINT}")
        if first_path is not None:
            return "paths", [check_corpus_file(p) for p in inputs]
        return "documents", inputs
    try:
        iter(inputs)
    except TypeError:
        raise TypeError(f"inputs must be an iterable of str or a list of paths, "
                        f"got {type(inputs).__name__}") from None
    return "iterable", inputs


def check_corpus_file(path: PathLike) -> str:
    """``path`` as a str after checking that it is a readable file with a supported extension:
    ``FileNotFoundError`` when it does not exist, :class:`CorpusError` for a directory, an
    unreadable file or an unknown extension."""
    p = os.fspath(path)
    if not isinstance(p, str):
        raise TypeError(f"paths must be str or os.PathLike[str], got {type(path).__name__}")
    if not os.path.exists(p):
        hint = "" if isinstance(path, os.PathLike) else f" ({_HINT})"
        raise FileNotFoundError(f"no such file: {p}{hint}")
    if os.path.isdir(p):
        raise CorpusError(f"{p} is a directory; pass the corpus files in it")
    if corpus_kind(p) is None:
        raise CorpusError(f"{p}: unsupported input type (the name must end in "
                          f"{', '.join(CORPUS_EXTENSIONS)})")
    if not os.access(p, os.R_OK):
        raise CorpusError(f"{p}: permission denied (cannot read the file)")
    return p


def is_path_list(inputs: object) -> bool:
    """True when ``inputs`` is a path or a list/tuple of paths under the module's rule (raises
    like :func:`classify_inputs` when they are missing or mixed)."""
    return classify_inputs(inputs)[0] == "paths"


def open_binary(path: PathLike) -> IO[bytes]:
    """Opens ``path`` for reading bytes, decompressing ``.gz`` and ``.zst`` transparently.

    Corrupt or truncated compressed data raises :class:`CorpusError` when it is read."""
    p = os.fspath(path)
    if p.endswith(".gz"):
        return gzip.open(p, "rb")
    if p.endswith(".zst"):
        return _ZstdReader(p)  # type: ignore[return-value]
    return open(p, "rb")


class _ZstdReader(io.RawIOBase):
    """A strict streaming .zst reader: every frame must be complete (a truncated file raises
    instead of silently ending early); multiple frames are read in sequence."""

    def __init__(self, path: str):
        try:
            import zstandard
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise CorpusError(f"{path}: reading .zst files needs the zstandard package "
                              "(pip install 'cnfmce[formats]')") from e
        self._zstd = zstandard
        self._path = path
        self._fh = open(path, "rb")
        self._dctx = zstandard.ZstdDecompressor()
        self._dobj = self._dctx.decompressobj()
        self._pending = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        while not self._pending and not self._eof:
            chunk = self._fh.read(1 << 20)
            if not chunk:
                if not self._dobj.eof and self._started:
                    raise CorpusError(f"{self._path}: truncated zstd data (the last frame is incomplete)")
                self._eof = True
                return
            self._started = True
            try:
                out = self._dobj.decompress(chunk)
                while self._dobj.eof and self._dobj.unused_data:
                    rest = self._dobj.unused_data
                    self._dobj = self._dctx.decompressobj()
                    out += self._dobj.decompress(rest)
            except self._zstd.ZstdError as e:
                raise CorpusError(f"{self._path}: corrupt zstd data ({e})") from None
            self._pending = out

    _started = False

    def readinto(self, b: "bytearray | memoryview") -> int:  # type: ignore[override]
        self._fill()
        n = min(len(b), len(self._pending))
        b[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


ProgressHook = Optional[Callable[[int], None]]
_PROGRESS_EVERY = 1 << 20


def _raw_tell(raw: Any) -> Callable[[], int]:
    """The position in the stored file of a reader from :func:`open_binary`."""
    inner = getattr(raw, "fileobj", None) or getattr(raw, "_fh", None) or raw
    return inner.tell


def iter_file(path: PathLike, field: str = "text", progress: ProgressHook = None) -> Iterator[str]:
    """Yields the documents of one file (``field``: the JSON field or parquet column), checked
    with :func:`check_corpus_file` first."""
    for doc, _ in iter_file_numbered(path, field, progress):
        yield doc


def iter_file_numbered(path: PathLike, field: str = "text",
                       progress: ProgressHook = None) -> Iterator[Tuple[str, int]]:
    """Yields ``(document, where)`` for one file: ``where`` is the line of a JSON-lines file,
    the row (from 1) of a parquet file, 0 for a text file."""
    p = check_corpus_file(path)
    kind = corpus_kind(p)
    if kind == "parquet":
        yield from _iter_parquet(p, field, progress)
    elif kind == "jsonl":
        for lineno, obj in _iter_jsonl_numbered(p, field, progress):
            yield obj[field], lineno
    else:
        with open_binary(p) as fh:
            data = _read_all(fh, p)
        if progress is not None:
            progress(os.path.getsize(p))
        try:
            yield data.decode("utf-8"), 0
        except UnicodeDecodeError as e:
            raise CorpusError(f"{p}: not valid UTF-8 at byte {e.start}") from None


def _read_all(fh: IO[bytes], p: str) -> bytes:
    try:
        return fh.read()
    except _READ_ERRORS as e:
        raise CorpusError(f"{p}: cannot read: truncated or corrupt data ({e})") from None


def iter_jsonl_records(p: PathLike, field: str = "text",
                       progress: ProgressHook = None) -> Iterator[Dict[str, Any]]:
    """The JSON objects of a JSON-lines file (blank lines skipped), each checked to hold a
    ``field`` string (default ``"text"``); errors name the file and line."""
    for _, obj in _iter_jsonl_numbered(os.fspath(p), field, progress):
        yield obj


def _iter_jsonl_numbered(p: str, field: str = "text",
                         progress: ProgressHook = None) -> Iterator[Tuple[int, Dict[str, Any]]]:
    with open_binary(p) as raw:
        fh = io.BufferedReader(raw, 1 << 20) if not isinstance(raw, io.BufferedReader) else raw
        tell = _raw_tell(raw) if progress is not None else None
        yield from iter_jsonl_stream(fh, p, field, progress, tell)
    if progress is not None:
        progress(os.path.getsize(p))


def iter_jsonl_stream(fh: IO[bytes], name: str, field: str = "text", progress: ProgressHook = None,
                      tell: Optional[Callable[[], int]] = None
                      ) -> Iterator[Tuple[int, Dict[str, Any]]]:
    """``(line number, object)`` for each JSON line of the binary stream ``fh`` (blank lines
    skipped), each object checked to hold a ``field`` string; errors are :class:`CorpusError`
    naming ``name`` and the line. ``progress`` is called with ``tell()`` every MB or so."""
    lineno = 0
    unreported = 0
    while True:
        try:
            line = fh.readline()
        except _READ_ERRORS as e:
            raise CorpusError(f"{name}: cannot read after line {lineno}: truncated or corrupt "
                              f"data ({e})") from None
        if not line:
            break
        if progress is not None and tell is not None:
            unreported += len(line)
            if unreported >= _PROGRESS_EVERY:
                progress(tell())
                unreported = 0
        lineno += 1
        if not line.strip():
            continue
        yield lineno, parse_jsonl_line(line, name, lineno, field)


def parse_jsonl_line(line: bytes, name: str, lineno: int, field: str = "text") -> Dict[str, Any]:
    """The JSON object of one (non-blank) line of a JSON-lines file, checked to hold a
    ``field`` string; :class:`CorpusError` naming ``name`` and ``lineno`` otherwise."""
    obj = load_json(line, f"{name}:{lineno}", CorpusError)
    if not isinstance(obj, dict) or field not in obj:
        raise CorpusError(f"{name}:{lineno}: expected a JSON object with a \"{field}\" field")
    if not isinstance(obj[field], str):
        raise CorpusError(f"{name}:{lineno}: \"{field}\" is not a string")
    return obj


def _iter_parquet(p: str, field: str = "text", progress: ProgressHook = None
                  ) -> Iterator[Tuple[str, int]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise CorpusError(f"{p}: reading .parquet needs pyarrow (pip install 'cnfmce[formats]')") from e
    try:
        pf = pq.ParquetFile(p)
    except Exception as e:  # pyarrow raises its own error types
        raise CorpusError(f"{p}: not a readable parquet file ({e})") from None
    if field not in pf.schema_arrow.names:
        raise CorpusError(f"{p}: no \"{field}\" column (columns: {pf.schema_arrow.names})")
    rows = max(1, pf.metadata.num_rows)
    row = 0
    batches = pf.iter_batches(columns=[field], batch_size=4096)
    while True:
        try:
            batch = next(batches)
            texts = batch.column(0).to_pylist()
        except StopIteration:
            break
        except Exception as e:  # corrupt pages raise pyarrow's own error types
            raise CorpusError(f"{p}: cannot read after row {row}: corrupt data ({e})") from None
        for t in texts:
            row += 1
            if t is None:
                continue
            if not isinstance(t, str):
                raise CorpusError(f"{p}: row {row}: \"{field}\" is {type(t).__name__}, not a string")
            yield t, row
        if progress is not None:
            progress(os.path.getsize(p) * row // rows)


def iter_documents(inputs: Inputs, field: str = "text") -> Iterator[str]:
    """Yields documents from a path, a list of paths, or an iterable of strings (the module's
    paths-or-documents rule; ``field``: the JSON field or parquet column of files)."""
    for doc, _, _ in iter_documents_located(inputs, field):
        yield doc


def iter_documents_located(inputs: Inputs, field: str = "text"
                           ) -> Iterator[Tuple[str, Optional[str], int]]:
    """Yields ``(document, path, n)``: ``n`` is the line of a JSON-lines file, the row of a
    parquet file, 0 for a text file, and the document's index when ``path`` is None (in-memory
    inputs); :func:`describe_location` makes the words for an error message."""
    kind, items = classify_inputs(inputs)
    if kind == "paths":
        for p in items:
            for doc, n in iter_file_numbered(p, field):
                yield doc, p, n
        return
    for k, doc in enumerate(items):
        if not isinstance(doc, str):
            hint = " (paths go in a list, not an iterator)" if isinstance(doc, os.PathLike) else ""
            raise TypeError(f"document {k} is {type(doc).__name__}, expected str{hint}")
        yield doc, None, k


def describe_location(path: Optional[str], n: int) -> str:
    """``a.jsonl:12``, ``b.parquet: row 7``, ``c.txt`` or ``document 3000`` (see
    :func:`iter_documents_located`)."""
    if path is None:
        return f"document {n}"
    if not n:
        return path
    return f"{path}:{n}" if corpus_kind(path) == "jsonl" else f"{path}: row {n}"


def list_paths(inputs: Sequence[PathLike]) -> List[Path]:
    """The input paths as ``Path`` objects, checking that they exist."""
    return [Path(check_corpus_file(p)) for p in inputs]
