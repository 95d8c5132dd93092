"""Corpus files cut into blocks that other processes or machines read on their own (the
distributed backend, :mod:`cnfmce.ray`): a block is a byte range of a JSON-lines file (of its
decompressed stream for ``.gz`` / ``.zst``), a run of row groups of a parquet file, or a group of
one-document text files. Every line, row and file belongs to exactly one block, and a block
yields the documents the local readers of :mod:`cnfmce.corpus` yield for that part of the file,
with the same checks, so the documents of all blocks are those of a local run.

Paths are local paths (on a cluster: the same path on every machine, e.g. a shared file system)
or URIs of any file system pyarrow opens (``s3://``, ``gs://``, ``hdfs://``, ...) or, failing
that, fsspec; a directory stands for the corpus files under it (recursively, sorted by name).
"""

from __future__ import annotations

import gzip
import io
import os
from dataclasses import dataclass
from typing import IO, Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type

from .corpus import (CORPUS_EXTENSIONS, check_corpus_file, corpus_kind, iter_jsonl_stream,
                     open_binary)
from .errors import CorpusError

#: A compressed JSON-lines file whose stored size times this is below the block size is one
#: block without being measured (text rarely compresses better than 8:1).
MAX_COMPRESSION = 8
_COMPRESSED = (".gz", ".zst")


@dataclass(frozen=True)
class Block:
    """One block of a corpus: ``kind`` is ``"jsonl"`` (``path``, the byte range ``[start,
    end)`` of the lines that start in it, ``end`` None for the end of the file), ``"parquet"``
    (``path``, ``row_groups``) or ``"text"`` (``paths``, one document each). ``size``: the
    estimated bytes of text, for balance and progress; ``stored``: the bytes of the files read."""

    kind: str
    path: str = ""
    start: int = 0
    end: Optional[int] = None
    row_groups: Tuple[int, ...] = ()
    paths: Tuple[str, ...] = ()
    size: int = 0
    stored: int = 0
    field: str = "text"

    def describe(self) -> str:
        if self.kind == "jsonl":
            end = "end" if self.end is None else f"{self.end:,}"
            return f"{self.path} (bytes {self.start:,} to {end})"
        if self.kind == "parquet":
            return f"{self.path} (row groups {self.row_groups[0]}-{self.row_groups[-1]})"
        return f"{len(self.paths)} text file(s) from {self.paths[0]}"


# --- file systems ---------------------------------------------------------------------------------

