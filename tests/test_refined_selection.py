"""The refined selection (``selection="refined"``; src/refine.rs, issue 13) against a
slow Python reference built on the reference MCE (tests/train_helpers.py): character coverage,
refining passes, tokens saved. The paper's rule (``selection="paper"``) is tested against the same
reference in test_filter_train.py."""

from __future__ import annotations

import math
import random

import pytest
import regex

import cnfmce
import reference

from train_helpers import (HUGE, SENTENCES, brute_rounds, expected_vocabulary, mce_encode,
                           random_corpus, raw_vocabulary, tokens_of, usage_counts)

REFINE_STEPS = (2.0, 1.4, 1.15)
CHAR_COVERAGE = 0.9997
CHAR_COVERAGE_SHARE = 1 / 16
ROUNDS = ((1, 8, 0), (9, 16, 2))
SCRIPT_SHARE_EXPONENT = cnfmce._core.SCRIPT_SHARE_EXPONENT  # selection="refined-scripts"
NON_ASCII_SHARE_EXPONENT = cnfmce._core.NON_ASCII_SHARE_EXPONENT  # selection="refined-non-ascii"
# the scripts the test texts use (the reference refuses any other character)
_SCRIPTS = ("Latin", "Greek", "Cyrillic", "Han", "Hangul", "Arabic", "Hebrew", "Devanagari", "Thai", "Hiragana",
            "Katakana", "Bopomofo")


def _round(x: float) -> int:
    return int(math.floor(x + 0.5))  # Rust's f64::round for positive numbers


