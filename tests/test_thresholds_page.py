"""experiments/thresholds.py --import-trial: only the thresholds another build trained become a
trial, never this page's runs or that build's own imported trials."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
TH = pytest.importorskip("thresholds")

MINE, THEIRS, OLD = "a" * 40, "b" * 40, "c" * 40


def entry(core, cpt=2.0):
    return {"train": {"params": {"core": core}, "seconds": 1.0}, "eval": {"indomain": {"en": {"cpt": cpt}}}}


def run(by_t, **kw):
    return dict({"corpus": "mix", "size": "250k", "selection": "refined-non-ascii", "by_t": by_t}, **kw)


def test_import_takes_only_the_other_builds_thresholds(tmp_path, monkeypatch):
    monkeypatch.setattr(TH.C, "RESULTS", tmp_path)
    mine = {"runs": {"mix-250k-refined-non-ascii": run({"80": entry(MINE), "20": entry(MINE)}),
                     "mix-128k-refined-non-ascii": run({"80": entry(MINE)}, size="128k"),
                     "mix-250k-refined-non-ascii / X": run({"20": entry(OLD)}, trial="X")}}
    (tmp_path / "thresholds.json").write_text(json.dumps(mine))
    # the other build's file: a copy of this page's runs (it was made from this repository), one
    # threshold retrained by that build, and a trial it imported itself
    theirs = {"runs": {"mix-250k-refined-non-ascii": run({"80": entry(MINE), "20": entry(THEIRS, 2.5)}),
                       "mix-128k-refined-non-ascii": run({"80": entry(MINE)}, size="128k"),
                       "mix-250k-refined-non-ascii / Y": run({"40": entry(THEIRS)}, trial="Y")}}
    other = tmp_path / "other.json"
    other.write_text(json.dumps(theirs))
    TH.import_trial(str(other), "EXP")
    got = json.loads((tmp_path / "thresholds.json").read_text())["runs"]
    assert set(got) == set(mine["runs"]) | {"mix-250k-refined-non-ascii / EXP"}
    t = got["mix-250k-refined-non-ascii / EXP"]
    assert t["trial"] == "EXP" and list(t["by_t"]) == ["20"]
    assert t["by_t"]["20"]["eval"]["indomain"]["en"]["cpt"] == 2.5
    assert got["mix-250k-refined-non-ascii"] == mine["runs"]["mix-250k-refined-non-ascii"]
    # importing again changes nothing (the build's core is now on the page)
    TH.import_trial(str(other), "EXP2")
    assert json.loads((tmp_path / "thresholds.json").read_text())["runs"] == got


def test_a_later_run_of_the_same_build_joins_its_trial(tmp_path, monkeypatch):
    monkeypatch.setattr(TH.C, "RESULTS", tmp_path)
    (tmp_path / "thresholds.json").write_text(json.dumps({"runs": {
        "mix-250k-refined-non-ascii / EXP": run({"20": entry(THEIRS)}, trial="EXP")}}))
    other = tmp_path / "other.json"
    # that build has since trained T = 40 and another configuration (raw_vocab_size 20 x k)
    other.write_text(json.dumps({"runs": {
        "mix-250k-refined-non-ascii": run({"20": entry(THEIRS), "40": entry(THEIRS, 3.0)}),
        "mix-250k-refined-non-ascii-m20x": run({"20": entry(THEIRS, 4.0)}, raw_x=20)}}))
    TH.import_trial(str(other), "EXP")
    got = json.loads((tmp_path / "thresholds.json").read_text())["runs"]
    assert sorted(got["mix-250k-refined-non-ascii / EXP"]["by_t"]) == ["20", "40"]
    assert got["mix-250k-refined-non-ascii-m20x / EXP"]["raw_x"] == 20
    assert list(got["mix-250k-refined-non-ascii-m20x / EXP"]["by_t"]) == ["20"]
