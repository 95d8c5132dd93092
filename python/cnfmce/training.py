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
from ._checks import default_memory_limit
from .config import TrainConfig, counting_info, report_metadata, warn_rounds
from .corpus import Inputs
from .counts import Counts, count_lists, load_counts, merge_counts, save_counts
from .readers import Corpus, fmt_bytes, feed, peak_rss_bytes
from .tokenizer import DEFAULT_BOUNDARY_PENALTY, Tokenizer
from .workdir import remove_stale_work_dirs, work_dir

# Names from before this module was split, kept for their callers.
_Corpus = Corpus
_work_dir = work_dir

__all__ = ["DEFAULT_ROUNDS", "Counts", "count", "train", "train_from_counts", "save_counts",
           "load_counts", "merge_counts", "default_memory_limit", "remove_stale_work_dirs",
           "TrainConfig"]

DEFAULT_ROUNDS: Tuple[Tuple[int, int, int], ...] = _core.DEFAULT_ROUNDS  # the paper's, defined in the core


def count(inputs: Inputs, raw_vocab_size: int = _core.DEFAULT_COUNT_RAW_VOCAB_SIZE,
          rounds: Optional[Sequence[Tuple[int, int, int]]] = None, num_threads: Optional[int] = None,
          progress: bool = True, memory_limit: Optional[int] = None,
          tmp_dir: Optional[str] = None, backend: str = "local", field: str = "text",
          **backend_options: Any) -> Counts:
    """The counting phase of CNF (paper Algorithm 1): counts valid candidates in length rounds
    and returns the ``raw_vocab_size`` most frequent (ties by bytes) as :class:`Counts`.

    ``inputs``: an iterable of ``str`` (one document each) or a list of paths (``.txt``,
    ``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``, ``.parquet``), told apart by the rule of
    :mod:`cnfmce.corpus`: ``pathlib.Path`` items are paths; a ``str`` is a path when it names an
    existing file, or has no whitespace and ends in a corpus extension (missing: an error); a list
    mixing paths and documents raises ``ValueError``; iterators and ``cnfmce.Documents(...)`` are
    always documents. ``memory_limit`` (bytes, default
    a sixth of the machine's memory, at least 1 GB) bounds the counting tables: beyond it they are spilled to sorted
    runs in ``tmp_dir`` and merged, so the counts stay exact. ``field``: the JSON field or
    parquet column holding the text of input files (default ``"text"``). ``rounds`` None: the
    paper's length intervals, ((1, 12, 0), (13, 21, T), (22, 30, T)), with T scaled to the corpus
    (``cnfmce._core.scaled_threshold`` of its UTF-8 bytes, known once the first round has read
    them: from 20 up to the paper's 80 at 512 MiB), as :func:`train` counts.

    ``backend="ray"`` counts on a Ray cluster (:func:`cnfmce.ray.count`, whose extra keyword
    arguments ``backend_options`` are), with the same result.
    """
    ray = _backend(backend, backend_options, "count")
    config = TrainConfig(raw_vocab_size=raw_vocab_size, rounds=rounds, num_threads=num_threads,
                         progress=progress, memory_limit=memory_limit, tmp_dir=tmp_dir, field=field)
    return run_count(inputs, config, ray, backend_options)


def run_count(inputs: Inputs, config: TrainConfig, backend: Optional[str] = None,
              backend_options: Optional[Dict[str, Any]] = None) -> Counts:
    """:func:`count` with its options as one checked :class:`TrainConfig` (``backend``: None,
    local, or ``"ray"`` with the Ray keyword arguments ``backend_options``)."""
    if backend is not None:
        return _on_ray("count", inputs, config, backend_options or {})
    progress = config.progress
    with work_dir(config.tmp_dir) as tmp:
        limit, budget = config.memory()
        counter = config.counter(tmp, budget)
        warn_rounds(counter.rounds, stacklevel=4)
        corpus = Corpus(inputs, tmp, config.field)
        info = counting_info(counter.rounds, config.raw_vocab_size, limit)
        t_start = time.perf_counter()
        n = len(counter.rounds)
        for k in range(n):
            r = counter.rounds[k]  # read again: the first round may set the later thresholds
            counter.begin_round()
            _counting_pass(corpus, k, n, r, counter.add, counter.end_round,
                           lambda: counter.table_bytes, progress, info,
                           _scaler(config, counter, info))
        _counting_done(corpus, info, t_start, limit, stacklevel=4)
        toks, counts = counter.result()
        return Counts(zip(toks, counts), info=info, characters=dict(zip(*counter.char_counts())))