def _one_char(t: bytes) -> bool:
    if not 2 <= len(t) <= 4:
        return False
    try:
        return len(t.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


def covered(counts, k):
    chars = sorted(((c, t) for t, c in counts.items() if c > 0 and _one_char(t)), key=lambda x: (-x[0], x[1]))
    total = sum(c for c, _ in chars)
    cap = min(int(k * CHAR_COVERAGE_SHARE), max(0, k - 256))
    out, acc = [], 0
    for c, t in chars:
        if acc >= CHAR_COVERAGE * total or len(out) >= cap:
            break
        out.append(t)
        acc += c
    return set(out)


def fallback_prefixes(chars, have):
    """src/refine.rs step 6: every character of 3 or 4 bytes gives every proper prefix of its bytes
    of at least 2 bytes, counted with the summed counts of the characters beginning with it; the
    prefixes already in ``have`` (the raw vocabulary) are left out."""
    out = {}
    for t, c in chars.items():
        if len(t) >= 3 and c > 0 and _one_char(t):
            for n in range(2, len(t)):
                out[t[:n]] = out.get(t[:n], 0) + c
    return {p: c for p, c in out.items() if p not in have}


def alt_cost(vocab, t):
    ids = {tok: i for i, tok in enumerate(vocab)}
    try:
        s = t.decode("utf-8")
    except UnicodeDecodeError:  # a fallback prefix (step 6): split at every byte
        return min(len(reference.mce_encode(ids, t[:p])) + len(reference.mce_encode(ids, t[p:]))
                   for p in range(1, len(t)))
    if len(s) == 1:
        return len(t)
    maxlen = max(len(x) for x in vocab)
    best = None
    for p in range(1, len(s)):
        n = len(mce_encode(ids, s[:p], maxlen=maxlen)) + len(mce_encode(ids, s[p:], maxlen=maxlen))
        best = n if best is None else min(best, n)
    return best


def _char_script(ch):
    if regex.match(r"\p{sc=Common}|\p{sc=Inherited}", ch):
        return None
    for name in _SCRIPTS:
        if regex.match(rf"\p{{sc={name}}}", ch):
            return name
    raise AssertionError(f"the reference does not know the script of {ch!r}")


def token_script(t):
    """src/refine.rs step 4: the one script of the token's characters that are neither Common
    nor Inherited; None without one, with two, or for bytes that are not UTF-8."""
    try:
        s = t.decode("utf-8")
    except UnicodeDecodeError:
        return None
    found = {_char_script(ch) for ch in s} - {None}
    return found.pop() if len(found) == 1 else None


def script_weights(vocab, use):
    mass = {}
    for t in vocab:
        sc = token_script(t)
        if sc is not None:
            mass[sc] = mass.get(sc, 0) + use[t]
    top = max(mass.values(), default=0)
    w = {}
    for t in vocab:
        m = mass.get(token_script(t), 0)
        w[t] = (top / m) ** SCRIPT_SHARE_EXPONENT if m > 0 else 1.0
    return w


def non_ascii_weights(vocab, use):
    """src/refine.rs step 5: the tokens of the smaller of the ASCII and non-ASCII groups (by the
    usage of their tokens) weighted by (larger / smaller) ^ NON_ASCII_SHARE_EXPONENT."""
    ma = sum(use[t] for t in vocab if t.isascii())
    mn = sum(use[t] for t in vocab if not t.isascii())
    lo, hi = min(ma, mn), max(ma, mn)
    w = (float(hi) / float(lo)) ** NON_ASCII_SHARE_EXPONENT if 0 < lo < hi else 1.0
    weighted_ascii = ma < mn
    return {t: w if t.isascii() == weighted_ascii else 1.0 for t in vocab}


def _scaled(x, w):
    return x if w == 1.0 else int(math.floor(x * w + 0.5))


def scores(vocab, use, keep, weight=None):
    w = (lambda t: weight[t]) if weight is not None else (lambda t: 1.0)
    wu = {t: _scaled(use[t], w(t)) for t in vocab}
    multi = sorted((i for i, t in enumerate(vocab) if len(t) > 1 and wu[t] > 0), key=lambda i: (-wu[vocab[i]], i))
    top = multi[:2 * keep]
    sc = {}
    for i in multi[2 * keep:]:
        t = vocab[i]
        sc[t] = _scaled(use[t] * (alt_cost(vocab, t) - 1), w(t)) if _one_char(t) else wu[t]
    for i in top:
        t = vocab[i]
        sc[t] = _scaled(use[t] * (alt_cost(vocab, t) - 1), w(t))
    return sc


def choose(vocab, use, sc, keep, cov):
    singles = [t for t in vocab if len(t) == 1]
    rest = [(i, t) for i, t in enumerate(vocab) if len(t) > 1]

    def key(it):
        i, t = it
        s = sc.get(t, 0)
        return (t not in cov, 0 if s else 1, -s, t if s else b"", i)

    rest.sort(key=key)
    chosen = singles + [t for _, t in rest[:keep - len(singles)]]
    return sorted(chosen, key=lambda t: (-use[t], t))


def expected_refined(counts, docs, k, raw_vocab_size=None, chars=None, scripts=False, non_ascii=False):
    """``chars``: every counted character with its count (default: those of ``counts``); the
    covered ones that the raw_vocab_size cut leaves out join the raw vocabulary. ``scripts``:
    ``selection="refined-scripts"`` (every cut weighted by :func:`script_weights`);
    ``non_ascii``: ``selection="refined-non-ascii"`` (weighted by :func:`non_ascii_weights`)."""
    weigh = script_weights if scripts else non_ascii_weights if non_ascii else (lambda v, u: None)
    if chars is None:
        chars = {t: c for t, c in counts.items() if _one_char(t)}
    cov = covered(chars, k)
    cut = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:raw_vocab_size])
    cut.update({t: chars[t] for t in cov if t not in cut})
    if non_ascii:  # step 6: the fallback prefixes of every character of 3 or 4 bytes
        cut.update(fallback_prefixes(chars, set(cut)))
    vocab = raw_vocabulary(cut)
    use = usage_counts(vocab, docs)
    passes = 0
    for f in REFINE_STEPS:
        keep = _round(f * k)
        if keep >= len(vocab):
            continue
        weight = weigh(vocab, use)
        vocab = choose(vocab, use, scores(vocab, use, keep, weight), keep, cov)
        use = usage_counts(vocab, docs)
        passes += 1
    if len(vocab) > k:
        weight = weigh(vocab, use)
        return choose(vocab, use, scores(vocab, use, k, weight), k, cov), passes
    # nothing to cut: the paper's rule over the last vocabulary
    used = sorted((t for t in vocab if len(t) > 1 and use[t] > 0), key=lambda t: (-use[t], t))
    unused = [t for t in vocab if len(t) > 1 and use[t] == 0]
    singles = [t for t in vocab if len(t) == 1]
    return sorted(singles + (used + unused)[:k - 256], key=lambda t: (-use[t], t)), passes


