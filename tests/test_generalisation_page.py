"""experiments/generalisation.py: a partial re-run (GEN_CONFIGS) keeps the other configurations'
numbers with the core that made them, and the page labels every column with its core."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "experiments"))
G = pytest.importorskip("generalisation")

OLD, NEW = "a" * 40, "b" * 40
CATS = ["en", "sci", "math", "code", "zh", "multi"]


def ev(cpt: float, lang_cpt: float = None):
    """An evaluation with the same characters per token on every set (zh/zh and multi/ru per language)."""
    out = {}
    for kind in ("indomain", "heldout"):
        out[kind] = {}
        for cat in CATS:
            langs = {}
            if cat in ("zh", "multi"):
                lang = "zh" if cat == "zh" else "ru"
                c = lang_cpt if lang_cpt is not None else cpt
                langs[lang] = {"chars": 100_000, "tokens": round(100_000 / c), "cpt": c}
            out[kind][cat] = {"chars": 100_000, "tokens": round(100_000 / cpt), "cpt": cpt, "langs": langs}
    return out


def train_rec(core: str, seconds: float, run=None):
    t = {"seconds": seconds, "counting_s": 1.0, "filtering_s": 1.0, "refining_s": 1.0, "refining": [{}],
         "raw_vocabulary": 320_000, "covered_characters": 2_000, "peak_rss": 1.5e9,
         "params": {"config": {}, "cnfmce": "0.1.0", "core": core}}
    if run:
        t["run"] = run
    return t


def old_run():
    return {"train": {"after": train_rec(OLD, 10.0), "nonascii": train_rec(OLD, 20.0)},
            "eval": {"bpe": ev(2.0), "before": ev(1.8), "after": ev(2.4), "nonascii": ev(2.2, 2.1)},
            "from_selection": {"before": "paper"},
            "previous_after": {"core": "c" * 40, "eval": ev(2.3), "train": train_rec("c" * 40, 5.0)}}


OLD_STAMP = {"date": "2026-12-01 20:16 UTC", "cpu": "AMD EPYC", "commit": "ad70d08"}


def test_merge_keeps_other_configs_and_the_retrained_ones_earlier_core():
    new_nonascii = train_rec(NEW, 30.0, {"date": "2026-12-02 19:00 UTC", "cpu": "Xeon", "commit": "1bd1799"})
    r = G.merge_run(old_run(), {"nonascii": new_nonascii}, NEW, OLD_STAMP, ["nonascii"])
    # not retrained: kept with their numbers, provenance and (selection.py) source
    assert r["eval"]["after"] == ev(2.4) and r["train"]["after"]["params"]["core"] == OLD
    assert r["source"] == {"before": "kept", "after": "kept"}
    assert r["from_selection"] == {"before": "paper"}
    assert "run" not in r["train"]["after"]  # the earlier run did not train it: no date invented
    # retrained: nothing of the earlier result left in eval/train, but kept as the earlier core
    assert "nonascii" not in r["eval"] and "nonascii" not in r["train"]
    (pv,) = r["previous"]["nonascii"]
    assert pv["core"] == OLD and pv["eval"] == ev(2.2, 2.1) and pv["train"]["run"] == OLD_STAMP
    # the legacy previous_after is carried over as previous["after"]
    assert [p["core"] for p in r["previous"]["after"]] == ["c" * 40]
    # retraining with the same core adds no earlier-core column
    same = G.merge_run(old_run(), {"nonascii": train_rec(OLD, 30.0)}, OLD, OLD_STAMP, ["nonascii"])
    assert "nonascii" not in same["previous"]


def test_page_labels_each_column_with_its_core(tmp_path):
    new_nonascii = train_rec(NEW, 30.0, {"date": "2026-12-02 19:00 UTC", "cpu": "Intel(R) Xeon(R) Processor",
                                         "commit": "1bd1799"})
    r = G.merge_run(old_run(), {"nonascii": new_nonascii}, NEW, OLD_STAMP, ["nonascii"])
    r["eval"]["bpe"] = ev(2.0)
    r["train"]["nonascii"] = new_nonascii
    r["eval"]["nonascii"] = ev(2.5, 2.4)
    r["source"]["nonascii"] = "this run"
    res = {"experiment": "generalisation", "quick": False, "command": "python experiments/generalisation.py",
           "date": "2026-12-02 19:00 UTC", "runtime_s": 60.0,
           "machine": {"cpu": "Xeon", "cores": 2, "memory_gb": 23.5, "os": "Linux", "versions": {},
                       "git_commit": "1bd1799"},
           "configs": G.ALL_CONFIGS, "trained": ["nonascii"], "defaults": {"raw_vocab_per_token": 10},
           "load_before": [1.0, 1.0, 1.0], "load_after": [2.0, 2.0, 2.0], "core": NEW,
           "cores": {NEW: {"first": "1111111", "last": "2222222", "date": "2026-12-02 16:00"}},
           "train_chars": {"zh": {"zh": 5_000_000}, "multi": {"ru": 800_000}},
           "runs": {"mix-32k": r}}
    md = tmp_path / "page.md"
    G.render(res, md)
    page = md.read_text()
    assert "**This run made *nonascii*** with core `bbbbbbbbbb` (src/ of `1111111`..`2222222`, 2026-12-02 16:00) (" in page
    assert "| nonascii | this run | `bbbbbbbbbb` (src/ of `1111111`..`2222222`, 2026-12-02 16:00) | 2026-12-02 19:00 UTC, Intel Xeon, HEAD `1bd1799` |" in page
    assert "| after | kept | `aaaaaaaaaa` | an earlier run (date not recorded) |" in page
    assert "| nonascii, core aaaaaaaaaa | kept (earlier core) | `aaaaaaaaaa` | 2026-12-01 20:16 UTC, AMD EPYC, HEAD `ad70d08` |" in page
    assert "| before | kept | `experiments/selection.py` variant `paper`" in page
    # gains: this run's nonascii +25.0%, the earlier core's +10.0%, the older after +15.0%
    hdr = next(line for line in page.splitlines() if line.startswith("| evaluation |"))
    assert hdr.split(" | ")[-3:] == ["after, core cccccccccc gain", "nonascii, core aaaaaaaaaa gain", "target |"]
    row = next(line for line in page.splitlines() if line.startswith("| in-domain | en |"))
    assert row.split(" | ")[-4:] == ["+25.0%", "+15.0%", "+10.0%", "+30% |"]
    # per language: this run's and the earlier core's columns (zh/zh: +20.0% and +5.0%)
    lrow = next(line for line in page.splitlines() if line.startswith("| zh/zh |"))
    assert lrow.split(" | ")[1:] == ["5,000,000", "-10.0%", "+20.0%", "+20.0%", "+15.0%", "+5.0%"] * 1 + \
        ["-10.0%", "+20.0%", "+20.0%", "+15.0%", "+5.0% |"]
    assert "nonascii 30 s (1 / 1 / 1 s), 1.50 GB" in page and "[Intel Xeon]" in page


def test_counts_check_compares_with_cnfmce_train_of_its_own_core():
    """After a later run retrains *nonascii* with another core, the counts check (made with the
    earlier core) is still compared with the earlier core's cnfmce.train numbers."""
    r = G.merge_run(old_run(), {"nonascii": train_rec(NEW, 30.0)}, NEW, OLD_STAMP, ["nonascii"])
    r["eval"]["bpe"] = ev(2.0)
    r["train"]["nonascii"] = train_rec(NEW, 30.0)
    r["eval"]["nonascii"] = ev(2.5)
    diff = {"identical": False, "only_a": 3, "only_b": 3, "only_b_chars": 1}
    same = {"identical": True, "only_a": 0, "only_b": 0, "only_b_chars": 0}
    check = {"counts": "byte_fallback", "candidates": 10, "chars_counted": 5, "chars_in_cut": 3,
             "chars_in_cut_same_count": 3,
             "reference": {"covered_characters": 5, "covered_beyond_cut": 2, "fallback_prefixes": 4},
             "cut": {"covered_characters": 3, "covered_beyond_cut": 0, "fallback_prefixes": 1, "vs_reference": diff,
                     "eval": ev(2.1)},
             "cut_chars": {"covered_characters": 5, "covered_beyond_cut": 2, "fallback_prefixes": 4,
                           "vs_reference": same}}
    res = {"runs": {"mix-32k": r}, "cores": {},
           "counts_check": {"_stamp": {"date": "d", "cpu": "c", "commit": "x", "core": OLD}, "32k": check}}
    page = "\n".join(G.counts_check_md(res))
    rows = [line for line in page.splitlines() if line.startswith("|") and "+" in line and "/" in line]
    # cut +5.00%, and cnfmce.train of the check's core (the earlier nonascii, 2.2) +10.00%, not this run's +25%
    assert rows[0].split(" | ")[2] == "+5.00% / +5.00%"
    assert rows[1].split(" | ")[2] == "+10.00% / +10.00%"
    assert "+25.00%" not in page
    assert "| 32k | cut | 10 | 3 of 5 | 3 of 3 | 3 (0) | 1 | 3 tokens differ (1 of its characters missing) |" in page
    assert "identical (same tokens, same ids)" in page and "So at 32k the difference" in page
