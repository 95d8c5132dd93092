"""CNF counting (SPEC sections 2 and 4; paper section 3.1.1, Algorithm 1) against brute force.

The brute force (tests/train_helpers.py) enumerates every substring that starts and ends on a
character boundary and counts it where its boundary penalty is not forbidden, with no early
stopping. ``cnfmce.count`` must give exactly those counts: with one round (threshold 0) all of
them; with several rounds whose thresholds do not decrease, the candidates of each round's
lengths whose count reaches the round's threshold (early stopping must not change anything).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

import cnfmce
import cnfmce.training as training

from train_helpers import (HUGE, SENTENCES, algorithm1, annotate, brute_count, brute_rounds,
                           forbidden, random_corpus, random_rounds, random_text, read_shared_docs,
                           top_m)

PAPER = "1600 B.C. was a significant year in human history."


def count(docs, rounds, raw_vocab_size=HUGE, **kw):
    kw.setdefault("progress", False)
    return cnfmce.count(docs, raw_vocab_size=raw_vocab_size, rounds=rounds, **kw)


@pytest.fixture(scope="module")
def mixed_docs():
    return list(SENTENCES) + random_corpus(1234, n_docs=12, max_pieces=60)


# --- the brute force itself -----------------------------------------------------------------------

def test_brute_force_units_sanity():
    # digits and punctuation are units by themselves; letters and marks join (not CJK/kana)
    _, starts, w, _ = annotate("ab12 é\u0301漢字ーか\u3099")
    # units: "ab", "1", "2", " ", "é\u0301", "漢", "字", "ー" (Lm, Script=Common: joins), "か",
    # "\u3099" (Mn, Script=Inherited: joins, but か does not)
    assert w[-1] + 1 == 10
    assert sum(starts) == 10
    # the brute force's validity rule on the paper's example
    x, starts, w, _ = annotate(PAPER)
    i = PAPER.index("ficant year")
    assert forbidden(starts, w, i, i + len("ficant year"))
    i = PAPER.index("significant year")
    assert not forbidden(starts, w, i, i + len("significant year"))


def test_paper_example_list():
    c = count([PAPER], rounds=((1, 60, 0),))
    b = brute_count([PAPER])
    assert dict(c) == dict(b)
    for ok in ["6", " sig", "significant", "cant", " year", " was a", "significant year",
               "ficant ", "1600 B.C.", "600 B", " human history.", PAPER]:
        assert ok.encode() in c, ok
    for bad in ["ficant year", "ignificant y", "an hist", "s a sig", "ear in h", "C. wa"]:
        assert bad.encode() not in c, bad
    # every character is a one-unit candidate: "a" occurs 5 times, "0" twice
    assert c[b"a"] == 5 and c[b"0"] == 2 and c[b" "] == 8
    assert c[b"significant"] == 1 and c[b"ficant "] == 1


# --- one round: exact equality ----------------------------------------------------------------------

@pytest.mark.parametrize("max_len", [1, 4, 12, 17, 33])
def test_single_round_equals_brute_force(mixed_docs, max_len):
    c = count(mixed_docs, rounds=((1, max_len, 0),))
    b = brute_count(mixed_docs, 1, max_len)
    assert len(c) == len(b)
    assert dict(c) == dict(b)


def test_single_round_random_corpora():
    for seed in range(12):
        docs = random_corpus(seed, n_docs=6, max_pieces=50)
        c = count(docs, rounds=((1, 14, 0),))
        assert dict(c) == dict(brute_count(docs, 1, 14)), seed


def test_single_round_with_threshold():
    docs = SENTENCES[:3] * 3 + SENTENCES[3:]
    c = count(docs, rounds=((1, 10, 3),))
    b = brute_count(docs, 1, 10)
    assert dict(c) == {k: v for k, v in b.items() if v >= 3}


# --- several rounds ---------------------------------------------------------------------------------

@pytest.mark.parametrize("rounds", [
    ((1, 4, 0), (5, 8, 3), (9, 14, 3)),
    ((1, 3, 0), (4, 9, 2), (10, 15, 2), (16, 40, 4)),   # keys of 15/16 and 31/32 bytes
    ((1, 1, 0), (2, 2, 1), (3, 6, 2), (7, 7, 2), (8, 20, 5)),
    ((1, 12, 0), (13, 21, 3), (22, 30, 3)),
])
def test_rounds_equal_brute_force(mixed_docs, rounds):
    docs = mixed_docs + mixed_docs[:6] * 2  # repeats so thresholds keep and drop candidates
    c = count(docs, rounds=rounds)
    want = brute_rounds(docs, rounds)
    assert dict(c) == want
    # the thresholds actually removed something and kept something in every later round
    full = brute_count(docs, 1, rounds[-1][1])
    for lo, hi, t in rounds[1:]:
        assert any(lo <= len(k) <= hi for k in want), (lo, hi, t)
        if t > 1:
            assert any(lo <= len(k) <= hi and v < t for k, v in full.items()), (lo, hi, t)


def test_early_stopping_never_changes_the_result():
    """Random corpora, random non-decreasing rounds: Algorithm 1 with its two early-stopping
    criteria must equal counting everything; also random raw_vocab_size cuts."""
    rng = random.Random(20240611)
    for trial in range(60):
        docs = random_corpus(rng.randrange(10 ** 9), n_docs=rng.randint(1, 7), max_pieces=45)
        if not any(docs):
            docs.append("x")
        rounds = random_rounds(rng, max_len=rng.randint(1, 18))
        want = brute_rounds(docs, rounds)
        c = count(docs, rounds=rounds)
        assert dict(c) == want, (trial, rounds, docs)
        m = rng.randint(1, max(1, len(want)))
        c = count(docs, rounds=rounds, raw_vocab_size=m)
        assert list(c.items()) == top_m(want, m), (trial, rounds, m)


def test_decreasing_thresholds_warn():
    with pytest.warns(RuntimeWarning, match="lower threshold"):
        count(["the cat sat on the mat"] * 3, rounds=((1, 3, 0), (4, 6, 5), (7, 9, 2)))


@pytest.mark.filterwarnings("ignore:a later round has a lower threshold")
def test_decreasing_thresholds_follow_algorithm1():
    """Thresholds that decrease make early stopping drop candidates (a prefix below an earlier
    round's threshold is absent from the trie): the result is then Algorithm 1's, which differs
    from the brute force. Checks that the implementation really stops early as the paper says."""
    rng = random.Random(77)
    differed = 0
    for trial in range(40):
        docs = random_corpus(rng.randrange(10 ** 9), n_docs=6, max_pieces=40)
        rounds = random_rounds(rng, max_len=14, max_thr=4, non_decreasing=False)
        got = dict(count(docs, rounds=rounds))
        assert got == algorithm1(docs, rounds), (trial, rounds)
        differed += got != brute_rounds(docs, rounds)
    assert differed > 0


def test_handcrafted_early_stop():
    # "ab" occurs once (count 1 < threshold 5 of round 1) so "ab xy" is never counted although its
    # own count (1) reaches round 2's threshold (1): the second criterion stops at "ab".
    # "xy" occurs 6 times so "xy xy" is counted (5 times).
    docs = ["ab xy xy xy xy xy xy"]
    rounds = ((1, 2, 5), (3, 5, 1))
    c = dict(count(docs, rounds=rounds))
    assert c == algorithm1(docs, rounds)
    assert c[b"xy"] == 6 and c[b"xy xy"] == 5 and c[b" xy"] == 6
    assert b"ab" not in c
    assert brute_count(docs)[b"ab xy"] == 1 and b"ab xy" not in c
    assert b"ab " not in c and b"b xy" not in c


def test_raw_vocab_size_top_m_ties_by_bytes(mixed_docs):
    rounds = ((1, 6, 0), (7, 12, 2))
    want = brute_rounds(mixed_docs, rounds)
    ranked = top_m(want, len(want))
    # there are ties at many cut points
    assert len({v for _, v in ranked}) < len(ranked) // 4
    for m in (1, 2, 3, 10, 57, 300, len(want) - 1, len(want), len(want) + 5):
        c = count(mixed_docs, rounds=rounds, raw_vocab_size=m)
        assert list(c.items()) == ranked[:m], m
        assert isinstance(c, cnfmce.Counts)


def test_raw_vocab_size_small_example():
    c = count(["abab"], rounds=((1, 3, 0),), raw_vocab_size=3)
    # counts: a 2, b 2, ab 2, ba 1, aba 1, bab 1 (u == 1 for all) -> top 3 by count then bytes
    assert list(c.items()) == [(b"a", 2), (b"ab", 2), (b"b", 2)]


def test_top_m_pruning_on_a_larger_corpus():
    """The counter prunes candidates below later thresholds to the best m while it merges (once
    their number reaches 2 * max(m, 65536)); with many distinct candidates the result must still
    be the exact top m of the full counts, ties at the cut broken by bytes."""
    docs = (read_shared_docs("multi", max_bytes=700_000, max_doc_bytes=20_000)
            + read_shared_docs("zh", max_bytes=600_000, max_doc_bytes=20_000))
    rounds = ((1, 8, 0), (9, 12, 4))
    full = count(docs, rounds=rounds)
    ranked = list(full.items())
    assert ranked == top_m(full, len(full))
    values = [v for _, v in ranked]
    below = sum(1 for k, v in ranked if len(k) <= 8 and v < 4)
    # cuts inside the groups of count 3 and count 2 (thousands of ties), and a small m
    for m in (1000, values.index(3) + 777, values.index(2) + 101):
        if m > 1000:
            assert values[m - 1] == values[m] and below >= 2 * max(m, 65536), (m, below)
        c = count(docs, rounds=rounds, raw_vocab_size=m)
        assert list(c.items()) == ranked[:m], m


def test_long_document_split_into_ranges():
    """Documents above 64 KiB are counted in parallel position ranges: no occurrence may be lost
    or doubled at the range edges (multi-byte characters straddle them)."""
    rng = random.Random(5)
    doc = random_text(rng, 25_000)
    assert len(doc.encode()) > 65536 + 10_000
    docs = [doc, "short one", doc[:1000]]
    rounds = ((1, 5, 0), (6, 9, 3))
    c = count(docs, rounds=rounds, num_threads=2)
    assert dict(c) == brute_rounds(docs, rounds)


def test_documents_with_nul_and_control_characters():
    docs = ["a\x00b\x00a\x00b", "\x00\x00\x00", "\r\n\r\n", "\x7f\x01"]
    c = count(docs, rounds=((1, 4, 0), (5, 9, 1)))
    assert dict(c) == brute_rounds(docs, ((1, 4, 0), (5, 9, 1)))
    assert c[b"\x00"] == 6 and c[b"a\x00"] == 2


# --- determinism ------------------------------------------------------------------------------------

def test_threads_and_document_order_do_not_matter(mixed_docs):
    rng = random.Random(3)
    docs = mixed_docs + [random_text(rng, 20_000)] + mixed_docs  # one document above 64 KiB
    rounds = ((1, 6, 0), (7, 12, 2), (13, 20, 2))
    ref = list(count(docs, rounds=rounds, num_threads=1).items())
    assert list(count(docs, rounds=rounds, num_threads=2).items()) == ref
    assert list(count(docs, rounds=rounds).items()) == ref
    shuffled = list(docs)
    random.Random(9).shuffle(shuffled)
    assert list(count(shuffled, rounds=rounds, num_threads=2).items()) == ref
    assert list(count(list(reversed(docs)), rounds=rounds, num_threads=1).items()) == ref


def test_counts_info():
    docs = ["hello world", "hello there"]
    c = count(docs, rounds=((1, 4, 0), (5, 8, 1)))
    info = c.info
    assert info["documents"] == 2
    assert info["bytes"] == sum(len(d.encode()) for d in docs)
    assert [list(r) for r in info["rounds"]] == [[1, 4, 0], [5, 8, 1]]
    assert len(info["round_stats"]) == 2
    st = info["round_stats"][0]
    b = brute_count(docs, 1, 4)
    assert st["distinct"] == len(b) and st["retained"] == len(b)
    st = info["round_stats"][1]
    assert st["retained"] == sum(1 for k in brute_count(docs, 5, 8))  # threshold 1 keeps all


# --- memory limit and spilling ---------------------------------------------------------------------

def test_memory_limit_spills_and_gives_identical_counts(monkeypatch, tmp_path):
    """A tiny memory_limit (the table budget is clamped to 16 MB) must spill sorted runs and give
    exactly the counts of an unbounded run. Batches are made small so that the table crosses the
    budget several times within a round (spills, then a merge of runs and the in-memory table)."""
    docs = read_shared_docs("en", max_bytes=700_000)
    rounds = ((1, 12, 0), (13, 20, 2))
    ref = count(docs, rounds=rounds)
    assert all(st["spills"] == 0 for st in ref.info["round_stats"])
    monkeypatch.setattr(training._Corpus.batches, "__defaults__", (32 << 10,))
    with pytest.warns(RuntimeWarning, match="exceeded memory_limit"):
        small = count(docs, rounds=rounds, memory_limit=1, tmp_dir=str(tmp_path))
    spills = [st["spills"] for st in small.info["round_stats"]]
    assert spills[0] >= 2 and spills[1] >= 1, spills
    assert all(st["spilled_bytes"] > 0 for st in small.info["round_stats"] if st["spills"])
    assert list(small.items()) == list(ref.items())
    # with a cut at m as well
    m = 5000
    with pytest.warns(RuntimeWarning, match="exceeded memory_limit"):
        cut = count(docs, rounds=rounds, memory_limit=4096, raw_vocab_size=m,
                    tmp_dir=str(tmp_path))
    assert cut.info["round_stats"][0]["spills"] >= 2
    assert list(cut.items()) == list(ref.items())[:m]
    # the runs are removed
    assert list(tmp_path.iterdir()) == []


# --- inputs: files equal memory ---------------------------------------------------------------------

def _write_inputs(tmp_path: Path, docs):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    paths = {}
    txt = []
    for k, d in enumerate(docs):
        p = tmp_path / f"doc{k:03d}.txt"
        p.write_bytes(d.encode("utf-8"))
        txt.append(p)
    paths["txt"] = txt
    jsonl = "".join(json.dumps({"text": d, "id": k}, ensure_ascii=False) + "\n"
                    for k, d in enumerate(docs)).encode("utf-8")
    (tmp_path / "c.jsonl").write_bytes(jsonl)
    paths["jsonl"] = [tmp_path / "c.jsonl"]
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(jsonl))
    paths["jsonl.gz"] = [tmp_path / "c.jsonl.gz"]
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl))
    paths["jsonl.zst"] = [tmp_path / "c.jsonl.zst"]
    pq.write_table(pa.table({"id": list(range(len(docs))), "text": docs}), tmp_path / "c.parquet",
                   row_group_size=7)
    paths["parquet"] = [tmp_path / "c.parquet"]
    return paths


def test_files_equal_memory(tmp_path, mixed_docs):
    docs = mixed_docs + ["ascii only\r\nwith CRLF\r\n", "\ufeffBOM at the start", "tab\tsep"]
    rounds = ((1, 5, 0), (6, 10, 2))
    ref = list(count(docs, rounds=rounds).items())
    assert dict(ref) == brute_rounds(docs, rounds)
    paths = _write_inputs(tmp_path, docs)
    for kind, ps in paths.items():
        got = count(ps, rounds=rounds)
        assert list(got.items()) == ref, kind
        assert got.info["documents"] == len(docs), kind
        got = count([str(p) for p in ps], rounds=rounds)  # str paths
        assert list(got.items()) == ref, kind
    # a single path, and a mixed list of formats
    assert list(count(paths["jsonl.zst"][0], rounds=rounds).items()) == ref
    half = len(docs) // 2
    (tmp_path / "second_half").mkdir()
    mixed_half = _write_inputs(tmp_path / "second_half", docs[half:])
    mixed = paths["txt"][:half] + mixed_half["parquet"]
    assert list(count(mixed, rounds=rounds).items()) == ref


def test_generator_input_for_count(mixed_docs):
    rounds = ((1, 5, 0), (6, 10, 2))
    mixed_docs = mixed_docs + ["a\u2028b\u2029c\x85d\re\n", "\ufeffbom", '"quoted\\ "'] * 2
    ref = list(count(mixed_docs, rounds=rounds).items())
    # several rounds: the one-shot iterator is spooled on the first pass
    assert list(count((d for d in mixed_docs), rounds=rounds).items()) == ref
    assert list(count(iter(mixed_docs), rounds=rounds).items()) == ref
    assert list(count(tuple(mixed_docs), rounds=rounds).items()) == ref


def test_generator_input_for_train(mixed_docs, tmp_path):
    docs = mixed_docs * 2
    kw = dict(vocab_size=400, raw_vocab_size=5000, rounds=((1, 6, 0), (7, 12, 2)), progress=False)
    ref = cnfmce.train(docs, **kw)
    gen = cnfmce.train((d for d in docs), tmp_dir=str(tmp_path), **kw)
    assert ref.vocab_size == 400
    assert [gen.id_to_token(i) for i in range(gen.vocab_size)] == \
        [ref.id_to_token(i) for i in range(ref.vocab_size)]
    assert list(tmp_path.iterdir()) == []  # the spool is removed
    # and from files
    p = _write_inputs(tmp_path, docs)["jsonl.gz"]
    fromfile = cnfmce.train(p, **kw)
    assert [fromfile.id_to_token(i) for i in range(fromfile.vocab_size)] == \
        [ref.id_to_token(i) for i in range(ref.vocab_size)]
