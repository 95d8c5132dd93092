"""benches/train.py's --selection: each cnfmce trainer runs once per selection rule."""

import importlib.util
from pathlib import Path

import pytest

import cnfmce

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("bench_train", ROOT / "benches" / "train.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


DOCS = ([f"The quick brown fox {i} jumps over the lazy dog, again and again." for i in range(60)]
        + [f"中文文本第{i}段，用于测试训练的选择规则。汉字的词语很多。" for i in range(60)]
        + [f"Русский текст номер {i} для проверки правил выбора." for i in range(40)])


def test_selection_names_round_trip():
    b = _bench()
    assert b.with_selection("cnfmce", "paper") == "cnfmce"
    assert b.with_selection("cnfmce", "refined") == "cnfmce:refined"
    assert b.split_selection("cnfmce:refined-non-ascii") == ("cnfmce", "refined-non-ascii")
    assert b.split_selection("cnfmce-m20v") == ("cnfmce-m20v", "paper")
    b.register_trainer("cnfmce-m20v:refined")
    assert "cnfmce-m20v:refined" in b.CNF_TRAINERS
    assert b.TRAINERS["cnfmce-m20v:refined"] == 'cnfmce (m=20V), selection="refined"'
    b.register_trainer("hf-bpe:refined")  # not a cnfmce trainer: not registered
    assert "hf-bpe:refined" not in b.TRAINERS


def test_unknown_selection_is_a_usage_error(capsys):
    b = _bench()
    with pytest.raises(SystemExit) as e:
        b.main(["--selection", "paper", "bogus", "--no-snapshot"])
    assert e.value.code == 2
    assert "unknown selection 'bogus'" in capsys.readouterr().err


@pytest.mark.parametrize("selection", ["paper", "refined-non-ascii"])
def test_the_trainer_trains_with_the_selection(selection):
    b = _bench()
    count, _, post = b.train_one(b.with_selection("cnfmce", selection), list(DOCS), 400, {})
    ref = cnfmce.train(list(DOCS), vocab_size=400, progress=False, selection=selection)
    assert count(DOCS[:5]) == sum(map(len, ref.encode_batch(DOCS[:5])))
    assert post()["cnf"]["selection"] == selection
    other = cnfmce.train(list(DOCS), vocab_size=400, progress=False,
                         selection="paper" if selection != "paper" else "refined-non-ascii")
    assert ref.token_bytes() != other.token_bytes()  # the rule matters on this text


def test_the_default_trainer_is_the_library_default():
    b = _bench()
    name = b.with_selection("cnfmce", "default")
    assert name == "cnfmce:default"
    b.register_trainer(name)
    assert b.TRAINERS[name].endswith(", the library's defaults")
    count, _, post = b.train_one(name, list(DOCS), 400, {})
    ref = cnfmce.train(list(DOCS), vocab_size=400, progress=False)
    assert count(DOCS[:5]) == sum(map(len, ref.encode_batch(DOCS[:5])))
    assert post()["cnf"]["selection"] == ref.metadata["selection"] == "refined-non-ascii"
