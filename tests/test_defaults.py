"""The defaults of training and the ``balance`` control (docs/spec.md section 4, docs/training.md):
what they resolve to, that the default run trains exactly what its resolved settings train, the
scaled threshold of the later rounds, the errors, and the command line's ``--balance``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import cnfmce
from cnfmce import _core
from cnfmce.config import DEFAULT_SELECTION, PAPER_ROUNDS, TrainConfig
from conftest import fixture_path

PATHS = [str(fixture_path("corpora", c, "train.jsonl.gz")) for c in ("en", "code", "zh", "multi")]
N = 1500


def corpus_bytes(paths):
    import gzip
    return sum(len(json.loads(line)["text"].encode("utf-8", "surrogatepass"))
               for p in paths for line in gzip.open(p, "rt", encoding="utf-8") if line.strip())


def tokens(tok):
    return [tok.id_to_token(i) for i in range(tok.vocab_size)]


@pytest.fixture(scope="module")
def default_tok():
    return cnfmce.train(PATHS, vocab_size=N, progress=False)


def test_default_config_resolves_to_the_balance_settings():
    cfg = TrainConfig()
    assert cfg.selection == DEFAULT_SELECTION == "refined-non-ascii"
    assert cfg.balance == _core.DEFAULT_BALANCE
    e, h = _core.balance_settings(_core.DEFAULT_BALANCE, cfg.vocab_size)
    assert (cfg.non_ascii_exponent, cfg.raw_han_exponent) == (e, h)
    assert cfg.scaled_rounds and tuple(map(tuple, cfg.rounds)) == tuple(map(tuple, PAPER_ROUNDS))
    # the paper's algorithm: its rounds, not scaled, no balance
    p = TrainConfig(selection="paper")
    assert not p.scaled_rounds and p.balance is None and p.later_threshold(10 ** 6) is None
    # explicit rounds keep their meaning
    r = TrainConfig(rounds=((1, 12, 0), (13, 21, 50)))
    assert not r.scaled_rounds and r.later_threshold(10 ** 6) is None
    # an explicit exponent: no balance recorded, the exponent kept
    x = TrainConfig(non_ascii_exponent=0.3)
    assert x.balance is None and x.non_ascii_exponent == 0.3


@pytest.mark.parametrize("size", [1000, 32_000, 64_000, 128_000, 180_000, 250_000, 10 ** 6])
def test_balance_settings_are_monotone_and_zero_is_the_mix(size):
    prev = (-1.0, -1.0)
    for b in [0.0, 0.1, 0.25, 0.5, 0.75, 1.0]:
        e, h = _core.balance_settings(b, size)
        assert 0.0 <= e <= 1.0 and 0.0 <= h <= 1.0
        assert e >= prev[0] and h >= prev[1]
        prev = (e, h)
        if b == 0.0:
            assert (e, h) == (0.0, 0.0)
    # balance 1 at an anchor size is the anchor
    for k, e1, h1 in _core.BALANCE_ANCHORS:
        assert _core.balance_settings(1.0, k) == pytest.approx((e1, h1))


def test_scaled_threshold():
    f = _core.scaled_threshold
    assert f(0) == f(10 ** 6) == _core.MIN_SCALED_THRESHOLD == 20
    assert f(512 * 2 ** 20) == f(10 ** 12) == f(2 ** 64 - 1) == _core.PAPER_THRESHOLD == 80
    assert f(40 * _core.BYTES_PER_THRESHOLD) == 40
    last = 0
    for b in range(0, 700 * 2 ** 20, 7 * 2 ** 20):
        t = f(b)
        assert t >= last
        last = t


@pytest.mark.parametrize("kw, err, msg", [
    ({"balance": 1.5}, ValueError, "balance must be a number from 0 to 1"),
    ({"balance": -0.01}, ValueError, "balance must be a number from 0 to 1"),
    ({"balance": float("nan")}, ValueError, "balance must be a number from 0 to 1"),
    ({"balance": "1"}, TypeError, "balance must be a number"),
    ({"balance": True}, TypeError, "balance must be a number"),
    ({"balance": 0.5, "selection": "paper"}, ValueError, "not of selection='paper'"),
    ({"balance": 0.5, "selection": "refined"}, ValueError, "not of selection='refined'"),
    ({"balance": 0.5, "non_ascii_exponent": 0.5}, ValueError, "not both"),
    ({"selection": "best"}, ValueError, "selection must be"),
])
def test_bad_balance_is_refused_before_any_work(kw, err, msg, tmp_path):
    with pytest.raises(err, match=msg):
        cnfmce.train([str(tmp_path / "missing.jsonl")], vocab_size=N, progress=False, **kw)


def test_default_train_is_its_resolved_settings(default_tok):
    """The default run (no selection, rounds or balance) trains exactly what the settings it
    resolves to train when given explicitly: the later threshold scaled from the corpus's bytes,
    the exponents of the default balance."""
    md = default_tok.metadata
    nbytes = corpus_bytes(PATHS)
    t = _core.scaled_threshold(nbytes)
    rounds = [[lo, hi, th if i == 0 else t] for i, (lo, hi, th) in enumerate(PAPER_ROUNDS)]
    assert md["counting"]["scaled_threshold"] == {"corpus_bytes": nbytes, "threshold": t}
    assert md["counting"]["rounds"] == rounds
    assert md["balance"] == _core.DEFAULT_BALANCE
    e, h = _core.balance_settings(_core.DEFAULT_BALANCE, N)
    assert md["non_ascii_exponent"] == e
    explicit = cnfmce.train(PATHS, vocab_size=N, progress=False, selection="refined-non-ascii",
                            non_ascii_exponent=e, raw_han_exponent=h, rounds=rounds)
    assert tokens(explicit) == tokens(default_tok)
    assert "balance" not in explicit.metadata and "scaled_threshold" not in explicit.metadata["counting"]


def test_paper_selection_is_the_paper_run(default_tok):
    paper = cnfmce.train(PATHS, vocab_size=N, progress=False, selection="paper")
    md = paper.metadata
    assert md["counting"]["rounds"] == [list(r) for r in PAPER_ROUNDS]
    assert "scaled_threshold" not in md["counting"] and "balance" not in md
    same = cnfmce.train(PATHS, vocab_size=N, progress=False, selection="paper", rounds=PAPER_ROUNDS)
    assert tokens(same) == tokens(paper)
    # on this corpus the defaults choose other tokens than the paper's rule
    assert tokens(paper) != tokens(default_tok)


def test_balance_one_moves_ids_to_the_non_ascii_part():
    def non_ascii(tok):
        return sum(1 for t in tokens(tok)[256:] if any(b > 127 for b in t))
    got = {}
    for b in (0.0, 1.0):
        tok = cnfmce.train(PATHS, vocab_size=N, progress=False, balance=b)
        assert tok.metadata["balance"] == b
        assert tok.metadata["non_ascii_exponent"] == _core.balance_settings(b, N)[0]
        got[b] = non_ascii(tok)
    assert got[1.0] > got[0.0], got


def test_count_then_train_from_counts_is_train(tmp_path, default_tok):
    """The counting pass scales its rounds as train does, so count + train_from_counts give the
    default vocabulary."""
    counts = cnfmce.count(PATHS, raw_vocab_size=10 * N, progress=False)
    tok = cnfmce.train_from_counts(counts, PATHS, vocab_size=N, progress=False)
    assert tokens(tok) == tokens(default_tok)


def test_cli_balance(tmp_path):
    out = tmp_path / "b.json"
    r = subprocess.run([sys.executable, "-m", "cnfmce.cli", "train", "-o", str(out), "--vocab-size",
                        str(N), "--balance", "1", "--quiet", *PATHS], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-2000:]
    assert cnfmce.Tokenizer.load(str(out)).metadata["balance"] == 1.0
    for bad in ("2", "x", "nan"):
        r = subprocess.run([sys.executable, "-m", "cnfmce.cli", "train", "-o", str(out), "--balance",
                            bad, *PATHS], capture_output=True, timeout=60)
        assert r.returncode == 2 and b"balance" in r.stderr, r.stderr
        assert b"Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "cnfmce.cli", "train", "-o", str(out), "--balance", "0.5",
                        "--selection", "paper", *PATHS], capture_output=True, timeout=60)
    assert r.returncode != 0 and b"balance" in r.stderr and b"Traceback" not in r.stderr


def test_readme_results_are_the_test_split_of_the_defaults_page():
    """The README's three result rows (the default, balance=1, the paper's algorithm) are the
    128k test-split gains of docs/results/defaults.json, as its page prints them."""
    import re
    from pathlib import Path
    repo = Path(__file__).resolve().parent.parent
    res = json.loads((repo / "docs" / "results" / "defaults.json").read_text(encoding="utf-8"))
    run = res["runs"]["mix-128k"]
    readme = (repo / "README.md").read_text(encoding="utf-8")
    table = re.search(r"^\| test split, 128k \| (.*?) \|\n\|[-:| ]+\|\n((?:\|.*\|\n){3})", readme, re.M)
    assert table, "the README's results table"
    cats = [c.strip() for c in table.group(1).split("|")]
    assert cats == ["en", "sci", "math", "code", "zh", "multi"]
    names = {"the default": "default", "balance=1.0": "balance1", 'selection="paper"': "paper"}
    seen = set()
    for line in table.group(2).splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = next(v for k, v in names.items() if k in cells[0])
        seen.add(name)
        ev, bpe = run["configs"][name]["eval"]["test"]["cats"], run["bpe"]["test"]["cats"]
        for cat, cell in zip(cats, cells[1:]):
            g = 100 * ((ev[cat][0] / ev[cat][1]) / (bpe[cat][0] / bpe[cat][1]) - 1)
            assert cell == f"{g:+.1f}%".replace("+-", "-"), (name, cat, cell, g)
    assert seen == set(names.values())
    # the library's settings the page was made with are the installed ones
    assert res["library"]["default_balance"] == _core.DEFAULT_BALANCE
    assert [tuple(a) for a in res["library"]["anchors"]] == [tuple(a) for a in _core.BALANCE_ANCHORS]
