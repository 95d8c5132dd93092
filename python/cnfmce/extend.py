"""Vocabulary extension: CNF tokens added to an existing vocabulary that keeps every id
(``docs/extend.md``).

>>> ext = cnfmce.extend("o200k_base.tiktoken", ["train.jsonl.gz"], new_tokens=32_768)  # doctest: +SKIP
>>> rows = cnfmce.initial_embeddings(ext, base_embedding_matrix)                          # doctest: +SKIP

The base keeps every regular token, every special token and every id; ids it leaves unused stay
unused. The new tokens take the ids from one past the base's largest id (special tokens
included) on. They are counted on the inputs as :func:`cnfmce.train` counts (a candidate the base
already has is not new) and chosen by usage under MCE over the base and the candidates, the base
always kept, in the refined selection's steps (cuts to 2x, 1.4x, 1.15x and 1x ``new_tokens``,
each keeping the candidates that save the most tokens; ``src/extend.rs``). Since every base
token keeps its id, the MCE cost of any text with the extension is at most its cost with the base.

Each new token's *pieces* (its MCE encoding with the base alone, base ids) are stored in the
tokenizer's metadata under ``"extension"`` (saved with it; layout in ``docs/spec.md``), so that
:func:`initial_embeddings` can give the new rows of an embedding matrix.
"""

from __future__ import annotations

import array
import base64
import os
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _core
from .corpus import Inputs
from .readers import Corpus, feed, fmt_bytes, peak_rss_bytes
from .tokenizer import Tokenizer
from .workdir import work_dir
from . import training as _training
from ._checks import check_exponent, check_positive
from .config import TrainConfig, counting_info, warn_rounds

__all__ = ["extend", "initial_embeddings", "extension_info", "resize_model_embeddings", "EXTENSION_KEY",
           "load_base"]

#: The metadata key of an extended tokenizer's extension record.
EXTENSION_KEY = "extension"
#: The version of that record's layout.
EXTENSION_VERSION = 1

METHODS = ("mean",)
#: Counted candidates kept per new token when ``raw_vocab_size`` is not given (``train`` keeps
#: 10 per token). Chosen on a validation split of the shared text (o200k_base + 32,768 tokens;
#: docs/results/extend.md): 20 is the only multiple of 10, 20 and 40 ahead of the naive union on
#: every category; 10 leaves too few candidates of the scripts that are rarer in the text (zh,
#: multi), 40 gives them tokens the other categories need.
EXTEND_RAW_PER_NEW_TOKEN = 20


def load_base(base: Union[Tokenizer, "os.PathLike[str]", str]) -> Tokenizer:
    """A :class:`Tokenizer` as is, or the tokenizer in a file: a cnfmce file, a ``.tiktoken``
    vocabulary or a Hugging Face ``tokenizer.json`` (told apart by
    :func:`cnfmce.formats.tokenizer_file_kind`)."""
    if isinstance(base, Tokenizer):
        return base
    if not isinstance(base, (str, os.PathLike)):
        raise TypeError(f"base must be a cnfmce.Tokenizer or a path, got {type(base).__name__}")
    from .loading import load_tokenizer_file
    path = os.fspath(base)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such tokenizer file: {path}")
    return load_tokenizer_file(path)


def _u32(values: Sequence[int]) -> str:
    a = array.array("I", values)
    if a.itemsize != 4:  # pragma: no cover - every platform cnfmce builds on has 4-byte unsigned int
        a = array.array("L", values)
    if sys.byteorder != "little":  # pragma: no cover
        a.byteswap()
    return base64.b64encode(a.tobytes()).decode("ascii")


def _from_u32(text: Any, what: str) -> List[int]:
    try:
        raw = base64.b64decode(text, validate=True)
    except (TypeError, ValueError) as e:
        raise ValueError(f"bad extension record: {what} is not base64 ({e})") from None
    if len(raw) % 4:
        raise ValueError(f"bad extension record: {what} is not a whole number of uint32")
    a = array.array("I")
    a.frombytes(raw)
    if sys.byteorder != "little":  # pragma: no cover
        a.byteswap()
    return a.tolist()


