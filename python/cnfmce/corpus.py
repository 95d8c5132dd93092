"""Reading documents from files and iterables, streamed (never loaded whole).

Supported inputs: an iterable of ``str`` (one document each) or paths:

* ``.txt`` (one document per file),
* ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst`` (one JSON object per line, field ``"text"``),
* ``.parquet`` (column ``"text"``, needs ``pyarrow``).

``field`` (default ``"text"``) names another JSON field / parquet column. ``progress``, when given,
is called now and then with the number of bytes of the file (as stored, compressed or not) read
so far, for progress bars with an ETA.

A ``.txt.gz`` file is one gzip-compressed document. Files must be UTF-8; invalid UTF-8 raises
:class:`cnfmce.errors.CorpusError` naming the file and line.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union

from .errors import CorpusError

__all__ = ["PathLike", "Inputs", "is_path_list", "iter_documents", "iter_file", "iter_jsonl_records",
           "open_binary"]

PathLike = Union[str, "os.PathLike[str]"]
Inputs = Union[Iterable[str], Sequence[PathLike]]

_JSONL = (".jsonl", ".jsonl.gz", ".jsonl.zst", ".json.gz", ".ndjson")


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


def is_path_list(inputs: object) -> bool:
    """True when ``inputs`` is a single path or a list/tuple of paths (not of documents)."""
    if isinstance(inputs, (str, bytes)):
        return False
    if isinstance(inputs, os.PathLike):
        return True
    if isinstance(inputs, (list, tuple)) and inputs:
        return all(isinstance(x, os.PathLike) for x in inputs) or all(
            isinstance(x, str) and _looks_like_path(x) for x in inputs)
    return False


def _looks_like_path(s: str) -> bool:
    if "\n" in s or len(s) > 4096:
        return False
    return s.lower().endswith((".txt", ".txt.gz", ".parquet") + _JSONL)


ProgressHook = Optional[Callable[[int], None]]
_PROGRESS_EVERY = 1 << 20


def _raw_tell(raw: Any) -> Callable[[], int]:
    """The position in the stored file of a reader from :func:`open_binary`."""
    inner = getattr(raw, "fileobj", None) or getattr(raw, "_fh", None) or raw
    return inner.tell


def iter_file(path: PathLike, field: str = "text", progress: ProgressHook = None) -> Iterator[str]:
    """Yields the documents of one file (``field``: the JSON field or parquet column)."""
    p = os.fspath(path)
    low = p.lower()
    if not os.path.exists(p):
        raise FileNotFoundError(f"no such file: {p}")
    if os.path.isdir(p):
        raise CorpusError(f"{p} is a directory; pass the files in it")
    if low.endswith(".parquet"):
        yield from _iter_parquet(p, field, progress)
    elif low.endswith(_JSONL):
        yield from _iter_jsonl(p, field, progress)
    elif low.endswith((".txt", ".txt.gz", ".md", ".text")):
        with open_binary(p) as fh:
            data = _read_all(fh, p)
        if progress is not None:
            progress(os.path.getsize(p))
        try:
            yield data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorpusError(f"{p}: not valid UTF-8 at byte {e.start}") from None
    else:
        raise CorpusError(f"{p}: unsupported input type; use .txt, .jsonl, .jsonl.gz, "
                          ".jsonl.zst or .parquet")


def _read_all(fh: IO[bytes], p: str) -> bytes:
    try:
        return fh.read()
    except (EOFError, gzip.BadGzipFile, OSError) as e:
        raise CorpusError(f"{p}: cannot read ({e})") from None


def iter_jsonl_records(p: PathLike, field: str = "text",
                       progress: ProgressHook = None) -> Iterator[Dict[str, Any]]:
    """The JSON objects of a JSON-lines file (blank lines skipped), each checked to hold a
    ``field`` string (default ``"text"``); errors name the file and line."""
    p = os.fspath(p)
    with open_binary(p) as raw:
        fh = io.BufferedReader(raw, 1 << 20) if not isinstance(raw, io.BufferedReader) else raw
        tell = _raw_tell(raw)
        unreported = 0
        lineno = 0
        while True:
            try:
                line = fh.readline()
            except (EOFError, gzip.BadGzipFile, OSError) as e:
                raise CorpusError(f"{p}: cannot read after line {lineno} ({e})") from None
            if not line:
                break
            if progress is not None:
                unreported += len(line)
                if unreported >= _PROGRESS_EVERY:
                    progress(tell())
                    unreported = 0
            lineno += 1
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except UnicodeDecodeError:
                raise CorpusError(f"{p}:{lineno}: not valid UTF-8") from None
            except ValueError as e:
                raise CorpusError(f"{p}:{lineno}: malformed JSON ({e})") from None
            if not isinstance(obj, dict) or field not in obj:
                raise CorpusError(f"{p}:{lineno}: expected a JSON object with a \"{field}\" field")
            if not isinstance(obj[field], str):
                raise CorpusError(f"{p}:{lineno}: \"{field}\" is not a string")
            yield obj
    if progress is not None:
        progress(os.path.getsize(p))


def _iter_jsonl(p: str, field: str = "text", progress: ProgressHook = None) -> Iterator[str]:
    for obj in iter_jsonl_records(p, field, progress):
        yield obj[field]


def _iter_parquet(p: str, field: str = "text", progress: ProgressHook = None) -> Iterator[str]:
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
    done = 0
    for batch in pf.iter_batches(columns=[field], batch_size=4096):
        for t in batch.column(0).to_pylist():
            if t is not None:
                yield t
        done += batch.num_rows
        if progress is not None:
            progress(os.path.getsize(p) * done // rows)


def iter_documents(inputs: Inputs, field: str = "text") -> Iterator[str]:
    """Yields documents from a path, a list of paths, or an iterable of strings."""
    if isinstance(inputs, (str, os.PathLike)) and is_path_list([inputs]):
        yield from iter_file(inputs, field)  # a single path
        return
    if is_path_list(inputs):
        for p in inputs:  # type: ignore[union-attr]
            yield from iter_file(p, field)
        return
    if isinstance(inputs, (str, bytes)):
        raise TypeError("inputs must be an iterable of documents or a list of paths, not a single "
                        "string (wrap one document in a list)")
    try:
        it = iter(inputs)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"inputs must be an iterable of str or a list of paths, "
                        f"got {type(inputs).__name__}") from None
    for k, doc in enumerate(it):
        if not isinstance(doc, str):
            raise TypeError(f"document {k} is {type(doc).__name__}, expected str")
        yield doc


def list_paths(inputs: Sequence[PathLike]) -> List[Path]:
    """The input paths as ``Path`` objects, checking that they exist."""
    out = []
    for p in inputs:
        path = Path(p)
        if not path.exists():
            raise FileNotFoundError(f"no such file: {path}")
        out.append(path)
    return out
