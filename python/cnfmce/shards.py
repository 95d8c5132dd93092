"""Pretraining data: a corpus turned into token shards (``cnfmce tokenize``).

:func:`tokenize_corpus` streams documents from ``.txt``, ``.jsonl``, ``.jsonl.gz``,
``.jsonl.zst`` and ``.parquet`` files (``field`` names the JSON field or parquet column), encodes
them with the Rust core (GIL released, all cores) and writes shards of about ``shard_size`` bytes
of tokens in one of three formats.

Reading: the core reads JSON lines (plain or gzip) and text files itself
(``cnfmce._core.CorpusReader``, ``src/read.rs``: gzip and JSON with the GIL released, into blocks
of UTF-8 documents that the encoder takes without a Python string per document); ``.zst``,
parquet and in-memory documents go through the training readers (:mod:`cnfmce.corpus`). The
documents and the errors are the training readers': the core's JSON check only takes lines that
``json.loads`` surely reads the same way and hands every other line to
:func:`cnfmce.corpus.parse_jsonl_line`; a file it cannot read on (corrupt or truncated data) is
read again by the Python reader, past the documents already given, which raises its own error.
One addition: a line (a ``.txt.gz`` text) that inflates past
:func:`cnfmce.formats.inflate_limit` of the compressed file's size is a :class:`CorpusError`
(a gzip bomb), not a memory blow-up.

Threads: reading (this thread), encoding (threads
that spend their time in the core, GIL released: two sharing the core's pool by default, or
``num_threads`` of one core each) and writing (a thread) overlap; documents keep their order, so
the output is byte-identical whatever ``num_threads`` is.

Output files
============

``OUTDIR/manifest.json`` (small, rewritten atomically after every shard) and, for shard ``k``,
files named ``shard_{k:06d}...`` so that sorting the names gives document order (at most
1,000,000 shards: a run that would need more stops with an error, its complete shards listed).
Documents are never split across shards: a shard is closed before the document that would take it past
``shard_size`` bytes of tokens (a single larger document gets a shard of its own). Each document
is written as ``[bos] ids [eos]`` (``bos``/``eos`` when set).

``megatron`` — ``shard_k.bin`` + ``shard_k.idx``, Megatron-LM's ``IndexedDataset`` (pass
``OUTDIR/shard_k`` as a data path prefix). Each document is one sequence. ``.bin``: the tokens.
``.idx``, little-endian: the 9 bytes ``MMIDIDX\\x00\\x00``, a uint64 version ``1``, a uint8 dtype
code (``8`` = uint16, ``4`` = int32: Megatron has no unsigned 32-bit code), a uint64 sequence
count ``S``, a uint64 document count ``S + 1`` (the length of the next-but-one array), then
``S`` int32 sequence lengths (tokens), ``S`` int64 sequence pointers (byte offsets into
``.bin``) and ``S + 1`` int64 document indices ``0, 1, ..., S`` (document ``d`` is sequences
``[d, d + 1)``).

``llmc`` — ``shard_k.bin`` in llm.c's / modded-nanoGPT's format: a header of 256 little-endian
int32 (``header[0]`` magic, ``header[1]`` version, ``header[2]`` the number of tokens, the rest
0), then the tokens. uint16 tokens use magic ``20240520`` version ``1`` (GPT-2 shards, what
llm.c's ``dataloader.h`` and modded-nanoGPT read); uint32 tokens use magic ``20240801`` version
``7``, as llm.c's ``data_common.py`` writes for Llama 3. The token count being an int32, a shard
holds at most 2**31 - 1 tokens (shards are closed earlier when needed).

``npy`` — ``shard_k.tokens.npy`` (one-dimensional, uint16 or uint32) and
``shard_k.offsets.npy`` (int64, the documents' starts in the tokens plus the end: document ``d``
is ``tokens[offsets[d]:offsets[d + 1]]``, bos/eos included).

dtype: ``"auto"`` is uint16 when every id that can be written (the tokenizer's ids, eos and bos)
is below 65,536, else uint32 (``int32`` in Megatron's files). Asking for ``uint16`` with a larger
vocabulary, or a Megatron output with an id of 2**31 or more, is an error before anything is
written.

Manifest (JSON, keys sorted): ``format`` ``"cnfmce-shards"``, ``version``, ``output_format``,
``dtype``, ``tokenizer`` (``sha256``: see :func:`tokenizer_sha256`; ``vocab_size``, ``n_vocab``,
options),
``eos_id``/``eos_token``, ``bos_id``/``bos_token``, ``field``, ``shard_size``, ``inputs`` (path
and size of each file), per shard its ``name``, ``files`` (name -> bytes), ``first_document``,
``documents``, ``tokens``, ``text_bytes`` and ``input_end`` (``[file index, documents read from
that file]`` after its last document), and the totals ``documents``, ``tokens``, ``text_bytes``
and ``complete``. It holds no time stamps: two runs with the same inputs write identical files.

Atomicity and resuming: a shard is written to hidden temporary files, flushed to disk and renamed;
only then is it added to the manifest. An interrupted run (Ctrl-C, a kill, a crash) leaves
complete shards only (and possibly temporary files, hidden ``.shard_*.tmp`` and
``manifest.json.tmp<pid>``, that the next run deletes).
``resume=True`` checks that the settings, the tokenizer and the inputs are those of the manifest,
keeps the shards it lists, skips the input files they cover without reading them (and the covered
documents of the next file by reading past them) and continues: the result is byte-identical to an
uninterrupted run. Without ``resume``, an OUTDIR that already holds shards is an error. A run that
stopped before completing its first shard (a bad input, a wrong ``field``) leaves a manifest that
lists no shard: the next run, with or without ``resume``, starts over with its own settings.
A run holds an exclusive lock on OUTDIR (``flock`` on the directory, released when the process
ends, however it ends): a second run into the same directory fails at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from .corpus import PathLike, is_path_list, iter_file
from .errors import CnfmceError, CorpusError
from .tokenizer import useful_threads
from .workdir import _sigterm_cleans_up, interrupts_kept

__all__ = ["tokenize_corpus", "FORMATS", "DEFAULT_SHARD_SIZE", "MANIFEST", "EOS_NAMES",
           "default_eos", "parse_size", "read_manifest", "tokenizer_sha256"]

FORMATS = ("megatron", "llmc", "npy")
DEFAULT_SHARD_SIZE = 1_000_000_000
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "cnfmce-shards"
MANIFEST_VERSION = 1
# Special-token names taken as the end-of-document token when none is given, in this order.
EOS_NAMES = ("<|endoftext|>", "<|end_of_text|>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "</s>",
             "<eos>", "<|eos|>", "[EOS]")
# Characters of text per encode batch: large enough to keep every core busy between batches,
# small enough that reading, encoding and writing overlap finely.
BATCH_CHARS = 4 << 20
_LLMC_MAX_TOKENS = 2**31 - 1
# Token dtypes of the files, always little-endian.
_U16, _U32, _I32 = np.dtype("<u2"), np.dtype("<u4"), np.dtype("<i4")
_LLMC_HEADER = {_U16.str: (20240520, 1), _U32.str: (20240801, 7)}
_MEGATRON_HEADER = b"MMIDIDX\x00\x00"
_MEGATRON_CODE = {_U16.str: 8, _I32.str: 4}
_NPY_HEADER_BYTES = 128
# shard_000000 ... shard_999999: six digits, so that sorting the names gives document order
_MAX_SHARDS = 10**6
_INPUT_SUFFIXES = (".txt", ".txt.gz", ".md", ".text", ".parquet", ".jsonl", ".jsonl.gz",
                   ".jsonl.zst", ".json.gz", ".ndjson")


class ShardsError(CnfmceError, ValueError):
    """Settings that cannot be written, or an OUTDIR that does not match a resume."""


# --- settings -----------------------------------------------------------------------------------

def parse_size(s: Union[str, int]) -> int:
    """A byte size: an int, or a string such as ``1GB``, ``512M``, ``64k``, ``1e9`` (decimal
    units; ``KiB``/``MiB``/``GiB`` binary)."""
    if isinstance(s, bool):
        raise TypeError("a size must be an int or a string such as 1GB")
    if isinstance(s, int):
        n = s
    elif isinstance(s, str):
        t = s.strip().lower().replace("_", "")
        mult = 1
        for suffix, m in (("kib", 2**10), ("mib", 2**20), ("gib", 2**30), ("tib", 2**40),
                          ("kb", 10**3), ("mb", 10**6), ("gb", 10**9), ("tb", 10**12),
                          ("k", 10**3), ("m", 10**6), ("g", 10**9), ("t", 10**12), ("b", 1)):
            if t.endswith(suffix):
                t, mult = t[: -len(suffix)].strip(), m
                break
        try:
            n = int(float(t) * mult) if t else -1
        except (ValueError, OverflowError):  # not a number, nan, inf
            raise ValueError(f"not a size: {s!r} (e.g. 1GB, 512MB, 100000000)") from None
    else:
        raise TypeError(f"a size must be an int or a string such as 1GB, got {type(s).__name__}")
    if n <= 0:
        raise ValueError(f"the shard size must be positive, got {s!r}")
    return n


def default_eos(tok: Any) -> Optional[Tuple[int, str]]:
    """The tokenizer's end-of-document special token as ``(id, text)``: the ``eos_token`` of its
    metadata when it names a special token, else the first of :data:`EOS_NAMES` it has."""
    specials = tok.special_tokens
    named = (tok.metadata or {}).get("eos_token") if hasattr(tok, "metadata") else None
    if isinstance(named, str) and named in specials:
        return specials[named], named
    for name in EOS_NAMES:
        if name in specials:
            return specials[name], name
    return None


def _resolve_token(tok: Any, value: Any, what: str) -> Optional[Tuple[int, Optional[str]]]:
    """``(id, text)`` for an --eos/--bos value: a special token's text, a regular token's text,
    or an integer id of the tokenizer (a token's or a special token's; any other id is refused,
    before anything is written: the model would get an id outside its vocabulary)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a token string or an id, not a bool")
    if isinstance(value, (int, np.integer)):
        i = int(value)
        if not 0 <= i < 2**32 - 1:
            raise ValueError(f"{what} id {i} is out of range (0 <= id < 2**32 - 1)")
        special = {v: k for k, v in tok.special_tokens.items()}
        if i in special:
            return i, special[i]
        try:
            return i, tok.id_to_token(i).decode("utf-8", "backslashreplace")
        except (KeyError, ValueError):
            raise ValueError(
                f"{what} id {i} is not an id of this tokenizer (its ids: 0 to {tok.n_vocab - 1:,}); "
                "give a special token of the tokenizer, or a "
                "tokenizer that has that id (e.g. Tokenizer.from_tiktoken(..., special_tokens=...))"
            ) from None
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a token string or an id, got {type(value).__name__}")
    specials = tok.special_tokens
    if value in specials:
        return specials[value], value
    i = tok.token_to_id(value.encode("utf-8"))
    if i is not None:
        return i, value
    hint = ", ".join(sorted(specials)[:8]) or "none"
    raise ValueError(f"{what} {value!r} is neither a token of this tokenizer nor an id "
                     f"(its special tokens: {hint})")