def _record(base: Tokenizer, base_id_bound: int, first_new_id: int, pieces: List[List[int]]) -> Dict[str, Any]:
    return {
        "version": EXTENSION_VERSION,
        "base_num_ids": base.n_vocab,
        "base_id_bound": base_id_bound,
        "first_new_id": first_new_id,
        "new_tokens": len(pieces),
        "piece_lengths": _u32([len(p) for p in pieces]),
        "pieces": _u32([i for p in pieces for i in p]),
    }


def extension_info(tok: Tokenizer) -> Dict[str, Any]:
    """The extension record of an extended tokenizer, decoded: ``first_new_id``,
    ``new_tokens``, ``base_id_bound`` (one past the base's largest regular id), ``base_num_ids``
    and ``pieces`` (one list of base ids per new id, in id order). ``ValueError`` when ``tok``
    has none (it was not made by :func:`extend`) or the record is damaged."""
    if not isinstance(tok, Tokenizer):
        raise TypeError(f"expected a cnfmce.Tokenizer, got {type(tok).__name__}")
    rec = tok.metadata.get(EXTENSION_KEY)
    if not isinstance(rec, dict):
        raise ValueError("this tokenizer has no extension record (metadata['extension']): it was "
                         "not made by cnfmce.extend, so there are no pieces to initialise from")
    if rec.get("version") != EXTENSION_VERSION:
        raise ValueError(f"unsupported extension record version {rec.get('version')!r} "
                         f"(this cnfmce reads version {EXTENSION_VERSION})")
    try:
        first, n, bound = int(rec["first_new_id"]), int(rec["new_tokens"]), int(rec["base_id_bound"])
        lengths = _from_u32(rec["piece_lengths"], "piece_lengths")
        flat = _from_u32(rec["pieces"], "pieces")
    except (KeyError, TypeError) as e:
        raise ValueError(f"bad extension record: {e}") from None
    if len(lengths) != n or sum(lengths) != len(flat) or any(x <= 0 for x in lengths):
        raise ValueError("bad extension record: piece lengths do not match the pieces")
    if flat and max(flat) >= bound:
        raise ValueError("bad extension record: a piece id is not a base id")
    pieces, at = [], 0
    for ln in lengths:
        pieces.append(flat[at:at + ln])
        at += ln
    for k in range(n):
        if tok._core.id_to_token(first + k) != b"".join(tok._core.id_to_token(i) for i in pieces[k]):
            raise ValueError(f"bad extension record: the pieces of id {first + k} do not spell its token")
    return {"first_new_id": first, "new_tokens": n, "base_id_bound": bound,
            "base_num_ids": rec.get("base_num_ids"), "pieces": pieces}