def tfc(counts, docs, k, **kw):
    kw.setdefault("progress", False)
    kw.setdefault("selection", "refined")
    return cnfmce.train_from_counts(counts, docs, vocab_size=k, **kw)


def _cjk_corpus(seed, n=30):
    rng = random.Random(seed)
    han = [chr(0x4E00 + rng.randrange(400)) for _ in range(120)]
    hangul = [chr(0xAC00 + rng.randrange(300)) for _ in range(60)]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(5, 40)):
            r = rng.random()
            if r < 0.4:
                parts.append("".join(rng.choice(han[:rng.randint(3, 120)]) for _ in range(rng.randint(1, 5))))
            elif r < 0.6:
                parts.append("".join(rng.choice(hangul) for _ in range(rng.randint(1, 4))))
            else:
                parts.append(rng.choice(SENTENCES)[: rng.randint(3, 40)])
        out.append(rng.choice(["", " ", "，", "。"]).join(parts))
    return out


@pytest.mark.parametrize("seed,k", [(1, 300), (3, 520)])
def test_refined_equals_reference(seed, k):
    docs = _cjk_corpus(seed, n=14) + random_corpus(seed, n_docs=5, max_pieces=30)
    counts = brute_rounds(docs, ROUNDS)
    want, passes = expected_refined(counts, docs, k)
    tok = tfc(counts, docs, k)
    assert tokens_of(tok) == want
    assert tok.metadata["selection"] == "refined"
    assert len(tok.metadata["refining"]) == passes
    assert tok.metadata["covered_characters"] == len(covered(counts, k))
    if seed == 1:
        assert passes >= 1  # the cases do refine


def _scripts_corpus(seed, n=24):
    """Latin, Han and Hangul (_cjk_corpus) with a little Greek and Cyrillic."""
    rng = random.Random(seed)
    greek = ["".join(chr(0x3B1 + rng.randrange(24)) for _ in range(rng.randint(2, 7))) for _ in range(30)]
    cyr = ["".join(chr(0x430 + rng.randrange(32)) for _ in range(rng.randint(2, 8))) for _ in range(40)]
    docs = _cjk_corpus(seed, n=n)
    for words in (greek, cyr):
        docs += [" ".join(rng.choice(words[:rng.randint(4, len(words))]) for _ in range(rng.randint(5, 30)))
                 for _ in range(4)]
    return docs


def test_script_of_tokens():
    assert token_script(b" the") == "Latin" and token_script("中文，".encode()) == "Han"
    assert token_script(b"  ") is None and token_script("aα".encode()) is None
    assert token_script("\u03b1\u0301".encode()) == "Greek"  # a combining mark is Inherited
    assert token_script(b"\xe4\xb8") is None  # part of a character


