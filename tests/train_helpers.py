"""Slow, obviously-correct helpers for the CNF training tests (SPEC sections 2 and 4).

Everything here is written straight from the SPEC and the paper (section 3.1, Algorithm 1) in
pure Python, without using the package:

* ``char_joins`` / ``token_preference`` / ``mce_encode``: from ``tests/reference.py`` (units from
  ``unicodedata`` and the ``regex`` module's ``\\p{Script=...}``);
* ``brute_count``: every valid candidate occurrence, no early stopping;
* ``brute_rounds``: the candidates of each round's lengths whose brute-force count reaches the
  round's threshold (what Algorithm 1 must return when thresholds do not decrease);
* ``algorithm1``: a literal transcription of Algorithm 1 (with both early-stopping criteria);
* ``mce_encode``: the min-cost encoding DP of SPEC section 2 (a thin wrapper of the reference);
* ``expected_vocabulary``: the filtering phase of SPEC section 4 over a brute-force usage count;
* corpora: hand-written sentences, random mixed-script texts, the shared corpora.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import pytest

import reference
from reference import char_joins, token_preference  # noqa: F401 (re-exported)

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CNFMCE_SHARED", str(REPO.parent / "shared")))
HUGE = 10 ** 9



# --- units (SPEC section 2) ---------------------------------------------------------------------


def annotate(text: str) -> Tuple[bytes, List[int], List[int], List[bool]]:
    """(x, starts, w, boundary): the UTF-8 bytes, 1 where a byte starts its unit, the unit index
    of every byte, and whether each position 0..n is a character boundary."""
    x = text.encode("utf-8")
    n = len(x)
    starts = [0] * n
    boundary = [False] * (n + 1)
    boundary[n] = True
    pos = 0
    prev = False
    for ch in text:
        ln = len(ch.encode("utf-8"))
        j = char_joins(ch)
        starts[pos] = 0 if (j and prev) else 1
        boundary[pos] = True
        prev = j
        pos += ln
    w = []
    u = -1
    for s in starts:
        u += s
        w.append(u)
    return x, starts, w, boundary


def forbidden(starts: Sequence[int], w: Sequence[int], i: int, j: int) -> bool:
    """SPEC section 2: forbidden iff the candidate x[i:j] touches >= 3 units and is not aligned."""
    n = len(starts)
    u = w[j - 1] - w[i] + 1
    a = starts[i] == 1 and (j == n or starts[j] == 1)
    return u >= 3 and not a


def penalty(starts: Sequence[int], w: Sequence[int], i: int, j: int, lam: float) -> Optional[float]:
    n = len(starts)
    u = w[j - 1] - w[i] + 1
    a = starts[i] == 1 and (j == n or starts[j] == 1)
    if u == 1 or a:
        return 0.0
    if u == 2:
        return lam
    return None


# --- counting -------------------------------------------------------------------------------------

def brute_count(docs: Iterable[str], min_len: int = 1, max_len: int = 10 ** 9) -> Counter:
    """Every valid occurrence of every candidate with min_len <= len <= max_len bytes."""
    out: Counter = Counter()
    for d in docs:
        x, starts, w, bnd = annotate(d)
        n = len(x)
        bpos = [p for p in range(n + 1) if bnd[p]]
        for a_idx, i in enumerate(bpos[:-1]):
            for j in bpos[a_idx + 1:]:
                ln = j - i
                if ln > max_len:
                    break
                if ln < min_len:
                    continue
                if not forbidden(starts, w, i, j):
                    out[x[i:j]] += 1
    return out


def brute_rounds(docs: Sequence[str], rounds: Sequence[Tuple[int, int, int]]) -> Dict[bytes, int]:
    """Brute-force candidates of each round's lengths whose count reaches the round's threshold."""
    full = brute_count(docs, 1, max(r[1] for r in rounds))
    out = {}
    for s, c in full.items():
        for lo, hi, t in rounds:
            if lo <= len(s) <= hi and c >= t and c > 0:
                out[s] = c
    return out


def algorithm1(docs: Sequence[str], rounds: Sequence[Tuple[int, int, int]]) -> Dict[bytes, int]:
    """Paper Algorithm 1 transcribed (all retained candidates F, before the top-m cut)."""
    F: Dict[bytes, int] = {}
    ann = [annotate(d) for d in docs]
    for lo, hi, t in rounds:
        f: Counter = Counter()
        for x, starts, w, bnd in ann:
            n = len(x)
            for i in range(n):
                if not bnd[i]:
                    continue
                for ln in range(1, min(hi, n - i) + 1):
                    j = i + ln
                    if not bnd[j]:
                        continue  # invalid (ends inside a character) but extendable
                    if forbidden(starts, w, i, j):
                        if starts[i] == 0:
                            break  # no extension can start at a unit start
                        continue
                    s = x[i:j]
                    if ln >= lo:
                        f[s] += 1
                    elif s not in F or F[s] < t:
                        break
        F.update({s: c for s, c in f.items() if c >= t})
    return F


def top_m(counts: Mapping[bytes, int], m: int) -> List[Tuple[bytes, int]]:
    """The best m by count descending, ties by bytes ascending."""
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:m]


# --- MCE and filtering ----------------------------------------------------------------------------


def mce_encode(vocab: Mapping[bytes, int], text: str, lam: float = 0.05, eps: bool = True,
               maxlen: Optional[int] = None) -> List[int]:
    """SPEC section 2's dynamic program on ``text`` (tests/reference.py's reference; ``maxlen`` is
    accepted for the callers' convenience and not needed)."""
    return reference.mce_encode(dict(vocab), text.encode("utf-8"), lam, eps)