def _scaler(config: TrainConfig, owner: Any, info: Dict[str, Any]) -> Optional[Any]:
    """When ``config`` scales the rounds: the call that, given the corpus's bytes at the end of
    the first round, sets the later rounds' threshold in ``owner`` (a core Trainer or Counter)
    and records it in ``info`` (the counting record); else None."""
    if config.later_threshold(0) is None:
        return None

    def scale(corpus_bytes: int) -> None:
        t = config.later_threshold(corpus_bytes)
        owner.set_later_thresholds(t)
        info["rounds"] = [list(r) for r in owner.rounds]
        info["scaled_threshold"] = {"corpus_bytes": int(corpus_bytes), "threshold": t}
    return scale


def _counting_pass(corpus: "Corpus", k: int, n: int, r: Tuple[int, int, int], add: Any, end: Any,
                   table_bytes: Any, progress: bool, info: Dict[str, Any],
                   scale: Optional[Any] = None) -> None:
    """Counting round ``k`` of ``n`` (``r``: its lengths and threshold): feeds the corpus to
    ``add``, ends it with ``end()``, records and prints its statistics. ``scale``: after the
    first round has read the corpus, called with its bytes before the round ends
    (:func:`_scaler`)."""
    lo, hi, thr = r
    label = f"count {k + 1}/{n} [{lo}-{hi}]" + (f" t={thr}" if k or scale is None else "")
    bar = feed(corpus, label, progress, add, lambda: {"table": fmt_bytes(table_bytes())})
    t_end = time.perf_counter()
    try:
        if k == 0 and scale is not None:
            scale(bar.done)
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


def _on_ray(call: str, *args: Any) -> Any:
    """The one way into the Ray backend (an optional integration, imported here only):
    ``cnfmce.ray.run(call, *args)``, where ``args`` end with the config and the Ray options."""
    from . import ray as _ray_backend
    return _ray_backend.run(call, *args)