def _trained_as_reference(counts, docs, k, selection, **rule):
    """Trains from ``counts`` with ``selection`` and checks it against the slow reference of the
    rule (``rule``: the flag of ``expected_refined``); returns the reference tokens and the tokenizer."""
    want, passes = expected_refined(counts, docs, k, **rule)
    # the reference weighs with NON_ASCII_SHARE_EXPONENT (the default selection's exponent is set
    # by balance: tests/test_defaults.py)
    exp = {"non_ascii_exponent": NON_ASCII_SHARE_EXPONENT} if selection == "refined-non-ascii" else {}
    tok = tfc(counts, docs, k, selection=selection, **exp)
    assert tokens_of(tok) == want
    assert tok.metadata["selection"] == selection
    assert len(tok.metadata["refining"]) == passes >= 1
    return want, tok


def _trained_with_counting(docs, k, selection, **rule):
    """``cnfmce.train`` with ``selection`` at 1 thread equals the reference over ``cnfmce.count``'s
    counts, and at 2 threads the 1-thread result; returns the 1-thread tokenizer."""
    kw = dict(rounds=ROUNDS, raw_vocab_size=1500, progress=False, selection=selection)
    if selection == "refined-non-ascii":
        kw["non_ascii_exponent"] = NON_ASCII_SHARE_EXPONENT
    one = cnfmce.train(docs, vocab_size=k, num_threads=1, **kw)
    c = cnfmce.count(docs, raw_vocab_size=1500, rounds=ROUNDS, progress=False)
    # counting keeps every character's count beside the cut (coverage and step 6 see them all)
    assert tokens_of(one) == expected_refined(dict(c), docs, k, chars=_char_occurrences(docs), **rule)[0]
    assert tokens_of(cnfmce.train(docs, vocab_size=k, num_threads=2, **kw)) == tokens_of(one)
    return one


@pytest.mark.parametrize("seed,k", [(2, 320), pytest.param(6, 560, marks=pytest.mark.slow)])
def test_refined_scripts_equals_reference(seed, k):
    docs = _scripts_corpus(seed, n=12) + random_corpus(seed, n_docs=4, max_pieces=30)
    counts = brute_rounds(docs, ROUNDS)
    want, tok = _trained_as_reference(counts, docs, k, "refined-scripts", scripts=True)
    assert tok.metadata["covered_characters"] == len(covered(counts, k))
    # the weights change the choice, never to more tokens of the largest script (Latin) than "refined"
    plain = tokens_of(tfc(counts, docs, k))
    assert plain == expected_refined(counts, docs, k)[0] != want
    latin = lambda toks: sum(token_script(t) == "Latin" for t in toks)  # noqa: E731
    assert latin(want) <= latin(plain)


def test_refined_scripts_train_threads():
    one = _trained_with_counting(_scripts_corpus(9, n=16), 450, "refined-scripts", scripts=True)
    assert "covered_beyond_cut" in one.metadata


@pytest.mark.parametrize("seed,k,mostly", [(4, 360, "non-ASCII"), (5, 420, "ASCII")])
def test_refined_non_ascii_equals_reference(seed, k, mostly):
    # mostly multi-byte text (the ASCII tokens are weighted) and mostly ASCII text (the others are)
    docs = _scripts_corpus(seed, n=12) + random_corpus(seed, n_docs=4, max_pieces=30)
    if mostly == "ASCII":
        rng = random.Random(seed)
        words = [s for s in SENTENCES if s.isascii()]
        docs = docs[:3] + [" ".join(rng.choice(words)[: rng.randint(5, 60)] for _ in range(rng.randint(3, 12)))
                           for _ in range(40)]
    counts = brute_rounds(docs, ROUNDS)
    want, _ = _trained_as_reference(counts, docs, k, "refined-non-ascii", non_ascii=True)
    # the weight changes the choice, to more tokens of the smaller group than "refined" keeps
    plain = tokens_of(tfc(counts, docs, k))
    assert plain != want
    use = usage_counts(raw_vocabulary(counts), docs)
    ascii_smaller = sum(u for t, u in use.items() if t.isascii()) < sum(u for t, u in use.items() if not t.isascii())
    assert ascii_smaller == (mostly == "non-ASCII")
    group = lambda toks: sum(t.isascii() == ascii_smaller for t in toks if len(t) > 1)  # noqa: E731
    assert group(want) > group(plain)
    if seed == 4:  # the same with counting, at 1 and 2 threads
        _trained_with_counting(docs, k, "refined-non-ascii", non_ascii=True)