def _choose_dtype(fmt: str, bound: int, dtype: str) -> np.dtype:
    """The token dtype of the files for ids below ``bound`` (module docstring)."""
    if dtype not in ("auto", "uint16", "uint32"):
        raise ValueError(f'dtype must be "auto", "uint16" or "uint32", got {dtype!r}')
    if dtype == "auto":
        dtype = "uint16" if bound <= 2**16 else "uint32"
    if dtype == "uint16" and bound > 2**16:
        raise ShardsError(f"the vocabulary has ids up to {bound - 1:,}, too many for uint16 "
                          f"tokens (at most 65,536 ids); use dtype uint32")
    dt = _U16 if dtype == "uint16" else _U32
    if fmt == "megatron" and dt == _U32:
        if bound > 2**31:
            raise ShardsError(f"ids up to {bound - 1:,} do not fit Megatron's int32 tokens "
                              "(Megatron-LM's index has no unsigned 32-bit dtype)")
        dt = _I32
    return dt


def _dtype_name(dt: np.dtype) -> str:
    return {_U16.str: "uint16", _U32.str: "uint32", _I32.str: "int32"}[dt.str]


def tokenizer_sha256(tok: Any) -> str:
    """A SHA-256 of everything that decides a tokenizer's output: the SHA-256 of the
    concatenation of ``b"cnfmce-tokenizer-sha256 v1\\n"``, the packed regular tokens (all token
    bytes in id order, then one little-endian uint32 length per token, then one uint32 id per
    token, each part preceded by its byte length as a uint64), and the JSON (keys sorted) of
    ``{"options": tok.options, "special_tokens": tok.special_tokens}``. Equal tokenizers give
    equal hashes, whatever file they were loaded from; it costs milliseconds even for large
    vocabularies (no serialisation)."""
    h = hashlib.sha256(b"cnfmce-tokenizer-sha256 v1\n")
    for part in tok._core.packed():
        h.update(struct.pack("<Q", len(part)))
        h.update(part)
    h.update(json.dumps({"options": tok.options, "special_tokens": tok.special_tokens},
                        sort_keys=True).encode("utf-8"))
    return h.hexdigest()


def _load(tokenizer: Any) -> Any:
    from .tokenizer import Tokenizer
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    if isinstance(tokenizer, (str, os.PathLike)):
        from .loading import load_tokenizer_file
        return load_tokenizer_file(os.fspath(tokenizer))
    raise TypeError(f"tokenizer must be a cnfmce.Tokenizer or a path, got {type(tokenizer).__name__}")


# --- the shard writers --------------------------------------------------------------------------