def train_from_counts(counts: Union[Mapping[bytes, int], "os.PathLike[str]", str], inputs: Inputs,
                      vocab_size: int = _core.DEFAULT_VOCAB_SIZE, special_tokens: Sequence[str] = (),
                      num_threads: Optional[int] = None, progress: bool = True,
                      raw_vocab_size: Optional[int] = None, algorithm: str = "mce",
                      boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY, token_preference: bool = True,
                      tmp_dir: Optional[str] = None, selection: Optional[str] = None,
                      backend: str = "local", non_ascii_exponent: Optional[float] = None,
                      raw_han_exponent: Optional[float] = None, field: str = "text",
                      balance: Optional[float] = None, **backend_options: Any) -> Tokenizer:
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

    ``selection`` None (the default) is ``"refined-non-ascii"`` with the exponents ``balance``
    sets (below; :func:`train`). ``selection="paper"`` (SPEC section 4) is the paper's rule: one
    pass, the most used tokens. ``selection="refined"`` keeps the most frequent multi-byte characters, cuts the
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
    only) is the power of that ratio: 1 weighs the two groups' usage equally, 0 is
    ``"refined"`` with the prefixes. ``balance`` (``"refined-non-ascii"`` only, a number from 0
    to 1; None: ``cnfmce._core.DEFAULT_BALANCE`` unless ``non_ascii_exponent`` is given) sets
    ``non_ascii_exponent`` and, when it is not given, ``raw_han_exponent`` for ``vocab_size``
    (``cnfmce._core.balance_settings``): 0 ranks tokens by tokens saved over the mix as it is, 1
    gives the ASCII and non-ASCII parts of the mix the equal say measured best at that size.

    ``raw_han_exponent`` (any selection; 0, the default outside ``balance``, is the paper's cut) makes the cut of
    the counts to ``raw_vocab_size`` (which must then be given) Han-weighted: of the best
    ``cnfmce._core.HAN_POOL_PER_RAW * raw_vocab_size`` counts, each candidate with a Han
    character has its count multiplied by ``(ASCII count / non-ASCII count) ^ raw_han_exponent``
    (the summed counts of the pool's ASCII and other candidates; no weight when the ASCII count
    is not the larger), and the best ``raw_vocab_size`` by that weighted count are the raw
    vocabulary (src/raw_cut.rs). On a mix that is mostly ASCII it brings in the Chinese words
    the paper's cut leaves just below the line (``docs/results/raw_rule.md``).

    ``field``: the JSON field or parquet column holding the text of input files (default
    ``"text"``), as for :func:`train`."""
    ray = _backend(backend, backend_options, "train_from_counts")
    config = TrainConfig(vocab_size=vocab_size, raw_vocab_size=raw_vocab_size,
                         special_tokens=special_tokens, algorithm=algorithm,
                         boundary_penalty=boundary_penalty, token_preference=token_preference,
                         selection=selection, balance=balance, non_ascii_exponent=non_ascii_exponent,
                         raw_han_exponent=raw_han_exponent, num_threads=num_threads,
                         progress=progress, tmp_dir=tmp_dir, field=field)
    return run_train_from_counts(counts, inputs, config, ray, backend_options)


def run_train_from_counts(counts: Any, inputs: Inputs, config: TrainConfig,
                          backend: Optional[str] = None,
                          backend_options: Optional[Dict[str, Any]] = None) -> Tokenizer:
    """:func:`train_from_counts` with its options as one checked :class:`TrainConfig`."""
    if backend is not None:
        return _on_ray("train_from_counts", counts, inputs, config, backend_options or {})
    with work_dir(config.tmp_dir) as tmp:
        trainer = config.counts_trainer(counts, tmp)
        try:
            corpus = Corpus(inputs, tmp, config.field)
            return _run(trainer, corpus, config, {})
        finally:
            trainer.close()


def _run(trainer: "_core.Trainer", corpus: "Corpus", config: TrainConfig, meta: Dict[str, Any],
         counted: Optional[Any] = None) -> Tokenizer:
    """Runs the trainer's passes over the corpus (counting rounds, recorded in
    ``meta["counting"]``, then ``counted()``, then filtering and the refining passes of
    ``selection="refined"``) and returns the tokenizer with the run's metadata."""
    progress = config.progress
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
                           lambda: trainer.table_bytes, progress, meta["counting"],
                           _scaler(config, trainer, meta["counting"]))
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
        warnings.warn(report["warning"], RuntimeWarning, stacklevel=4)
    tok = Tokenizer(core)
    tok.metadata.update(meta)
    tok.metadata.update(trainer="cnfmce", vocab_size=config.vocab_size, raw_vocabulary=raw_size,
                        filtering=filtering, selection=report["selection"],
                        refining=refining, covered_characters=report["covered_characters"])
    report_metadata(tok, report, config.balance)
    return tok