def test_refined_keeps_covered_characters_the_paper_drops():
    # many rare characters inside frequent words: the paper's single pass counts the words, not
    # the characters, and cuts the characters; coverage keeps them
    docs = _cjk_corpus(11, n=40)
    counts = brute_rounds(docs, ROUNDS)
    k = 600
    cov = covered(counts, k)
    assert cov
    refined = set(tokens_of(tfc(counts, docs, k)))
    paper = set(tokens_of(tfc(counts, docs, k, selection="paper")))
    assert cov <= refined
    assert not cov <= paper
    assert tokens_of(tfc(counts, docs, k, selection="paper")) == expected_vocabulary(counts, docs, k)


def test_train_selection_paper_and_refined_on_raw_vocab_size():
    docs = _cjk_corpus(5, n=10) + list(SENTENCES[:6])
    kw = dict(rounds=ROUNDS, progress=False, raw_vocab_size=1200)
    ref = cnfmce.train(docs, vocab_size=500, selection="refined", **kw)
    c = cnfmce.count(docs, raw_vocab_size=1200, rounds=ROUNDS, progress=False)
    assert tokens_of(ref) == expected_refined(dict(c), docs, 500)[0]
    # from more counts than raw_vocab_size, coverage sees the raw vocabulary's candidates only
    every = cnfmce.count(docs, raw_vocab_size=HUGE, rounds=ROUNDS, progress=False)
    assert len(every) > 1200
    assert tokens_of(tfc(every, docs, 500, raw_vocab_size=1200)) == tokens_of(ref)
    paper = cnfmce.train(docs, vocab_size=500, selection="paper", **kw)
    assert tokens_of(paper) == expected_vocabulary(c, docs, 500)
    assert paper.metadata["selection"] == "paper" and paper.metadata["refining"] == []
    # the default is "refined-non-ascii" with the exponent the default balance sets (rounds given:
    # used as given)
    default = cnfmce.train(docs, vocab_size=500, **kw)
    e = cnfmce._core.balance_settings(cnfmce._core.DEFAULT_BALANCE, 500)[0]
    assert default.metadata["selection"] == "refined-non-ascii" and default.metadata["non_ascii_exponent"] == e
    assert default.token_bytes() == cnfmce.train(docs, vocab_size=500, selection="refined-non-ascii",
                                                 non_ascii_exponent=e, **kw).token_bytes()
    assert default.token_bytes() != paper.token_bytes()
    assert tokens_of(ref) != tokens_of(paper)


def _utf8(t):
    try:
        t.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _char_occurrences(docs):
    from collections import Counter
    return {ch.encode(): n for ch, n in Counter(ch for d in docs for ch in d if ord(ch) >= 0x80).items()}