def _npy_header(dt: np.dtype, n: int) -> bytes:
    d = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (dt.str, n)
    pad = _NPY_HEADER_BYTES - 10 - len(d) - 1
    if pad < 0:  # pragma: no cover - a shape of more than 60 digits
        raise ShardsError("npy header too long")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", _NPY_HEADER_BYTES - 10) + \
        (d + " " * pad + "\n").encode("latin-1")


class _Shard:
    """One shard being written: hidden temporary files, renamed when complete."""

    def __init__(self, out: str, index: int, fmt: str, dt: np.dtype, first_document: int):
        self.out = out
        self.index = index
        self.fmt = fmt
        self.dt = dt
        self.name = f"shard_{index:06d}"
        self.first_document = first_document
        self.documents = 0
        self.tokens = 0
        self.text_bytes = 0
        self.lengths: List[np.ndarray] = []
        self.input_end: Optional[List[int]] = None
        self.final = self._final_names()
        self.tmp = {f: os.path.join(out, f".{f}.tmp") for f in self.final}
        main = self.final[0]
        self.fh = open(self.tmp[main], "wb")
        if fmt == "llmc":
            self.fh.write(b"\x00" * 1024)
        elif fmt == "npy":
            self.fh.write(_npy_header(dt, 0))

    def _final_names(self) -> List[str]:
        if self.fmt == "megatron":
            return [self.name + ".bin", self.name + ".idx"]
        if self.fmt == "llmc":
            return [self.name + ".bin"]
        return [self.name + ".tokens.npy", self.name + ".offsets.npy"]

    def add(self, tokens: np.ndarray, lengths: np.ndarray, text_bytes: int) -> None:
        if len(tokens):
            self.fh.write(memoryview(tokens))
        self.tokens += len(tokens)
        self.documents += len(lengths)
        self.text_bytes += text_bytes
        self.lengths.append(lengths)

    def finish(self) -> Dict[str, Any]:
        """Completes the files, flushes them to disk and renames them; the manifest entry."""
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, dtype=np.int64)
        fh = self.fh
        if self.fmt == "llmc":
            magic, version = _LLMC_HEADER[self.dt.str]
            header = np.zeros(256, dtype="<i4")
            header[:3] = (magic, version, self.tokens)
            fh.seek(0)
            fh.write(header.tobytes())
        elif self.fmt == "npy":
            fh.seek(0)
            fh.write(_npy_header(self.dt, self.tokens))
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        if self.fmt == "megatron":
            if len(lengths) and int(lengths.max()) > 2**31 - 1:
                raise ShardsError("a document has more than 2**31 - 1 tokens (Megatron's lengths are int32)")
            pointers = np.zeros(len(lengths), dtype="<i8")
            if len(lengths) > 1:
                np.cumsum(lengths[:-1] * self.dt.itemsize, out=pointers[1:])
            with open(self.tmp[self.final[1]], "wb") as ix:
                ix.write(_MEGATRON_HEADER)
                ix.write(struct.pack("<Q", 1))
                ix.write(struct.pack("<B", _MEGATRON_CODE[self.dt.str]))
                ix.write(struct.pack("<Q", len(lengths)))
                ix.write(struct.pack("<Q", len(lengths) + 1))
                ix.write(lengths.astype("<i4").tobytes())
                ix.write(pointers.tobytes())
                ix.write(np.arange(len(lengths) + 1, dtype="<i8").tobytes())
                ix.flush()
                os.fsync(ix.fileno())
        elif self.fmt == "npy":
            offsets = np.zeros(len(lengths) + 1, dtype="<i8")
            np.cumsum(lengths, out=offsets[1:])
            with open(self.tmp[self.final[1]], "wb") as ox:
                np.save(ox, offsets)
                ox.flush()
                os.fsync(ox.fileno())
        files = {}
        for f in self.final:
            os.replace(self.tmp[f], os.path.join(self.out, f))
            files[f] = os.path.getsize(os.path.join(self.out, f))
        return {"name": self.name, "files": files, "first_document": self.first_document,
                "documents": self.documents, "tokens": self.tokens, "text_bytes": self.text_bytes,
                "input_end": self.input_end}

    def abort(self) -> None:
        try:
            self.fh.close()
        except OSError:
            pass
        for p in self.tmp.values():
            try:
                os.unlink(p)
            except OSError:
                pass


# --- the pipeline -------------------------------------------------------------------------------

@dataclass
class _Batch:
    texts: List[str]
    # (first document of the batch, file index, documents of that file before it), one entry
    # per input file the batch's documents come from
    segments: List[Tuple[int, int, int]]
    # (ids, starts, UTF-8 sizes) when the batch was encoded elsewhere (backend="ray"): texts is
    # then empty
    encoded: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]] = None
    # the progress bar's input position (stored bytes of all files) once the batch is written:
    # the bar shows what is written, not what the reader has read ahead
    input_pos: Optional[int] = None
    # the documents as UTF-8 (a cnfmce._core.TextBlock) when the core read them: texts is
    # then empty
    block: Any = None

    def end_after(self, j: int) -> List[int]:
        """[file index, documents read from that file] once document ``j`` of the batch is done."""
        for first, fi, before in reversed(self.segments):
            if first <= j:
                return [fi, before + j - first + 1]
        raise AssertionError(j)  # pragma: no cover


@dataclass
class _Encoded:
    tokens: np.ndarray                # all documents' tokens, bos/eos included, in the shard dtype
    lengths: np.ndarray               # tokens per document (int64)
    text_bytes: np.ndarray            # UTF-8 bytes per document (int64)
    batch: _Batch


_DONE = object()


class _Slot:
    """One batch on its way: filled by an encoder, taken by the writer in reading order."""

    __slots__ = ("batch", "result", "ready")

    def __init__(self, batch: _Batch):
        self.batch = batch
        self.result: Optional[_Encoded] = None
        self.ready = threading.Event()


class _Stop(Exception):
    pass


@dataclass
class _State:
    """What the three threads share."""
    error: Optional[BaseException] = None
    stop: threading.Event = field(default_factory=threading.Event)

    def fail(self, e: BaseException) -> None:
        if self.error is None:
            self.error = e
        self.stop.set()


def _put(q: "queue.Queue[Any]", item: Any, state: _State) -> None:
    while True:
        if state.stop.is_set():
            raise _Stop()
        try:
            q.put(item, timeout=0.1)
            return
        except queue.Full:
            continue


def _get(q: "queue.Queue[Any]", state: _State) -> Any:
    while True:
        if state.stop.is_set():
            raise _Stop()
        try:
            return q.get(timeout=0.1)
        except queue.Empty:
            continue