def train(inputs: Inputs, vocab_size: int = _core.DEFAULT_VOCAB_SIZE, raw_vocab_size: Optional[int] = None,
          rounds: Optional[Sequence[Tuple[int, int, int]]] = None, special_tokens: Sequence[str] = (),
          num_threads: Optional[int] = None, progress: bool = True,
          memory_limit: Optional[int] = None, algorithm: str = "mce",
          boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY, token_preference: bool = True,
          tmp_dir: Optional[str] = None, selection: Optional[str] = None, backend: str = "local",
          non_ascii_exponent: Optional[float] = None, raw_han_exponent: Optional[float] = None,
          field: str = "text", balance: Optional[float] = None, **backend_options: Any) -> Tokenizer:
    """Trains a CNF vocabulary (SPEC section 4) and returns its :class:`Tokenizer`.

    ``inputs``: documents or paths, as for :func:`count` (the rule of :mod:`cnfmce.corpus`; wrap
    strings that look like file names in ``cnfmce.Documents``). Equal to
    ``train_from_counts(count(inputs, ...), inputs, ...)`` with the same ``raw_vocab_size``. The
    result has ``vocab_size`` ids (byte tokens and special tokens
    included), ordered by usage in the filtering pass, special tokens last. ``raw_vocab_size``
    None means ``cnfmce._core.default_raw_vocab_size(vocab_size)`` (a multiple of ``vocab_size``).

    **Defaults** (chosen on a validation split, ``docs/results/defaults.md``): with no
    ``selection``, ``"refined-non-ascii"`` with its exponents set by ``balance`` (a number from 0
    to 1, default ``cnfmce._core.DEFAULT_BALANCE``): 0 gives ids by tokens saved over the
    training mix as it is, 1 gives its ASCII part (English, science, maths, code) and its
    non-ASCII part (Chinese, other scripts, accented words) an equal say; raise it for a
    multilingual vocabulary. With no ``rounds``, the paper's length intervals with the threshold
    of the rounds after the first scaled to the corpus (``cnfmce._core.scaled_threshold`` of its
    UTF-8 bytes: 20 up to 137 MB, the paper's 80 from 512 MiB). ``selection="paper"`` is the
    paper's algorithm exactly (SPEC section 4), with the paper's rounds unless ``rounds`` is
    given. ``balance`` with another selection, or with ``non_ascii_exponent``, is refused.

    ``selection``: ``"paper"``, ``"refined"``, ``"refined-scripts"`` or ``"refined-non-ascii"``,
    as in :func:`train_from_counts`, and so are ``non_ascii_exponent`` and ``raw_han_exponent``; with ``raw_han_exponent`` above 0
    counting keeps ``cnfmce._core.HAN_POOL_PER_RAW * raw_vocab_size`` candidates (the pool of
    the Han-weighted cut), so ``train(inputs, raw_vocab_size=m, raw_han_exponent=a)`` equals
    ``train_from_counts(count(inputs, raw_vocab_size=4 * m), inputs, raw_vocab_size=m,
    raw_han_exponent=a)``. The same inputs give the same vocabulary
    whatever ``num_threads`` and whatever the order of the documents. ``field``: the JSON field
    or parquet column holding the text of input files (default ``"text"``; documents in memory
    are text already); a file whose records lack it raises :class:`cnfmce.CorpusError` naming
    the file.

    The options are checked once, as a :class:`cnfmce.config.TrainConfig`, which is what the
    run (local or Ray) reads.

    ``backend="ray"`` trains on a Ray cluster (:func:`cnfmce.ray.train`; ``backend_options``
    such as ``ray_address``, ``block_size``, ``num_partitions`` go to it): the same vocabulary,
    byte for byte.
    """
    ray = _backend(backend, backend_options, "train")
    config = TrainConfig(vocab_size=vocab_size, raw_vocab_size=raw_vocab_size, rounds=rounds,
                         special_tokens=special_tokens, algorithm=algorithm,
                         boundary_penalty=boundary_penalty, token_preference=token_preference,
                         selection=selection, balance=balance, non_ascii_exponent=non_ascii_exponent,
                         raw_han_exponent=raw_han_exponent, num_threads=num_threads,
                         progress=progress, memory_limit=memory_limit, tmp_dir=tmp_dir, field=field)
    return run_train(inputs, config, ray, backend_options)


def run_train(inputs: Inputs, config: TrainConfig, backend: Optional[str] = None,
              backend_options: Optional[Dict[str, Any]] = None) -> Tokenizer:
    """:func:`train` with its options as one checked :class:`TrainConfig` (``backend``: None,
    local, or ``"ray"`` with the Ray keyword arguments ``backend_options``)."""
    if backend is not None:
        return _on_ray("train", inputs, config, backend_options or {})
    with work_dir(config.tmp_dir) as tmp:
        limit, budget = config.memory()
        trainer = config.trainer(tmp, budget)
        try:
            warn_rounds(trainer.rounds, stacklevel=4)
            corpus = Corpus(inputs, tmp, config.field)
            meta = {"counting": counting_info(trainer.rounds,
                                              config.raw_pool(config.counted_raw_vocab_size()), limit)}
            t_start = time.perf_counter()
            return _run(trainer, corpus, config, meta,
                        lambda: _counting_done(corpus, meta["counting"], t_start, limit, stacklevel=6))
        finally:
            trainer.close()
