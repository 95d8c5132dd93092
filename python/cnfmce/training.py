"""CNF training: counting (Algorithm 1) and filtering (paper section 3.1; SPEC section 4).

The heavy work runs in the Rust core with the GIL released; this module streams the documents in
batches, shows progress and keeps Ctrl-C responsive (an interrupt stops between batches and
removes temporary files).

>>> tok = cnfmce.train(["some text", "more text"], vocab_size=300)      # doctest: +SKIP
>>> counts = cnfmce.count(paths, raw_vocab_size=1_000_000)                 # doctest: +SKIP
>>> tok = cnfmce.train_from_counts(counts, paths, vocab_size=32_000)     # doctest: +SKIP
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import json
import math
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from typing import (Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

from . import _core
from .corpus import Documents, Inputs, classify_inputs, describe_location, iter_documents_located
from .errors import CorpusError, TokenizerFileError
from .formats import read_bytes, write_bytes_atomic
from .tokenizer import DEFAULT_BOUNDARY_PENALTY, Tokenizer, _check_options, useful_threads

__all__ = ["DEFAULT_ROUNDS", "Counts", "count", "train", "train_from_counts", "save_counts",
           "load_counts", "merge_counts", "default_memory_limit"]

DEFAULT_ROUNDS: Tuple[Tuple[int, int, int], ...] = _core.DEFAULT_ROUNDS  # the paper's, defined in the core
BATCH_BYTES = 2 << 20  # per call into the core; Ctrl-C is seen between calls
COUNTS_MAGIC = "# cnfmce counts v1"


# --- helpers ------------------------------------------------------------------------------------

def default_memory_limit() -> int:
    """A sixth of the machine's physical memory, at least 1 GB (bytes): training then leaves
    most of the machine to the rest of a data pipeline; raise it to spill less on big corpora."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        total = 16 << 30
    return max(1 << 30, int(total // 6))


def _rss_bytes() -> int:
    """Current resident set size (bytes), from /proc when available."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return _peak_rss_bytes()


def _peak_rss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def _check_positive(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


def _check_threads(num_threads: Optional[int]) -> Optional[int]:
    """None (all cores) or a positive int, lowered to :func:`cnfmce.tokenizer.max_threads`."""
    return useful_threads(num_threads)


# --- temporary files and signals ------------------------------------------------------------------

WORK_DIR_PREFIX = "cnfmce-"
_LOCK_NAME = ".cnfmce-lock"
_WORK_DIR_RE = re.compile(r"cnfmce-(\d+)-[A-Za-z0-9_]+\Z")


class _Terminated(BaseException):
    """Raised by the SIGTERM handler installed while training runs (see :func:`_sigterm_cleans_up`)."""


@contextlib.contextmanager
def _sigterm_cleans_up() -> Iterator[None]:
    """While the block runs, SIGTERM (``kill``, ``timeout``, Docker, Slurm, Kubernetes) unwinds
    like Ctrl-C, so temporary files are removed, and then kills the process with SIGTERM as the
    sender expects. Only in the main thread and only when the program has no SIGTERM handler of
    its own; a signal that arrives while the core works is handled when that call returns (a
    batch, or a merge of spilled runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        old = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        old = None
    if old is not signal.SIG_DFL:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Terminated()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGTERM)  # dies here (default action)
        raise SystemExit(128 + signal.SIGTERM)  # pragma: no cover - SIGTERM blocked by the caller
    finally:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def remove_stale_work_dirs(base: Optional[str] = None) -> List[str]:
    """Removes the temporary directories (``cnfmce-<pid>-*`` under ``base``, default the system's
    temporary directory) left by training runs that were killed (SIGKILL, power loss, ...): a
    directory is removed only when the lock its run held is free, i.e. no living process owns
    it. Returns the removed paths. Called at the start of every training run."""
    base = base or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        if not _WORK_DIR_RE.match(name):
            continue
        d = os.path.join(base, name)
        lock = os.path.join(d, _LOCK_NAME)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue  # not ours, or being created / removed right now
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a running process holds it
        try:
            shutil.rmtree(d, ignore_errors=True)
            if not os.path.exists(d):
                removed.append(d)
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def _work_dir(tmp_dir: Optional[str]) -> Iterator[str]:
    """A private temporary directory ``cnfmce-<pid>-XXXX`` (under ``tmp_dir`` or the system's
    temporary directory) for spooled inputs and spilled counting runs, locked for the run's
    lifetime and removed at the end, on an exception, Ctrl-C or SIGTERM; stale ones of killed
    runs are removed first (:func:`remove_stale_work_dirs`)."""
    with _sigterm_cleans_up():
        remove_stale_work_dirs(tmp_dir)
        d = tempfile.mkdtemp(prefix=f"{WORK_DIR_PREFIX}{os.getpid()}-", dir=tmp_dir)
        fd = -1
        try:
            # locked before it gets its name, so that no other run can find it unlocked
            tmp_lock = os.path.join(d, _LOCK_NAME + ".new")
            fd = os.open(tmp_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(tmp_lock, os.path.join(d, _LOCK_NAME))
            yield d
        finally:
            shutil.rmtree(d, ignore_errors=True)
            if fd >= 0:
                os.close(fd)


class _Corpus:
    """A re-readable view of the training inputs: a list of documents, a list of paths, or a
    one-shot iterable spooled to a temporary JSON-lines file on its first pass. Which one follows
    the paths-or-documents rule of :mod:`cnfmce.corpus`; paths are checked here, before any work."""

    def __init__(self, inputs: Inputs, tmp_dir: str):
        self.total_bytes: Optional[int] = None
        self.documents: Optional[int] = None
        self._spool_path: Optional[str] = None
        kind, items = classify_inputs(inputs)
        self._source: Any = Documents(items) if kind != "paths" else items
        if kind == "iterable":
            self._spool_path = os.path.join(tmp_dir, "spool.jsonl")

    def batches(self, batch_bytes: int = BATCH_BYTES) -> Iterator[Tuple[List[str], int]]:
        """Yields (documents, their UTF-8 size) in batches of about ``batch_bytes``; a document
        that UTF-8 cannot hold (a lone surrogate) raises :class:`CorpusError` naming its file and
        line, or its index."""
        first = self.total_bytes is None
        total = 0
        ndocs = 0
        spool = None
        if self._spool_path is not None and not first:
            source: Any = iter_documents_located([self._spool_path])
        else:
            source = iter_documents_located(self._source)
            if self._spool_path is not None:
                spool = open(self._spool_path, "w", encoding="utf-8")
        batch: List[str] = []
        size = 0
        try:
            for doc, path, n in source:
                if doc.isascii():
                    nb = len(doc)
                else:
                    try:
                        nb = len(doc.encode("utf-8"))
                    except UnicodeEncodeError as e:
                        raise CorpusError(
                            f"{describe_location(path, n)}: the text holds a lone surrogate "
                            f"(U+{ord(doc[e.start]):04X} at character {e.start}), which UTF-8 "
                            "cannot hold") from None
                if spool is not None:
                    spool.write(json.dumps({"text": doc}, ensure_ascii=False))
                    spool.write("\n")
                batch.append(doc)
                size += nb
                total += nb
                ndocs += 1
                if size >= batch_bytes:
                    yield batch, size
                    batch, size = [], 0
            if batch:
                yield batch, size
        finally:
            if spool is not None:
                spool.close()
        if first:
            self.total_bytes = total
            self.documents = ndocs


class _Progress:
    """A tqdm bar on stderr (or nothing when progress is off)."""

    def __init__(self, enabled: bool, desc: str, total: Optional[int]):
        self.bar = None
        self.t0 = time.perf_counter()
        self.done = 0
        if enabled:
            from tqdm.auto import tqdm
            self.bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1000,
                            file=sys.stderr, dynamic_ncols=True, leave=True)

    def update(self, n: int, **postfix: Any) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
            if postfix:
                self.bar.set_postfix(postfix, refresh=False)

    def close(self, summary: Optional[str] = None) -> None:
        if self.bar is not None:
            self.bar.close()
            if summary:
                print(summary, file=sys.stderr, flush=True)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0


# --- counts ---------------------------------------------------------------------------------------

class Counts(dict):
    """The raw vocabulary: a ``dict`` mapping candidate bytes to their count, best first, with an
    ``info`` attribute describing how it was made (rounds, documents, bytes, timings)."""

    info: Dict[str, Any]

    def __init__(self, *args: Any, info: Optional[Dict[str, Any]] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.info = dict(info or {})


def count(inputs: Inputs, raw_vocab_size: int = _core.DEFAULT_COUNT_RAW_VOCAB_SIZE,
          rounds: Sequence[Tuple[int, int, int]] = DEFAULT_ROUNDS, num_threads: Optional[int] = None,
          progress: bool = True, memory_limit: Optional[int] = None,
          tmp_dir: Optional[str] = None) -> Counts:
    """The counting phase of CNF (paper Algorithm 1): counts valid candidates in length rounds
    and returns the ``raw_vocab_size`` most frequent (ties by bytes) as :class:`Counts`.

    ``inputs``: an iterable of ``str`` (one document each) or a list of paths (``.txt``,
    ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``, ``.parquet``), told apart by the rule of
    :mod:`cnfmce.corpus`: ``pathlib.Path`` items are paths; a ``str`` is a path when it names an
    existing file, or has no whitespace and ends in a corpus extension (missing: an error); a list
    mixing paths and documents raises ``ValueError``; iterators and ``cnfmce.Documents(...)`` are
    always documents. ``memory_limit`` (bytes, default
    a sixth of the machine's memory, at least 1 GB) bounds the counting tables: beyond it they are spilled to sorted
    runs in ``tmp_dir`` and merged, so the counts stay exact.
    """
    with _work_dir(tmp_dir) as tmp:
        limit, budget = _memory(memory_limit)
        counter = _core.Counter(rounds, raw_vocab_size, budget, os.path.join(tmp, ""),
                                _check_threads(num_threads))
        _warn_rounds(counter.rounds)
        corpus = _Corpus(inputs, tmp)
        info = _info(counter.rounds, raw_vocab_size, limit)
        t_start = time.perf_counter()
        n = len(counter.rounds)
        for k, r in enumerate(counter.rounds):
            counter.begin_round()
            _counting_pass(corpus, k, n, r, counter.add, counter.end_round,
                           lambda: counter.table_bytes, progress, info)
        _counting_done(corpus, info, t_start, limit)
        toks, counts = counter.result()
        return Counts(zip(toks, counts), info=info)


def _memory(memory_limit: Optional[int]) -> Tuple[int, int]:
    """(the memory limit, the counting tables' budget): the tables get 60% of what the limit
    leaves; the rest covers batches, the kept candidates, the trie and hash-table growth."""
    limit = default_memory_limit() if memory_limit is None else _check_positive("memory_limit", memory_limit)
    return limit, max(16 << 20, int(0.6 * (limit - _rss_bytes())))


def _warn_rounds(rounds: Sequence[Tuple[int, int, int]]) -> None:
    note = _core.rounds_warning(rounds)
    if note:
        warnings.warn(note, RuntimeWarning, stacklevel=3)


def _info(rounds: Sequence[Tuple[int, int, int]], raw_vocab_size: Optional[int], limit: int) -> Dict[str, Any]:
    return {"rounds": [list(r) for r in rounds], "raw_vocab_size": raw_vocab_size,
            "memory_limit": limit, "round_stats": []}


def _feed(corpus: "_Corpus", desc: str, progress: bool, add: Any,
          status: Optional[Any] = None) -> "_Progress":
    """Streams the corpus into ``add(batch)`` with a progress bar (``status()``: more fields to
    show); returns the bar, still open. Ctrl-C is seen between batches."""
    bar = _Progress(progress, desc, corpus.total_bytes)
    try:
        ndocs = 0
        for batch, size in corpus.batches():
            add(batch)
            ndocs += len(batch)
            bar.update(size, docs=f"{ndocs:,}", **(status() if status else {}),
                       rss=_fmt_bytes(_rss_bytes()))
    except BaseException:
        bar.close()
        raise
    return bar


def _counting_pass(corpus: "_Corpus", k: int, n: int, r: Tuple[int, int, int], add: Any, end: Any,
                   table_bytes: Any, progress: bool, info: Dict[str, Any]) -> None:
    """Counting round ``k`` of ``n`` (``r``: its lengths and threshold): feeds the corpus to
    ``add``, ends it with ``end()``, records and prints its statistics."""
    lo, hi, thr = r
    bar = _feed(corpus, f"count {k + 1}/{n} [{lo}-{hi}] t={thr}", progress, add,
                lambda: {"table": _fmt_bytes(table_bytes())})
    try:
        st = dict(end())
    except BaseException:
        bar.close()
        raise
    st.update(round=k + 1, min_len=lo, max_len=hi, threshold=thr, seconds=round(bar.seconds, 3),
              bytes=bar.done, peak_rss=_peak_rss_bytes())
    info["round_stats"].append(st)
    mbps = bar.done / max(bar.seconds, 1e-9) / 1e6
    bar.close(f"  round {k + 1} [{lo}-{hi}] t={thr}: {_fmt_bytes(bar.done)} in {bar.seconds:.1f}s "
              f"({mbps:.2f} MB/s), {st['distinct']:,} distinct, {st['retained']:,} retained, "
              f"table peak {_fmt_bytes(st['peak_table_bytes'])}, {st['spills']} spills, "
              f"peak RSS {_fmt_bytes(st['peak_rss'])}")


def _counting_done(corpus: "_Corpus", info: Dict[str, Any], t_start: float, limit: int,
                   stacklevel: int = 3) -> None:
    """Records the counting phase's totals; warns when it took more memory than allowed."""
    info.update(documents=corpus.documents, bytes=corpus.total_bytes,
                seconds=round(time.perf_counter() - t_start, 3), peak_rss=_peak_rss_bytes())
    if info["peak_rss"] > limit:
        warnings.warn(f"peak memory {_fmt_bytes(info['peak_rss'])} exceeded memory_limit "
                      f"{_fmt_bytes(limit)}", RuntimeWarning, stacklevel=stacklevel)


# --- counts files -----------------------------------------------------------------------------

def save_counts(counts: Mapping[bytes, int], path: "os.PathLike[str] | str") -> None:
    """Writes counts as text (gzip when ``path`` ends in ``.gz``), atomically.

    Format: a first line ``# cnfmce counts v1``, a second line ``# `` followed by a JSON object
    (how the counts were made; may be ``{}``), then one ``<base64 bytes>\\t<count>`` line per
    candidate, best first (count descending, ties by bytes).
    """
    info = getattr(counts, "info", {}) or {}
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    lines = [COUNTS_MAGIC, "# " + json.dumps(info, ensure_ascii=True, default=str)]
    for tok, c in items:
        if not isinstance(tok, bytes) or not isinstance(c, int) or c < 0:
            raise TypeError("counts must map bytes to non-negative ints")
        lines.append(f"{base64.b64encode(tok).decode('ascii')}\t{c}")
    write_bytes_atomic(path, ("\n".join(lines) + "\n").encode("ascii"))


def load_counts(path: "os.PathLike[str] | str") -> Counts:
    """Reads a counts file written by :func:`save_counts` / ``cnfmce count``."""
    p = os.fspath(path)
    data = read_bytes(p)
    lines = data.split(b"\n")
    if not lines or lines[0].strip().decode("ascii", "replace") != COUNTS_MAGIC:
        raise TokenizerFileError(f"{p}: not a cnfmce counts file (first line must be {COUNTS_MAGIC!r})")
    info: Dict[str, Any] = {}
    out = Counts()
    for lineno, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        if line.startswith(b"#"):
            if lineno == 2:
                try:
                    info = json.loads(line[1:].strip() or b"{}")
                except RecursionError:
                    raise TokenizerFileError(f"{p}:2: JSON header nested too deeply") from None
                except ValueError:
                    raise TokenizerFileError(f"{p}:2: malformed JSON header") from None
            continue
        parts = line.split(b"\t")
        if len(parts) != 2:
            raise TokenizerFileError(f"{p}:{lineno}: expected '<base64>\\t<count>'")
        try:
            tok = base64.b64decode(parts[0], validate=True)
            c = int(parts[1])
        except (binascii.Error, ValueError):
            raise TokenizerFileError(f"{p}:{lineno}: bad base64 or count") from None
        if not tok or c < 0:
            raise TokenizerFileError(f"{p}:{lineno}: empty candidate or negative count")
        c += out.get(tok, 0)
        if c >= 2**64:
            raise TokenizerFileError(f"{p}:{lineno}: count {c} does not fit in 64 bits")
        out[tok] = c
    out.info = info if isinstance(info, dict) else {}
    return out


def merge_counts(*counts: Union[Mapping[bytes, int], "os.PathLike[str]", str]) -> Counts:
    """Sums several counts (mappings or counts files), e.g. made on different machines.

    Counts made on shards of a corpus are exact sums only where every shard kept the candidate;
    candidates cut by a shard's threshold or ``raw_vocab_size`` are undercounted. Count shards with
    generous ``raw_vocab_size`` to keep the merge close to counting the whole corpus at once.
    """
    out = Counts()
    for c in counts:
        m = load_counts(c) if isinstance(c, (str, os.PathLike)) else c
        for k, v in m.items():
            out[k] = out.get(k, 0) + v
    out.info = {"merged": len(counts)}
    return out


def _count_lists(counts: Mapping[bytes, int]) -> Tuple[List[bytes], List[int]]:
    """The counts as two parallel lists, checked."""
    toks = list(counts.keys())
    vals = list(counts.values())
    for k, v in zip(toks, vals):
        if not isinstance(k, bytes) or not k:
            raise TypeError("counts must map non-empty bytes to ints")
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**64:
            raise ValueError(f"count of {k!r} must be a non-negative int, got {v!r}")
    return toks, vals


# --- filtering and training -----------------------------------------------------------------------

def train_from_counts(counts: Union[Mapping[bytes, int], "os.PathLike[str]", str], inputs: Inputs,
                      vocab_size: int = _core.DEFAULT_VOCAB_SIZE, special_tokens: Sequence[str] = (),
                      num_threads: Optional[int] = None, progress: bool = True,
                      raw_vocab_size: Optional[int] = None, algorithm: str = "mce",
                      boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY, token_preference: bool = True,
                      tmp_dir: Optional[str] = None) -> Tokenizer:
    """The filtering phase of CNF: encodes ``inputs`` once with MCE over the raw vocabulary
    (``counts``: a mapping bytes -> count, or the path of a counts file; the best
    ``raw_vocab_size`` of them, all when None) and keeps the ``vocab_size - len(special_tokens)``
    most used tokens, all 256 single bytes included, ids ordered by usage (ties by bytes);
    special tokens get the last ids."""
    opts = _check_options(algorithm, boundary_penalty, token_preference)
    with _work_dir(tmp_dir) as tmp:
        trainer = _core.Trainer(vocab_size, raw_vocab_size, None, special_tokens, opts,
                                tmp_dir=os.path.join(tmp, ""), num_threads=_check_threads(num_threads))
        try:
            if isinstance(counts, (str, os.PathLike)):
                counts = load_counts(counts)
            elif not isinstance(counts, Mapping):
                raise TypeError("counts must be a mapping bytes -> int or the path of a counts file")
            trainer.use_counts(*_count_lists(counts))
            corpus = _Corpus(inputs, tmp)
            return _run(trainer, corpus, progress, {}, vocab_size)
        finally:
            trainer.close()


def _run(trainer: "_core.Trainer", corpus: "_Corpus", progress: bool, meta: Dict[str, Any],
         vocab_size: int, counted: Optional[Any] = None) -> Tokenizer:
    """Runs the trainer's passes over the corpus (counting rounds, recorded in
    ``meta["counting"]``, then ``counted()``, then filtering) and returns the tokenizer with the
    run's metadata."""
    n = len(trainer.rounds)
    filtering: Dict[str, Any] = {}
    while True:
        step = trainer.next_pass()
        if step is None:
            break
        kind, k, r = trainer.begin_pass()
        if kind == "count":
            _counting_pass(corpus, k, n, r, trainer.add, trainer.end_pass,
                           lambda: trainer.table_bytes, progress, meta["counting"])
            continue
        if counted is not None:
            counted()
        bar = _feed(corpus, "filter", progress, trainer.add)
        try:
            st = trainer.end_pass()
        except BaseException:
            bar.close()
            raise
        core, report = trainer.finish()
        ntok, nbytes = report["tokens"], report["bytes"]
        bar.close(f"  filter: {_fmt_bytes(nbytes)} in {bar.seconds:.1f}s "
                  f"({nbytes / max(bar.seconds, 1e-9) / 1e6:.2f} MB/s), raw vocabulary "
                  f"{st['raw_vocab_size']:,}, {report['used_tokens']:,} of {core.num_regular:,} kept "
                  f"tokens used, {nbytes / max(ntok, 1):.3f} bytes/token on the training text with "
                  f"the raw vocabulary")
        filtering = {"seconds": round(bar.seconds, 3), "bytes": nbytes, "tokens": ntok,
                     "used_tokens": report["used_tokens"]}
        if report["warning"]:
            warnings.warn(report["warning"], RuntimeWarning, stacklevel=3)
        tok = Tokenizer(core)
        tok.metadata.update(meta)
        tok.metadata.update(trainer="cnfmce", vocab_size=vocab_size,
                            raw_vocabulary=st["raw_vocab_size"], filtering=filtering)
        return tok
    raise RuntimeError("the trainer ended without a filtering pass")  # pragma: no cover


def train(inputs: Inputs, vocab_size: int = _core.DEFAULT_VOCAB_SIZE, raw_vocab_size: Optional[int] = None,
          rounds: Sequence[Tuple[int, int, int]] = DEFAULT_ROUNDS, special_tokens: Sequence[str] = (),
          num_threads: Optional[int] = None, progress: bool = True,
          memory_limit: Optional[int] = None, algorithm: str = "mce",
          boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY, token_preference: bool = True,
          tmp_dir: Optional[str] = None) -> Tokenizer:
    """Trains a CNF vocabulary (SPEC section 4) and returns its :class:`Tokenizer`.

    ``inputs``: documents or paths, as for :func:`count` (the rule of :mod:`cnfmce.corpus`; wrap
    strings that look like file names in ``cnfmce.Documents``). Equal to
    ``train_from_counts(count(inputs, ...), inputs, ...)`` with the same ``raw_vocab_size``. The
    result has ``vocab_size`` ids (byte tokens and special tokens
    included), ordered by usage in the filtering pass, special tokens last. ``raw_vocab_size``
    None means ``cnfmce._core.default_raw_vocab_size(vocab_size)`` (a multiple of ``vocab_size``).
    The same inputs give the same vocabulary whatever ``num_threads`` and whatever the order of
    the documents.
    """
    opts = _check_options(algorithm, boundary_penalty, token_preference)
    with _work_dir(tmp_dir) as tmp:
        limit, budget = _memory(memory_limit)
        trainer = _core.Trainer(vocab_size, raw_vocab_size, rounds, special_tokens, opts, budget,
                                os.path.join(tmp, ""), _check_threads(num_threads))
        try:
            _warn_rounds(trainer.rounds)
            corpus = _Corpus(inputs, tmp)
            m = raw_vocab_size if raw_vocab_size is not None else _core.default_raw_vocab_size(vocab_size)
            meta = {"counting": _info(trainer.rounds, m, limit)}
            t_start = time.perf_counter()
            return _run(trainer, corpus, progress, meta, vocab_size,
                        lambda: _counting_done(corpus, meta["counting"], t_start, limit, stacklevel=5))
        finally:
            trainer.close()