class _Pipeline:
    def __init__(self, tok: Any, out: str, fmt: str, dt: np.dtype, eos: Optional[int],
                 bos: Optional[int], shard_size: int, num_threads: Optional[int],
                 manifest: Dict[str, Any], bar: Any):
        self.tok = tok
        self.core = tok._core  # the flat encoder behind encode_batch(return_numpy=True)
        self.out = out
        self.fmt = fmt
        self.dt = dt
        self.eos = eos
        self.bos = bos
        self.shard_bytes = shard_size
        self.max_tokens = _LLMC_MAX_TOKENS if fmt == "llmc" else None
        self.num_threads = num_threads
        self.manifest = manifest
        self.bar = bar
        self.state = _State()
        # Encoders: with num_threads None, two threads whose encode_batch calls share the core's
        # pool (while one batch ends on one core, the other batch fills the other); with
        # num_threads N, N threads of one core each. Batches reach the writer in reading order
        # through `pending` (its size bounds the batches in memory).
        self.workers = 2 if num_threads is None else num_threads
        self.per_call = None if num_threads is None else 1
        self.to_encode: "queue.Queue[Any]" = queue.Queue()
        self.pending: "queue.Queue[Any]" = queue.Queue(maxsize=self.workers + 1)
        self.shard: Optional[_Shard] = None
        self.lock = threading.Lock()
        self.tokens_done = manifest["tokens"]
        self.input_done: Optional[int] = None
        self.docs_done = manifest["documents"]
        self.text_done = manifest["text_bytes"]

    # encoder thread: the Rust core, GIL released during the encoding
    def _encode_loop(self) -> None:
        try:
            while True:
                slot = _get(self.to_encode, self.state)
                if slot is _DONE:
                    return
                b = slot.batch
                if b.encoded is not None:  # encoded elsewhere (backend="ray")
                    ids_a, starts_a, sizes_a = b.encoded
                    b.encoded = None
                elif b.block is not None:  # read by the core: UTF-8 documents, framed there
                    toks, lens, sizes = self.core.encode_block_framed(
                        b.block, self.dt.itemsize, self.bos, self.eos, self.per_call)
                    b.block = None
                    slot.result = _Encoded(np.frombuffer(toks, dtype=self.dt),
                                           np.frombuffer(lens, dtype="<i8"),
                                           np.frombuffer(sizes, dtype="<i8"), b)
                    slot.ready.set()
                    continue
                else:
                    try:
                        ids, starts, sizes = self.core.encode_batch_flat(b.texts, None, self.per_call)
                    except ValueError:
                        raise self._unicode_error(b) from None
                    b.texts = []
                    ids_a = np.frombuffer(ids, dtype=np.uint32)
                    starts_a = np.frombuffer(starts, dtype=np.int64)
                    sizes_a = np.frombuffer(sizes, dtype=np.int64)
                slot.result = self._frame(ids_a, starts_a, sizes_a, b)
                slot.ready.set()
        except _Stop:
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            self.state.fail(e)

    def _unicode_error(self, b: _Batch) -> Exception:
        """The error of a batch the encoder refused (a document with a lone surrogate), placed
        in its input: the file and its document number, or the document's number in the
        documents given (not its number in the batch)."""
        for j, t in enumerate(b.texts):
            try:
                t.encode("utf-8")
            except UnicodeEncodeError as e:
                fi, n = b.end_after(j)
                inputs = self.manifest.get("inputs")
                if not inputs:
                    return _surrogate_error(f"document {n - 1}", t, e)
                # its line (or row) in the file, as the readers name places: read again up to it
                from .corpus import describe_location, iter_file_numbered
                path, where = inputs[fi]["path"], f"{inputs[fi]['path']}: document {n}"
                for k, (_, line) in enumerate(iter_file_numbered(path, self.manifest["field"]), 1):
                    if k == n:
                        where = describe_location(path, line)
                        break
                return _surrogate_error(where, t, e)
        return ValueError("a batch the encoder refused")  # pragma: no cover

    def _frame(self, ids: np.ndarray, starts: np.ndarray, sizes: np.ndarray, b: _Batch) -> _Encoded:
        n = len(starts) - 1
        lengths = np.diff(starts)
        extra = (self.bos is not None) + (self.eos is not None)
        if not extra:
            return _Encoded(ids.astype(self.dt, copy=False), lengths, sizes, b)
        new_starts = starts + extra * np.arange(n + 1, dtype=np.int64)
        out = np.empty(len(ids) + extra * n, dtype=self.dt)
        mask = np.ones(len(out), dtype=bool)
        if self.bos is not None:
            mask[new_starts[:-1]] = False
            out[new_starts[:-1]] = self.bos
        if self.eos is not None:
            mask[new_starts[1:] - 1] = False
            out[new_starts[1:] - 1] = self.eos
        out[mask] = ids
        return _Encoded(out, lengths + extra, sizes, b)

    # writer thread: documents into shards, shards to disk, the manifest after each shard
    def _write_loop(self) -> None:
        try:
            while True:
                slot = _get(self.pending, self.state)
                if slot is _DONE:
                    if self.shard is not None and self.shard.documents:
                        self._close_shard()
                    return
                while not slot.ready.wait(0.1):
                    if self.state.stop.is_set():
                        raise _Stop()
                e, slot.result = slot.result, None
                self._write(e)
                if e.batch.input_pos is not None:
                    self.input_done = e.batch.input_pos
        except _Stop:
            pass
        except BaseException as e:  # noqa: BLE001
            self.state.fail(e)
        finally:
            if self.shard is not None:
                self.shard.abort()
                self.shard = None

    def _write(self, e: _Encoded) -> None:
        item = self.dt.itemsize
        nbytes = e.lengths * item
        cum = np.zeros(len(nbytes) + 1, dtype=np.int64)
        np.cumsum(nbytes, out=cum[1:])
        tcum = cum // item
        k = 0
        n = len(e.lengths)
        while k < n:
            if self.state.stop.is_set():
                raise _Stop()
            if self.shard is None:
                if len(self.manifest["shards"]) >= _MAX_SHARDS:
                    raise ShardsError(f"more than {_MAX_SHARDS:,} shards (their names would no "
                                      "longer sort in document order): use a larger shard size")
                self.shard = _Shard(self.out, len(self.manifest["shards"]), self.fmt, self.dt,
                                    self.manifest["documents"])
            sh = self.shard
            room = self.shard_bytes - sh.tokens * item
            # documents k..j-1 fit in the room left (at least one when the shard is empty)
            j = int(np.searchsorted(cum, cum[k] + room, side="right")) - 1
            if self.max_tokens is not None:
                jt = int(np.searchsorted(tcum, tcum[k] + self.max_tokens - sh.tokens, side="right")) - 1
                j = min(j, jt)
            if j <= k:
                if sh.documents:
                    self._close_shard()
                    continue
                j = k + 1  # one document larger than a whole shard: a shard of its own
                if self.max_tokens is not None and e.lengths[k] > self.max_tokens:
                    raise ShardsError(f"document {self.manifest['documents'] + k} has "
                                      f"{int(e.lengths[k]):,} tokens, more than an llm.c shard "
                                      "can hold (2**31 - 1)")
            sh.add(e.tokens[tcum[k]:tcum[j]], e.lengths[k:j], int(e.text_bytes[k:j].sum()))
            sh.input_end = e.batch.end_after(j - 1)
            self._count(int(tcum[j] - tcum[k]), j - k, int(e.text_bytes[k:j].sum()))
            k = j

    def _count(self, tokens: int, docs: int, text: int) -> None:
        with self.lock:
            self.tokens_done += tokens
            self.docs_done += docs
            self.text_done += text

    def _close_shard(self) -> None:
        sh = self.shard
        assert sh is not None
        entry = sh.finish()
        self.shard = None
        m = self.manifest
        m["shards"].append(entry)
        m["documents"] += entry["documents"]
        m["tokens"] += entry["tokens"]
        m["text_bytes"] += entry["text_bytes"]
        _write_manifest(self.out, m)

    def run(self, batches: Iterator[_Batch]) -> None:
        # Each thread sets its own event when it ends, and this thread waits on the events, not
        # on Thread.join: a join interrupted by Ctrl-C can mark a thread that is still running
        # as stopped (CPython's _wait_for_tstate_lock), and the wait after it would then let the
        # process exit while the writer is still renaming a shard.
        loops = [self._encode_loop] * self.workers + [self._write_loop]
        ended = [threading.Event() for _ in loops]

        def target(loop: Any, ev: threading.Event) -> Any:
            def go() -> None:
                try:
                    loop()
                finally:
                    ev.set()
            return go
        threads = [threading.Thread(target=target(loop, ev), daemon=True,
                                    name="cnfmce-write" if loop == self._write_loop else "cnfmce-encode")
                   for loop, ev in zip(loops, ended)]
        for t in threads:
            t.start()
        try:
            try:
                for b in batches:
                    slot = _Slot(b)
                    _put(self.pending, slot, self.state)  # blocks while enough are in flight
                    _put(self.to_encode, slot, self.state)
                    self._show()
                _put(self.pending, _DONE, self.state)
                for _ in range(self.workers):
                    _put(self.to_encode, _DONE, self.state)
                while not all(ev.is_set() for ev in ended):
                    ended[-1].wait(0.2)
                    self._show()
            except _Stop:
                pass
        except BaseException as e:  # a reading error, Ctrl-C: stop the other threads
            self.state.fail(e)
        finally:
            for ev in ended:
                while not ev.wait(0.2):
                    pass
        if self.state.error is not None:
            raise self.state.error

    def _show(self) -> None:
        if self.bar is not None:
            # the counts first: the bar's refresh (in advance) then shows them with the position
            self.bar.postfix_now(self.docs_done, self.tokens_done, self.text_done)
            if self.bar.bar.total is None:  # documents given in memory: count their text
                self.bar.advance(self.text_done - self.bar.pos)
            elif self.input_done is not None:  # files: the input behind the written documents
                self.bar.advance(self.input_done - self.bar.pos)