def is_uri(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _filesystem(uri: str) -> Tuple[Any, str, str]:
    """(file system, path inside it, "pyarrow" or "fsspec") for a URI."""
    try:
        import pyarrow.fs as pafs
        fs, p = pafs.FileSystem.from_uri(uri)
        return fs, p, "pyarrow"
    except Exception as first:  # pyarrow raises its own error types for unknown schemes
        try:
            import fsspec
        except ImportError:
            raise CorpusError(f"{uri}: cannot open this URI with pyarrow ({first}); install the "
                              "file system's package (e.g. s3fs, gcsfs) and fsspec") from None
        try:
            fs, p = fsspec.core.url_to_fs(uri)
        except Exception as e:
            raise CorpusError(f"{uri}: cannot open this URI ({e})") from None
        return fs, p, "fsspec"


def _join_uri(uri: str, inner: str) -> str:
    scheme = uri.split("://", 1)[0]
    return f"{scheme}://{inner.lstrip('/')}" if scheme not in ("hdfs", "viewfs") else inner


def list_files(path: str) -> List[Tuple[str, int]]:
    """``[(path, stored size)]``: the file itself, or the corpus files under a directory (sorted
    by name). Raises ``FileNotFoundError`` / :class:`CorpusError` like the local readers."""
    if not is_uri(path):
        p = path[len("file://"):] if path.startswith("file://") else os.path.expanduser(path)
        if os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if corpus_kind(f) is not None and not f.startswith("."):
                        found.append(os.path.join(root, f))
            if not found:
                raise CorpusError(f"{p}: no corpus files in this directory (names ending in "
                                  f"{', '.join(CORPUS_EXTENSIONS)})")
            return [(f, os.path.getsize(f)) for f in sorted(found)]
        q = check_corpus_file(p)
        return [(q, os.path.getsize(q))]
    fs, inner, lib = _filesystem(path)
    if lib == "pyarrow":
        import pyarrow.fs as pafs
        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"no such file: {path}")
        if info.type == pafs.FileType.Directory:
            infos = fs.get_file_info(pafs.FileSelector(inner, recursive=True))
            found = sorted((i.path, i.size) for i in infos if i.type == pafs.FileType.File
                           and corpus_kind(i.path) is not None
                           and not os.path.basename(i.path).startswith("."))
            if not found:
                raise CorpusError(f"{path}: no corpus files under this directory")
            return [(_join_uri(path, p), s) for p, s in found]
        if corpus_kind(inner) is None:
            raise CorpusError(f"{path}: unsupported input type (the name must end in "
                              f"{', '.join(CORPUS_EXTENSIONS)})")
        return [(path, info.size)]
    if not fs.exists(inner):
        raise FileNotFoundError(f"no such file: {path}")
    if fs.isdir(inner):
        found = sorted(p for p in fs.find(inner) if corpus_kind(p) is not None)
        if not found:
            raise CorpusError(f"{path}: no corpus files under this directory")
        return [(_join_uri(path, p), fs.size(p)) for p in found]
    if corpus_kind(inner) is None:
        raise CorpusError(f"{path}: unsupported input type")
    return [(path, fs.size(inner))]


def open_raw(path: str, seekable: bool = False) -> IO[bytes]:
    """The stored bytes of a file (local or URI)."""
    if not is_uri(path):
        p = path[len("file://"):] if path.startswith("file://") else path
        return open(p, "rb")
    fs, inner, lib = _filesystem(path)
    if lib == "pyarrow":
        return fs.open_input_file(inner) if seekable else fs.open_input_stream(inner)
    return fs.open(inner, "rb")


def open_text_stream(path: str) -> IO[bytes]:
    """The decompressed bytes of a file (``.gz`` and ``.zst`` decompressed), as the local
    readers see them."""
    if not is_uri(path):
        return open_binary(path[len("file://"):] if path.startswith("file://") else path)
    raw = open_raw(path)
    low = path.lower()
    if low.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if low.endswith(".zst"):
        try:
            import zstandard
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise CorpusError(f"{path}: reading .zst files needs the zstandard package") from e
        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)  # type: ignore[return-value]
    return raw


def decompressed_size(path: str) -> int:
    """Bytes of the decompressed stream of a file (read once)."""
    n = 0
    try:
        with open_text_stream(path) as fh:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    return n
                n += len(chunk)
    except (EOFError, OSError) as e:
        raise CorpusError(f"{path}: cannot read: truncated or corrupt data ({e})") from None


# --- planning -------------------------------------------------------------------------------------

def _compressed(path: str) -> bool:
    return path.lower().endswith(_COMPRESSED)


