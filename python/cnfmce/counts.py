"""Counts of the counting phase: :class:`Counts` (a dict ``bytes -> int``, best first, with an
``info`` dict), counts files (their syntax is in :mod:`cnfmce.formats`) and sums of counts."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import _core
from ._checks import check_positive, memory_budget
from .errors import TokenizerFileError
from .formats import dump_counts, parse_counts, write_bytes_atomic

__all__ = ["Counts", "save_counts", "load_counts", "merge_counts", "count_lists", "load_any_counts"]


class Counts(dict):
    """The raw vocabulary: a ``dict`` mapping candidate bytes to their count, best first, with an
    ``info`` attribute describing how it was made (rounds, documents, bytes, timings) and a
    ``characters`` attribute: every multi-byte character counting saw, with its count, whatever
    the ``raw_vocab_size`` cut (UTF-8 bytes -> count, by bytes; empty for counts made elsewhere).
    The refined selections rank those characters, so :func:`cnfmce.train_from_counts` on the
    result of :func:`cnfmce.count` trains what :func:`cnfmce.train` trains."""

    info: Dict[str, Any]
    characters: Dict[bytes, int]

    def __init__(self, *args: Any, info: Optional[Dict[str, Any]] = None,
                 characters: Optional[Mapping[bytes, int]] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.info = dict(info or {})
        self.characters = dict(sorted(_checked_characters(characters or {}).items()))


CHARACTERS_KEY = "characters"  # the counts file header's (and parquet metadata's) reserved key


def _checked_characters(chars: Mapping[bytes, int]) -> Dict[bytes, int]:
    if not isinstance(chars, Mapping):
        raise TypeError(f"characters must map bytes to ints, got {type(chars).__name__}")
    out: Dict[bytes, int] = {}
    for k, v in chars.items():
        if not isinstance(k, bytes) or not _one_multibyte_char(k):
            raise ValueError(f"characters must be single multi-byte UTF-8 characters, got {k!r}")
        if not _is_count(v):
            raise ValueError(f"count of character {k.decode('utf-8')!r} must be a non-negative "
                             f"64-bit int, got {v!r}")
        out[k] = v
    return out


def _characters_of(counts: Any) -> Dict[bytes, int]:
    """The checked ``characters`` of counts (none for a plain mapping)."""
    return _checked_characters(getattr(counts, "characters", None) or {})


def _is_count(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and 0 <= v < 2**64


def _one_multibyte_char(b: bytes) -> bool:
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return len(s) == 1 and len(b) > 1


def _header(info: Mapping[str, Any], chars: Mapping[bytes, int]) -> Dict[str, Any]:
    """The JSON header of saved counts: ``info``, with the (checked) characters under
    ``"characters"`` (``{character: count}``, by bytes) when there are any."""
    info = dict(info)
    info.pop(CHARACTERS_KEY, None)
    if chars:
        info[CHARACTERS_KEY] = {k.decode("utf-8"): v for k, v in sorted(chars.items())}
    return info


def _split_header(info: Any, where: str) -> Tuple[Dict[str, Any], Dict[bytes, int]]:
    """(info, characters) of a saved header; a malformed ``"characters"`` is a file error."""
    if not isinstance(info, dict):
        return {}, {}
    info = dict(info)
    raw = info.pop(CHARACTERS_KEY, None)
    if raw is None:
        return info, {}
    if not isinstance(raw, dict):
        raise TokenizerFileError(f"{where}: header key {CHARACTERS_KEY!r} must be an object "
                                 f"{{character: count}}, got {type(raw).__name__}")
    try:
        chars = _checked_characters({k.encode("utf-8", "surrogatepass"): v for k, v in raw.items()})
    except ValueError as e:
        raise TokenizerFileError(f"{where}: header {CHARACTERS_KEY!r}: {e}") from None
    return info, chars


def _sum_characters(into: Dict[bytes, int], chars: Mapping[bytes, int]) -> None:
    for k, v in chars.items():
        into[k] = into.get(k, 0) + v


def save_counts(counts: Mapping[bytes, int], path: "os.PathLike[str] | str") -> None:
    """Writes counts as text (gzip when ``path`` ends in ``.gz``), atomically.

    Format: a first line ``# cnfmce counts v1``, a second line ``# `` followed by a JSON object
    (how the counts were made; may be ``{}``; the :attr:`Counts.characters` under the key
    ``"characters"`` as ``{character: count}``), then one ``<base64 bytes>\\t<count>`` line
    per candidate, best first (count descending, ties by bytes).

    A path ending in ``.parquet`` gets the parquet layout instead (see :func:`load_counts`),
    rows best first, the JSON object in the schema metadata under ``cnfmce``.
    """
    info = _header(getattr(counts, "info", None) or {}, _characters_of(counts))
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if _is_parquet_counts(path):
        _save_parquet_counts(items, info, path)
        return
    write_bytes_atomic(path, dump_counts(items, info))


def load_counts(path: "os.PathLike[str] | str") -> Counts:
    """Reads a counts file written by :func:`save_counts` / ``cnfmce count``, or counts as
    parquet (a ``.parquet`` file, or a directory of them as Spark and Ray Data write them).

    **Parquet counts layout**: columns ``token`` (``binary``; ``string`` is accepted too and
    read as its UTF-8 bytes) and ``count`` (``int64``, or any integer type; non-negative), other
    columns ignored; rows in any order and in any number of row groups and files (a directory:
    every ``*.parquet`` file under it); a token present in several rows or files has the sum of
    their counts. No nulls, no empty tokens. The result is ordered best first. The schema
    metadata's ``cnfmce`` JSON object, when a file has one, is the header of a counts file (a
    value that is not a JSON object raises :class:`TokenizerFileError`); the characters of every
    file are summed.
    """
    p = os.fspath(path)
    if _is_parquet_counts(p):
        merger = _core.CountsMerger(1 << 62, tempfile.gettempdir())
        chars: Dict[bytes, int] = {}
        infos: List[Dict[str, Any]] = []
        for toks, vals in _parquet_counts_chunks(p, chars, infos):
            merger.add_counts(toks, vals)
        toks, vals = merger.top(None)
        # a file's header; a directory's characters are the sum of its files' (its info is empty)
        info = infos[0] if not os.path.isdir(p) else {}
        return Counts(zip(toks, vals), info=info, characters=chars)
    header, counts = parse_counts(path)
    info, chars = _split_header(header, f"{p}:2")
    return Counts(counts, info=info, characters=chars)


def merge_counts(*counts: Union[Mapping[bytes, int], "os.PathLike[str]", str],
                 raw_vocab_size: Optional[int] = None, output: Optional[Union[str, "os.PathLike[str]"]] = None,
                 memory_limit: Optional[int] = None, tmp_dir: Optional[str] = None) -> Any:
    """Sums several counts (mappings, counts files, parquet counts files or directories of them,
    see :func:`load_counts`), e.g. made on different machines or by a Spark / Ray job.

    Streaming, in bounded memory: the inputs are read in chunks into the core's merger, which
    keeps at most ``memory_limit`` bytes (default as for :func:`count`) and spills sorted runs
    to ``tmp_dir`` beyond it, then merges them in one pass. Returns :class:`Counts`, best first:
    all the candidates, or the best ``raw_vocab_size`` (ties by bytes; only those are held).
    With ``output`` (a ``.parquet`` path, or a counts-file path) the result is written there
    atomically instead and the path is returned; a parquet output without ``raw_vocab_size``
    is written while merging (rows in bytewise order), so the merged counts are never all in
    memory.

    The inputs' :attr:`Counts.characters` are summed too (they are exact: counting keeps every
    character whatever the cut).

    Counts made on shards of a corpus are exact sums only where every shard kept the candidate;
    candidates cut by a shard's threshold or ``raw_vocab_size`` are undercounted. Count shards with
    generous ``raw_vocab_size`` to keep the merge close to counting the whole corpus at once
    (or count on a cluster: :func:`cnfmce.ray.count` is exact).
    """
    from .workdir import work_dir
    if raw_vocab_size is not None:
        check_positive("raw_vocab_size", raw_vocab_size)
    _, budget = memory_budget(memory_limit, floor=1 << 16)
    with work_dir(tmp_dir) as tmp:
        merger = _core.CountsMerger(budget, os.path.join(tmp, ""))
        chars: Dict[bytes, int] = {}
        for c in counts:
            for toks, vals in _counts_chunks(c, chars):
                merger.add_counts(toks, vals)
        info = {"merged": len(counts), **{k: v for k, v in merger.stats().items()
                                           if k in ("records", "spills", "spilled_bytes")}}
        if output is not None and raw_vocab_size is None and _is_parquet_counts(output):
            _stream_parquet_counts(merger, _header(info, chars), output)
            return os.fspath(output)
        toks, vals = merger.top(raw_vocab_size)
    out = Counts(zip(toks, vals), info=info, characters=chars)
    if output is not None:
        save_counts(out, output)
        return os.fspath(output)
    return out


PARQUET_COUNTS_CHUNK = 1 << 18  # rows per chunk when streaming counts


def _is_parquet_counts(path: Any) -> bool:
    if not isinstance(path, (str, os.PathLike)):
        return False
    p = os.fspath(path)
    return p.lower().endswith(".parquet") or os.path.isdir(p)


def _parquet_files(p: str) -> List[str]:
    if os.path.isdir(p):
        files = sorted(os.path.join(r, f) for r, _, fs in os.walk(p) for f in fs
                       if f.lower().endswith(".parquet") and not f.startswith((".", "_")))
        if not files:
            raise TokenizerFileError(f"{p}: a directory without .parquet counts files")
        return files
    if not os.path.exists(p):
        raise FileNotFoundError(f"no such file: {p}")
    return [p]


def _pq() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("parquet counts need pyarrow (pip install 'cnfmce[formats]')") from e
    return pq


def _parquet_counts_chunks(p: str, chars: Dict[bytes, int], infos: List[Dict[str, Any]]
                           ) -> Iterator[Tuple[List[bytes], List[int]]]:
    """(tokens, counts) chunks of parquet counts (the layout of :func:`load_counts`), checked;
    each file is opened once, its header (schema metadata ``cnfmce``) appended to ``infos`` and
    its characters added to ``chars`` before its rows are read."""
    pq = _pq()
    import pyarrow as pa
    for f in _parquet_files(p):
        try:
            pf = pq.ParquetFile(f)
        except Exception as e:  # pyarrow raises its own error types
            raise TokenizerFileError(f"{f}: not a readable parquet file ({e})") from None
        schema = pf.schema_arrow
        info, fchars = _split_header(_parquet_metadata(schema.metadata, f), f"{f}: schema metadata")
        infos.append(info)
        _sum_characters(chars, fchars)
        missing = [c for c in ("token", "count") if c not in schema.names]
        if missing:
            raise TokenizerFileError(f"{f}: parquet counts need columns 'token' (binary) and "
                                     f"'count' (int64); missing {missing} (columns: {schema.names})")
        tt, ct = schema.field("token").type, schema.field("count").type
        is_str = pa.types.is_string(tt) or pa.types.is_large_string(tt)
        if not (pa.types.is_binary(tt) or pa.types.is_large_binary(tt) or is_str):
            raise TokenizerFileError(f"{f}: column 'token' is {tt}, expected binary")
        if not pa.types.is_integer(ct):
            raise TokenizerFileError(f"{f}: column 'count' is {ct}, expected int64")
        row = 0
        batches = pf.iter_batches(columns=["token", "count"], batch_size=PARQUET_COUNTS_CHUNK)
        while True:
            try:
                b = next(batches)
            except StopIteration:
                break
            except Exception as e:  # corrupt pages raise pyarrow's own error types
                raise TokenizerFileError(f"{f}: cannot read after row {row}: corrupt data ({e})") from None
            toks, vals = b.column(0), b.column(1)
            if toks.null_count or vals.null_count:
                raise TokenizerFileError(f"{f}: null tokens or counts after row {row}")
            tl = toks.to_pylist()
            if is_str:
                tl = [t.encode("utf-8") for t in tl]
            vl = vals.to_pylist()
            for k, (t, v) in enumerate(zip(tl, vl)):
                if not t or v < 0:
                    raise TokenizerFileError(f"{f}: row {row + k + 1}: empty token or negative count")
            row += len(tl)
            yield tl, vl


def _parquet_metadata(md: Optional[Mapping[bytes, bytes]], f: str) -> Dict[str, Any]:
    """The ``cnfmce`` JSON object of a parquet file's schema metadata: ``{}`` when it has none
    (counts written elsewhere, e.g. by Spark); not JSON or not an object is an error, so that a
    damaged header never silently loses the characters it holds."""
    raw = (md or {}).get(b"cnfmce")
    if raw is None:
        return {}
    try:
        info = json.loads(raw)
    except ValueError:
        raise TokenizerFileError(f"{f}: schema metadata 'cnfmce' is not JSON") from None
    if not isinstance(info, dict):
        raise TokenizerFileError(f"{f}: schema metadata 'cnfmce' is not a JSON object")
    return info


def _parquet_schema(info: Dict[str, Any]) -> Any:
    import pyarrow as pa
    return pa.schema([("token", pa.binary()), ("count", pa.int64())],
                     metadata={"cnfmce": json.dumps(info, ensure_ascii=True, default=str)})


def _parquet_arrays(toks: List[bytes], vals: List[int]) -> Any:
    import pyarrow as pa
    if vals and max(vals) >= 2**63:
        raise ValueError("a count of 2**63 or more does not fit parquet counts' int64")
    return pa.record_batch([pa.array(toks, pa.binary()), pa.array(vals, pa.int64())],
                           names=["token", "count"])


def _atomic_parquet(path: Any, write: Any) -> None:
    p = os.fspath(path)
    d = os.path.dirname(os.path.abspath(p))
    fd, tmp = tempfile.mkstemp(prefix=".cnfmce-", suffix=".parquet.tmp", dir=d)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _save_parquet_counts(items: List[Tuple[bytes, int]], info: Dict[str, Any], path: Any) -> None:
    for tok, c in items:
        if not isinstance(tok, bytes) or not tok or not isinstance(c, int) or c < 0:
            raise TypeError("counts must map non-empty bytes to non-negative ints")
    pq = _pq()
    schema = _parquet_schema(info)

    def write(tmp: str) -> None:
        with pq.ParquetWriter(tmp, schema) as w:
            for i in range(0, max(1, len(items)), PARQUET_COUNTS_CHUNK):
                part = items[i:i + PARQUET_COUNTS_CHUNK]
                w.write_batch(_parquet_arrays([t for t, _ in part], [c for _, c in part]))
    _atomic_parquet(path, write)


def _stream_parquet_counts(merger: Any, info: Dict[str, Any], path: Any) -> None:
    pq = _pq()
    schema = _parquet_schema(info)

    def write(tmp: str) -> None:
        with pq.ParquetWriter(tmp, schema) as w:
            merger.for_each_chunk(lambda t, v: w.write_batch(_parquet_arrays(t, v)), PARQUET_COUNTS_CHUNK)
    _atomic_parquet(path, write)


def _counts_chunks(c: Any, chars: Dict[bytes, int]) -> Iterator[Tuple[List[bytes], List[int]]]:
    """(tokens, counts) chunks of one input of :func:`merge_counts`; its characters are added
    to ``chars``."""
    if _is_parquet_counts(c):
        yield from _parquet_counts_chunks(os.fspath(c), chars, [])
    elif isinstance(c, (str, os.PathLike)):
        loaded = load_counts(c)
        _sum_characters(chars, loaded.characters)
        yield count_lists(loaded)
    elif isinstance(c, Mapping):
        _sum_characters(chars, _characters_of(c))
        yield count_lists(c)
    else:
        raise TypeError(f"counts must be mappings bytes -> int or paths, got {type(c).__name__}")


def load_any_counts(counts: Any, raw_vocab_size: Optional[int], tmp: str, budget: int
                    ) -> Tuple[List[bytes], List[int], List[bytes], List[int]]:
    """The counts ``train_from_counts`` takes, as four lists (tokens, counts, characters,
    character counts; the arguments of ``Trainer.use_counts``): a mapping (its ``characters``
    attribute, if any), a counts file, or parquet counts (streamed through a merger of
    ``budget`` bytes spilling into ``tmp``; only the best ``raw_vocab_size`` are held when it
    is given)."""
    if _is_parquet_counts(counts):
        p = os.fspath(counts)
        chars: Dict[bytes, int] = {}
        merger = _core.CountsMerger(budget, os.path.join(tmp, ""))
        for toks, vals in _parquet_counts_chunks(p, chars, []):
            merger.add_counts(toks, vals)
        toks, vals = merger.top(raw_vocab_size)
        return toks, vals, list(chars), list(chars.values())
    if isinstance(counts, (str, os.PathLike)):
        counts = load_counts(counts)
    elif not isinstance(counts, Mapping):
        raise TypeError("counts must be a mapping bytes -> int or the path of a counts file")
    chars = _characters_of(counts)
    return (*count_lists(counts), list(chars), list(chars.values()))


def count_lists(counts: Mapping[bytes, int]) -> Tuple[List[bytes], List[int]]:
    """The counts as two parallel lists (for the core), checked."""
    toks = list(counts.keys())
    vals = list(counts.values())
    for k, v in zip(toks, vals):
        if not isinstance(k, bytes) or not k:
            raise TypeError("counts must map non-empty bytes to ints")
        if not _is_count(v):
            raise ValueError(f"count of {k!r} must be a non-negative int, got {v!r}")
    return toks, vals