# --- inputs -------------------------------------------------------------------------------------

def _input_list(inputs: Any) -> Tuple[Optional[List[str]], Optional[Iterable[str]]]:
    """(paths, None) for file inputs (a path, or a list of paths as :func:`cnfmce.train` takes
    them), (None, documents) for an iterable of str."""
    if isinstance(inputs, (str, os.PathLike)):
        return [os.fspath(inputs)], None
    if isinstance(inputs, bytes):
        raise TypeError("inputs must be paths or an iterable of str, not bytes")
    if is_path_list(inputs):
        return [os.fspath(x) for x in inputs], None
    try:
        return None, iter(inputs)
    except TypeError:
        raise TypeError(f"inputs must be paths or an iterable of str, got {type(inputs).__name__}") from None


def _check_paths(paths: List[str]) -> List[Dict[str, Any]]:
    out = []
    for p in paths:
        if not os.path.exists(p):
            raise FileNotFoundError(f"no such file: {p}")
        if os.path.isdir(p):
            raise CorpusError(f"{p} is a directory; pass the files in it")
        if not p.lower().endswith(_INPUT_SUFFIXES):
            raise CorpusError(f"{p}: unsupported input type; use .txt, .jsonl, .jsonl.gz, "
                              ".jsonl.zst or .parquet")
        if not os.access(p, os.R_OK):
            raise PermissionError(f"cannot read {p}")
        out.append({"path": p, "bytes": os.path.getsize(p)})
    return out


def _core_mode(path: str, field_name: str) -> Optional[Tuple[bool, bool]]:
    """``(text, gzip)`` when the core reads ``path`` (JSON lines or a text file, plain or gzip,
    as :func:`cnfmce.corpus.open_binary` would open it), None for the Python readers (``.zst``,
    parquet, a field name that is not valid Unicode)."""
    from .corpus import corpus_kind
    kind = corpus_kind(path)
    if kind not in ("jsonl", "text") or path.endswith(".zst"):
        return None
    try:
        field_name.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return kind == "text", path.endswith(".gz")