def test_coverage_sees_characters_below_the_raw_vocabulary_cut():
    # counting keeps every character's exact count beside the raw_vocab_size cut: coverage takes
    # characters the cut leaves out (issue 13), against the reference with the full counts
    # repeated English (many candidates counted more often than any character) and 200 Han
    # characters spread evenly (each about 4 times)
    rng = random.Random(21)
    docs = [" ".join(rng.choice(SENTENCES[:4]) for _ in range(8)) + " "
            + "".join(chr(0x4E00 + rng.randrange(200)) for _ in range(30)) for _ in range(30)]
    docs += random_corpus(21, n_docs=3, max_pieces=20)
    counts = brute_rounds(docs, ROUNDS)
    chars = {t: c for t, c in counts.items() if _one_char(t)}
    assert chars == _char_occurrences(docs)  # a character's count is its number of occurrences
    k, raw = 700, 900
    cut = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:raw])
    beyond = covered(chars, k) - set(cut)
    assert len(beyond) >= 5
    for threads in (1, 2):
        tok = cnfmce.train(docs, vocab_size=k, raw_vocab_size=raw, rounds=ROUNDS, selection="refined",
                           progress=False, num_threads=threads)
        want, passes = expected_refined(counts, docs, k, raw_vocab_size=raw, chars=chars)
        assert tokens_of(tok) == want
        assert tok.metadata["covered_characters"] == len(covered(chars, k))
        assert tok.metadata["covered_beyond_cut"] == len(beyond)
        assert tok.metadata["raw_vocabulary"] >= raw + len(beyond)
    assert set(tokens_of(tok)) >= covered(chars, k)
    # the counts of every candidate given to train_from_counts: the same (coverage ranks every
    # character given, then the cut)
    every = cnfmce.count(docs, raw_vocab_size=HUGE, rounds=ROUNDS, progress=False)
    assert tokens_of(tfc(every, docs, k, raw_vocab_size=raw)) == tokens_of(tok)
    # only the raw vocabulary's counts: nothing beyond its cut to cover
    cut_only = tfc(dict(cnfmce.count(docs, raw_vocab_size=raw, rounds=ROUNDS, progress=False)), docs, k)
    assert cut_only.metadata["covered_beyond_cut"] == 0
    assert tokens_of(cut_only) == expected_refined(cut, docs, k)[0] != tokens_of(tok)
    # the paper's rule does not look at characters: unchanged, and no such key in its metadata
    paper = cnfmce.train(docs, vocab_size=k, raw_vocab_size=raw, rounds=ROUNDS, progress=False,
                         selection="paper")
    assert tokens_of(paper) == expected_vocabulary(counts, docs, k, raw_vocab_size=raw)
    assert "covered_beyond_cut" not in paper.metadata


def _rare_characters_corpus(seed):
    """English repeated (its candidates outnumber the characters' counts) and Han and Hangul
    characters drawn from wide ranges, most of them a few times: below the raw vocabulary's cut."""
    rng = random.Random(seed)
    docs = []
    for _ in range(30):
        parts = [rng.choice(SENTENCES[:4]) for _ in range(6)]
        parts.append("".join(chr(0x4E00 + rng.randrange(2000)) for _ in range(rng.randint(10, 30))))
        parts.append("".join(chr(0xAC00 + rng.randrange(800)) for _ in range(rng.randint(3, 10))))
        parts.append("".join(chr(0x4E00 + rng.randrange(40)) for _ in range(rng.randint(10, 30))))
        docs.append(rng.choice([" ", "，", "。"]).join(parts))
    return docs + random_corpus(seed, n_docs=3, max_pieces=20)


