"""The training corpus as the passes of a training run read it: documents or files
(:mod:`cnfmce.corpus`), read again for every pass (a one-shot iterable is spooled to the run's
work directory on the first pass), in batches of about ``BATCH_BYTES``, with a progress bar; and
:func:`feed`, the one loop that streams a pass into the core (Ctrl-C is seen between batches)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any, Iterator, List, Optional, Tuple

from .corpus import Documents, Inputs, classify_inputs, describe_location, iter_documents_located
from .errors import CorpusError

__all__ = ["BATCH_BYTES", "Corpus", "Progress", "feed", "rss_bytes", "peak_rss_bytes", "fmt_bytes"]

BATCH_BYTES = 2 << 20  # per call into the core; Ctrl-C is seen between calls


def rss_bytes() -> int:
    """Current resident set size (bytes), from /proc when available."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return peak_rss_bytes()


def peak_rss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


class Corpus:
    """A re-readable view of the training inputs: a list of documents, a list of paths, or a
    one-shot iterable spooled to a temporary JSON-lines file on its first pass. Which one follows
    the paths-or-documents rule of :mod:`cnfmce.corpus`; paths are checked here, before any work.
    ``field``: the JSON field or parquet column of the files that holds the text."""

    def __init__(self, inputs: Inputs, tmp_dir: str, field: str = "text"):
        self.field = field
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
            source = iter_documents_located(self._source, self.field)
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


class Progress:
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

    def fail(self) -> None:
        """The work failed: :meth:`close` then clears the bar (no stale progress line before
        the error message)."""
        if self.bar is not None:
            self.bar.leave = False

    def close(self, summary: Optional[str] = None) -> None:
        if self.bar is not None:
            self.bar.close()
            if summary:
                print(summary, file=sys.stderr, flush=True)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.t0


def feed(corpus: "Corpus", desc: str, progress: bool, add: Any,
          status: Optional[Any] = None) -> "Progress":
    """Streams the corpus into ``add(batch)`` with a progress bar (``status()``: more fields to
    show); returns the bar, still open. Ctrl-C is seen between batches."""
    bar = Progress(progress, desc, corpus.total_bytes)
    try:
        ndocs = 0
        for batch, size in corpus.batches():
            add(batch)
            ndocs += len(batch)
            bar.update(size, docs=f"{ndocs:,}", **(status() if status else {}),
                       rss=fmt_bytes(rss_bytes()))
    except BaseException:
        bar.fail()
        bar.close()
        raise
    return bar