def _parquet_groups(path: str) -> List[int]:
    """Uncompressed bytes of each row group of a parquet file."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise CorpusError(f"{path}: reading .parquet needs pyarrow") from e
    try:
        with open_raw(path, seekable=True) as fh:
            md = pq.ParquetFile(fh).metadata
            return [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]
    except Exception as e:  # pyarrow raises its own error types
        raise CorpusError(f"{path}: not a readable parquet file ({e})") from None


def estimate_text_bytes(files: Sequence[Tuple[str, int]]) -> int:
    """A rough size of the text in files (compressed ones counted at 3:1), for choosing sizes."""
    return sum(s * 3 if _compressed(p) else s for p, s in files)


def plan_blocks(files: Sequence[Tuple[str, int]], block_size: int, field: str = "text",
                measure: Optional[Callable[[List[str]], List[int]]] = None) -> List[Block]:
    """Cuts the files (``(path, stored size)``, in order) into blocks of about ``block_size``
    bytes of text. ``measure(paths)`` gives the decompressed sizes of compressed JSON-lines
    files that may need cutting (default: read them here)."""
    if block_size < 1:
        raise ValueError("block_size must be positive")
    to_measure = [p for p, s in files
                  if corpus_kind(p) == "jsonl" and _compressed(p) and s * MAX_COMPRESSION > block_size]
    sizes: Dict[str, int] = {}
    if to_measure:
        got = measure(to_measure) if measure is not None else [decompressed_size(p) for p in to_measure]
        sizes = dict(zip(to_measure, got))
    blocks: List[Block] = []
    texts: List[Tuple[str, int]] = []

    def flush_texts() -> None:
        if texts:
            blocks.append(Block("text", paths=tuple(p for p, _ in texts),
                                size=sum(estimate_text_bytes([t]) for t in texts),
                                stored=sum(s for _, s in texts), field=field))
            texts.clear()

    for p, stored in files:
        kind = corpus_kind(p)
        if kind == "text":
            if texts and sum(estimate_text_bytes([t]) for t in texts) + estimate_text_bytes([(p, stored)]) > block_size:
                flush_texts()
            texts.append((p, stored))
            continue
        flush_texts()
        if kind == "parquet":
            groups = _parquet_groups(p)
            cur: List[int] = []
            cur_size = 0
            for i, g in enumerate(groups):
                if cur and cur_size + g > block_size:
                    blocks.append(Block("parquet", path=p, row_groups=tuple(cur), size=cur_size,
                                        stored=stored * cur_size // max(1, sum(groups)), field=field))
                    cur, cur_size = [], 0
                cur.append(i)
                cur_size += g
            if cur:
                blocks.append(Block("parquet", path=p, row_groups=tuple(cur), size=cur_size,
                                    stored=stored * cur_size // max(1, sum(groups)), field=field))
            continue
        # JSON lines: byte ranges of the (decompressed) stream
        total = sizes.get(p, stored if not _compressed(p) else stored * 3)
        known = p in sizes or not _compressed(p)
        n = max(1, -(-total // block_size)) if known else 1
        for k in range(n):
            start = total * k // n
            end = None if k == n - 1 else total * (k + 1) // n
            size = (end if end is not None else total) - start
            blocks.append(Block("jsonl", path=p, start=start, end=end, size=size,
                                stored=stored * size // max(1, total), field=field))
    flush_texts()
    return blocks


# --- reading --------------------------------------------------------------------------------------

class _LineRange:
    """The lines of a binary stream that start in ``[start, end)`` (``end`` None: to the end),
    read through ``readline()`` as :func:`cnfmce.corpus.iter_jsonl_stream` reads a file."""

    def __init__(self, fh: IO[bytes], start: int, end: Optional[int], seekable: bool):
        self.fh = fh
        self.end = end
        self.pos = 0
        if start > 0:
            if seekable:
                fh.seek(start - 1)
                self.pos = start - 1 + len(fh.readline())  # the end of the line holding byte start-1
            else:
                while self.pos < start:
                    line = fh.readline()
                    if not line:
                        break
                    self.pos += len(line)

    def readline(self) -> bytes:
        if self.end is not None and self.pos >= self.end:
            return b""
        line = self.fh.readline()
        self.pos += len(line)
        return line


def iter_block(block: Block) -> Iterator[str]:
    """The documents of a file block, checked as the local readers check them (errors name the
    file, and the line within the block's range)."""
    if block.kind == "jsonl":
        seekable = not _compressed(block.path)
        name = block.path if block.start == 0 else f"{block.path} (from byte {block.start:,})"
        try:
            fh = open_raw(block.path, seekable=True) if seekable else open_text_stream(block.path)
        except FileNotFoundError:
            raise FileNotFoundError(f"no such file: {block.path}") from None
        with fh:
            if seekable and not isinstance(fh, io.BufferedReader):
                fh = io.BufferedReader(fh, 1 << 20)  # type: ignore[arg-type,assignment]
            lines = _LineRange(fh, block.start, block.end, seekable)
            for _, obj in iter_jsonl_stream(lines, name, block.field):  # type: ignore[arg-type]
                yield obj[block.field]
        return
    if block.kind == "text":
        for p in block.paths:
            try:
                with open_text_stream(p) as fh:
                    data = fh.read()
            except (EOFError, OSError) as e:
                raise CorpusError(f"{p}: cannot read: truncated or corrupt data ({e})") from None
            try:
                yield data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorpusError(f"{p}: not valid UTF-8 at byte {e.start}") from None
        return
    if block.kind == "parquet":
        import pyarrow.parquet as pq
        with open_raw(block.path, seekable=True) as fh:
            try:
                pf = pq.ParquetFile(fh)
            except Exception as e:  # pyarrow raises its own error types
                raise CorpusError(f"{block.path}: not a readable parquet file ({e})") from None
            if block.field not in pf.schema_arrow.names:
                raise CorpusError(f"{block.path}: no \"{block.field}\" column "
                                  f"(columns: {pf.schema_arrow.names})")
            batches = pf.iter_batches(columns=[block.field], batch_size=4096,
                                      row_groups=list(block.row_groups))
            while True:
                try:
                    column = next(batches).column(0)
                except StopIteration:
                    break
                except Exception as e:  # corrupt pages raise pyarrow's own error types
                    raise CorpusError(f"{block.path}: cannot read row groups {block.row_groups}: "
                                      f"corrupt data ({e})") from None
                texts = texts_of_column(column, f"{block.path}: \"{block.field}\"", CorpusError)
                yield from texts
        return
    raise ValueError(f"unknown block kind {block.kind!r}")


def texts_of_column(column: Any, where: str, error: Type[Exception] = CorpusError) -> List[str]:
    """The documents of a text column (a pyarrow ``Array`` / ``ChunkedArray``): its strings in
    order, nulls skipped. Any other value raises ``error`` naming ``where`` (the local readers
    raise :class:`CorpusError` for a parquet file; a ``ray.data.Dataset`` given as input is a
    value of the wrong type: ``TypeError``)."""
    import pyarrow as pa
    t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return column.drop_null().to_pylist()  # type: ignore[no-any-return]
    values = column.to_pylist()  # other types (dictionary, Python objects) may still hold str
    bad = next((v for v in values if v is not None and not isinstance(v, str)), None)
    if bad is not None:
        shown = repr(bad)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise error(f"{where} holds {type(bad).__name__} values ({shown}), not strings")
    return [v for v in values if v is not None]


def utf8_size(doc: str, where: str) -> int:
    """The UTF-8 size of a document; a lone surrogate raises :class:`CorpusError`."""
    if doc.isascii():
        return len(doc)
    try:
        return len(doc.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise CorpusError(f"{where}: a document holds a lone surrogate (U+{ord(doc[e.start]):04X}), "
                          "which UTF-8 cannot hold") from None


def batches(docs: Iterator[str], where: str, batch_bytes: int = 2 << 20
            ) -> Iterator[Tuple[List[str], int]]:
    """Documents in batches of about ``batch_bytes`` of UTF-8: ``(documents, their size)``."""
    batch: List[str] = []
    size = 0
    for d in docs:
        if not isinstance(d, str):
            raise TypeError(f"{where}: a document is {type(d).__name__}, expected str")
        size += utf8_size(d, where)
        batch.append(d)
        if size >= batch_bytes:
            yield batch, size
            batch, size = [], 0
    if batch:
        yield batch, size