def raw_vocabulary(counts: Mapping[bytes, int], raw_vocab_size: Optional[int] = None) -> List[bytes]:
    """Raw ids: by count descending (ties by bytes), then the missing single bytes in byte order."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if raw_vocab_size is not None:
        items = items[:raw_vocab_size]
    toks = [k for k, _ in items]
    have = set(toks)
    toks += [bytes([b]) for b in range(256) if bytes([b]) not in have]
    return toks


def usage_counts(raw: Sequence[bytes], docs: Iterable[str], lam: float = 0.05,
                 eps: bool = True) -> Counter:
    vocab = {t: i for i, t in enumerate(raw)}
    maxlen = max(len(t) for t in raw)
    use: Counter = Counter()
    for d in docs:
        for t in mce_encode(vocab, d, lam, eps, maxlen):
            use[raw[t]] += 1
    return use


def expected_vocabulary(counts: Mapping[bytes, int], docs: Sequence[str], k: int,
                        lam: float = 0.05, eps: bool = True,
                        raw_vocab_size: Optional[int] = None) -> List[bytes]:
    """SPEC section 4 filtering: all 256 single bytes plus the most used multi-byte tokens (ties by
    bytes), unused slots filled with unused raw tokens by counting rank; ids by usage descending,
    ties by bytes."""
    raw = raw_vocabulary(counts, raw_vocab_size)
    use = usage_counts(raw, docs, lam, eps)
    singles = [t for t in raw if len(t) == 1]
    assert len(singles) == 256
    used = sorted((t for t in raw if len(t) > 1 and use[t] > 0), key=lambda t: (-use[t], t))
    unused = [t for t in raw if len(t) > 1 and use[t] == 0]  # raw order = counting rank
    chosen = singles + (used + unused)[:k - 256]
    return sorted(chosen, key=lambda t: (-use[t], t))


def tokens_of(tok) -> List[bytes]:
    """The regular tokens of a tokenizer in id order (special tokens excluded)."""
    specials = set(tok.special_tokens.values())
    return [tok.id_to_token(i) for i in range(tok.vocab_size) if i not in specials]


# --- corpora --------------------------------------------------------------------------------------

SENTENCES = [
    "1600 B.C. was a significant year in human history.",
    "The cat sat on the mat. The cat sat on the hat! the cat, the mat.",
    "co-advisor co-advisors co-advisor: naïve café déjà vu — résumé",
    "漢字と仮名が混ざった文章です。カタカナもあります。ㄅㄆㄇ注音",
    "Привет, мир! Это тест. Привет мир, привет.",
    "Ελληνικά κείμενα, και αριθμοί 123 456 7890.",
    "مرحبا بالعالم، هذا اختبار. שלום עולם",
    "हिन्दी में लिखा गया वाक्य है। नमस्ते दुनिया",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "한국어 문장도 있습니다. 안녕하세요 세계",
    "e\u0301te\u0301 combining marks: a\u0308 o\u0302\u0323 and emoji 😀👍🏽 and 𝐀𝐁𝐂 math.",
    "def f(x):\n    return x + 1  # code\n\tif x == 0: print('zero')\r\n",
    "the the the the the cat cat the cat sat sat sat on on on the mat mat",
    "ーカー ラーメン 々 か\u3099 ゛ NUL\x00in text\x00 and soft\u00adhyphen, nbsp\u00a0here",
    "",
    "a",
    "   ",
]

_WORDS = ["the", "cat", "sat", "on", "mat", "co", "advisor", "é", "naïve", "über", "straße",
          "привет", "мир", "漢字", "かな", "カナ", "ㄅ", "한국", "ไทย", "नम", "ि", "\u0301",
          "1600", "42", "x", "😀", "Ω", "ab", "ba", "aa", "b", "-", ".", ",", "'"]
_SEPS = [" ", " ", " ", "  ", ", ", ". ", "\n", "-", "", "\t", "—", "。", "!", "\x00"]
_CHARS = ("abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 .,;:!?-_'\"()[]{}\n\téüßøñçĳ"
          "αβγδΩЖжщъ漢字語かなカナーㄅㄆ한글ไทยनमि\u0301\u0308\u3099😀👍🏽𝐀\u00a0\u00ad\u200d\x00")


def random_text(rng: random.Random, n_pieces: int) -> str:
    """Random mixed-script text with many repeats (so that thresholds matter)."""
    out = []
    for _ in range(n_pieces):
        r = rng.random()
        if r < 0.7:
            out.append(rng.choice(_WORDS))
        elif r < 0.9:
            out.append(rng.choice(_SEPS))
        else:
            out.append("".join(rng.choice(_CHARS) for _ in range(rng.randint(1, 4))))
    return "".join(out)


def random_corpus(seed: int, n_docs: int = 8, max_pieces: int = 40) -> List[str]:
    rng = random.Random(seed)
    return [random_text(rng, rng.randint(0, max_pieces)) for _ in range(n_docs)]


def random_rounds(rng: random.Random, max_len: int = 14, max_thr: int = 4,
                  non_decreasing: bool = True) -> List[Tuple[int, int, int]]:
    """Random consecutive rounds starting at 1; thresholds non-decreasing unless asked."""
    rounds = []
    lo = 1
    thr = rng.randint(0, 1)
    while lo <= max_len:
        hi = min(max_len, lo + rng.randint(0, 5))
        rounds.append((lo, hi, thr))
        lo = hi + 1
        thr = thr + rng.randint(0, 2) if non_decreasing else rng.randint(0, max_thr)
    return rounds


FIXTURE_CATEGORIES = ("code", "en", "multi", "zh")


def shared_corpus(name: str = "en", split: str = "train") -> Path:
    """A corpus of the fixtures (tests/fixtures/corpora: en, code, zh, multi; a few hundred kB of
    real text each, see its NOTICE.md), in the shared corpora's format."""
    p = REPO / "tests" / "fixtures" / "corpora" / name / f"{split}.jsonl.gz"
    assert p.exists(), f"test fixture missing: {p} (categories: {FIXTURE_CATEGORIES})"
    return p


def read_shared_docs(name: str = "en", split: str = "train", max_bytes: int = 1 << 20,
                     max_doc_bytes: Optional[int] = None) -> List[str]:
    """Documents from a fixture corpus (:func:`shared_corpus`), in file order, until max_bytes (UTF-8) are collected."""
    out = []
    total = 0
    with gzip.open(shared_corpus(name, split), "rt", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)["text"]
            if max_doc_bytes is not None:
                doc = doc.encode("utf-8")[:max_doc_bytes].decode("utf-8", "ignore")
            out.append(doc)
            total += len(doc.encode("utf-8"))
            if total >= max_bytes:
                break
    return out


def start_local_ray():
    """A Ray cluster of the test's own (``address="local"``: never one already running on the
    machine), small enough for a 2-core machine: 2 CPUs, a 150 MB object store, no dashboard."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(address="local", num_cpus=2, include_dashboard=False, object_store_memory=150 << 20,
             log_to_driver=False, logging_level="ERROR")
    return ray
