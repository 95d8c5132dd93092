"""experiments/by_source.py: the gain per source package over the BPE, small packages pooled,
and the page's summary counts."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
BS = pytest.importorskip("by_source")


def test_rows_gain_and_pooling():
    big, small1, small2 = BS.MIN_CHARS * 3, 1000, 3000
    s = {"bpe": {"p:big": [big, big // 2], "p:s1": [small1, 500], "p:s2": [small2, 1500]},
         "cnf": {"A": {"p:big": [big, big // 3], "p:s1": [small1, 250], "p:s2": [small2, 1750]},
                 "B": {"p:big": [big, big // 2], "p:s1": [small1, 500], "p:s2": [small2, 1500]}}}
    rows = BS._rows(s, ["A", "B"])
    assert [r[0] for r in rows] == ["p:big", "other"]
    src, ch, cpt, g = rows[0]
    assert (ch, cpt) == (big, 2.0)
    assert g[0] == pytest.approx(0.5) and g[1] == pytest.approx(0.0)  # 3 chars/token against 2
    # the pooled packages: BPE 2000 tokens, A 2000 tokens: no gain; B the BPE's
    assert rows[1][1] == small1 + small2 and rows[1][3] == [pytest.approx(0.0), pytest.approx(0.0)]


def test_render_summary(tmp_path):
    n = BS.MIN_CHARS
    sets = {}
    for kind in BS.KINDS:
        for cat in ("zh", "en"):
            sets[f"{kind}/{cat}"] = {"bpe": {"a": [n, n // 2], "b": [n, n // 2]},
                                     "cnf": {"A": {"a": [n, n // 4], "b": [n, n]},
                                             "B": {"a": [n, n // 5], "b": [n, n // 3]}}}
    res = {"experiment": "by_source", "quick": False, "command": "x", "date": "d", "machine": {
        "cpu": "c", "cores": 2, "memory_gb": 1, "os": "o", "versions": {}, "git_commit": "g"},
        "size": "250k", "vocabs": ["A", "B"], "files": {"A": "a.gz", "B": "b.gz"}, "sets": sets,
        "bpe_check": [{"set": "x", "cpt": 2.0, "recorded": 2.0}]}
    md = tmp_path / "p.md"
    BS.render(res, md)
    text = md.read_text()
    # A: above the BPE on package a (4 > 2), below on b (1 < 2); B above on both and above A on both
    assert "| held-out-by-package | zh | 2 | 1 / 2 | 2 / 2 | 2 / 2 |" in text
    assert "difference in characters per token over the 12 sets 0.000%" in text
