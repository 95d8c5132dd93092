"""Counts of the counting phase: :class:`Counts` (a dict ``bytes -> int``, best first, with an
``info`` dict), counts files (their syntax is in :mod:`cnfmce.formats`) and sums of counts."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from .formats import dump_counts, parse_counts, write_bytes_atomic

__all__ = ["Counts", "save_counts", "load_counts", "merge_counts", "count_lists"]


class Counts(dict):
    """The raw vocabulary: a ``dict`` mapping candidate bytes to their count, best first, with an
    ``info`` attribute describing how it was made (rounds, documents, bytes, timings)."""

    info: Dict[str, Any]

    def __init__(self, *args: Any, info: Optional[Dict[str, Any]] = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.info = dict(info or {})


def save_counts(counts: Mapping[bytes, int], path: "os.PathLike[str] | str") -> None:
    """Writes counts as text (gzip when ``path`` ends in ``.gz``), atomically.

    Format: a first line ``# cnfmce counts v1``, a second line ``# `` followed by a JSON object
    (how the counts were made; may be ``{}``), then one ``<base64 bytes>\\t<count>`` line per
    candidate, best first (count descending, ties by bytes).
    """
    info = getattr(counts, "info", {}) or {}
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    write_bytes_atomic(path, dump_counts(items, info))


def load_counts(path: "os.PathLike[str] | str") -> Counts:
    """Reads a counts file written by :func:`save_counts` / ``cnfmce count``."""
    info, counts = parse_counts(path)
    return Counts(counts, info=info)


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


def count_lists(counts: Mapping[bytes, int]) -> Tuple[List[bytes], List[int]]:
    """The counts as two parallel lists (for the core), checked."""
    toks = list(counts.keys())
    vals = list(counts.values())
    for k, v in zip(toks, vals):
        if not isinstance(k, bytes) or not k:
            raise TypeError("counts must map non-empty bytes to ints")
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**64:
            raise ValueError(f"count of {k!r} must be a non-negative int, got {v!r}")
    return toks, vals