class _Reader:
    """Documents into batches of about ``batch_chars`` characters (Python's ``len``), in
    reading order: from the core (:class:`cnfmce._core.CorpusReader`, UTF-8 blocks, no Python
    string per document) for the files it reads, else from the Python readers. A batch holds
    either a block or a list of str; it spans files, as the documents come."""

    def __init__(self, batch_chars: int, bar: Any, files: bool):
        self.batch_chars = batch_chars
        self.bar = bar
        self.files = files
        self.texts: List[str] = []
        self.block: Any = None
        self.chars = 0
        self.segments: List[Tuple[int, int, int]] = []
        self.k = 0  # documents of the current file in the batches already made

    def n(self) -> int:
        return len(self.block) if self.block is not None else len(self.texts)

    def begin_file(self, fi: int, k: int) -> None:
        self.k = k
        self.segments.append((self.n(), fi, k))

    def flush(self) -> _Batch:
        fi = self.segments[-1][1]
        self.k += self.n() - self.segments[-1][0]
        b = _Batch(self.texts, self.segments,
                   input_pos=self.bar.read if self.bar is not None and self.files else None,
                   block=self.block)
        self.texts, self.block, self.chars = [], None, 0
        self.segments = [(0, fi, self.k)]
        return b

    def python_docs(self, it: Iterable[str]) -> Iterator[_Batch]:
        for d in it:
            if self.block is not None:  # a batch holds one kind of documents
                yield self.flush()
            if not isinstance(d, str):
                raise TypeError(f"document {self.k + len(self.texts) - self.segments[-1][0]} is "
                                f"{type(d).__name__}, expected str")
            self.texts.append(d)
            self.chars += len(d)
            if self.chars >= self.batch_chars:
                yield self.flush()

    def core_file(self, fi: int, p: str, field_name: str, text: bool, gz: bool, skip: int,
                  hook: Any) -> Iterator[_Batch]:
        """The documents of ``p`` read by the core, from document ``skip`` on. A line only
        ``json.loads`` can judge goes to it (:func:`cnfmce.corpus.parse_jsonl_line`). A file
        the core cannot read on (corrupt or truncated data, an I/O error, or a bad line in a
        compressed file, where the Python reader may meet the corrupt data first) is read
        again by the Python reader, past the documents the core gave: it raises its own error
        (or reads what the core did not), so the errors are the Python readers'."""
        from ._core import CorpusReader, TextBlock
        from .corpus import parse_jsonl_line
        from .formats import inflate_limit
        limit = inflate_limit(os.path.getsize(p)) if gz else 2**64 - 1
        try:
            r = CorpusReader(p, field_name.encode("utf-8"), text=text, gzip=gz, limit=limit)
        except OSError:
            r = None
        failed: Optional[str] = None
        bad: Optional[CorpusError] = None

        def judge(line: bytes, lineno: int) -> Optional[str]:
            nonlocal bad
            try:
                doc = parse_jsonl_line(line, p, lineno, field_name)[field_name]
            except CorpusError as e:
                if not gz:
                    raise
                bad = e
                return None
            assert r is not None
            r.count_document()
            return doc
        while r is not None:  # documents already in finished shards: read past them
            if r.documents >= skip:
                break
            what, lineno, detail = r.read(TextBlock(), self.batch_chars, skip - r.documents)
            if what == "unsure":
                if judge(detail, lineno) is None:
                    break
            elif what == "too_long":
                raise _too_long(p, lineno, limit)
            elif what == "failed":
                failed = detail
                break
            elif what == "end":
                break
            if hook is not None:
                hook(r.raw_position)
        ok = r is not None and failed is None and bad is None
        if ok and r.documents < skip:
            raise _short_input(fi, r.documents, skip)
        while ok:
            if self.block is None:
                if self.texts:  # a batch holds one kind of documents
                    yield self.flush()
                self.block = TextBlock()
            what, lineno, detail = r.read(self.block, self.batch_chars)
            if hook is not None:
                hook(r.raw_position)
            if what == "full":
                yield self.flush()
            elif what == "end":
                if hook is not None:
                    hook(os.path.getsize(p))
                return
            elif what == "unsure":  # a line only json.loads can judge: its error, or its text
                doc = judge(detail, lineno)
                if doc is None:
                    break
                try:
                    self.block.push(doc.encode("utf-8"))
                except UnicodeEncodeError as e:  # a \ud800 escape: the file and line, as training
                    raise _surrogate_error(f"{p}:{lineno}", doc, e) from None
                if self.block.chars >= self.batch_chars:
                    yield self.flush()
            elif what == "too_long":
                raise _too_long(p, lineno, limit)
            else:
                failed = detail
                break
        # The Python reader reads the file again, past the documents the core gave.
        done = max(r.documents if r is not None else 0, skip)
        it = iter(iter_file(p, field_name, hook))
        k = 0
        for _ in range(done):
            if next(it, None) is None:
                break
            k += 1
        if k < done:
            if r is None or r.documents < skip:
                raise _short_input(fi, k, skip)
            if bad is not None:
                raise bad
            where = f" after line {r.lines}" if not text else ""
            raise CorpusError(f"{p}: cannot read{where}: truncated or corrupt data ({failed})")
        yield from self.python_docs(it)
        if bad is not None:  # the Python reader took what the core's line check refused
            raise bad

    def final(self) -> Iterator[_Batch]:
        if self.n():
            yield self.flush()


def _surrogate_error(where: str, doc: str, e: UnicodeEncodeError) -> CorpusError:
    return CorpusError(f"{where}: the text holds a lone surrogate (U+{ord(doc[e.start]):04X} at "
                       f"character {e.start}), which UTF-8 cannot hold")


def _short_input(fi: int, n: int, skip: int) -> ShardsError:
    return ShardsError(f"cannot resume: input {fi} now has {n} documents, fewer than the {skip} "
                       "the manifest says were done")


def _too_long(p: str, lineno: int, limit: int) -> CorpusError:
    what = f"{p}:{lineno}: a line" if lineno else f"{p}: the text"
    return CorpusError(f"{what} inflates to more than {limit:,} bytes (the limit of "
                       "cnfmce.formats.inflate_limit for a compressed file of this size): "
                       "refusing to read it")


def _read_batches(paths: Optional[List[str]], docs: Optional[Iterable[str]], field_name: str,
                  start: Tuple[int, int], batch_chars: int, bar: Any,
                  use_core: bool = True) -> Iterator[_Batch]:
    """The documents from ``start`` (file index, documents of that file already done) on, in
    batches of about ``batch_chars`` characters; as little work per document as possible in
    this thread (its time is taken from the encoders on a machine with few cores): the core
    reads the JSON-lines and text files (plain or gzip) with the GIL released."""
    f0, skip = start
    rd = _Reader(batch_chars, bar, paths is not None)
    if paths is None:
        assert docs is not None
        sources: Iterable[Tuple[int, Optional[str]]] = [(0, None)]
    else:
        sources = ((fi, p) for fi, p in enumerate(paths) if fi >= f0)
    for fi, p in sources:
        hook = bar.file_hook(fi) if bar is not None else None
        k = skip if fi == f0 else 0
        mode = _core_mode(p, field_name) if use_core and p is not None else None
        if p is not None and mode is not None:
            rd.begin_file(fi, k)
            yield from rd.core_file(fi, p, field_name, mode[0], mode[1], k, hook)
            continue
        it = iter(iter_file(p, field_name, hook)) if p is not None else iter(docs)  # type: ignore[arg-type]
        n = 0
        if k:
            for _ in it:  # documents already in finished shards: read past them
                n += 1
                if n == k:
                    break
            if n < k:
                raise _short_input(fi, n, k)
        rd.begin_file(fi, k)
        yield from rd.python_docs(it)
    yield from rd.final()


# --- manifest -----------------------------------------------------------------------------------

def _stale_temporary(name: str) -> bool:
    """A temporary file a killed run left in OUTDIR: a shard's hidden ``.shard_*.tmp`` or the
    manifest's ``manifest.json.tmp<pid>`` (:func:`cnfmce.formats.write_bytes_atomic`). Only called
    while this run holds OUTDIR's lock, so their writer is gone."""
    if name.startswith(".shard_") and name.endswith(".tmp"):
        return True
    rest = name[len(MANIFEST) + 4:]
    return name.startswith(MANIFEST + ".tmp") and rest.isdigit()


