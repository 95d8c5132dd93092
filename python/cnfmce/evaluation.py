r"""Intrinsic evaluation of tokenizers: the metrics of the paper's sections 4.2-4.5.

:func:`evaluate` measures one tokenizer on one set of documents, :func:`compare` two
segmentations of the same documents, :func:`fairness_gini` the spread of token cost across
languages. Every tokenizer goes through :func:`cnfmce.adapters.as_encoder`, so a
:class:`cnfmce.Tokenizer`, a ``tiktoken.Encoding``, a Hugging Face ``tokenizers.Tokenizer``, a
SentencePiece processor or a spec string such as ``"tiktoken:o200k_base"`` are all accepted.

Notation. The corpus is documents :math:`x \in \mathcal{D}`. For a document, :math:`T(x) =
(t_1, \dots, t_q)` is its token-id sequence, :math:`|x|_{char}` its number of Unicode code points
(``len(x)``), :math:`|x|_{byte}` its UTF-8 length, :math:`|x|_{word}` the number of
whitespace-separated words (``len(x.split())``), and :math:`b(t)` the bytes of token :math:`t`
(:meth:`Encoder.token_bytes <cnfmce.adapters.Encoder.token_bytes>`). Sums run over all documents
and all tokens. :math:`N = \sum_x |T(x)|` is the number of tokens. A ratio whose denominator is 0
is reported as ``None``, never as 0.

Compression (paper section 4.2, Eq. 5; section 4.5; Table 4):

* ``chars_per_token`` :math:`= \sum_x |x|_{char} / N` (CPT, Eq. 5; a ratio of totals, not a mean
  of per-document ratios).
* ``bytes_per_token`` :math:`= \sum_x |x|_{byte} / N` (TokEval's compression rate in bytes).
* ``tokens_per_kchar`` :math:`= 1000 \cdot N / \sum_x |x|_{char}` (tokens/kchar, section 4.5).
* ``fertility`` :math:`= N / \sum_x |x|_{word}`; ``fertility_doc_mean`` is TokEval's convention,
  the mean over documents with at least one word and one token of :math:`|T(x)| / |x|_{word}`.
* ``token_length_bytes`` :math:`= \sum_x \sum_{t \in T(x)} |b(t)| / N` (mean token length in
  bytes); ``token_length_doc_mean`` the mean over documents with tokens of the per-document mean.

Vocabulary usage (section 4.3, Table 4). :math:`V` is the declared vocabulary size (``vocab_size``
argument, else :attr:`Encoder.vocab_size <cnfmce.adapters.Encoder.vocab_size>`: ids in use,
special and added tokens included), :math:`f(t)` the number of occurrences of id :math:`t`,
:math:`p(t) = f(t)/N`:

* ``vocab_utilization`` :math:`= |\{t : f(t) > 0\}| / V`  (:math:`U(\mathcal{V})` of section 4.3).
* ``renyi_efficiency_<α>`` :math:`= H_\alpha(p) / \log |V|` with
  :math:`H_\alpha(p) = \frac{1}{1-\alpha} \log \sum_t p(t)^\alpha` (:math:`\alpha \ne 1`) and
  :math:`H_1(p) = -\sum_t p(t) \log p(t)`; the base of the logarithm cancels. This is the Rényi
  efficiency of Zouhar et al. (2023, "Tokenization and the Noiseless Channel") as computed by the
  ``tokenization-scorer`` package (``metric="renyi"``), normalised by the *declared* vocabulary
  size (tokenization-scorer's ``vocab=`` override; its default divides by the number of types
  observed), which is also TokEval's normalisation since its 1.0 release. Default
  α ∈ {2, 2.5}.

Word-like units (section 4.5, SPEC section 2). ``cnfmce._core.unit_starts`` marks the first byte
of every unit (a maximal run of joining characters, or any other single character, or an invalid
byte). For a token covering bytes :math:`[i, j)`, :math:`u = w_{j-1} - w_i + 1` is the number of
units it touches and :math:`a = 1` when byte :math:`i` starts a unit and byte :math:`j` starts one
(or :math:`j = n`):

* ``boundary_crossing_rate`` :math:`= |\{t : u \ge 2 \wedge a = 0\}| / N`: tokens that span
  several units and start inside their first unit or end inside their last (``"is a"`` in
  ``"is ancient"``, but also ``" anc"`` there, or ``"s."`` in ``"cats."``). Tokens made of whole
  units (``" is"``, ``"co-advisor"``) and tokens inside one unit do not count. This is the
  literal definition of section 4.5.
* ``boundary_crossing_rate_u3`` :math:`= |\{t : u \ge 3 \wedge a = 0\}| / N`: the partial
  crossings of three or more units, the ones MCE forbids (:math:`p = +\infty` in SPEC section 2),
  so it is exactly 0 for MCE. MCE does produce two-unit partial crossings (penalty λ), so the
  zeros reported for MCE in the paper's Table 6 match this count, not the literal one above.

UTF-8 integrity (TokEval's ``utf8_token_integrity``):

* ``utf8_token_integrity`` :math:`= |\{t : b(t) \text{ is valid UTF-8}\}| / N` (strict decoding;
  TokEval's completeness rate: ``<0xC3>`` alone is incomplete).
* ``multibyte_split_rate`` :math:`=` (multi-byte characters whose bytes lie in more than one token)
  / (multi-byte characters); TokEval's character split rate.
* ``char_boundary_crossing_rate`` :math:`=` tokens holding bytes of two or more characters and
  starting or ending inside a character, / :math:`N` (TokEval's character boundary crossing rate:
  the unit test above with characters for units).

Reconstruction:

* ``roundtrip_exact_match`` :math:`=` share of documents with ``decode(encode(x)) == x``, using
  each library's own decoder (TokEval's reconstruction fidelity / exact-match rate).

Numbers (TokEval's "three-digit boundary alignment", after Singh and Strouse 2024). Every maximal
run of decimal digits (Python's ``\d``, Unicode category Nd) of :math:`L` characters is a number.
Its reference boundaries are the 3-digit place-value positions counted from the right,
:math:`I = \{L - 3k : k \ge 1, L - 3k > 0\}` (``1234567`` → ``1|234|567``, :math:`I = \{1, 4\}`;
none for :math:`L \le 3`); its predicted boundaries :math:`P` are the token boundaries strictly
inside the run (a boundary inside a multi-byte digit is predicted and never correct). Per number,
:math:`F_1 = 2|P \cap I| / (|P| + |I|)`, and :math:`F_1 = 1` when :math:`|P| + |I| = 0` (a short
number kept whole).

* ``three_digit_f1`` — TokEval's headline value (``mean_f1``): the mean of the per-number
  :math:`F_1` over all numbers in the corpus.
* ``three_digit_precision`` / ``three_digit_recall`` / ``three_digit_f1_micro`` — pooled over all
  numbers: :math:`\sum|P \cap I| / \sum|P|`, :math:`\sum|P \cap I| / \sum|I|` and
  :math:`2\sum|P \cap I| / (\sum|P| + \sum|I|)` (1 when both sums are 0).

Byte alignment. The byte-level metrics (crossing rates, UTF-8 split, digit alignment) place the
tokens on the concatenation :math:`S = b(t_1) \cdots b(t_q)` of their bytes. For cnfmce, tiktoken
and byte-level BPE without a normalizer :math:`S` is the document's UTF-8; for a tokenizer that
normalises (Qwen's NFC), adds a dummy prefix (SentencePiece) or loses characters, :math:`S` is the
text *as the tokenizer saw it*. ``byte_mismatch_docs`` counts the documents where :math:`S` differs
from the document's UTF-8, and the round-trip metric reports the loss honestly.

Across languages (TokEval's "tokenizer fairness Gini", :func:`fairness_gini`): for each language
:math:`\ell`, the token cost :math:`c_\ell = \sum_{x \in \ell} |T(x)| / \sum_{x \in \ell} |x|_{unit}`
over its documents that are not blank (unit: bytes by default, as TokEval; or characters), and

.. math:: \mathrm{TFG} = \frac{\sum_{i=1}^n \sum_{j=1}^n |c_i - c_j|}{2 n^2 \mu},
          \qquad \mu = \frac1n \sum_\ell c_\ell,

the Gini coefficient with every language weighted equally (0: parity; at most :math:`(n-1)/n`).
``None`` for fewer than two languages or :math:`\mu = 0`.

Between two segmentations of the same text (:func:`compare`, paper section 4.5):

* ``distance`` :math:`= \sum_x \mathrm{lev}(T_a(x), T_b(x)) / \sum_x \max(|T_a(x)|, |T_b(x)|)`,
  with :math:`\mathrm{lev}` the exact Levenshtein distance between the id sequences (insertion,
  deletion, substitution of one id each cost 1); a corpus-level ratio of totals.
  ``distance_doc_mean`` is the mean of the per-document ratios.
* ``agreement`` :math:`=` (byte positions whose covering tokens have the same id in both
  segmentations) / (byte positions), over the documents whose two byte streams :math:`S_a, S_b`
  are identical (others are counted in ``agreement_docs_skipped``).

Special tokens. Documents are encoded as plain text (no special tokens added; see
:mod:`cnfmce.adapters`), so :math:`N` counts only tokens of the text. A Hugging Face tokenizer
still matches its added tokens inside the text; such a token counts like any other.

References (definitions followed; no code taken):

* C. Meister, *TokEval: a tokenizer evaluation suite* (the paper's Table 4 tool):
  github.com/swiss-ai/tokenizer-intrinsic-evals, ``docs/METRICS.md`` (compression rate,
  fertility, vocabulary utilization, Rényi efficiency over the declared vocabulary, three-digit
  boundary alignment with per-number F1 and ``mean_f1``, UTF-8 completeness / character split /
  character boundary crossing, reconstruction exact match) and
  ``tokenizer_analysis/metrics/gini.py`` (TFG, tokens per byte by default, null below two
  languages).
* V. Zouhar et al., *Tokenization and the Noiseless Channel*, ACL 2023, and the
  ``tokenization-scorer`` package (github.com/zouharvi/tokenization-scorer,
  ``tokenization_scorer/metrics.py``: ``_renyi_efficiency``).
* G. Myers, *A fast bit-vector algorithm for approximate string matching based on dynamic
  programming*, JACM 1999; H. Hyyrö, *Explaining and extending the bit-parallel approximate string
  matching algorithm of Myers*, 2001 (the edit-distance variant used by :func:`edit_distance`).
"""

