"""The names users look for (issue 8): ``cnfmce.evaluate`` / ``cnfmce.compare`` at the top level,
the metrics module under its own name and its former one."""

from __future__ import annotations

import subprocess
import sys

import pytest

import cnfmce

def test_evaluate_and_compare_at_top_level(bpe):
    docs = ["hello world", "the cat sat on the mat", "数字 123 456"]
    m = cnfmce.evaluate(bpe, docs)
    ids = [bpe.encode(d) for d in docs]
    n = sum(map(len, ids))
    chars = sum(map(len, docs))
    # The documented metrics (cnfmce.evaluation's docstring), checked by hand.
    assert m["tokens"] == n and m["chars"] == chars and m["docs"] == 3
    assert m["chars_per_token"] == pytest.approx(chars / n)
    assert m["bytes_per_token"] == pytest.approx(sum(len(d.encode()) for d in docs) / n)
    assert m["tokens_per_kchar"] == pytest.approx(1000 * n / chars)
    assert m["fertility"] == pytest.approx(n / sum(len(d.split()) for d in docs))
    assert m["distinct_ids"] == len({i for x in ids for i in x})
    assert m["roundtrip_exact_match"] == 1.0
    assert m == cnfmce.evaluation.evaluate(bpe, docs)
    c = cnfmce.compare(bpe, bpe.with_options(algorithm="fmm"), docs)
    assert c["docs"] == 3 and 0.0 <= c["distance"] <= 1.0 and 0.0 <= c["agreement"] <= 1.0
    assert cnfmce.compare(bpe, bpe, docs)["distance"] == 0.0
    assert callable(cnfmce.evaluate) and callable(cnfmce.compare)
    assert "evaluate" in cnfmce.__all__ and "compare" in cnfmce.__all__


def test_evaluate_accepts_the_transformers_tokenizer(bpe):
    pytest.importorskip("transformers")
    docs = ["hello world", "and more text"]
    hf = bpe.to_transformers()
    got = cnfmce.evaluate(hf, docs)
    want = cnfmce.evaluate(bpe, docs)
    assert {k: v for k, v in got.items() if k != "tokenizer"} == \
        {k: v for k, v in want.items() if k != "tokenizer"}


@pytest.mark.parametrize("code", [
    # The failing case: after `import cnfmce.evaluate`, cnfmce.evaluate must be callable.
    "import cnfmce.evaluate\nimport cnfmce\nassert callable(cnfmce.evaluate)\n"
    "tok = cnfmce.Tokenizer.from_tokens([bytes([b]) for b in range(256)])\n"
    "assert cnfmce.evaluate(tok, ['ab'])['tokens'] == 2",
    # Code written against the old module name keeps working.
    "from cnfmce.evaluate import compare, evaluate, edit_distance\nimport cnfmce\n"
    "assert evaluate is cnfmce.evaluate and compare is cnfmce.compare and edit_distance([1], [2]) == 1",
    "import cnfmce.evaluation as ev\nimport cnfmce\nassert ev.evaluate is cnfmce.evaluate",
    "import cnfmce\nassert cnfmce.evaluate.__module__ == 'cnfmce.evaluation'",
])
def test_import_forms_in_a_fresh_interpreter(code):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]

