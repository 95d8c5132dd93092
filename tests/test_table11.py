"""The paper's Table 11 (appendix A.3) on the Qwen3.5 vocabulary: MCE and FMM columns.

The paper's ’ is an ASCII apostrophe in the real test, and ␣ a space. BPE is not ours.
"""

from __future__ import annotations

import re

import pytest

from conftest import shared_path

# (text, FMM, MCE) with ␣ for a space; token boundaries as "|".
TABLE_11 = [
    ("␣autoregulation", "␣autore|gul|ation", "␣auto|reg|ulation"),
    ("␣pandemics", "␣pandemic|s", "␣pandemic|s"),
    ("␣inconceivable", "␣incon|ce|ivable", "␣inc|once|ivable"),
    ("␣Modeller", "␣Modelle|r", "␣Model|ler"),
    ("␣Trips", "␣Trip|s", "␣Tr|ips"),
    ("␣mediate", "␣media|te", "␣|mediate"),
    ("␣arterioles", "␣arter|iol|es", "␣art|eri|oles"),
    ("␣ejecting", "␣eject|ing", "␣ejec|ting"),
    ("␣too-little-too-late", "␣too|-li|ttl|e|-too|-lat|e", "␣too|-|little|-too|-|late"),
    ("even-valued", "even|-value|d", "even|-value|d"),
    ("␣eigenvectors", "␣eigen|vector|s", "␣eigen|vector|s"),
    ("␣extrinsic", "␣extr|insic", "␣ex|trinsic"),
    ("␣P(Queen", "␣P|(Q|ue|en", "␣P|(|Queen"),
    ("Combinatorics", "Comb|inator|ics", "Comb|inator|ics"),
    ("studentshare.org", "students|hare|.org", "student|share|.org"),
    ("}'.format", "}'.|format", "}'|.format"),
    ("(taxonomy", "(t|axon|omy", "(|taxonomy"),
    ("AddIntegers", "Add|Integer|s", "Add|Integer|s"),
    ("memory_efficient", "memory|_eff|icient", "memory|_|efficient"),
    ("␣pysimplesoap", "␣pys|imple|soap", "␣py|simple|soap"),
]


def _text(s: str) -> str:
    return s.replace("␣", " ")


def _split(s: str):
    return [p.replace("␣", " ").encode("utf-8") for p in s.split("|")]


def _pieces(tok, text):
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    return [tok.id_to_token(i) for i in ids]


def test_defaults_are_the_papers(qwen):
    assert qwen.algorithm == "mce" and qwen.boundary_penalty == 0.05 and qwen.token_preference is True


@pytest.mark.parametrize("text,fmm,mce", TABLE_11, ids=[r[0] for r in TABLE_11])
def test_table11_mce(qwen, text, fmm, mce):
    assert _pieces(qwen, _text(text)) == _split(mce)


@pytest.fixture(scope="module")
def qwen_fmm(qwen):
    return qwen.with_options(algorithm="fmm")


@pytest.mark.parametrize("text,fmm,mce", TABLE_11, ids=[r[0] for r in TABLE_11])
def test_table11_fmm(qwen_fmm, text, fmm, mce):
    assert _pieces(qwen_fmm, _text(text)) == _split(fmm)


@pytest.mark.shared
def test_table11_rows_are_the_papers():
    """The rows above are transcribed from the paper's text (’ read as ')."""
    paper = shared_path("paper", "cnf-mce-paper.txt").read_text(encoding="utf-8")
    block = paper.split("Table 11: Example tokenization results", 1)[1].split("Table 12", 1)[0]
    rows = [line.split("\t") for line in block.strip().splitlines()[1:] if line.strip()]
    assert rows[0][:4] == ["Text", "BPE", "FMM", "MCE"]

    def norm(cell):
        return "|".join(re.split(r"\s*\$\\+\|\$\s*", cell.strip())).replace("’", "'")

    parsed = [(norm(r[0]), norm(r[2]), norm(r[3])) for r in rows[1:]]
    assert parsed == TABLE_11


def test_mce_differs_from_fmm_on_the_table(qwen, qwen_fmm):
    """Not a tautology: the two algorithms disagree on most rows."""
    differ = sum(qwen.encode(_text(t)) != qwen_fmm.encode(_text(t)) for t, _, _ in TABLE_11)
    assert differ == sum(f != m for _, f, m in TABLE_11) == 15
