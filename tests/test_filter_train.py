"""CNF filtering and training (SPEC section 4; paper section 3.1.2) against a brute-force usage
count with a slow reference MCE (tests/train_helpers.py), plus counts files and bad input."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import warnings

import pytest

import cnfmce
from cnfmce.errors import CorpusError

from train_helpers import (HUGE, SENTENCES, brute_count, brute_rounds, expected_vocabulary,
                           random_corpus, raw_vocabulary, tokens_of, usage_counts)

ROUNDS = ((1, 8, 0), (9, 16, 2))


# The paper's filtering (SPEC section 4) is selection="paper"; the default selection is tested in
# tests/test_refined_selection.py and tests/test_defaults.py.
def tfc(counts, docs, vocab_size, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("selection", "paper")
    return cnfmce.train_from_counts(counts, docs, vocab_size=vocab_size, **kw)


def train(docs, vocab_size, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("rounds", ROUNDS)
    kw.setdefault("raw_vocab_size", HUGE)
    kw.setdefault("selection", "paper")
    return cnfmce.train(docs, vocab_size=vocab_size, **kw)


@pytest.fixture(scope="module")
def docs():
    return list(SENTENCES) + random_corpus(99, n_docs=20, max_pieces=50) + SENTENCES[:5]


@pytest.fixture(scope="module")
def counts(docs):
    # the filtering input: brute-force counts (a plain dict), independent of cnfmce.count
    return brute_rounds(docs, ROUNDS)


@pytest.fixture(scope="module")
def usage(counts, docs):
    return usage_counts(raw_vocabulary(counts), docs)


# --- filtering against the brute-force usage ---------------------------------------------------

def test_reference_usage_sanity(counts, usage, docs):
    raw = raw_vocabulary(counts)
    assert len(raw) == len(set(raw)) == len(counts) + sum(
        1 for b in range(256) if bytes([b]) not in counts)
    # the usage is a segmentation of the corpus: token bytes sum to the corpus bytes
    assert sum(len(t) * u for t, u in usage.items()) == sum(len(d.encode()) for d in docs)
    multi_used = [t for t in usage if len(t) > 1]
    assert len(multi_used) > 100
    # enough unused raw tokens for the fill tests below
    assert sum(1 for t in counts if len(t) > 1) - len(multi_used) > 100


@pytest.mark.parametrize("extra", [0, 1, 7, 40, 150, "all_used", "all_used+30", "all_raw"])
def test_filter_equals_reference(counts, docs, usage, extra):
    n_used = sum(1 for t, u in usage.items() if len(t) > 1 and u > 0)
    n_raw_multi = sum(1 for t in counts if len(t) > 1)
    k = 256 + {"all_used": n_used, "all_used+30": n_used + 30,
               "all_raw": n_raw_multi}.get(extra, extra)  # type: ignore[arg-type]
    tok = tfc(counts, docs, k)
    assert tok.vocab_size == k == len(tok)
    got = tokens_of(tok)
    want = expected_vocabulary(counts, docs, k)
    assert got == want
    # all 256 single bytes, ids ordered by usage (ties by bytes)
    assert {t for t in got if len(t) == 1} == {bytes([b]) for b in range(256)}
    keys = [(-usage[t], t) for t in got]
    assert keys == sorted(keys)
    if extra == "all_used+30":
        # the unused slots hold unused raw tokens with the best counting rank, placed by bytes
        raw = raw_vocabulary(counts)
        unused_multi = [t for t in raw if len(t) > 1 and usage[t] == 0]
        fill = [t for t in got if len(t) > 1 and usage[t] == 0]
        assert set(fill) == set(unused_multi[:30])
    for t in got:
        assert tok.token_to_id(t) == got.index(t)


def test_filter_unused_fill_by_counting_rank():
    counts = {b"the": 10, b" cat": 5, b"at": 4, b"zzz": 100, b"aaa": 50, b"qq": 75, b"th": 3}
    docs = ["the cat", "the"]
    # "the cat" -> "the" " cat"; "the" -> "the"; nothing else is used
    assert usage_counts(raw_vocabulary(counts), docs) == {b"the": 2, b" cat": 1}
    singles = [bytes([b]) for b in range(256)]
    tok = tfc(counts, docs, 258)
    assert tokens_of(tok) == [b"the", b" cat"] + singles
    # one more slot: the unused raw token with the best counting rank ("zzz": count 100), placed
    # among the unused tokens by bytes
    tok = tfc(counts, docs, 259)
    assert tokens_of(tok) == [b"the", b" cat"] + sorted(singles + [b"zzz"])
    assert tok.token_to_id(b"zzz") == 2 + ord("z") + 1
    tok = tfc(counts, docs, 260)
    assert tokens_of(tok) == [b"the", b" cat"] + sorted(singles + [b"zzz", b"qq"])
    tok = tfc(counts, docs, 262)
    assert tokens_of(tok) == [b"the", b" cat"] + sorted(singles + [b"zzz", b"qq", b"aaa", b"at"])
    tok = tfc(counts, docs, 263)
    assert set(tokens_of(tok)) == set(singles) | set(counts)
    assert tokens_of(tok) == expected_vocabulary(counts, docs, 263)


def test_filter_usage_ties_and_cut_by_bytes():
    # "xb" and "xa" are used equally often; with one free slot the tie is broken by bytes
    counts = {b"xb": 9, b"xa": 5, b"yy": 1}
    docs = ["xb xa", "xa,xb", "yyyyyyyy"]
    use = usage_counts(raw_vocabulary(counts), docs)
    assert use == {b"xa": 2, b"xb": 2, b"yy": 4, b" ": 1, b",": 1}
    assert tokens_of(tfc(counts, docs, 257))[0] == b"yy"
    tok = tfc(counts, docs, 258)
    assert tokens_of(tok)[:2] == [b"yy", b"xa"] and tok.token_to_id(b"xb") is None
    tok = tfc(counts, docs, 259)
    # usage 4, 2, 2, then the used single bytes (usage 1, by bytes), then the rest by bytes
    assert tokens_of(tok)[:5] == [b"yy", b"xa", b"xb", b" ", b","]
    assert tokens_of(tok)[5:] == sorted(bytes([b]) for b in range(256) if b not in b" ,")
    assert tokens_of(tok) == expected_vocabulary(counts, docs, 259)


def test_special_tokens_get_the_last_ids(counts, docs):
    specials = ["<|endoftext|>", "<|pad|>", "<|im_start|>"]
    k = 400
    tok = tfc(counts, docs, k, special_tokens=specials)
    assert tok.vocab_size == k
    assert tok.special_tokens == {s: k - 3 + n for n, s in enumerate(specials)}
    assert [tok.id_to_token(i) for i in range(k - 3)] == expected_vocabulary(counts, docs, k - 3)
    assert tok.encode("a<|pad|>", allowed_special="all")[-1] == k - 2
    tok = train(docs, k, special_tokens=specials)
    assert tok.special_tokens == {s: k - 3 + n for n, s in enumerate(specials)}
    assert tok.vocab_size == k


@pytest.mark.parametrize("lam,eps", [(0.05, False), (0.5, True), (0.0, True)])
def test_filter_options(counts, docs, lam, eps):
    tok = tfc(counts, docs, 330, boundary_penalty=lam, token_preference=eps)
    assert tokens_of(tok) == expected_vocabulary(counts, docs, 330, lam=lam, eps=eps)
    assert tok.boundary_penalty == lam and tok.token_preference is eps and tok.algorithm == "mce"


def test_filter_raw_vocab_size_cut(counts, docs):
    tok = tfc(counts, docs, 300, raw_vocab_size=120)
    assert tokens_of(tok) == expected_vocabulary(counts, docs, 300, raw_vocab_size=120)
    assert tokens_of(tok) != expected_vocabulary(counts, docs, 300)


def test_raw_vocabulary_too_small_gives_fewer_ids():
    counts = {b"ab": 3, b"cd": 2}
    with pytest.warns(RuntimeWarning):
        tok = tfc(counts, ["abcdab"], 1000, special_tokens=["<s>"])
    assert tok.vocab_size == 256 + 2 + 1
    assert tok.special_tokens == {"<s>": 258}
    assert tokens_of(tok)[:2] == [b"ab", b"cd"]


def test_filter_on_cnfmce_counts(docs):
    c = cnfmce.count(docs, raw_vocab_size=HUGE, rounds=ROUNDS, progress=False)
    assert dict(c) == brute_rounds(docs, ROUNDS)
    tok = tfc(c, docs, 350)
    assert tokens_of(tok) == expected_vocabulary(c, docs, 350)


# --- train = count + train_from_counts; determinism -----------------------------------------------

@pytest.mark.parametrize("m", [HUGE, 200])
def test_train_equals_count_then_filter(docs, m):
    rounds = ((1, 6, 0), (7, 12, 2), (13, 20, 2))
    tok = train(docs, 420, raw_vocab_size=m, rounds=rounds, special_tokens=["<|e|>"])
    c = cnfmce.count(docs, raw_vocab_size=m, rounds=rounds, progress=False)
    tok2 = tfc(c, docs, 420, special_tokens=["<|e|>"])
    assert tokens_of(tok) == tokens_of(tok2)
    assert tok.special_tokens == tok2.special_tokens
    assert tokens_of(tok) == expected_vocabulary(c, docs, 419)


def test_train_determinism_threads_and_order():
    docs = random_corpus(5, n_docs=60, max_pieces=120) + list(SENTENCES)
    kw = dict(rounds=((1, 8, 0), (9, 16, 2)), raw_vocab_size=3000)
    ref = tokens_of(train(docs, 600, num_threads=1, **kw))
    assert tokens_of(train(docs, 600, num_threads=2, **kw)) == ref
    shuffled = list(docs)
    random.Random(1).shuffle(shuffled)
    assert tokens_of(train(shuffled, 600, num_threads=2, **kw)) == ref
    assert tokens_of(train(shuffled[::-1], 600, num_threads=1, **kw)) == ref


# --- counts files ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["counts.tsv", "counts.tsv.gz"])
def test_save_load_counts_round_trip(tmp_path, docs, name):
    c = cnfmce.count(docs, raw_vocab_size=HUGE, rounds=ROUNDS, progress=False)
    p = tmp_path / name
    cnfmce.save_counts(c, p)
    raw = p.read_bytes()
    if name.endswith(".gz"):
        assert raw[:2] == b"\x1f\x8b"
        raw = gzip.decompress(raw)
    assert raw.startswith(b"# cnfmce counts v1\n")
    back = cnfmce.load_counts(p)
    assert list(back.items()) == list(c.items())
    assert back.info.get("rounds") == c.info["rounds"]
    # str path too, and train_from_counts(path) == train_from_counts(mapping)
    assert dict(cnfmce.load_counts(str(p))) == dict(c)
    assert tokens_of(tfc(p, docs, 350)) == tokens_of(tfc(c, docs, 350))
    assert tokens_of(tfc(str(p), docs, 350)) == tokens_of(tfc(c, docs, 350))
    assert list(tmp_path.iterdir()) == [p]  # atomic write: no temporary left behind


def test_save_counts_plain_dict_and_odd_bytes(tmp_path):
    c = {b"\x00": 1, b"\xff\xfe": 7, b"a\tb\n": 7, "é".encode(): 3, b" " * 40: 2}
    p = tmp_path / "c.tsv"
    cnfmce.save_counts(c, p)
    back = cnfmce.load_counts(p)
    assert dict(back) == c
    assert list(back) == sorted(c, key=lambda k: (-c[k], k))  # best first, ties by bytes


def test_merge_counts_sums(tmp_path):
    a = cnfmce.count(["the cat sat", "the mat"], raw_vocab_size=HUGE, rounds=((1, 6, 0),),
                     progress=False)
    b = cnfmce.count(["the hat", "a cat"], raw_vocab_size=HUGE, rounds=((1, 6, 0),),
                     progress=False)
    both = cnfmce.count(["the cat sat", "the mat", "the hat", "a cat"], raw_vocab_size=HUGE,
                        rounds=((1, 6, 0),), progress=False)
    m = cnfmce.merge_counts(a, b)
    assert dict(m) == dict(both)  # threshold 0 and no cut: shards sum exactly
    assert m[b"the "] == 3 and m[b" cat"] == 2
    pa = tmp_path / "a.tsv.gz"
    cnfmce.save_counts(a, pa)
    assert dict(cnfmce.merge_counts(pa, b)) == dict(both)
    assert dict(cnfmce.merge_counts(str(pa), pa)) == {k: 2 * v for k, v in a.items()}
    assert dict(cnfmce.merge_counts({b"x": 1}, {b"x": 2, b"y": 5})) == {b"x": 3, b"y": 5}


def test_load_counts_rejects_bad_files(tmp_path):
    bad = {
        "notcounts.tsv": b"hello\n",
        "badline.tsv": b"# cnfmce counts v1\n# {}\nYQ==\t3\nnot a line\n",
        "badb64.tsv": b"# cnfmce counts v1\n# {}\n!!!\t3\n",
        "negative.tsv": b"# cnfmce counts v1\n# {}\nYQ==\t-3\n",
        "trunc.tsv.gz": gzip.compress(b"# cnfmce counts v1\n# {}\n" + b"YQ==\t3\n" * 1000)[:60],
    }
    for name, data in bad.items():
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ValueError):
            cnfmce.load_counts(p)
    with pytest.raises(OSError):
        cnfmce.load_counts(tmp_path / "missing.tsv")


# --- bad input ------------------------------------------------------------------------------------

@pytest.mark.parametrize("inputs", [[], [""], ["", "", ""], ()])
def test_empty_corpus(inputs):
    with pytest.raises(ValueError, match="empty"):
        cnfmce.count(inputs, progress=False)
    with pytest.raises(ValueError, match="empty"):
        cnfmce.train(inputs, vocab_size=300, progress=False)
    with pytest.raises(ValueError, match="empty"):
        tfc({b"ab": 2}, inputs, 300)
    with pytest.raises(ValueError, match="empty"):
        cnfmce.train(iter(inputs), vocab_size=300, progress=False)


def test_empty_files(tmp_path):
    (tmp_path / "e.txt").write_bytes(b"")
    (tmp_path / "e.jsonl").write_bytes(b"\n\n")
    for p in ("e.txt", "e.jsonl"):
        with pytest.raises(ValueError):
            cnfmce.train([tmp_path / p], vocab_size=300, progress=False)


def _bad_files(tmp_path):
    good = b'{"text": "fine text"}\n'
    files = {
        "bad.txt": b"valid start \xff\xfe invalid",
        "bad_utf8.jsonl": good + b'{"text": "a\xffb"}\n',
        "malformed.jsonl": good + b'{"text": "unterminated\n',
        "notobject.jsonl": good + b'["text"]\n',
        "notext.jsonl": good + b'{"body": "x"}\n',
        "corrupt.jsonl.gz": b"this is not gzip data at all",
        "truncated.jsonl.gz": gzip.compress(good * 5000)[:200],
        "corrupt.parquet": b"PAR1 not really parquet",
        "bad_utf8.txt.gz": gzip.compress(b"ok \xc3\x28 bad"),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return list(files)


def test_bad_files_raise_value_error(tmp_path):
    for name in _bad_files(tmp_path):
        p = tmp_path / name
        for fn in (lambda: cnfmce.count([p], progress=False),
                   lambda: cnfmce.train([p], vocab_size=300, progress=False),
                   lambda: tfc({b"ab": 1}, [p], 300)):
            with pytest.raises(ValueError) as ei:
                fn()
            assert isinstance(ei.value, CorpusError), (name, ei.value)
            assert name in str(ei.value), (name, str(ei.value))


def _zst_files(tmp_path):
    import zstandard

    (tmp_path / "good.jsonl").write_text('{"text": "hello"}\n')
    data = b"".join(json.dumps({"text": f"document {i}"}).encode() + b"\n" for i in range(3000))
    z = zstandard.ZstdCompressor().compress(data)
    (tmp_path / "ok.jsonl.zst").write_bytes(z)
    (tmp_path / "corrupt.jsonl.zst").write_bytes(b"this is not zstd data")
    (tmp_path / "truncated.jsonl.zst").write_bytes(z[:-1])


def test_good_zst(tmp_path):
    _zst_files(tmp_path)
    c = cnfmce.count([tmp_path / "good.jsonl", tmp_path / "ok.jsonl.zst"], rounds=((1, 3, 0),),
                     progress=False)
    assert c.info["documents"] == 3001


def test_corrupt_zst_is_a_corpus_error(tmp_path):
    _zst_files(tmp_path)
    try:
        cnfmce.count([tmp_path / "corrupt.jsonl.zst"], progress=False)
    except CorpusError as e:
        assert "corrupt.jsonl.zst" in str(e)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{type(e).__module__}.{type(e).__name__}: {e}") from None
    else:
        raise AssertionError("no error")
    r = _cli("count", "-o", "c.tsv", "--quiet", "corrupt.jsonl.zst", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_truncated_zst_is_an_error(tmp_path):
    _zst_files(tmp_path)
    try:
        c = cnfmce.count([tmp_path / "good.jsonl", tmp_path / "truncated.jsonl.zst"],
                         rounds=((1, 3, 0),), progress=False)
    except ValueError:
        return
    raise AssertionError(f"no error; documents read: {c.info['documents']} of 3001")


def test_invalid_utf8_message_names_the_place(tmp_path):
    _bad_files(tmp_path)
    with pytest.raises(CorpusError, match=r"bad_utf8\.jsonl:2"):
        cnfmce.count([tmp_path / "bad_utf8.jsonl"], progress=False)
    with pytest.raises(CorpusError, match=r"malformed\.jsonl:2"):
        cnfmce.count([tmp_path / "malformed.jsonl"], progress=False)


def test_missing_file(tmp_path):
    (tmp_path / "ok.jsonl").write_text('{"text": "fine"}\n')
    for inputs in ([tmp_path / "nope.jsonl"], [tmp_path / "ok.jsonl", tmp_path / "nope.txt"],
                   [str(tmp_path / "nope.parquet")]):
        with pytest.raises(FileNotFoundError):
            cnfmce.count(inputs, progress=False)
        with pytest.raises(FileNotFoundError):
            cnfmce.train(inputs, vocab_size=300, progress=False)
    with pytest.raises(OSError):
        tfc(tmp_path / "nope.tsv", ["some text"], 300)


def test_bad_documents_in_memory():
    with pytest.raises(TypeError):
        cnfmce.count(["ok", b"bytes"], progress=False)
    with pytest.raises(TypeError):
        cnfmce.count("a single string", progress=False)
    with pytest.raises(ValueError):
        cnfmce.count(["lone \ud800 surrogate"], progress=False)


class _Untouchable:
    """An iterable that records whether anyone started reading documents from it."""

    def __init__(self):
        self.touched = False

    def __iter__(self):
        def gen():
            self.touched = True  # runs when the first document is pulled
            yield from ["some text"] * 10
        return gen()


@pytest.mark.parametrize("vocab_size,specials", [(255, ()), (256, ("<s>",)),
                                                 (257, ("<s>", "</s>")), (0, ()), (-5, ())])
def test_vocab_size_too_small_before_any_work(vocab_size, specials, tmp_path):
    src = _Untouchable()
    with pytest.raises(ValueError):
        cnfmce.train(src, vocab_size=vocab_size, special_tokens=specials, progress=False,
                     tmp_dir=str(tmp_path))
    assert not src.touched
    src = _Untouchable()
    with pytest.raises(ValueError):
        tfc({b"ab": 1}, src, vocab_size, special_tokens=specials)
    assert not src.touched
    # the check comes before the counts file is read
    with pytest.raises(ValueError):
        tfc(tmp_path / "missing-counts.tsv", ["x"], vocab_size, special_tokens=specials)
    assert list(tmp_path.iterdir()) == []


def test_vocab_size_exactly_256_plus_specials_is_fine():
    tok = train(["abc abc"], 258, special_tokens=["<a>", "<b>"])
    assert tok.vocab_size == 258 and tok.special_tokens == {"<a>": 256, "<b>": 257}


@pytest.mark.parametrize("rounds", [
    ((2, 5, 0),),                 # not starting at 1
    ((0, 5, 0),),
    ((1, 4, 0), (6, 9, 0)),       # gap
    ((1, 4, 0), (4, 9, 0)),       # overlap
    ((1, 4, 0), (5, 9, -1)),      # negative threshold
    ((1, 4, 0), (5, 3, 0)),       # max < min
    (),
])
def test_bad_rounds_before_any_work(rounds, tmp_path):
    src = _Untouchable()
    with pytest.raises(ValueError):
        cnfmce.count(src, rounds=rounds, progress=False, tmp_dir=str(tmp_path))
    assert not src.touched
    src = _Untouchable()
    with pytest.raises(ValueError):
        cnfmce.train(src, vocab_size=300, rounds=rounds, progress=False, tmp_dir=str(tmp_path))
    assert not src.touched
    assert list(tmp_path.iterdir()) == []


def test_bad_special_tokens():
    for specials, exc in ((["<s>", "<s>"], ValueError), ([""], ValueError), ("<s>", TypeError)):
        with pytest.raises(exc):
            train(["abc"], 300, special_tokens=specials)


def test_special_tokens_from_a_generator():
    tok = train(["the cat sat on the mat"] * 3, 300, special_tokens=(s for s in ["<|x|>"]))
    assert tok.special_tokens == {"<|x|>": 299}


# --- the CLI writes nothing on failure -------------------------------------------------------------

def _cli(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "cnfmce.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_writes_nothing_on_failure(tmp_path):
    names = _bad_files(tmp_path)
    (tmp_path / "good.jsonl").write_text('{"text": "fine text, fine text"}\n' * 20)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    before = set(os.listdir(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    cases = [
        ["train", "-o", out / "tok.json", "--vocab-size", "300", "--quiet", "good.jsonl", "bad.txt"],
        ["train", "-o", out / "tok.json", "--vocab-size", "300", "good.jsonl", "truncated.jsonl.gz"],
        ["train", "-o", out / "tok.json", "--vocab-size", "300", "good.jsonl", "missing.jsonl"],
        ["train", "-o", out / "tok.json", "--vocab-size", "200", "good.jsonl"],
        ["train", "-o", out / "tok.json", "--vocab-size", "300", "--rounds", "1-4:0,6-9:2",
         "good.jsonl"],
        ["train", "-o", out / "tok.json", "--vocab-size", "300", "--counts", "missing.tsv.gz",
         "good.jsonl"],
        ["train", "-o", out / "tok.json", "--vocab-size", "300", "--counts", "bad.txt",
         "good.jsonl"],
        ["count", "-o", out / "c.tsv.gz", "good.jsonl", "malformed.jsonl"],
        ["count", "-o", out / "c.tsv.gz", "--quiet", "bad_utf8.jsonl"],
    ]
    for args in cases:
        r = _cli(*args, cwd=tmp_path, env=env)
        assert r.returncode != 0, args
        assert "Traceback" not in r.stderr, (args, r.stderr)
        assert "error" in r.stderr.lower(), (args, r.stderr)
        assert os.listdir(out) == [], (args, os.listdir(out))
        assert os.listdir(tmp) == [], (args, os.listdir(tmp))
        assert set(os.listdir(tmp_path)) == before | {"out"}, args
    assert set(names) <= before


def test_cli_vocab_size_error_is_a_clear_message(tmp_path):
    (tmp_path / "good.jsonl").write_text('{"text": "fine"}\n')
    r = _cli("train", "-o", "t.json", "--vocab-size", "100", "good.jsonl", cwd=tmp_path)
    assert r.returncode == 1
    assert "vocab_size" in r.stderr and "256" in r.stderr
    assert not (tmp_path / "t.json").exists()
