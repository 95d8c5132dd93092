"""Argument checks and memory rules shared by the library's modules (training, counts, the Ray
backend): one home for each, below every module that uses them."""

from __future__ import annotations

import os
from typing import Any, Optional, Tuple

from . import _core
from .readers import rss_bytes

__all__ = ["check_positive", "check_exponent", "short_repr", "default_memory_limit", "memory_budget"]


def check_positive(name: str, v: Any) -> int:
    """``v`` when it is a positive int; ``ValueError`` naming ``name`` otherwise."""
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    if v >= 2**64:  # the core's sizes are 64-bit (an OverflowError without the name before)
        raise ValueError(f"{name} must be a positive int below 2**64, got {short_repr(v)}")
    return v


def short_repr(v: Any) -> str:
    """``repr(v)``, shortened when it is very long (a 400-digit int)."""
    r = repr(v)
    return r if len(r) <= 40 else f"{r[:20]}...({len(r)} digits)"


def check_exponent(name: str, v: Any) -> float:
    """A number for one of the exponents of training (the core checks its range)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(v).__name__}")
    try:
        return float(v)
    except OverflowError:  # an int beyond any float: out of the range the core checks
        top = _core.MAX_NON_ASCII_EXPONENT if name == "non_ascii_exponent" else _core.MAX_RAW_HAN_EXPONENT
        raise ValueError(f"{name} must be a number from 0 to {top:g}, got {short_repr(v)}") from None


def default_memory_limit() -> int:
    """A sixth of the machine's physical memory, at least 1 GB (bytes): training then leaves
    most of the machine to the rest of a data pipeline; raise it to spill less on big corpora."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        total = 16 << 30
    return max(1 << 30, int(total // 6))


def memory_budget(memory_limit: Optional[int], floor: int = 16 << 20) -> Tuple[int, int]:
    """(the memory limit, the counting tables' budget): the tables get 60% of what the limit
    leaves; the rest covers batches, the kept candidates, the trie and hash-table growth."""
    limit = default_memory_limit() if memory_limit is None else check_positive("memory_limit", memory_limit)
    return limit, max(floor, int(0.6 * (limit - rss_bytes())))
