"""CNF training (paper section 3.1; SPEC section 4): the driver of a run. The core owns the run
(``cnfmce._core.Trainer``: rounds, thresholds, filtering, selection, special tokens; the
counting phase alone is ``cnfmce._core.Counter``); this module checks nothing the core checks,
streams the documents of every pass in (:mod:`cnfmce.readers`), shows progress, keeps Ctrl-C
responsive (an interrupt stops between batches) and keeps temporary files in the run's work
directory (:mod:`cnfmce.workdir`). Counts and counts files are in :mod:`cnfmce.counts`.

>>> tok = cnfmce.train(["some text", "more text"], vocab_size=300)      # doctest: +SKIP
>>> counts = cnfmce.count(paths, raw_vocab_size=1_000_000)                 # doctest: +SKIP
>>> tok = cnfmce.train_from_counts(counts, paths, vocab_size=32_000)     # doctest: +SKIP
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _core
from .corpus import Inputs
from .counts import Counts, count_lists, load_any_counts, load_counts, merge_counts, save_counts
from .readers import Corpus, fmt_bytes, feed, peak_rss_bytes, rss_bytes
from .tokenizer import DEFAULT_BOUNDARY_PENALTY, Tokenizer, _check_options, useful_threads
from .workdir import remove_stale_work_dirs, work_dir

# Names from before this module was split, kept for their callers.
_Corpus = Corpus
_work_dir = work_dir

__all__ = ["DEFAULT_ROUNDS", "Counts", "count", "train", "train_from_counts", "save_counts",
           "load_counts", "merge_counts", "default_memory_limit", "remove_stale_work_dirs"]

DEFAULT_ROUNDS: Tuple[Tuple[int, int, int], ...] = _core.DEFAULT_ROUNDS  # the paper's, defined in the core


def default_memory_limit() -> int:
    """A sixth of the machine's physical memory, at least 1 GB (bytes): training then leaves
    most of the machine to the rest of a data pipeline; raise it to spill less on big corpora."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        total = 16 << 30
    return max(1 << 30, int(total // 6))


def _check_positive(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    if v >= 2**64:  # the core's sizes are 64-bit (an OverflowError without the name before)
        raise ValueError(f"{name} must be a positive int below 2**64, got {_short(v)}")
    return v


def _short(v: Any) -> str:
    """``repr(v)``, shortened when it is very long (a 400-digit int)."""
    r = repr(v)
    return r if len(r) <= 40 else f"{r[:20]}...({len(r)} digits)"


def _check_exponent(name: str, v: Any) -> float:
    """A number for one of the exponents of training (the core checks its range)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(v).__name__}")
    try:
        return float(v)
    except OverflowError:  # an int beyond any float: out of the range the core checks
        top = _core.MAX_NON_ASCII_EXPONENT if name == "non_ascii_exponent" else _core.MAX_RAW_HAN_EXPONENT
        raise ValueError(f"{name} must be a number from 0 to {top:g}, got {_short(v)}") from None


def _exponents(non_ascii_exponent: Optional[float], raw_han_exponent: float) -> Dict[str, Any]:
    """The trainer's keyword arguments for the two exponents, checked."""
    return {"non_ascii_exponent": None if non_ascii_exponent is None
            else _check_exponent("non_ascii_exponent", non_ascii_exponent),
            "raw_han_exponent": _check_exponent("raw_han_exponent", raw_han_exponent)}


def _raw_pool(raw_vocab_size: Optional[int], raw_han_exponent: float) -> Optional[int]:
    """The candidates to hold for a raw vocabulary of ``raw_vocab_size`` (None: all):
    ``cnfmce._core.raw_pool_size``, the pool of the Han-weighted cut when it is on."""
    return None if raw_vocab_size is None else _core.raw_pool_size(raw_vocab_size, raw_han_exponent)


def _report_metadata(tok: Tokenizer, report: Dict[str, Any]) -> None:
    """The selection's part of a trained tokenizer's metadata (local and Ray runs)."""
    if report["selection"] != "paper":  # covered characters below the raw_vocab_size cut
        tok.metadata["covered_beyond_cut"] = report["covered_beyond_cut"]
    if report["selection"] == "refined-non-ascii":  # fallback prefixes added to the raw vocabulary
        tok.metadata["fallback_prefixes"] = report["fallback_prefixes"]
        tok.metadata["non_ascii_exponent"] = report["non_ascii_exponent"]
    if report["raw_han_exponent"]:
        tok.metadata["raw_han_exponent"] = report["raw_han_exponent"]


def _check_threads(num_threads: Optional[int]) -> Optional[int]:
    """None (all cores) or a positive int, lowered to :func:`cnfmce.tokenizer.max_threads`."""
    return useful_threads(num_threads)


def count(inputs: Inputs, raw_vocab_size: int = _core.DEFAULT_COUNT_RAW_VOCAB_SIZE,
          rounds: Sequence[Tuple[int, int, int]] = DEFAULT_ROUNDS, num_threads: Optional[int] = None,
          progress: bool = True, memory_limit: Optional[int] = None,
          tmp_dir: Optional[str] = None, backend: str = "local", **backend_options: Any) -> Counts:
    """The counting phase of CNF (paper Algorithm 1): counts valid candidates in length rounds
    and returns the ``raw_vocab_size`` most frequent (ties by bytes) as :class:`Counts`.

    ``inputs``: an iterable of ``str`` (one document each) or a list of paths (``.txt``,
    ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``, ``.parquet``), told apart by the rule of
    :mod:`cnfmce.corpus`: ``pathlib.Path`` items are paths; a ``str`` is a path when it names an
    existing file, or has no whitespace and ends in a corpus extension (missing: an error); a list
    mixing paths and documents raises ``ValueError``; iterators and ``cnfmce.Documents(...)`` are
    always documents. ``memory_limit`` (bytes, default
    a sixth of the machine's memory, at least 1 GB) bounds the counting tables: beyond it they are spilled to sorted
    runs in ``tmp_dir`` and merged, so the counts stay exact.

    ``backend="ray"`` counts on a Ray cluster (:func:`cnfmce.ray.count`, whose extra keyword
    arguments ``backend_options`` are), with the same result.
    """
    if _backend(backend, backend_options, "count") is not None:
        from . import ray as _ray_backend
        return _ray_backend.count(inputs, raw_vocab_size, rounds, num_threads, progress,
                                  memory_limit, tmp_dir, **backend_options)
    with work_dir(tmp_dir) as tmp:
        limit, budget = _memory(memory_limit)
        counter = _core.Counter(rounds, raw_vocab_size, budget, os.path.join(tmp, ""),
                                _check_threads(num_threads))
        _warn_rounds(counter.rounds)
        corpus = Corpus(inputs, tmp)
        info = _info(counter.rounds, raw_vocab_size, limit)
        t_start = time.perf_counter()
        n = len(counter.rounds)
        for k, r in enumerate(counter.rounds):
            counter.begin_round()
            _counting_pass(corpus, k, n, r, counter.add, counter.end_round,
                           lambda: counter.table_bytes, progress, info)
        _counting_done(corpus, info, t_start, limit)
        toks, counts = counter.result()
        return Counts(zip(toks, counts), info=info, characters=dict(zip(*counter.char_counts())))


def _memory(memory_limit: Optional[int], floor: int = 16 << 20) -> Tuple[int, int]:
    """(the memory limit, the counting tables' budget): the tables get 60% of what the limit
    leaves; the rest covers batches, the kept candidates, the trie and hash-table growth."""
    limit = default_memory_limit() if memory_limit is None else _check_positive("memory_limit", memory_limit)
    return limit, max(floor, int(0.6 * (limit - rss_bytes())))


def _warn_rounds(rounds: Sequence[Tuple[int, int, int]]) -> None:
    note = _core.rounds_warning(rounds)
    if note:
        warnings.warn(note, RuntimeWarning, stacklevel=3)


def _info(rounds: Sequence[Tuple[int, int, int]], raw_vocab_size: Optional[int], limit: int) -> Dict[str, Any]:
    return {"rounds": [list(r) for r in rounds], "raw_vocab_size": raw_vocab_size,
            "memory_limit": limit, "round_stats": []}


def _counting_pass(corpus: "Corpus", k: int, n: int, r: Tuple[int, int, int], add: Any, end: Any,
                   table_bytes: Any, progress: bool, info: Dict[str, Any]) -> None:
    """Counting round ``k`` of ``n`` (``r``: its lengths and threshold): feeds the corpus to
    ``add``, ends it with ``end()``, records and prints its statistics."""
    lo, hi, thr = r
    bar = feed(corpus, f"count {k + 1}/{n} [{lo}-{hi}] t={thr}", progress, add,
                lambda: {"table": fmt_bytes(table_bytes())})
    t_end = time.perf_counter()
    try:
        st = dict(end())
    except BaseException:
        bar.close()
        raise
    # seconds runs until end() returns; end_seconds is its part in end(): the round's selection
    # (after the last round, also building the filter).
    st.update(round=k + 1, min_len=lo, max_len=hi, threshold=thr, seconds=round(bar.seconds, 3),
              end_seconds=round(time.perf_counter() - t_end, 3), bytes=bar.done,
              peak_rss=peak_rss_bytes())
    info["round_stats"].append(st)
    mbps = bar.done / max(bar.seconds, 1e-9) / 1e6
    bar.close(f"  round {k + 1} [{lo}-{hi}] t={thr}: {fmt_bytes(bar.done)} in {bar.seconds:.1f}s "
              f"({mbps:.2f} MB/s), {st['distinct']:,} distinct, {st['retained']:,} retained, "
              f"table peak {fmt_bytes(st['peak_table_bytes'])}, {st['spills']} spills, "
              f"peak RSS {fmt_bytes(st['peak_rss'])}")


def _counting_done(corpus: "Corpus", info: Dict[str, Any], t_start: float, limit: int,
                   stacklevel: int = 3) -> None:
    """Records the counting phase's totals; warns when it took more memory than allowed."""
    info.update(documents=corpus.documents, bytes=corpus.total_bytes,
                seconds=round(time.perf_counter() - t_start, 3), peak_rss=peak_rss_bytes())
    if info["peak_rss"] > limit:
        warnings.warn(f"peak memory {fmt_bytes(info['peak_rss'])} exceeded memory_limit "
                      f"{fmt_bytes(limit)}", RuntimeWarning, stacklevel=stacklevel)


def _backend(backend: Any, options: Dict[str, Any], call: str) -> Optional[str]:
    """None for the local backend (refusing backend options), "ray" for Ray."""
    if backend == "local":
        if options:
            raise TypeError(f"{call}() got unexpected keyword argument(s) {', '.join(sorted(options))} "
                            "(Ray options need backend='ray')")
        return None
    if backend == "ray":
        return "ray"
    raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}")


def train_from_counts(counts: Union[Mapping[bytes, int], "os.PathLike[str]", str], inputs: Inputs,
                      vocab_size: int = _core.DEFAULT_VOCAB_SIZE, special_tokens: Sequence[str] = (),
                      num_threads: Optional[int] = None, progress: bool = True,
                      raw_vocab_size: Optional[int] = None, algorithm: str = "mce",
                      boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY, token_preference: bool = True,
                      tmp_dir: Optional[str] = None, selection: str = "paper", backend: str = "local",
                      non_ascii_exponent: Optional[float] = None, raw_han_exponent: float = 0.0,
                      **backend_options: Any) -> Tokenizer:
    """The filtering phase of CNF: encodes ``inputs`` with MCE over the raw vocabulary
    (``counts``: a mapping bytes -> count, or the path of a counts file; the best
    ``raw_vocab_size`` of them, all when None) and keeps ``vocab_size - len(special_tokens)``
    tokens, all 256 single bytes included, ids ordered by usage (ties by bytes); special tokens
    get the last ids. ``counts`` may also be parquet counts (a ``.parquet`` file or a directory
    of them; layout in :func:`cnfmce.load_counts`), read streaming. ``backend="ray"`` filters on
    a Ray cluster (:func:`cnfmce.ray.train_from_counts`). The characters counting kept beside the
    cut (:attr:`cnfmce.Counts.characters`, a counts file's header key ``"characters"``) are ranked
    by the refined selections, so ``train_from_counts(count(inputs, raw_vocab_size=m), inputs)``
    trains what ``train(inputs, raw_vocab_size=m)`` trains under every ``selection``.

    ``selection="paper"`` (the default, SPEC section 4) is the paper's rule: one pass, the most
    used tokens. ``selection="refined"`` keeps the most frequent multi-byte characters, cuts the
    raw vocabulary in steps (2x, 1.4x, 1.15x ``vocab_size``, then ``vocab_size``), encoding the
    inputs again after each cut, and keeps at each cut the tokens that save the most tokens
    (usage times the tokens the text needs without them); it compresses better, most on
    multilingual text (``docs/results/selection.md``). ``selection="refined-scripts"`` is
    ``"refined"`` with each script's tokens saved weighted by how much smaller the script's share
    of the pass's usage is than the largest script's, to the power
    ``cnfmce._core.SCRIPT_SHARE_EXPONENT`` (src/refine.rs, step 4).
    ``selection="refined-non-ascii"`` is ``"refined"`` with the tokens saved of the smaller of
    the ASCII and non-ASCII groups (by the usage of their tokens in the pass) weighted by the
    ratio of the two usages to the power ``cnfmce._core.NON_ASCII_SHARE_EXPONENT`` (step 5);
    on text that is mostly ASCII it gives more ids to Chinese and to every other multi-byte
    script (both measured in ``docs/results/generalisation.md``); it also adds to the raw
    vocabulary, for every counted character of 3 or 4 bytes, the prefixes of its bytes from 2
    bytes to all but the last, so that a character without a token can cost 2 tokens instead of
    its 3 or 4 bytes (step 6, ``docs/results/byte_fallback.md``,
    ``docs/results/script_balance_128k.md``). ``non_ascii_exponent`` (``"refined-non-ascii"``
    only; None: ``cnfmce._core.NON_ASCII_SHARE_EXPONENT``, 0.5) is the power of that ratio: 1
    weighs the two groups' usage equally, 0 is ``"refined"`` with the prefixes.

    ``raw_han_exponent`` (any selection; 0, the default, is the paper's cut) makes the cut of
    the counts to ``raw_vocab_size`` (which must then be given) Han-weighted: of the best
    ``cnfmce._core.HAN_POOL_PER_RAW * raw_vocab_size`` counts, each candidate with a Han
    character has its count multiplied by ``(ASCII count / non-ASCII count) ^ raw_han_exponent``
    (the summed counts of the pool's ASCII and other candidates; no weight when the ASCII count
    is not the larger), and the best ``raw_vocab_size`` by that weighted count are the raw
    vocabulary (src/raw_cut.rs). On a mix that is mostly ASCII it brings in the Chinese words
    the paper's cut leaves just below the line (``docs/results/raw_rule.md``)."""
    if _backend(backend, backend_options, "train_from_counts") is not None:
        from . import ray as _ray_backend
        return _ray_backend.train_from_counts(counts, inputs, vocab_size, special_tokens, num_threads,
                                              progress, raw_vocab_size, algorithm, boundary_penalty,
                                              token_preference, tmp_dir, selection=selection,
                                              non_ascii_exponent=non_ascii_exponent,
                                              raw_han_exponent=raw_han_exponent, **backend_options)
    opts = _check_options(algorithm, boundary_penalty, token_preference)
    exps = _exponents(non_ascii_exponent, raw_han_exponent)
    with work_dir(tmp_dir) as tmp:
        trainer = _counts_trainer(counts, vocab_size, raw_vocab_size, special_tokens, opts, tmp,
                                  num_threads, selection, **exps)
        try:
            corpus = Corpus(inputs, tmp)
            return _run(trainer, corpus, progress, {}, vocab_size)
        finally:
            trainer.close()


def _counts_trainer(counts: Any, vocab_size: int, raw_vocab_size: Optional[int],
                    special_tokens: Sequence[str], opts: Any, tmp: str,
                    num_threads: Optional[int], selection: str, non_ascii_exponent: Optional[float] = None,
                    raw_han_exponent: float = 0.0) -> "_core.Trainer":
    """The trainer of :func:`train_from_counts` (local and Ray backends), its counting done by
    ``counts`` (a mapping, a counts file or parquet counts, loaded through ``tmp``): only the
    filtering passes are left. The caller closes it."""
    trainer = _core.Trainer(vocab_size, raw_vocab_size, None, special_tokens, opts,
                            tmp_dir=os.path.join(tmp, ""), num_threads=_check_threads(num_threads),
                            selection=selection, non_ascii_exponent=non_ascii_exponent,
                            raw_han_exponent=raw_han_exponent)
    try:
        pool = _raw_pool(raw_vocab_size, raw_han_exponent)
        trainer.use_counts(*load_any_counts(counts, pool, tmp, _memory(None)[1]))
    except BaseException:
        trainer.close()
        raise
    return trainer


def _run(trainer: "_core.Trainer", corpus: "Corpus", progress: bool, meta: Dict[str, Any],
         vocab_size: int, counted: Optional[Any] = None) -> Tokenizer:
    """Runs the trainer's passes over the corpus (counting rounds, recorded in
    ``meta["counting"]``, then ``counted()``, then filtering and the refining passes of
    ``selection="refined"``) and returns the tokenizer with the run's metadata."""
    n = len(trainer.rounds)
    filtering: Dict[str, Any] = {}
    refining: list = []
    raw_size = None
    while True:
        step = trainer.next_pass()
        if step is None:
            break
        kind, k, r = trainer.begin_pass()
        if kind == "count":
            _counting_pass(corpus, k, n, r, trainer.add, trainer.end_pass,
                           lambda: trainer.table_bytes, progress, meta["counting"])
            continue
        if kind == "filter" and counted is not None:
            counted()
        label = "filter" if kind == "filter" else f"refine {k + 1}"
        bar = feed(corpus, label, progress, trainer.add)
        try:
            st = trainer.end_pass()
        except BaseException:
            bar.close()
            raise
        ntok, nbytes = st["tokens"], st["bytes"]
        what = "raw vocabulary" if kind == "filter" else "vocabulary"
        bar.close(f"  {label}: {fmt_bytes(nbytes)} in {bar.seconds:.1f}s "
                  f"({nbytes / max(bar.seconds, 1e-9) / 1e6:.2f} MB/s), {what} "
                  f"{st['raw_vocab_size']:,}, {nbytes / max(ntok, 1):.3f} bytes/token on the "
                  f"training text")
        if kind == "filter":
            raw_size = st["raw_vocab_size"]
            filtering = {"seconds": round(bar.seconds, 3), "bytes": nbytes, "tokens": ntok}
        else:
            refining.append({"vocab_size": st["raw_vocab_size"], "seconds": round(bar.seconds, 3),
                             "bytes": nbytes, "tokens": ntok})
    if raw_size is None:  # pragma: no cover - the core always has a filtering pass
        raise RuntimeError("the trainer ended without a filtering pass")
    t_finish = time.perf_counter()
    core, report = trainer.finish()
    # finish_seconds: selecting the tokens and building the tokenizer (after the passes)
    filtering["finish_seconds"] = round(time.perf_counter() - t_finish, 3)
    filtering["used_tokens"] = report["used_tokens"]
    if report["warning"]:
        warnings.warn(report["warning"], RuntimeWarning, stacklevel=3)
    tok = Tokenizer(core)
    tok.metadata.update(meta)
    tok.metadata.update(trainer="cnfmce", vocab_size=vocab_size, raw_vocabulary=raw_size,
                        filtering=filtering, selection=report["selection"],
                        refining=refining, covered_characters=report["covered_characters"])
    _report_metadata(tok, report)
    return tok


def train(inputs: Inputs, vocab_size: int = _core.DEFAULT_VOCAB_SIZE, raw_vocab_size: Optional[int] = None,
          rounds: Sequence[Tuple[int, int, int]] = DEFAULT_ROUNDS, special_tokens: Sequence[str] = (),
          num_threads: Optional[int] = None, progress: bool = True,
          memory_limit: Optional[int] = None, algorithm: str = "mce",
          boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY, token_preference: bool = True,
          tmp_dir: Optional[str] = None, selection: str = "paper", backend: str = "local",
          non_ascii_exponent: Optional[float] = None, raw_han_exponent: float = 0.0,
          **backend_options: Any) -> Tokenizer:
    """Trains a CNF vocabulary (SPEC section 4) and returns its :class:`Tokenizer`.

    ``inputs``: documents or paths, as for :func:`count` (the rule of :mod:`cnfmce.corpus`; wrap
    strings that look like file names in ``cnfmce.Documents``). Equal to
    ``train_from_counts(count(inputs, ...), inputs, ...)`` with the same ``raw_vocab_size``. The
    result has ``vocab_size`` ids (byte tokens and special tokens
    included), ordered by usage in the filtering pass, special tokens last. ``raw_vocab_size``
    None means ``cnfmce._core.default_raw_vocab_size(vocab_size)`` (a multiple of ``vocab_size``).
    ``selection``: ``"paper"`` (the default: the paper's filtering, SPEC section 4),
    ``"refined"``, ``"refined-scripts"`` or ``"refined-non-ascii"``, as in :func:`train_from_counts`,
    and so are ``non_ascii_exponent`` and ``raw_han_exponent``; with ``raw_han_exponent`` above 0
    counting keeps ``cnfmce._core.HAN_POOL_PER_RAW * raw_vocab_size`` candidates (the pool of
    the Han-weighted cut), so ``train(inputs, raw_vocab_size=m, raw_han_exponent=a)`` equals
    ``train_from_counts(count(inputs, raw_vocab_size=4 * m), inputs, raw_vocab_size=m,
    raw_han_exponent=a)``. The same inputs give the same vocabulary
    whatever ``num_threads`` and whatever the order of the documents.

    ``backend="ray"`` trains on a Ray cluster (:func:`cnfmce.ray.train`; ``backend_options``
    such as ``ray_address``, ``block_size``, ``num_partitions`` go to it): the same vocabulary,
    byte for byte.
    """
    if _backend(backend, backend_options, "train") is not None:
        from . import ray as _ray_backend
        return _ray_backend.train(inputs, vocab_size, raw_vocab_size, rounds, special_tokens,
                                  num_threads, progress, memory_limit, algorithm, boundary_penalty,
                                  token_preference, tmp_dir, selection=selection,
                                  non_ascii_exponent=non_ascii_exponent,
                                  raw_han_exponent=raw_han_exponent, **backend_options)
    opts = _check_options(algorithm, boundary_penalty, token_preference)
    exps = _exponents(non_ascii_exponent, raw_han_exponent)
    with work_dir(tmp_dir) as tmp:
        limit, budget = _memory(memory_limit)
        trainer = _core.Trainer(vocab_size, raw_vocab_size, rounds, special_tokens, opts, budget,
                                os.path.join(tmp, ""), _check_threads(num_threads), selection, **exps)
        try:
            _warn_rounds(trainer.rounds)
            corpus = Corpus(inputs, tmp)
            m = raw_vocab_size if raw_vocab_size is not None else _core.default_raw_vocab_size(vocab_size)
            meta = {"counting": _info(trainer.rounds, _raw_pool(m, exps["raw_han_exponent"]), limit)}
            t_start = time.perf_counter()
            return _run(trainer, corpus, progress, meta, vocab_size,
                        lambda: _counting_done(corpus, meta["counting"], t_start, limit, stacklevel=5))
        finally:
            trainer.close()