@pytest.mark.parametrize("seed,k,raw", [(31, 700, 900), (32, 900, 1400)])
def test_fallback_prefixes_equal_reference(seed, k, raw):
    # selection="refined-non-ascii" adds the fallback prefixes of every character of 3 or 4
    # bytes (src/refine.rs step 6): against the reference with every character's count, at 1 and
    # 2 threads, from counting and from counts
    docs = _rare_characters_corpus(seed)
    counts = brute_rounds(docs, ROUNDS)
    chars = {t: c for t, c in counts.items() if _one_char(t)}
    assert chars == _char_occurrences(docs)
    cut = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:raw])
    cut.update({t: chars[t] for t in covered(chars, k) if t not in cut})
    pre = fallback_prefixes(chars, set(cut))
    assert len(pre) >= 10 and all(len(p) in (2, 3) for p in pre)  # 3: the 4-byte characters
    # prefixes of characters the raw vocabulary has, too (a refining step can cut those
    # characters; their prefix then spells them with 2 tokens)
    of_missing = {t[:-1] for t in chars if len(t) >= 3 and t not in cut}
    assert of_missing < set(pre)
    want, passes = expected_refined(counts, docs, k, raw_vocab_size=raw, chars=chars, non_ascii=True)
    kept = [t for t in want if t in pre]
    assert kept and passes >= 1  # the cuts keep some prefixes, not necessarily all
    for threads in (1, 2):
        tok = cnfmce.train(docs, vocab_size=k, raw_vocab_size=raw, rounds=ROUNDS, selection="refined-non-ascii",
                           progress=False, num_threads=threads)
        assert tokens_of(tok) == want
        assert tok.metadata["fallback_prefixes"] == len(pre)
        assert tok.metadata["raw_vocabulary"] >= raw + len(pre)
    every = cnfmce.count(docs, raw_vocab_size=HUGE, rounds=ROUNDS, progress=False)
    assert tokens_of(tfc(every, docs, k, raw_vocab_size=raw, selection="refined-non-ascii")) == want
    # a character without a token now costs 2 tokens, and round-trips
    ids = {t: i for i, t in enumerate(tokens_of(tok))}
    ch = next(t for t in sorted(chars) if t[:-1] in kept and t not in ids)
    assert len(tok.encode(ch.decode())) == 2 and tok.decode(tok.encode(ch.decode())) == ch.decode()
    for d in docs:
        assert tok.decode(tok.encode(d)) == d
    # "refined" and the paper's rule add no prefix (not valid UTF-8, longer than a byte)
    for sel in ("refined", "refined-scripts", "paper"):
        other = cnfmce.train(docs, vocab_size=k, raw_vocab_size=raw, rounds=ROUNDS, selection=sel, progress=False)
        assert not [t for t in tokens_of(other) if len(t) > 1 and t not in counts]
        assert other.metadata.get("fallback_prefixes") is None
    assert tokens_of(other) == expected_vocabulary(counts, docs, k, raw_vocab_size=raw)


def test_refined_determinism_threads_and_order():
    docs = _cjk_corpus(8, n=50) + random_corpus(8, n_docs=30, max_pieces=80)
    kw = dict(rounds=ROUNDS, raw_vocab_size=4000, progress=False, selection="refined")
    ref = tokens_of(cnfmce.train(docs, vocab_size=900, num_threads=1, **kw))
    assert tokens_of(cnfmce.train(docs, vocab_size=900, num_threads=2, **kw)) == ref
    shuffled = list(docs)
    random.Random(3).shuffle(shuffled)
    assert tokens_of(cnfmce.train(shuffled, vocab_size=900, num_threads=2, **kw)) == ref


def test_selection_bad_values():
    with pytest.raises(ValueError, match="selection"):
        cnfmce.train(["abc"], vocab_size=300, selection="best", progress=False)
    with pytest.raises(TypeError, match="selection"):
        cnfmce.train(["abc"], vocab_size=300, selection=1, progress=False)
    with pytest.raises(ValueError, match="selection"):
        cnfmce.train_from_counts({b"ab": 1}, ["abc"], vocab_size=300, selection="Paper", progress=False)


def test_cli_selection(tmp_path):
    import subprocess
    import sys
    src = tmp_path / "c.txt"
    src.write_text(" ".join(_cjk_corpus(2, n=5)), encoding="utf-8")
    outs = {}
    for sel in ("paper", "refined", "refined-scripts", "refined-non-ascii"):
        out = tmp_path / f"{sel}.json"
        subprocess.run([sys.executable, "-m", "cnfmce.cli", "train", "-o", str(out), "--vocab-size", "400",
                        "--selection", sel, "--quiet", str(src)], check=True)
        outs[sel] = cnfmce.Tokenizer.load(out)
    assert outs["paper"].vocab_size == outs["refined"].vocab_size == 400
    direct = cnfmce.train([src.read_text(encoding="utf-8")], vocab_size=400, selection="paper", progress=False)
    assert outs["paper"].token_bytes() == direct.token_bytes()
    direct = cnfmce.train([src.read_text(encoding="utf-8")], vocab_size=400, selection="refined", progress=False)
    assert outs["refined"].token_bytes() == direct.token_bytes()
    assert outs["refined"].metadata["selection"] == "refined"
    assert outs["refined-scripts"].metadata["selection"] == "refined-scripts"
    assert outs["refined-non-ascii"].metadata["selection"] == "refined-non-ascii"
    bad = subprocess.run([sys.executable, "-m", "cnfmce.cli", "train", "-o", str(tmp_path / "x.json"),
                          "--vocab-size", "400", "--selection", "best", str(src)], capture_output=True, text=True)
    assert bad.returncode != 0 and "selection" in bad.stderr


