"""The Han-weighted raw cut (``raw_han_exponent``, src/raw_cut.rs) and the run's
``non_ascii_exponent`` (issue 13): the raw vocabulary against a reference written from the
definition in docs/spec.md, the contract between ``train`` and ``train_from_counts(count(...))``,
the CLI, and bad arguments."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

import cnfmce
from cnfmce import _core
from train_helpers import read_shared_docs


def _han(t: bytes) -> bool:
    return any("\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" for c in t.decode("utf-8", "replace"))


def reference_cut(counts, m, a):
    """The raw vocabulary's candidates, from docs/spec.md: the pool is the best 4m by count (ties
    by bytes); a candidate with a Han character weighs count * (ASCII mass / non-ASCII mass) ^ a
    when the ASCII mass is the larger; the best m by weighted count, ties by count then bytes."""
    pool = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if m >= len(pool):
        return {t for t, _ in pool}
    pool = pool[: m * _core.HAN_POOL_PER_RAW] if a > 0 else pool[:m]
    ascii_mass = sum(c for t, c in pool if t.isascii())
    other = sum(c for t, c in pool if not t.isascii())
    w = (ascii_mass / other) ** a if a > 0 and other and ascii_mass > other else 1.0
    ranked = sorted(pool, key=lambda kv: (-(kv[1] * w if _han(kv[0]) else float(kv[1])), -kv[1], kv[0]))
    return {t for t, _ in ranked[:m]}


def raw_vocabulary(counts, m, a, selection="paper"):
    """The raw vocabulary the core builds from ``counts`` (filtering pass: its tokens)."""
    t = _core.Trainer(300, m, None, (), None, selection=selection, raw_han_exponent=a)
    try:
        t.use_counts(list(counts), list(counts.values()))
        return set(t.raw_tokens())
    finally:
        t.close()


@pytest.fixture(scope="module")
def mixed():
    """English and Chinese shared training text, mostly English."""
    return read_shared_docs("en", "train", max_bytes=300_000) + read_shared_docs("zh", "train", max_bytes=60_000)


def test_raw_vocabulary_matches_the_reference(mixed):
    counts = dict(cnfmce.count(mixed, raw_vocab_size=40_000, progress=False))
    singles = {bytes([b]) for b in range(256)}
    rng = random.Random(5)
    moved = 0
    for a in (0.0, 0.15, 0.5, 1.0, 2.5):
        for m in (500, 3000, 9000):
            got = raw_vocabulary(counts, m, a)
            want = reference_cut(counts, m, a)
            assert got == want | singles, (a, m)
            moved += len(want - reference_cut(counts, m, 0.0))
    assert moved > 0  # the weight changed some raw vocabularies
    # random counts: Han, other non-ASCII and ASCII candidates, many ties
    pieces = ["a", "b", " the", "x1", "\n", "中", "文", "的", "é", "Ελ", "日本"]
    for case in range(40):
        counts = {}
        for _ in range(rng.randrange(5, 300)):
            t = "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 4))).encode()
            counts[t] = rng.randrange(1, 6 if case % 2 else 500)
        m = rng.randrange(1, len(counts) + 2)
        a = rng.choice([0.1, 0.5, 1.0, 3.0])
        assert raw_vocabulary(counts, m, a) == reference_cut(counts, m, a) | singles, (case, m, a)


def test_train_equals_train_from_counts_of_the_pool(mixed):
    m = 6000
    for selection in ("paper", "refined-non-ascii"):
        kw = dict(vocab_size=2000, progress=False, selection=selection)
        tok = cnfmce.train(mixed, raw_vocab_size=m, raw_han_exponent=0.5, **kw)
        assert tok.metadata["raw_han_exponent"] == 0.5
        assert tok.metadata["counting"]["raw_vocab_size"] == m * _core.HAN_POOL_PER_RAW
        # the same rounds as train's: the paper's for selection="paper", else scaled (count's default)
        rounds = cnfmce.DEFAULT_ROUNDS if selection == "paper" else None
        pool = cnfmce.count(mixed, raw_vocab_size=m * _core.HAN_POOL_PER_RAW, progress=False, rounds=rounds)
        again = cnfmce.train_from_counts(pool, mixed, raw_vocab_size=m, raw_han_exponent=0.5, **kw)
        assert again.token_bytes() == tok.token_bytes()
        # larger counts hold the same pool
        big = cnfmce.count(mixed, raw_vocab_size=m * 6, progress=False, rounds=rounds)
        assert cnfmce.train_from_counts(big, mixed, raw_vocab_size=m, raw_han_exponent=0.5,
                                        **kw).token_bytes() == tok.token_bytes()
        plain = cnfmce.train(mixed, raw_vocab_size=m, **kw)
        assert "raw_han_exponent" not in plain.metadata
        han = lambda t: sum(_han(b) for b in t.token_bytes().values() if not b.isascii())  # noqa: E731
        assert han(tok) > han(plain), selection


def test_non_ascii_exponent(mixed):
    kw = dict(vocab_size=1500, raw_vocab_size=15_000, progress=False, selection="refined-non-ascii")
    default = cnfmce.train(mixed, **kw)  # the exponent the default balance sets
    e = _core.balance_settings(_core.DEFAULT_BALANCE, 1500)[0]
    assert default.metadata["non_ascii_exponent"] == e and default.metadata["balance"] == _core.DEFAULT_BALANCE
    assert cnfmce.train(mixed, non_ascii_exponent=e, **kw).token_bytes() == default.token_bytes()
    na = lambda t: sum(len(b) > 1 and not b.isascii() for b in t.token_bytes().values())  # noqa: E731
    equal = cnfmce.train(mixed, non_ascii_exponent=1.0, **kw)
    half = cnfmce.train(mixed, non_ascii_exponent=0.5, **kw)
    none = cnfmce.train(mixed, non_ascii_exponent=0, **kw)
    assert equal.metadata["non_ascii_exponent"] == 1.0 and "balance" not in equal.metadata
    assert na(equal) > na(half) > na(none)


def test_bad_exponents(mixed):
    docs = mixed[:20]
    kw = dict(vocab_size=300, progress=False)
    for bad, err, msg in [(dict(raw_han_exponent="0.5"), TypeError, "raw_han_exponent must be a number"),
                          (dict(raw_han_exponent=True), TypeError, "raw_han_exponent must be a number"),
                          (dict(raw_han_exponent=-0.1), ValueError, "from 0 to 4"),
                          (dict(raw_han_exponent=float("inf")), ValueError, "from 0 to 4"),
                          (dict(raw_han_exponent=float("nan")), ValueError, "from 0 to 4"),
                          (dict(selection="paper", non_ascii_exponent=1.0), ValueError, "refined-non-ascii"),
                          (dict(selection="refined", non_ascii_exponent=0.5), ValueError, "refined-non-ascii"),
                          (dict(selection="refined-non-ascii", non_ascii_exponent=9), ValueError, "from 0 to 4"),
                          (dict(selection="refined-non-ascii", non_ascii_exponent=[1]), TypeError, "must be a number")]:
        with pytest.raises(err, match=msg):
            cnfmce.train(docs, **kw, **bad)
    counts = cnfmce.count(docs, progress=False)
    with pytest.raises(ValueError, match="give raw_vocab_size"):
        cnfmce.train_from_counts(counts, docs, raw_han_exponent=0.5, **kw)
    with pytest.raises(ValueError, match="from 0 to 4"):
        cnfmce.train_from_counts(counts, docs, raw_vocab_size=100, raw_han_exponent=7, **kw)


def test_cli(mixed, tmp_path):
    import json
    src = tmp_path / "mixed.jsonl"
    src.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in mixed[:300]), encoding="utf-8")
    out = tmp_path / "tok.json"
    cmd = [sys.executable, "-m", "cnfmce.cli", "train", "-o", str(out), "--vocab-size", "800", "--raw-vocab-size", "4000",
           "--selection", "refined-non-ascii", "--non-ascii-exponent", "1", "--raw-han-exponent", "0.25", "--quiet", str(src)]
    subprocess.run(cmd, check=True)
    tok = cnfmce.Tokenizer.load(str(out))
    assert tok.metadata["raw_han_exponent"] == 0.25 and tok.metadata["non_ascii_exponent"] == 1.0
    want = cnfmce.train([str(src)], vocab_size=800, raw_vocab_size=4000, selection="refined-non-ascii",
                        non_ascii_exponent=1.0, raw_han_exponent=0.25, progress=False)
    assert tok.token_bytes() == want.token_bytes()
    for flag, value in [("--raw-han-exponent", "5"), ("--raw-han-exponent", "x"), ("--non-ascii-exponent", "-1")]:
        bad = list(cmd)
        i = bad.index(flag)
        bad[i + 1] = value
        r = subprocess.run(bad, capture_output=True, text=True)
        assert r.returncode == 2 and flag in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "cnfmce.cli", "train", "-o", str(tmp_path / "p.json"), "--vocab-size", "400",
                        "--selection", "paper", "--non-ascii-exponent", "1", "--quiet", str(src)],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "refined-non-ascii" in r.stderr, r.stderr


def test_deterministic_across_threads_and_order(mixed):
    kw = dict(vocab_size=1200, raw_vocab_size=5000, progress=False, selection="refined-non-ascii",
              non_ascii_exponent=1.0, raw_han_exponent=0.3)
    one = cnfmce.train(mixed, num_threads=1, **kw)
    two = cnfmce.train(list(reversed(mixed)), num_threads=2, **kw)
    assert one.token_bytes() == two.token_bytes()