from __future__ import annotations

import math
import re
from typing import (Any, Dict, Hashable, Iterable, Iterator, List, Optional, Sequence, Tuple,
                    Union)

from . import _core
from .adapters import Encoder, as_encoder



class _LazyNumpy:
    """``np`` for this module, imported on first use: ``import cnfmce`` (and this module) does not
    import numpy; evaluating does."""

    def __getattr__(self, name: str) -> Any:
        from .tokenizer import _numpy  # imported under the lock a fork waits for
        numpy = _numpy()
        globals()["np"] = numpy
        return getattr(numpy, name)


np: Any = _LazyNumpy()

__all__ = [
    "DEFAULT_ALPHAS", "evaluate", "compare", "fairness_gini", "language_costs", "gini",
    "edit_distance", "renyi_entropy", "renyi_efficiency", "digit_alignment", "crossing_count",
]

DEFAULT_ALPHAS: Tuple[float, ...] = (2.0, 2.5)
_BATCH = 256
_DIGIT_RUN = re.compile(r"\d+")


def _ratio(num: float, den: float) -> Optional[float]:
    return num / den if den else None


# --- edit distance --------------------------------------------------------------------------------

def edit_distance(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """The exact Levenshtein distance between two sequences: the least number of insertions,
    deletions and substitutions of one element (each of cost 1) that turn ``a`` into ``b``.

    Common prefixes and suffixes are stripped first (they never change the distance); the rest is
    computed with the bit-parallel algorithm of Myers (1999) in Hyyrö's (2001) formulation for
    edit distance, on Python integers of ``m = min(len(a), len(b))`` bits: ``max(len(a), len(b))``
    steps of about 17 ``m``-bit operations, i.e. O(len(a) * len(b) / 64) machine-word operations
    done in C. Measured on one core: about 0.3 s for two sequences of 30,000 ids and 0.8 s for
    two of 55,000 (the time does not depend on how similar they are, beyond the common prefix and
    suffix).

    Recurrence computed (``D[i][j]`` the distance between ``a[:i]`` and ``b[:j]``)::

        D[i][0] = i,  D[0][j] = j,
        D[i][j] = min(D[i-1][j] + 1, D[i][j-1] + 1, D[i-1][j-1] + (a[i-1] != b[j-1]))

    and the result is ``D[len(a)][len(b)]``.
    """
    a = list(a)
    b = list(b)
    # strip the common prefix and suffix
    n = min(len(a), len(b))
    p = 0
    if n:
        try:
            aa = np.asarray(a[:n])
            bb = np.asarray(b[:n])
            eq = (aa == bb) if aa.dtype != object and bb.dtype != object else None
        except (ValueError, TypeError):  # ragged or unorderable elements
            eq = None
        if eq is not None and eq.shape == (n,):
            p = n if eq.all() else int(np.argmin(eq))
        else:
            while p < n and a[p] == b[p]:
                p += 1
    a = a[p:]
    b = b[p:]
    s = 0
    n = min(len(a), len(b))
    while s < n and a[-1 - s] == b[-1 - s]:
        s += 1
    if s:
        a = a[:-s]
        b = b[:-s]
    if not a or not b:
        return len(a) + len(b)
    if len(a) > len(b):
        a, b = b, a
    m = len(a)
    peq: Dict[Any, int] = {}
    for i, c in enumerate(a):
        peq[c] = peq.get(c, 0) | (1 << i)
    mask = (1 << m) - 1
    top = 1 << (m - 1)
    pv = mask
    mv = 0
    score = m
    get = peq.get
    for c in b:
        eq_ = get(c, 0)
        xv = eq_ | mv
        xh = (((eq_ & pv) + pv) ^ pv) | eq_
        ph = mv | (~(xh | pv) & mask)
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = ((ph << 1) | 1) & mask
        mh = (mh << 1) & mask
        pv = mh | (~(xv | ph) & mask)
        mv = ph & xv
    return score


# --- distributions --------------------------------------------------------------------------------

def renyi_entropy(counts: Union[Sequence[int], np.ndarray], alpha: float) -> Optional[float]:
    r"""Rényi entropy in bits of the distribution :math:`p = f / \sum f` given by ``counts``:
    :math:`H_\alpha = \frac{1}{1-\alpha} \log_2 \sum_t p_t^\alpha` for :math:`\alpha \ne 1`,
    :math:`H_1 = -\sum_t p_t \log_2 p_t` (Shannon). Zero counts are ignored. None when the counts
    sum to 0."""
    f = np.asarray(counts, dtype=np.float64)
    f = f[f > 0]
    total = f.sum()
    if total <= 0:
        return None
    p = f / total
    if alpha == 1:
        return float(-(p * np.log2(p)).sum())
    if alpha <= 0:
        raise ValueError("alpha must be > 0")
    return float(math.log2(float((p ** alpha).sum())) / (1.0 - alpha))


def renyi_efficiency(counts: Union[Sequence[int], np.ndarray], alpha: float,
                     vocab_size: int) -> Optional[float]:
    r"""Rényi efficiency :math:`H_\alpha(p) / \log_2 |V|` (Zouhar et al. 2023;
    tokenization-scorer's ``renyi`` metric with ``vocab=|V|``), with ``vocab_size`` = :math:`|V|`
    the declared vocabulary size. None when there are no tokens or :math:`|V| \le 1`."""
    h = renyi_entropy(counts, alpha)
    if h is None or vocab_size <= 1:
        return None
    return h / math.log2(vocab_size)


def gini(values: Iterable[float]) -> Optional[float]:
    r"""The Gini coefficient with equal weights,
    :math:`G = \sum_i \sum_j |c_i - c_j| / (2 n^2 \mu)`, :math:`\mu` the mean of the values.
    None for fewer than two values or a mean of 0. (Computed in O(n log n) from the sorted values:
    :math:`\sum_i \sum_j |c_i - c_j| = 2 \sum_k (2k - n - 1) c_{(k)}`, k = 1..n.)"""
    c = np.sort(np.asarray(list(values), dtype=np.float64))
    n = len(c)
    if n < 2:
        return None
    mu = float(c.mean())
    if mu <= 0:
        return None
    k = np.arange(1, n + 1, dtype=np.float64)
    pair_sum = 2.0 * float(((2.0 * k - n - 1.0) * c).sum())
    return pair_sum / (2.0 * n * n * mu)


# --- byte-level helpers ---------------------------------------------------------------------------

def _tables(enc: Encoder) -> "_Tables":
    """The encoder's :class:`_Tables`, built once and kept on the encoder."""
    t = getattr(enc, "_eval_tables", None)
    if t is None:
        t = _Tables(enc)
        enc._eval_tables = t  # type: ignore[attr-defined]
    return t


class _Tables:
    """Per-id byte lengths and UTF-8 validity of an encoder's tokens."""

    def __init__(self, enc: Encoder) -> None:
        table = enc.token_table()
        self.table = table
        self.lengths = np.fromiter((len(t) if t is not None else 0 for t in table),
                                   dtype=np.int64, count=len(table))
        valid = np.zeros(len(table), dtype=bool)
        for i, t in enumerate(table):
            if t is not None:
                try:
                    t.decode("utf-8")
                    valid[i] = True
                except UnicodeDecodeError:
                    pass
        self.valid = valid

    def spans(self, ids: Sequence[int]) -> Tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
        """(S, ids, starts, ends): the concatenated token bytes and each token's byte span."""
        arr = np.asarray(ids, dtype=np.int64)
        if arr.size and (arr.min() < 0 or arr.max() >= len(self.table)):
            bad = int(arr.max()) if arr.max() >= len(self.table) else int(arr.min())
            raise ValueError(f"token id {bad} is not in the tokenizer's vocabulary")
        lengths = self.lengths[arr]
        ends = np.cumsum(lengths)
        starts = ends - lengths
        try:
            stream = b"".join([self.table[i] for i in ids])  # type: ignore[misc]
        except TypeError:
            raise ValueError("the encoder produced an id with no token bytes") from None
        return stream, arr, starts, ends


def _crossings(group_starts: Union[bytes, np.ndarray], starts: np.ndarray,
               ends: np.ndarray) -> Tuple[int, int]:
    """(spans with u >= 2 and not complete, spans with u >= 3 and not complete), by the
    unit-crossing rule of the core (``cnfmce._core.crossing_counts``)."""
    g = bytes(group_starts) if isinstance(group_starts, (bytes, bytearray)) \
        else np.ascontiguousarray(group_starts, dtype=np.uint8).tobytes()
    spans = np.stack([np.asarray(starts, dtype="<i8"), np.asarray(ends, dtype="<i8")], axis=1)
    if spans.size and int(spans[:, 1].max()) > len(g):
        raise ValueError("a span ends past the end of the data")
    c2, c3 = _core.crossing_counts(g, np.ascontiguousarray(spans).tobytes())
    return int(c2), int(c3)


def crossing_count(group_starts: Union[bytes, np.ndarray], starts: np.ndarray,
                   ends: np.ndarray, min_groups: int = 2) -> int:
    r"""Number of spans ``[starts[k], ends[k])`` that touch at least ``min_groups`` (2 or 3)
    groups and do not both start and end on a group boundary.

    ``group_starts[i]`` is nonzero when byte ``i`` starts a group (a unit of SPEC section 2, or a
    character). With :math:`w_i` the group of byte :math:`i`, a span :math:`[i, j)` touches
    :math:`u = w_{j-1} - w_i + 1` groups and is complete (:math:`a = 1`) when byte :math:`i`
    starts a group and :math:`j` is the end of the data or starts a group; it is counted when
    :math:`u \ge` ``min_groups`` and :math:`a = 0`. Empty spans are never counted."""
    if min_groups not in (2, 3):
        raise ValueError("min_groups must be 2 or 3")
    c2, c3 = _crossings(group_starts, starts, ends)
    return c2 if min_groups == 2 else c3


def _char_starts(stream: bytes) -> Tuple[np.ndarray, str]:
    """(cs, text): cs[i] is True when byte i starts a character; text is the stream decoded with
    ``surrogateescape`` (one lone surrogate per invalid byte, which is a character of its own)."""
    arr = np.frombuffer(stream, dtype=np.uint8)
    try:
        text = stream.decode("utf-8")
        return (arr & 0xC0) != 0x80, text
    except UnicodeDecodeError:
        pass
    text = stream.decode("utf-8", "surrogateescape")
    cs = np.zeros(len(stream), dtype=bool)
    pos = 0
    for ch in text:
        cs[pos] = True
        cp = ord(ch)
        pos += 1 if 0xDC80 <= cp <= 0xDCFF else len(ch.encode("utf-8"))
    return cs, text


def digit_alignment(text: str, char_starts: Optional[np.ndarray],
                    boundaries: np.ndarray) -> Tuple[int, float, int, int, int]:
    r"""Three-digit boundary alignment of one text (see the module docstring).

    ``text`` is the decoded byte stream, ``char_starts`` marks the bytes that start a character
    (None when every character is one byte), ``boundaries`` the sorted byte offsets where tokens
    start. Returns ``(numbers, sum of per-number F1, Σ|P∩I|, Σ|P|, Σ|I|)`` where, for a run of
    :math:`L` digits, :math:`I = \{L-3k > 0\}` (character offsets inside the run) and :math:`P` the
    token boundaries strictly inside it; per-number :math:`F_1 = 2|P∩I| / (|P|+|I|)`, or 1 when
    both are empty."""
    runs = [m.span() for m in _DIGIT_RUN.finditer(text)]
    if not runs:
        return 0, 0.0, 0, 0, 0
    if char_starts is None:
        char_pos = None
        char_idx = None
    else:
        char_pos = np.flatnonzero(char_starts)
        char_pos = np.append(char_pos, len(char_starts))
        char_idx = np.cumsum(char_starts) - 1
    spans = np.asarray(runs, dtype=np.int64)
    if char_pos is None:
        bs, be = spans[:, 0], spans[:, 1]
    else:
        bs, be = char_pos[spans[:, 0]], char_pos[spans[:, 1]]
    lo = np.searchsorted(boundaries, bs, side="right")
    hi = np.searchsorted(boundaries, be, side="left")
    f1_sum = 0.0
    tp_sum = pred_sum = ideal_sum = 0
    for (a, b), l_, h_ in zip(runs, lo.tolist(), hi.tolist()):
        n_ideal = (b - a - 1) // 3
        n_pred = h_ - l_
        tp = 0
        if n_pred:
            p = boundaries[l_:h_]
            if char_starts is None or char_idx is None:
                tp = int(np.count_nonzero((b - p) % 3 == 0))
            else:
                tp = int(np.count_nonzero(char_starts[p] & ((b - char_idx[p]) % 3 == 0)))
        den = n_pred + n_ideal
        f1_sum += 1.0 if den == 0 else 2.0 * tp / den
        tp_sum += tp
        pred_sum += n_pred
        ideal_sum += n_ideal
    return len(runs), f1_sum, tp_sum, pred_sum, ideal_sum


# --- evaluate -------------------------------------------------------------------------------------

class _Acc:
    """Running totals of :func:`evaluate`."""

    def __init__(self, id_bound: int) -> None:
        self.docs = self.chars = self.bytes = self.words = self.tokens = self.token_bytes = 0
        self.fert_sum = 0.0
        self.fert_n = 0
        self.tlen_sum = 0.0
        self.tlen_n = 0
        self.counts = np.zeros(max(id_bound, 1), dtype=np.int64)
        self.crossing = 0
        self.crossing3 = 0
        self.utf8_complete = 0
        self.char_crossing = 0
        self.multibyte = 0
        self.multibyte_split = 0
        self.roundtrip_ok = 0
        self.mismatch = 0
        self.numbers = 0
        self.f1_sum = 0.0
        self.tp = self.pred = self.ideal = 0
        self.langs: Dict[str, List[int]] = {}
        self.pending: List[np.ndarray] = []  # id arrays not yet added to counts

    def flush(self) -> None:
        """Adds the pending ids to the unigram counts (one bincount per batch)."""
        if self.pending:
            ids = np.concatenate(self.pending)
            self.counts += np.bincount(ids, minlength=len(self.counts))
            self.pending = []


def _iter_batches(docs: Iterable[str], langs: Optional[Iterable[Optional[str]]],
                  encodings: Optional[Iterable[Sequence[int]]], size: int
                  ) -> Iterator[Tuple[List[str], List[Optional[str]], Optional[List[Sequence[int]]]]]:
    if isinstance(docs, str):
        raise TypeError("docs must be an iterable of documents, not a single string")
    it_docs = iter(docs)
    it_langs = iter(langs) if langs is not None else None
    it_enc = iter(encodings) if encodings is not None else None
    while True:
        batch: List[str] = []
        lbatch: List[Optional[str]] = []
        ebatch: List[Sequence[int]] = []
        for doc in it_docs:
            if not isinstance(doc, str):
                raise TypeError(f"documents must be str, got {type(doc).__name__}")
            batch.append(doc)
            if it_langs is not None:
                try:
                    lbatch.append(next(it_langs))
                except StopIteration:
                    raise ValueError("langs is shorter than docs") from None
            else:
                lbatch.append(None)
            if it_enc is not None:
                try:
                    ebatch.append(next(it_enc))
                except StopIteration:
                    raise ValueError("encodings is shorter than docs") from None
            if len(batch) >= size:
                break
        if not batch:
            if it_langs is not None and next(it_langs, _END) is not _END:
                raise ValueError("langs is longer than docs")
            if it_enc is not None and next(it_enc, _END) is not _END:
                raise ValueError("encodings is longer than docs")
            return
        yield batch, lbatch, (ebatch if it_enc is not None else None)


_END = object()


def _measure_doc(acc: _Acc, tables: _Tables, enc: Encoder, text: str, ids: Sequence[int],
                 lang: Optional[str]) -> None:
    text_b = text.encode("utf-8")
    stream, arr, starts, ends = tables.spans(ids)
    q = len(arr)
    n = len(stream)
    acc.docs += 1
    acc.chars += len(text)
    acc.bytes += len(text_b)
    words = len(text.split())
    acc.words += words
    acc.tokens += q
    acc.token_bytes += n
    if q and words:
        acc.fert_sum += q / words
        acc.fert_n += 1
    if q:
        acc.tlen_sum += n / q
        acc.tlen_n += 1
        acc.pending.append(arr)
        acc.utf8_complete += int(np.count_nonzero(tables.valid[arr]))
    if stream != text_b:
        acc.mismatch += 1
    if enc.decode(ids) == text:
        acc.roundtrip_ok += 1
    if lang is not None and text.strip():
        rec = acc.langs.setdefault(lang, [0, 0, 0, 0])
        rec[0] += 1
        rec[1] += q
        rec[2] += len(text)
        rec[3] += len(text_b)
    if not n:
        return
    # word-like units (SPEC section 2) on the token bytes
    c2, c3 = _crossings(_core.unit_starts(stream), starts, ends)
    acc.crossing += c2
    acc.crossing3 += c3
    # characters
    cs, decoded = _char_starts(stream)
    acc.char_crossing += _crossings(cs, starts, ends)[0]
    keep = ends > starts
    bounds = np.unique(starts[keep])  # sorted byte offsets where tokens start
    ascii_only = len(decoded) == n
    if not ascii_only:
        cpos = np.flatnonzero(cs)
        cend = np.append(cpos[1:], n)
        multi = (cend - cpos) >= 2
        ms, me = cpos[multi], cend[multi]
        acc.multibyte += int(ms.size)
        if ms.size:
            is_b = np.zeros(n + 1, dtype=np.int64)
            is_b[bounds] = 1
            cum = np.concatenate(([0], np.cumsum(is_b)))  # cum[k] = boundaries at offsets < k
            inside = cum[me] - cum[ms + 1]                # boundaries at offsets in (s, e)
            acc.multibyte_split += int(np.count_nonzero(inside > 0))
    nums, f1s, tp, pred, ideal = digit_alignment(decoded, None if ascii_only else cs, bounds)
    acc.numbers += nums
    acc.f1_sum += f1s
    acc.tp += tp
    acc.pred += pred
    acc.ideal += ideal


def _lang_costs(langs: Dict[str, List[int]], unit: str) -> Dict[str, float]:
    col = {"bytes": 3, "chars": 2}[unit]
    return {lang: rec[1] / rec[col] for lang, rec in sorted(langs.items()) if rec[col] > 0}


def _check_unit(unit: str) -> None:
    if unit not in ("bytes", "chars"):
        raise ValueError(f'unit must be "bytes" or "chars", got {unit!r}')


def evaluate(tokenizer: Any, docs: Iterable[str], *, vocab_size: Optional[int] = None,
             langs: Optional[Iterable[Optional[str]]] = None,
             alphas: Sequence[float] = DEFAULT_ALPHAS, gini_unit: str = "bytes",
             encodings: Optional[Iterable[Sequence[int]]] = None,
             batch_size: int = _BATCH) -> Dict[str, Any]:
    r"""Measures ``tokenizer`` on ``docs`` (an iterable of str, streamed in batches).

    Every metric is defined in the module docstring of :mod:`cnfmce.evaluation`; in short, with
    :math:`N` tokens in total:

    * ``chars_per_token`` = Σ chars / N (Eq. 5), ``bytes_per_token`` = Σ UTF-8 bytes / N,
      ``tokens_per_kchar`` = 1000 N / Σ chars, ``fertility`` = N / Σ ``len(x.split())``
      (``fertility_doc_mean``: mean per-document ratio), ``token_length_bytes`` =
      Σ token bytes / N (``token_length_doc_mean``: mean per-document mean);
    * ``vocab_utilization`` = distinct ids / V, ``renyi_efficiency_<α>`` =
      :math:`\frac{1}{1-α}\log\sum_t p_t^α / \log V` (V = ``vocab_size`` or the tokenizer's
      declared size);
    * ``boundary_crossing_rate`` = tokens with u ≥ 2 units and not (starting at a unit start and
      ending at a unit end) / N; ``boundary_crossing_rate_u3`` the same with u ≥ 3;
    * ``utf8_token_integrity`` = tokens whose bytes decode strictly / N;
      ``multibyte_split_rate`` = multi-byte characters split across tokens / multi-byte characters;
      ``char_boundary_crossing_rate`` = tokens spanning ≥ 2 characters with a partial one / N;
    * ``roundtrip_exact_match`` = documents with decode(encode(x)) == x / documents;
    * ``three_digit_f1`` = mean over digit runs of the per-run boundary F1 against the 3-digit
      place-value grouping (TokEval); ``three_digit_precision`` / ``_recall`` / ``_f1_micro`` pooled
      over all runs;
    * with ``langs`` (one language code per document, None to leave a document out):
      ``fairness_gini`` (TokEval's TFG over per-language tokens per ``gini_unit``, "bytes" or
      "chars") and ``language_costs``.

    ``encodings`` (one id list per document) skips encoding and measures those ids instead.
    Counts (``docs``, ``chars``, ``bytes``, ``words``, ``tokens``, ``distinct_ids``,
    ``byte_mismatch_docs``, ``digit_runs``, ...) are returned alongside, and every ratio with a
    zero denominator is None.
    """
    _check_unit(gini_unit)
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    enc = as_encoder(tokenizer)
    tables = _tables(enc)
    acc = _Acc(len(tables.table))
    for batch, lbatch, ebatch in _iter_batches(docs, langs, encodings, batch_size):
        ids_batch = ebatch if ebatch is not None else enc.encode_batch(batch)
        for text, ids, lang in zip(batch, ids_batch, lbatch):
            _measure_doc(acc, tables, enc, text, ids, lang)
        acc.flush()
    return _summarize(acc, enc, vocab_size, alphas, gini_unit, langs is not None)


def _summarize(acc: _Acc, enc: Encoder, vocab_size: Optional[int], alphas: Sequence[float],
               gini_unit: str, with_langs: bool) -> Dict[str, Any]:
    v = int(vocab_size) if vocab_size is not None else enc.vocab_size
    distinct = int(np.count_nonzero(acc.counts))
    out: Dict[str, Any] = {
        "tokenizer": enc.name,
        "kind": enc.kind,
        "docs": acc.docs,
        "chars": acc.chars,
        "bytes": acc.bytes,
        "words": acc.words,
        "tokens": acc.tokens,
        "chars_per_token": _ratio(acc.chars, acc.tokens),
        "bytes_per_token": _ratio(acc.bytes, acc.tokens),
        "tokens_per_kchar": _ratio(1000.0 * acc.tokens, acc.chars),
        "fertility": _ratio(acc.tokens, acc.words),
        "fertility_doc_mean": _ratio(acc.fert_sum, acc.fert_n),
        "token_length_bytes": _ratio(acc.token_bytes, acc.tokens),
        "token_length_doc_mean": _ratio(acc.tlen_sum, acc.tlen_n),
        "vocab_size": v,
        "distinct_ids": distinct,
        "vocab_utilization": _ratio(distinct, v),
    }
    for a in alphas:
        out[f"renyi_efficiency_{a:g}"] = renyi_efficiency(acc.counts, a, v)
    out.update({
        "boundary_crossing_tokens": acc.crossing,
        "boundary_crossing_rate": _ratio(acc.crossing, acc.tokens),
        "boundary_crossing_tokens_u3": acc.crossing3,
        "boundary_crossing_rate_u3": _ratio(acc.crossing3, acc.tokens),
        "utf8_token_integrity": _ratio(acc.utf8_complete, acc.tokens),
        "utf8_incomplete_tokens": acc.tokens - acc.utf8_complete,
        "char_boundary_crossing_rate": _ratio(acc.char_crossing, acc.tokens),
        "multibyte_chars": acc.multibyte,
        "multibyte_chars_split": acc.multibyte_split,
        "multibyte_split_rate": _ratio(acc.multibyte_split, acc.multibyte),
        "roundtrip_exact_match": _ratio(acc.roundtrip_ok, acc.docs),
        "roundtrip_failures": acc.docs - acc.roundtrip_ok,
        "byte_mismatch_docs": acc.mismatch,
        "digit_runs": acc.numbers,
        "three_digit_f1": _ratio(acc.f1_sum, acc.numbers),
        "three_digit_precision": _ratio(acc.tp, acc.pred),
        "three_digit_recall": _ratio(acc.tp, acc.ideal),
        "three_digit_f1_micro": (None if not acc.numbers else
                                 1.0 if acc.pred + acc.ideal == 0 else
                                 2.0 * acc.tp / (acc.pred + acc.ideal)),
    })
    if with_langs:
        costs = _lang_costs(acc.langs, gini_unit)
        out["gini_unit"] = gini_unit
        out["fairness_gini"] = gini(costs.values())
        out["language_costs"] = costs
        out["per_language"] = {
            lang: {"docs": r[0], "tokens": r[1], "chars": r[2], "bytes": r[3],
                   "chars_per_token": _ratio(r[2], r[1]), "bytes_per_token": _ratio(r[3], r[1])}
            for lang, r in sorted(acc.langs.items())}
    return out


def language_costs(tokenizer: Any, docs: Iterable[str], langs: Iterable[Optional[str]], *,
                   unit: str = "bytes") -> Dict[str, float]:
    r"""Per-language token cost :math:`c_\ell = \sum_{x \in \ell} |T(x)| / \sum_{x \in \ell}
    |x|_{unit}` (``unit`` "bytes": UTF-8 bytes, TokEval's default; "chars": code points), over the
    documents of each language that are not blank (``x.strip()`` non-empty), as TokEval computes
    them. ``langs`` gives each document's language (None: left out)."""
    _check_unit(unit)
    enc = as_encoder(tokenizer)
    per: Dict[str, List[int]] = {}
    for batch, lbatch, _ in _iter_batches(docs, langs, None, _BATCH):
        sel = [(t, lg) for t, lg in zip(batch, lbatch) if lg is not None and t.strip()]
        if not sel:
            continue
        for (text, lang), ids in zip(sel, enc.encode_batch([t for t, _ in sel])):
            rec = per.setdefault(lang, [0, 0, 0, 0])
            rec[0] += 1
            rec[1] += len(ids)
            rec[2] += len(text)
            rec[3] += len(text.encode("utf-8"))
    return _lang_costs(per, unit)


def fairness_gini(tokenizer: Any, docs: Iterable[str], langs: Iterable[Optional[str]], *,
                  unit: str = "bytes") -> Optional[float]:
    r"""TokEval's tokenizer fairness Gini (TFG) across the languages of ``docs``.

    With :math:`c_\ell` from :func:`language_costs` (tokens per UTF-8 byte by default, or per
    character with ``unit="chars"``) for the :math:`n` languages present and
    :math:`\mu = \frac1n\sum_\ell c_\ell`:

    .. math:: \mathrm{TFG} = \frac{\sum_{i=1}^n \sum_{j=1}^n |c_i - c_j|}{2 n^2 \mu}

    0 when every language costs the same, at most :math:`(n-1)/n`. None for fewer than two
    languages (TokEval publishes null there too). Every language has equal weight, whatever its
    number of documents.
    """
    return gini(language_costs(tokenizer, docs, langs, unit=unit).values())


def _take(it: Iterator[Sequence[int]], k: int, what: str) -> List[Sequence[int]]:
    out = []
    for _ in range(k):
        try:
            out.append(next(it))
        except StopIteration:
            raise ValueError(f"{what} is shorter than docs") from None
    return out


# --- compare --------------------------------------------------------------------------------------

def compare(tok_a: Any, tok_b: Any, docs: Iterable[str], *,
            encodings_a: Optional[Iterable[Sequence[int]]] = None,
            encodings_b: Optional[Iterable[Sequence[int]]] = None,
            batch_size: int = _BATCH) -> Dict[str, Any]:
    r"""Compares two segmentations of the same documents (paper section 4.5, Tables 5-6).

    * ``distance`` :math:`= \sum_x \mathrm{lev}(T_a(x), T_b(x)) / \sum_x \max(|T_a(x)|,
      |T_b(x)|)`: the exact Levenshtein distance between the token-id sequences (unit-cost
      insertion, deletion, substitution; :func:`edit_distance`) divided by the length of the longer
      sequence, aggregated over the corpus as a ratio of totals (so long documents weigh more);
      ``distance_doc_mean`` is the unweighted mean of the per-document ratios (documents where both
      sequences are empty are left out).
    * ``agreement`` :math:`= \sum_x |\{i : \mathrm{id}_a(i) = \mathrm{id}_b(i)\}| / \sum_x n_x`,
      where :math:`\mathrm{id}(i)` is the id of the token covering byte :math:`i` and
      :math:`n_x` the number of bytes: the share of byte positions given the same id. Computed on
      the token bytes; a document whose two byte streams differ (a normalizing tokenizer) cannot
      be aligned byte by byte and is counted in ``agreement_docs_skipped`` instead.

    Ids are compared as numbers, so both measures are meaningful only for two encoders over the
    same vocabulary (e.g. MCE and FMM, or MCE and the BPE the vocabulary came from).
    ``encodings_a`` / ``encodings_b`` supply precomputed id lists.
    """
    ea, eb = as_encoder(tok_a), as_encoder(tok_b)
    ta, tb = _tables(ea), _tables(eb)
    it_a = iter(encodings_a) if encodings_a is not None else None
    it_b = iter(encodings_b) if encodings_b is not None else None
    n_docs = tokens_a = tokens_b = 0
    ed_sum = max_sum = 0
    ratio_sum = 0.0
    ratio_n = 0
    same = total = skipped = 0
    for batch, _, _ in _iter_batches(docs, None, None, batch_size):
        ids_a = _take(it_a, len(batch), "encodings_a") if it_a is not None else ea.encode_batch(batch)
        ids_b = _take(it_b, len(batch), "encodings_b") if it_b is not None else eb.encode_batch(batch)
        for a, b in zip(ids_a, ids_b):
            n_docs += 1
            tokens_a += len(a)
            tokens_b += len(b)
            ed = edit_distance(a, b)
            longer = max(len(a), len(b))
            ed_sum += ed
            max_sum += longer
            if longer:
                ratio_sum += ed / longer
                ratio_n += 1
            sa, arr_a, _, _ = ta.spans(a)
            sb, arr_b, _, _ = tb.spans(b)
            if sa != sb:
                skipped += 1
                continue
            if not sa:
                continue
            ra = np.repeat(arr_a, ta.lengths[arr_a])
            rb = np.repeat(arr_b, tb.lengths[arr_b])
            same += int(np.count_nonzero(ra == rb))
            total += len(sa)
    return {
        "tokenizer_a": ea.name,
        "tokenizer_b": eb.name,
        "docs": n_docs,
        "tokens_a": tokens_a,
        "tokens_b": tokens_b,
        "edit_distance": ed_sum,
        "max_length": max_sum,
        "distance": _ratio(ed_sum, max_sum),
        "distance_doc_mean": _ratio(ratio_sum, ratio_n),
        "agreement": _ratio(same, total),
        "agreement_bytes": total,
        "agreement_docs_skipped": skipped,
    }