def _write_manifest(out: str, m: Dict[str, Any]) -> None:
    from .formats import write_bytes_atomic
    write_bytes_atomic(os.path.join(out, MANIFEST),
                       (json.dumps(m, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8"))


def read_manifest(outdir: PathLike) -> Dict[str, Any]:
    """The manifest of a shard directory written by :func:`tokenize_corpus`."""
    p = os.path.join(os.fspath(outdir), MANIFEST)
    try:
        with open(p, "rb") as fh:
            m = json.loads(fh.read())
    except FileNotFoundError:
        raise FileNotFoundError(f"no {MANIFEST} in {os.fspath(outdir)}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ShardsError(f"{p}: not a readable manifest ({e})") from None
    if not isinstance(m, dict) or m.get("format") != MANIFEST_FORMAT:
        raise ShardsError(f"{p}: not a cnfmce shard manifest")
    if m.get("version") != MANIFEST_VERSION:
        raise ShardsError(f"{p}: manifest version {m.get('version')!r} is not supported")
    return m


_SETTINGS = ("output_format", "dtype", "eos_id", "bos_id", "field", "shard_size")


def _nothing_done(out: str, m: Optional[Dict[str, Any]] = None) -> bool:
    """True when OUTDIR's manifest is that of a run that stopped (an error, Ctrl-C) before it
    completed its first shard: there is nothing to keep, so a new run starts over even when its
    settings differ (a typo in --field must not lock the directory)."""
    if m is None:
        try:
            m = read_manifest(out)
        except (OSError, ShardsError):
            return False
    return not m.get("shards") and not m.get("complete")


def _resume_from(out: str, fresh: Dict[str, Any]) -> Dict[str, Any]:
    """The manifest to continue, checked against the settings of this run; removes what an
    interrupted run left that the manifest does not list."""
    old = read_manifest(out)
    if _nothing_done(out, old):  # nothing to keep: this run starts over with its own settings
        for f in os.listdir(out):
            if f.startswith("shard_") or _stale_temporary(f):
                os.unlink(os.path.join(out, f))
        _write_manifest(out, fresh)
        return fresh
    diffs = [f"{k}: {old.get(k)!r} then, {fresh[k]!r} now" for k in _SETTINGS if old.get(k) != fresh[k]]
    if (old.get("tokenizer") or {}).get("sha256") != fresh["tokenizer"]["sha256"]:
        diffs.append("the tokenizer differs")

    def sig(inputs: Any) -> Any:
        return None if inputs is None else [(os.path.basename(i["path"]), i["bytes"]) for i in inputs]
    if sig(old.get("inputs")) != sig(fresh["inputs"]):
        diffs.append("the inputs differ (names or sizes)")
    if diffs:
        raise ShardsError(f"cannot resume into {out}: " + "; ".join(diffs))
    keep = []
    for s in old["shards"]:
        ok = all(os.path.isfile(os.path.join(out, f)) and os.path.getsize(os.path.join(out, f)) == n
                 for f, n in s["files"].items())
        if not ok:
            break
        keep.append(s)
    m = dict(old)
    m["shards"] = keep
    m["documents"] = sum(s["documents"] for s in keep)
    m["tokens"] = sum(s["tokens"] for s in keep)
    m["text_bytes"] = sum(s["text_bytes"] for s in keep)
    m["complete"] = bool(old.get("complete")) and len(keep) == len(old["shards"])
    listed = {f for s in keep for f in s["files"]}
    for f in os.listdir(out):
        if (f.startswith("shard_") and f not in listed) or _stale_temporary(f):
            os.unlink(os.path.join(out, f))
    return m


def _prepare_outdir(out: str) -> None:
    if os.path.exists(out) and not os.path.isdir(out):
        raise NotADirectoryError(f"the output {out} exists and is not a directory")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise OSError(f"cannot create the output directory {out}: {e.strerror or e}") from None
    probe = os.path.join(out, f".cnfmce-write-test-{os.getpid()}")
    try:
        with open(probe, "wb"):
            pass
        os.unlink(probe)
    except OSError as e:
        raise PermissionError(f"cannot write to the output directory {out}: {e.strerror or e}") from None


# --- progress -----------------------------------------------------------------------------------

class _Bar:
    """tqdm on stderr: input bytes (as stored) with an ETA when the inputs are files, and the
    documents, tokens and text MB/s so far."""

    def __init__(self, total: Optional[int], done: int = 0):
        from tqdm.auto import tqdm
        self.t0 = time.perf_counter()
        self.bar = tqdm(total=total, initial=done, desc="tokenize", unit="B", unit_scale=True,
                        unit_divisor=1000, file=sys.stderr, dynamic_ncols=True, leave=True,
                        smoothing=0.1)
        self.base = 0
        self.pos = done
        self.read = done  # input position of the reader (ahead of what is written)
        self.text0: Optional[int] = None
        self.sizes: List[int] = []

    def file_hook(self, fi: int) -> Any:
        base = sum(self.sizes[:fi])

        def hook(raw_pos: int) -> None:
            self.read = max(self.read, base + raw_pos)
        return hook

    def advance(self, n: int) -> None:
        if n > 0:
            self.pos += n
            self.bar.update(n)

    def postfix_now(self, docs: int, tokens: int, text: int) -> None:
        if self.text0 is None:
            self.text0 = text
        dt = max(1e-9, time.perf_counter() - self.t0)
        self.bar.set_postfix_str(f"{docs:,} docs, {tokens:,} tokens, "
                                 f"{(text - self.text0) / dt / 1e6:.1f} MB/s text", refresh=False)

    def fail(self) -> None:
        """The run failed: :meth:`close` then clears the bar, so that the error message that
        follows is not preceded by a stale progress line."""
        self.bar.leave = False

    def close(self) -> None:
        self.bar.close()


# --- the entry point ----------------------------------------------------------------------------

def tokenize_corpus(tokenizer: Any, inputs: Any, output: PathLike, *, format: str = "megatron",
                    eos: Any = "auto", bos: Any = None, field: str = "text",
                    shard_size: Union[int, str] = DEFAULT_SHARD_SIZE,
                    num_threads: Optional[int] = None, resume: bool = False, dtype: str = "auto",
                    progress: bool = False, batch_chars: int = BATCH_CHARS, backend: str = "local",
                    **backend_options: Any) -> Dict[str, Any]:
    """Tokenizes ``inputs`` into token shards in the directory ``output``; returns the manifest.

    ``tokenizer``: a :class:`cnfmce.Tokenizer` or a tokenizer file (as ``cnfmce encode -t``).
    ``inputs``: a path or a list of paths (``.txt``, ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``,
    ``.parquet``), or an iterable of str. ``format``: ``"megatron"``, ``"llmc"`` or ``"npy"``
    (layouts in the module docstring). ``eos``: ``"auto"`` (the tokenizer's end-of-document
    special token when it has one, see :func:`default_eos`), None (no separator), a token's text
    or an id; ``bos`` likewise (default None). ``field``: the JSON field / parquet column holding
    the text. ``shard_size``: bytes of tokens per shard (an int or ``"1GB"``). ``num_threads``:
    encoding threads (default all cores); the output does not depend on it. ``resume``: continue
    an interrupted run in ``output``. ``dtype``: ``"auto"``, ``"uint16"`` or ``"uint32"``.
    ``progress``: a progress bar and a summary line on stderr.

    ``backend="ray"`` encodes on a Ray cluster (:func:`cnfmce.ray.tokenize_corpus`; the
    ``backend_options`` ``ray_address``, ``block_size``, ``cpus_per_task`` go to it; inputs may
    also be URIs, directories or a ``ray.data.Dataset``): a Ray Data ``map_batches`` pipeline
    encodes blocks of the inputs on an actor pool, and its output, consumed in order, is written
    here by the same writer, so the files and the manifest are byte-identical to the local
    run's (``output`` is on this machine's file system; ``resume`` works the same).

    Errors (missing or unreadable input, corrupt compressed data, a missing field, an output
    that cannot be written, a vocabulary too large for the dtype, an OUTDIR that already holds
    shards without ``resume``) raise an exception; no partial shard is left behind, the complete
    ones stay listed in the manifest.
    """
    if backend not in ("local", "ray"):
        raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")
    if backend == "local" and backend_options:
        raise TypeError(f"tokenize_corpus() got unexpected keyword argument(s) "
                        f"{', '.join(sorted(backend_options))} (Ray options need backend='ray')")
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {format!r}")
    if not isinstance(field, str) or not field:
        raise ValueError("field must be a non-empty string")
    try:
        field.encode("utf-8")
    except UnicodeEncodeError:  # e.g. a --field argument in bytes the locale cannot decode
        raise ValueError(f"field {field!r} is not valid text: the name of a JSON field or parquet "
                         "column is UTF-8 (check the --field argument's encoding)") from None
    num_threads = useful_threads(num_threads)  # the cap of encode_batch and train, one rule
    if isinstance(batch_chars, bool) or not isinstance(batch_chars, int) or batch_chars < 1:
        raise ValueError("batch_chars must be a positive int")
    size = parse_size(shard_size)
    tok = _load(tokenizer)
    if isinstance(eos, str) and eos == "auto":
        eos_t: Optional[Tuple[int, Optional[str]]] = default_eos(tok)
    else:
        eos_t = _resolve_token(tok, eos, "eos")
    bos_t = _resolve_token(tok, bos, "bos")
    bound = max([tok.n_vocab] + [t[0] + 1 for t in (eos_t, bos_t) if t is not None])
    dt = _choose_dtype(format, bound, dtype)
    remote = None
    if backend == "ray":
        from . import ray as _ray_backend
        remote = _ray_backend._Encoding(tok, inputs, field, num_threads, **backend_options)
        paths, docs, input_info = remote.paths, None, remote.input_info
    else:
        paths, docs = _input_list(inputs)
        input_info = _check_paths(paths) if paths is not None else None
    out = os.fspath(output)
    _prepare_outdir(out)
    lock = _lock_outdir(out)
    try:
        # SIGTERM unwinds like Ctrl-C (the shard being written is removed), then ends the process;
        # a Ctrl-C that lands in a finalizer (Ray's handles) is not lost
        with _sigterm_cleans_up(), interrupts_kept():
            return _tokenize_locked(tok, out, format, dt, size, field, eos_t, bos_t, paths, docs,
                                    input_info, remote, num_threads, resume, progress, batch_chars)
    finally:
        os.close(lock)


def _lock_outdir(out: str) -> int:
    """An exclusive lock on OUTDIR (flock on the directory itself, no file added) for the run:
    a second run into the same directory, in this process or another, fails at once instead of
    deleting the first one's temporary files. The kernel releases it when the process ends,
    however it ends."""
    fd = os.open(out, os.O_RDONLY)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ShardsError(f"another run is writing to {out} (cnfmce tokenize / tokenize_corpus "
                          "into the same directory); wait for it to end or use another "
                          "directory") from None
    except OSError:  # a file system without flock (some network ones): no lock
        pass
    return fd


def _tokenize_locked(tok: Any, out: str, format: str, dt: np.dtype, size: int, field: str,
                     eos_t: Optional[Tuple[int, Optional[str]]],
                     bos_t: Optional[Tuple[int, Optional[str]]], paths: Optional[List[str]],
                     docs: Optional[Iterable[str]], input_info: Optional[List[Dict[str, Any]]],
                     remote: Any, num_threads: Optional[int], resume: bool, progress: bool,
                     batch_chars: int) -> Dict[str, Any]:
    """:func:`tokenize_corpus` once its arguments are checked and OUTDIR is locked."""
    fresh: Dict[str, Any] = {
        "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "output_format": format,
        "dtype": _dtype_name(dt),
        "tokenizer": {"sha256": tokenizer_sha256(tok), "vocab_size": tok.vocab_size,
                      "n_vocab": tok.n_vocab, **tok.options},
        "eos_id": eos_t[0] if eos_t else None, "eos_token": eos_t[1] if eos_t else None,
        "bos_id": bos_t[0] if bos_t else None, "bos_token": bos_t[1] if bos_t else None,
        "field": field, "shard_size": size, "inputs": input_info, "shards": [],
        "documents": 0, "tokens": 0, "text_bytes": 0, "complete": False,
    }
    if resume and os.path.exists(os.path.join(out, MANIFEST)):
        manifest = _resume_from(out, fresh)
    else:
        existing = sorted(f for f in os.listdir(out) if f == MANIFEST or f.startswith("shard_"))
        if existing == [MANIFEST] and _nothing_done(out):
            existing = []  # a run that stopped before its first shard: start over
        if existing:
            raise ShardsError(f"{out} already holds shards ({existing[0]}, ...); pass --resume "
                              "(resume=True) to continue that run, or use an empty directory")
        for f in os.listdir(out):
            if _stale_temporary(f):
                os.unlink(os.path.join(out, f))
        manifest = fresh
        _write_manifest(out, manifest)
    if manifest["complete"]:
        if progress:
            print(f"{out}: already complete ({len(manifest['shards'])} shards, "
                  f"{manifest['tokens']:,} tokens); nothing to do", file=sys.stderr)
        return manifest

    start = (0, 0)
    if manifest["shards"]:
        start = tuple(manifest["shards"][-1]["input_end"])  # type: ignore[assignment]
    bar = None
    if progress:
        total = sum(i["bytes"] for i in input_info) if input_info is not None else None
        done = sum(i["bytes"] for i in input_info[:start[0]]) if input_info is not None else 0
        bar = _Bar(total, done)
        if input_info is not None:
            bar.sizes = [i["bytes"] for i in input_info]
    t0 = time.perf_counter()
    pipe = _Pipeline(tok, out, format, dt, manifest["eos_id"], manifest["bos_id"], size,
                     num_threads, manifest, bar)
    text_before = manifest["text_bytes"]
    failed = True
    try:
        if remote is not None:
            pipe.run(remote.batches(start, bar))
        else:
            pipe.run(_read_batches(paths, docs, field, start, batch_chars, bar))
        if bar is not None:  # everything is written: the whole input
            bar.advance(bar.read - bar.pos)
        failed = False
    finally:
        if bar is not None:
            if failed:
                bar.fail()
            bar.close()
    manifest["complete"] = True
    _write_manifest(out, manifest)
    if progress:
        dt_s = time.perf_counter() - t0
        text = manifest["text_bytes"] - text_before
        print(f"tokenized {manifest['documents']:,} documents ({manifest['text_bytes'] / 1e6:,.1f} MB "
              f"of text) into {manifest['tokens']:,} tokens, {len(manifest['shards'])} "
              f"{format} shard{'s' if len(manifest['shards']) != 1 else ''} ({_dtype_name(dt)}) in "
              f"{out}; {dt_s:.1f} s, {text / 1e6 / max(dt_s, 1e-9):.1f} MB/s", file=sys.stderr)
    return manifest
