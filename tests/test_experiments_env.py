"""experiments/common.py child_env: the environment of a trial training (another build on
PYTHONPATH, trial constants) is set for the block and restored after it, also on errors."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
C = pytest.importorskip("common")


def test_child_env_sets_removes_and_restores(monkeypatch):
    monkeypatch.setenv("CNFMCE_T_KEEP", "1")
    monkeypatch.setenv("CNFMCE_T_DROP", "x")
    monkeypatch.delenv("CNFMCE_T_NEW", raising=False)
    with C.child_env({"CNFMCE_T_KEEP": "2", "CNFMCE_T_DROP": None, "CNFMCE_T_NEW": "y"}):
        assert os.environ["CNFMCE_T_KEEP"] == "2" and os.environ["CNFMCE_T_NEW"] == "y"
        assert "CNFMCE_T_DROP" not in os.environ
    assert os.environ["CNFMCE_T_KEEP"] == "1" and os.environ["CNFMCE_T_DROP"] == "x"
    assert "CNFMCE_T_NEW" not in os.environ
    with pytest.raises(RuntimeError):
        with C.child_env({"CNFMCE_T_KEEP": None, "CNFMCE_T_NEW": "z"}):
            raise RuntimeError("a failed training")
    assert os.environ["CNFMCE_T_KEEP"] == "1" and "CNFMCE_T_NEW" not in os.environ