@dataclass(frozen=True, eq=False)
class _Plan:
    """An extension run's options, checked, and its base: what the local run and the Ray run
    (``cnfmce.ray``) share. Each backend counts (``config``: the counting of
    :func:`cnfmce.train` keeping room for the candidates the base has) and runs the passes its
    own way; the rules between (the candidates, the passes' order and labels, the result and
    its metadata) are here."""
    base: Tokenizer
    new_tokens: int
    #: the new candidates counting keeps
    raw: int
    selection: str
    #: the exponent of selection="refined-non-ascii" (None for "refined")
    exponent: Optional[float]
    #: the run's options; its raw_vocab_size is ``raw`` plus the base's regular tokens
    config: TrainConfig
    #: the base's regular tokens (``CoreTokenizer.packed()``) and special tokens
    packed: Tuple[bytes, bytes, bytes]
    specials: List[Tuple[bytes, int]]

    @classmethod
    def make(cls, base: Union[Tokenizer, "os.PathLike[str]", str], new_tokens: int,
             raw_vocab_size: Optional[int], rounds: Optional[Sequence[Tuple[int, int, int]]],
             num_threads: Optional[int], progress: bool, memory_limit: Optional[int],
             tmp_dir: Optional[str], selection: str, non_ascii_exponent: Optional[float],
             field: str) -> "_Plan":
        n = check_positive("new_tokens", new_tokens)
        if selection not in ("refined", "refined-non-ascii"):
            raise ValueError(f"selection must be 'refined' or 'refined-non-ascii', got {selection!r}")
        if non_ascii_exponent is not None and selection != "refined-non-ascii":
            raise ValueError("non_ascii_exponent is an exponent of selection='refined-non-ascii'")
        exponent = None
        if selection == "refined-non-ascii":
            exponent = (_core.NON_ASCII_SHARE_EXPONENT if non_ascii_exponent is None
                        else check_exponent("non_ascii_exponent", non_ascii_exponent))
        if raw_vocab_size is None:
            raw = n * EXTEND_RAW_PER_NEW_TOKEN
        else:
            raw = check_positive("raw_vocab_size", raw_vocab_size)
        tok = load_base(base)
        core = tok._core
        packed = core.packed()
        # the run's options, checked as train() checks them (the counting part of a TrainConfig;
        # rounds None: the default rounds, as given); counting keeps room for the candidates the
        # base already has, which are dropped
        config = TrainConfig(rounds=_training.DEFAULT_ROUNDS if rounds is None else rounds,
                             num_threads=num_threads, progress=progress, memory_limit=memory_limit,
                             tmp_dir=tmp_dir, field=field)
        config = config.replace(raw_vocab_size=raw + len(packed[1]) // 4)
        return cls(tok, n, raw, selection, exponent, config, packed, core.specials())

    @property
    def options(self) -> "_core.Options":
        """The base's encoding options (every pass encodes with MCE and their λ and ε)."""
        return self.base._core.options

    def extender(self, counter: "_core.Counter", info: Dict[str, Any]) -> "_core.Extender":
        """The core's extension run over the counted candidates (``counter``, its counting done)
        the base lacks, the best ``raw`` of them by count, ties by bytes; ``info`` (the counting
        record) gets how many counted candidates the base has and how many are left."""
        have = set(b for b, _ in self.specials)
        data, at = self.packed[0], 0
        for ln in array.array("I", self.packed[1]):
            have.add(data[at:at + ln])
            at += ln
        toks, counts = counter.result()
        ranked = sorted((t for t in zip(toks, counts) if t[0] not in have), key=lambda x: (-x[1], x[0]))
        info["counted_in_base"] = len(toks) - len(ranked)
        del toks, counts, have
        cands = [t for t, _ in ranked[:self.raw]]
        info["candidates"] = len(cands)
        del ranked
        return _core.Extender(self.packed, self.specials, self.options, cands, self.new_tokens,
                              self.config.num_threads, self.exponent)

    @staticmethod
    def passes(ext: "_core.Extender", one_pass: Callable[[str], Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Runs every pass of ``ext``: ``one_pass(label)`` (label ``"filter"``, ``"refine 1"``,
        ...) feeds the corpus to the pass and ends it, returning its record."""
        out = []
        while True:
            step = ext.next_pass()
            if step is None:
                return out
            out.append(one_pass("filter" if step[0] == "filter" else f"refine {step[1] + 1}"))

    @staticmethod
    def describe(st: Dict[str, Any]) -> str:
        """The end of a pass's progress line (``st``: what ``Extender.end_pass`` returns)."""
        return (f"base + {st['candidates']:,} candidates, {st['bytes'] / max(st['tokens'], 1):.3f} "
                "bytes/token on the training text")

    def result(self, ext: "_core.Extender", info: Dict[str, Any], passes: List[Dict[str, Any]],
               t_start: float, stacklevel: int) -> Tokenizer:
        """The extended tokenizer from ``ext`` (every pass done), its metadata: the base's, the
        counting record ``info``, the passes' records and the extension record. A run with
        fewer new tokens than asked warns at the caller of ``extend`` (``stacklevel``: its level
        seen from the caller of this method)."""
        new_core, first, pieces, report = ext.finish()
        if report["warning"]:
            warnings.warn(report["warning"], RuntimeWarning, stacklevel=stacklevel + 1)
        out = Tokenizer(new_core)
        out.metadata.update({k: v for k, v in self.base.metadata.items() if k != EXTENSION_KEY})
        out.metadata.update(trainer="cnfmce-extend", selection=self.selection, counting=info,
                            extend_passes=passes, used_new_tokens=report["used_new_tokens"],
                            extend_seconds=round(time.perf_counter() - t_start, 3),
                            peak_rss=peak_rss_bytes())
        if self.exponent is not None:
            out.metadata["non_ascii_exponent"] = self.exponent
        ids = array.array("I")
        ids.frombytes(self.packed[2])
        out.metadata[EXTENSION_KEY] = _record(self.base, max(ids) + 1, first, pieces)
        return out


def extend(base: Union[Tokenizer, "os.PathLike[str]", str], inputs: Inputs, new_tokens: int,
           raw_vocab_size: Optional[int] = None,
           rounds: Sequence[Tuple[int, int, int]] = _training.DEFAULT_ROUNDS,
           num_threads: Optional[int] = None, progress: bool = True,
           memory_limit: Optional[int] = None, tmp_dir: Optional[str] = None,
           selection: str = "refined", non_ascii_exponent: Optional[float] = None,
           field: str = "text", backend: str = "local", **backend_options: Any) -> Tokenizer:
    """The base vocabulary with ``new_tokens`` CNF tokens added (module documentation).

    ``base``: a :class:`Tokenizer` or the path of a cnfmce file, a ``.tiktoken`` vocabulary (no
    special tokens: load it with :meth:`Tokenizer.from_tiktoken` to give them) or a
    ``tokenizer.json``. Its options (``algorithm``, ``boundary_penalty``,
    ``token_preference``) carry over; the tokens are chosen with MCE.

    ``inputs``: documents or paths, as for :func:`cnfmce.train`. ``raw_vocab_size``: the new
    candidates counting keeps (candidates the base has are dropped first; None:
    ``cnfmce.EXTEND_RAW_PER_NEW_TOKEN`` (20) times ``new_tokens``). ``rounds``, ``num_threads``,
    ``progress``, ``memory_limit``, ``tmp_dir`` and ``field`` are those of :func:`cnfmce.train`
    (``rounds`` None: the default, the paper's rounds); the result is the same whatever
    ``num_threads`` and the order of the documents. When the text offers fewer candidates than
    ``new_tokens``, the result has fewer new ids and a ``RuntimeWarning`` says so.

    ``backend="ray"`` runs on a Ray cluster (also :func:`cnfmce.ray.extend`; ``backend_options``
    such as ``ray_address``, ``block_size``, ``num_partitions``, ``cpus_per_task`` are those of
    :func:`cnfmce.ray.train`): counting in the partitioned rounds of ``cnfmce.ray.train``, each
    pass's documents encoded by workers whose usage the driver sums into the run; the result
    is the local one, tokens, ids and pieces byte for byte, whatever the number of workers,
    blocks and partitions.

    ``selection``: ``"refined"`` (the default: tokens saved) or ``"refined-non-ascii"`` (tokens
    saved of the candidates of the smaller of the ASCII and non-ASCII groups, by the usage of
    the whole vocabulary in the pass, weighted up by the ratio of the two usages to the power
    ``non_ascii_exponent``, default ``cnfmce._core.NON_ASCII_SHARE_EXPONENT``, as
    :func:`cnfmce.train`'s selection of that name weighs them).

    The result's ``metadata["extension"]`` holds each new token's pieces over the base
    (:func:`extension_info`, :func:`initial_embeddings`).
    """
    ray = _training._backend(backend, backend_options, "extend")
    plan = _Plan.make(base, new_tokens, raw_vocab_size, rounds, num_threads, progress, memory_limit,
                      tmp_dir, selection, non_ascii_exponent, field)
    if ray is not None:
        return _training._on_ray("extend", inputs, plan, backend_options)
    return _extend_here(inputs, plan)


def _extend_here(inputs: Inputs, plan: _Plan) -> Tokenizer:
    """:func:`extend` on this machine: the corpus read once per counting round and per pass."""
    config = plan.config
    t_start = time.perf_counter()
    with work_dir(config.tmp_dir) as tmp:
        limit, budget = config.memory()
        counter = config.counter(tmp, budget)
        warn_rounds(counter.rounds, stacklevel=4)
        corpus = Corpus(inputs, tmp, config.field)
        info = counting_info(counter.rounds, plan.raw, limit)
        nr = len(counter.rounds)
        for k, r in enumerate(counter.rounds):
            counter.begin_round()
            _training._counting_pass(corpus, k, nr, r, counter.add, counter.end_round,
                                     lambda: counter.table_bytes, config.progress, info)
        _training._counting_done(corpus, info, t_start, limit, stacklevel=4)
        ext = plan.extender(counter, info)
        del counter

        def one_pass(label: str) -> Dict[str, Any]:
            bar = feed(corpus, label, config.progress, ext.add)
            try:
                st = ext.end_pass()
            except BaseException:
                bar.close()
                raise
            bar.close(f"  {label}: {fmt_bytes(st['bytes'])} in {bar.seconds:.1f}s, {plan.describe(st)}")
            return dict(st, seconds=round(bar.seconds, 3))

        try:
            passes = plan.passes(ext, one_pass)
            return plan.result(ext, info, passes, t_start, stacklevel=3)
        finally:
            ext.close()


def initial_embeddings(extended: Tokenizer, base_matrix: Any, method: str = "mean") -> Any:
    """The rows for the new ids of ``extended`` (made by :func:`extend`) from the base model's
    embedding matrix ``base_matrix`` (a 2-D numpy array of floats, one row per base id; it may
    have more rows than the base has ids, as padded model matrices do): a numpy array of shape
    ``(new_tokens, dim)`` and the matrix's dtype, row ``k`` for id ``first_new_id + k``.

    ``method="mean"``: the mean of the rows of the new token's pieces (its MCE encoding with the
    base), computed in float64. A new token's pieces all come from the base, so the mean is the
    average of what the model already knows about the text the token stands for.
    """
    import numpy as np
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(repr(m) for m in METHODS)}, got {method!r}")
    info = extension_info(extended)
    if not isinstance(base_matrix, np.ndarray):
        raise TypeError(f"base_matrix must be a numpy array, got {type(base_matrix).__name__} "
                        "(for a torch tensor: tensor.detach().cpu().numpy())")
    if base_matrix.ndim != 2:
        raise ValueError(f"base_matrix must be 2-D (ids x dimensions), got shape {base_matrix.shape}")
    if not np.issubdtype(base_matrix.dtype, np.floating):
        raise TypeError(f"base_matrix must hold floats, got dtype {base_matrix.dtype}")
    if base_matrix.shape[0] < info["base_id_bound"]:
        raise ValueError(f"base_matrix has {base_matrix.shape[0]:,} rows but the base vocabulary has "
                         f"ids up to {info['base_id_bound'] - 1:,}: not this base's matrix")
    pieces = info["pieces"]
    out = np.empty((len(pieces), base_matrix.shape[1]), dtype=base_matrix.dtype)
    if not pieces:
        return out
    lengths = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
    flat = np.fromiter((i for p in pieces for i in p), dtype=np.int64, count=int(lengths.sum()))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    sums = np.add.reduceat(base_matrix[flat].astype(np.float64), starts, axis=0)
    out[:] = sums / lengths[:, None]
    return out


def resize_model_embeddings(model: Any, extended: Tokenizer, method: str = "mean",
                            pad_to_multiple_of: Optional[int] = None) -> Any:
    """Resizes a ``transformers`` model's input embeddings (and its output embeddings when they
    are not tied to them) to hold every id of ``extended`` (made by :func:`extend` from the
    model's vocabulary) and fills the rows of the new ids with :func:`initial_embeddings` of the
    model's own matrices; returns the model. Rows the model had keep their values (a padded
    matrix's spare rows that new ids land on are overwritten). Needs ``torch``
    (``cnfmce.hf.resize_embeddings`` is this function)."""
    import numpy as np
    import torch
    info = extension_info(extended)
    first, n = info["first_new_id"], info["new_tokens"]
    emb = model.get_input_embeddings()
    if emb is None:
        raise ValueError("the model has no input embeddings to resize")
    rows0 = emb.weight.shape[0]
    if rows0 < info["base_id_bound"]:
        raise ValueError(f"the model's embedding matrix has {rows0:,} rows but the base vocabulary has "
                         f"ids up to {info['base_id_bound'] - 1:,}: not the model of this base")
    out0 = model.get_output_embeddings()
    tied = out0 is None or out0.weight is emb.weight or out0.weight.data_ptr() == emb.weight.data_ptr()
    new_in = initial_embeddings(extended, emb.weight.detach().float().cpu().numpy().astype(np.float32), method)
    new_out = None if tied else initial_embeddings(
        extended, out0.weight.detach().float().cpu().numpy().astype(np.float32), method)
    size = max(rows0, first + n)
    model.resize_token_embeddings(size, pad_to_multiple_of=pad_to_multiple_of)
    with torch.no_grad():
        w = model.get_input_embeddings().weight
        w[first:first + n] = torch.from_numpy(new_in).to(dtype=w.dtype, device=w.device)
        if new_out is not None:
            o = model.get_output_embeddings().weight
            o[first:first + n] = torch.from_numpy(new_out).to(dtype=o.dtype, device=o.device)
    return model
