"""The unit-crossing rule of the core (`cnfmce._core.crossing_counts`, used by the evaluation's
boundary-crossing metric) against a direct transcription of SPEC section 2."""

import random
import struct

import pytest

from cnfmce import _core


def direct(group_starts: bytes, spans):
    n = len(group_starts)
    partial = forbidden = 0
    for s, e in spans:
        if e <= s:
            continue
        units = 1 + sum(1 for k in range(s + 1, e) if group_starts[k])
        whole = bool(group_starts[s]) and (e == n or bool(group_starts[e]))
        if units >= 2 and not whole:
            partial += 1
            if units >= 3:
                forbidden += 1
    return partial, forbidden


def pack(spans):
    return b"".join(struct.pack("<qq", s, e) for s, e in spans)


def test_random_spans_match_direct_rule():
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randrange(1, 60)
        g = bytes(rng.random() < 0.3 for _ in range(n))
        spans = []
        for _ in range(rng.randrange(0, 40)):
            s = rng.randrange(0, n)
            spans.append((s, rng.randrange(s, n + 1)))
        assert _core.crossing_counts(g, pack(spans)) == direct(g, spans)


def test_paper_example_and_bad_spans():
    g = _core.unit_starts(b"co-advisor")
    # o- (two units, partial), o-ad (three, forbidden), co-advisor (whole), ad (inside one)
    assert _core.crossing_counts(g, pack([(1, 3), (1, 5), (0, 10), (3, 5)])) == (2, 1)
    with pytest.raises(ValueError):
        _core.crossing_counts(g, pack([(0, 11)]))
    with pytest.raises(ValueError):
        _core.crossing_counts(g, b"\0" * 8)