def test_paper_default_unchanged_for_huge_raw():
    # with HUGE raw and a vocabulary larger than what was used, both rules keep everything used
    docs = list(SENTENCES)
    counts = brute_rounds(docs, ROUNDS)
    n_used = sum(1 for t, u in usage_counts(raw_vocabulary(counts), docs).items() if len(t) > 1 and u > 0)
    k = 256 + len([t for t in counts if len(t) > 1]) + 10
    with pytest.warns(RuntimeWarning):
        a = tfc(counts, docs, k)
    with pytest.warns(RuntimeWarning):
        b = tfc(counts, docs, k, selection="paper")
    assert tokens_of(a) == tokens_of(b)
    assert n_used > 0 and HUGE > k


@pytest.mark.parametrize("selection", ["refined", "refined-non-ascii"])
def test_distributed_steps_refined_equal_local(selection):
    # docs/spec.md section 6: counting and every usage pass (filtering and the refining passes)
    # made in blocks, merged through pickle, give the local refined tokenizer (with
    # "refined-non-ascii", its fallback prefixes too: rare characters below the raw cut)
    import pickle
    from cnfmce import _core
    docs = _cjk_corpus(4, n=24) + list(SENTENCES)
    if selection == "refined-non-ascii":
        docs += _rare_characters_corpus(33)[:12]
    exp = {"non_ascii_exponent": NON_ASCII_SHARE_EXPONENT} if selection == "refined-non-ascii" else {}
    local = cnfmce.train(docs, vocab_size=400, raw_vocab_size=1500, rounds=ROUNDS, selection=selection,
                         progress=False, **exp)
    opts = _core.Options.default()
    trainer = _core.Trainer(400, 1500, ROUNDS, [], opts, selection=selection)
    kinds = []
    ship = lambda x: pickle.loads(pickle.dumps(x))  # noqa: E731
    blocks = [docs[i::3] for i in range(3)]
    while trainer.next_pass() is not None:
        kind, _, round_ = trainer.begin_pass()
        kinds.append(kind)
        if kind == "count":
            survivors = ship(trainer.survivors())
            total = _core.BlockCounts()
            for b in blocks:
                total = ship(_core.count_block(b, round_, survivors)).merge(total)
            trainer.end_pass_with_counts(total)
        else:
            worker = _core.Filter(trainer.raw_tokens(), ship(opts))
            total = _core.BlockUsage()
            for b in reversed(blocks):
                total = ship(worker.usage_of(b)).merge(total)
            trainer.end_pass_with_usage(total)
    assert "refine" in kinds and kinds.index("filter") < kinds.index("refine")
    core, report = trainer.finish()
    assert cnfmce.Tokenizer(core).token_bytes() == local.token_bytes()
    assert report["selection"] == selection and len(report["refine"]) == kinds.count("refine")
    assert (report["fallback_prefixes"] > 0) == (selection == "refined-non-ascii")
    if selection == "refined-non-ascii":
        assert local.metadata["fallback_prefixes"] == report["fallback_prefixes"]
        assert [t for t in local.token_bytes().values() if len(t) > 1 and not _utf8(t)]
