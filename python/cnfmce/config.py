"""The options of a training run as one object, :class:`TrainConfig`: the Python side of the
core's ``TrainConfig`` (src/train.rs) plus what a run on this side needs (threads, progress,
memory limit, work directory, the text field of the input files). Built once per call by
:func:`cnfmce.train`, :func:`cnfmce.train_from_counts`, :func:`cnfmce.count`, the command line
and the Ray backend, checked once when it is made (the checks of this side; the core checks the
rest when :meth:`TrainConfig.trainer` or :meth:`TrainConfig.counter` hands it over), and passed
down whole. A new option is one more field here, read where it is used.

>>> config = TrainConfig(vocab_size=32_000, boundary_penalty=0.1)   # doctest: +SKIP
>>> trainer = config.trainer(tmp)                                   # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple

from . import _core
from ._checks import check_exponent, check_positive, memory_budget
from .counts import load_any_counts
from .tokenizer import DEFAULT_BOUNDARY_PENALTY, useful_threads

__all__ = ["TrainConfig", "DEFAULT_SELECTION", "PAPER_ROUNDS", "counting_info", "warn_rounds",
           "report_metadata"]

Round = Tuple[int, int, int]

#: The selection of a run that gives none: the refined selection with the ASCII / non-ASCII
#: weighting, its exponents set by ``balance`` (:func:`cnfmce._core.balance_settings`).
DEFAULT_SELECTION = "refined-non-ascii"
#: The paper's rounds, ((1, 12, 0), (13, 21, 80), (22, 30, 80)): those of ``selection="paper"``
#: when no rounds are given, and the lengths of the scaled default rounds.
PAPER_ROUNDS: Tuple[Round, ...] = _core.DEFAULT_ROUNDS
SELECTIONS = ("paper", "refined", "refined-scripts", "refined-non-ascii")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The options of :func:`cnfmce.train` (same names, same defaults), checked when made.

    The core's part (``vocab_size``, ``raw_vocab_size``, ``rounds``, ``special_tokens``, the
    encoding options, ``selection`` and the two exponents) is checked by the core when the
    trainer is made; this side checks the encoding options (as :class:`cnfmce._core.Options`),
    the exponents' types, ``memory_limit``, ``num_threads`` (lowered to what can help) and
    ``field``, in that order, with the messages the calls have always given."""

    vocab_size: int = _core.DEFAULT_VOCAB_SIZE
    raw_vocab_size: Optional[int] = None
    #: None: the paper's rounds for ``selection="paper"``; for the other selections the paper's
    #: length intervals with the threshold of the rounds after the first scaled to the corpus
    #: (:func:`cnfmce._core.scaled_threshold` of its bytes, set once the first round has read
    #: them all: ``scaled_rounds``)
    rounds: Optional[Sequence[Round]] = None
    special_tokens: Sequence[str] = ()
    algorithm: str = "mce"
    boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY
    token_preference: bool = True
    #: None: :data:`DEFAULT_SELECTION`
    selection: Optional[str] = None
    #: ``selection="refined-non-ascii"`` only: a number from 0 to 1 that sets its exponents
    #: (None: ``cnfmce._core.DEFAULT_BALANCE`` unless ``non_ascii_exponent`` is given)
    balance: Optional[float] = None
    non_ascii_exponent: Optional[float] = None
    raw_han_exponent: Optional[float] = None
    # of the run on this side
    num_threads: Optional[int] = None
    progress: bool = True
    memory_limit: Optional[int] = None
    tmp_dir: Optional[str] = None
    field: str = "text"
    #: the encoding options as the core takes them (made from the three above)
    options: "_core.Options" = dataclasses.field(init=False, repr=False, compare=False)
    #: True when the rounds after the first get :func:`cnfmce._core.scaled_threshold` of the
    #: corpus (no rounds given, a selection other than the paper's)
    scaled_rounds: bool = dataclasses.field(init=False, compare=False)
    #: True when ``raw_han_exponent`` is the one ``balance`` set
    han_from_balance: bool = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "options", _core.Options(self.algorithm, self.boundary_penalty, self.token_preference))
        self._resolve_defaults()
        if self.non_ascii_exponent is not None:
            set_(self, "non_ascii_exponent", check_exponent("non_ascii_exponent", self.non_ascii_exponent))
        set_(self, "raw_han_exponent", check_exponent("raw_han_exponent", self.raw_han_exponent))
        if self.memory_limit is not None:
            check_positive("memory_limit", self.memory_limit)
        set_(self, "num_threads", useful_threads(self.num_threads))
        if not isinstance(self.field, str) or not self.field:
            raise ValueError("field must be a non-empty string")

    def _resolve_defaults(self) -> None:
        """The defaults that depend on other options: the selection, ``balance`` and the
        exponents it sets, the rounds (module :mod:`cnfmce._core`'s ``balance_settings`` and
        ``scaled_threshold``; ``docs/spec.md`` section 4)."""
        set_ = object.__setattr__
        han = False
        sel = DEFAULT_SELECTION if self.selection is None else self.selection
        if not isinstance(sel, str):
            raise TypeError(f"selection must be a string, got {type(sel).__name__}")
        if sel not in SELECTIONS:
            raise ValueError("selection must be 'paper', 'refined', 'refined-scripts' or "
                             f"'refined-non-ascii', got {sel!r}")
        set_(self, "selection", sel)
        if self.non_ascii_exponent is not None and sel != "refined-non-ascii":
            raise ValueError("non_ascii_exponent is an exponent of selection='refined-non-ascii', not "
                             f"of selection='{sel}'")
        b = self.balance
        if b is not None:
            if isinstance(b, bool) or not isinstance(b, (int, float)):
                raise TypeError(f"balance must be a number from 0 to 1, got {type(b).__name__}")
            b = float(b)
            if not 0.0 <= b <= 1.0:  # also NaN
                raise ValueError(f"balance must be a number from 0 to 1, got {self.balance!r}")
            if sel != "refined-non-ascii":
                raise ValueError(f"balance sets the exponents of selection='refined-non-ascii' (the "
                                 f"default), not of selection='{sel}'")
            if self.non_ascii_exponent is not None:
                raise ValueError("give balance or non_ascii_exponent, not both (balance sets it)")
        if sel == "refined-non-ascii" and self.non_ascii_exponent is None:
            if b is None:
                b = _core.DEFAULT_BALANCE
            size = self.vocab_size if isinstance(self.vocab_size, int) and self.vocab_size > 0 \
                else _core.DEFAULT_VOCAB_SIZE  # the core refuses a bad vocab_size later
            e, h = _core.balance_settings(b, size)
            set_(self, "non_ascii_exponent", e)
            if self.raw_han_exponent is None:
                set_(self, "raw_han_exponent", h)
                han = True
        set_(self, "balance", b)
        set_(self, "han_from_balance", han)
        if self.raw_han_exponent is None:
            set_(self, "raw_han_exponent", 0.0)
        set_(self, "scaled_rounds", self.rounds is None and sel != "paper")
        if self.rounds is None:
            set_(self, "rounds", PAPER_ROUNDS)

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with ``changes``, checked again. What the defaults resolved to is resolved
        again (for the new ``vocab_size``, say) unless ``changes`` names it: the exponents
        ``balance`` set and the scaled rounds."""
        if self.balance is not None:
            changes.setdefault("non_ascii_exponent", None)
            if self.han_from_balance:
                changes.setdefault("raw_han_exponent", None)
        if self.scaled_rounds:
            changes.setdefault("rounds", None)
        return dataclasses.replace(self, **changes)

    def later_threshold(self, corpus_bytes: int) -> Optional[int]:
        """The threshold the rounds after the first get for a corpus of ``corpus_bytes`` bytes
        (None when the rounds are not scaled, or there is no later round)."""
        if not self.scaled_rounds or len(self.rounds) < 2:
            return None
        return _core.scaled_threshold(int(corpus_bytes))

    # --- what the run derives from the options -----------------------------------------------

    def memory(self) -> Tuple[int, int]:
        """(the memory limit, the counting tables' budget) of a local run, as of now."""
        return memory_budget(self.memory_limit)

    def counted_raw_vocab_size(self) -> int:
        """The raw vocabulary size counting aims at: ``raw_vocab_size``, or the core's default
        multiple of ``vocab_size``."""
        if self.raw_vocab_size is not None:
            return self.raw_vocab_size
        return _core.default_raw_vocab_size(self.vocab_size)

    def raw_pool(self, raw_vocab_size: Optional[int]) -> Optional[int]:
        """The candidates to hold for a raw vocabulary of ``raw_vocab_size`` (None: all):
        ``cnfmce._core.raw_pool_size``, the pool of the Han-weighted cut when it is on."""
        if raw_vocab_size is None:
            return None
        return _core.raw_pool_size(raw_vocab_size, self.raw_han_exponent)

    # --- handing the options to the core -----------------------------------------------------

    def trainer(self, tmp: str, memory_budget: Optional[int] = None, counting: bool = True
                ) -> "_core.Trainer":
        """The core trainer of this run (the core checks its part of the options here), its
        spill files in ``tmp``; ``counting=False``: a trainer whose counts will be given
        (``use_counts``), so without rounds. The caller closes it."""
        budget = {} if memory_budget is None else {"memory_budget": memory_budget}
        return _core.Trainer(self.vocab_size, self.raw_vocab_size,
                             self.rounds if counting else None, self.special_tokens,
                             self.options, tmp_dir=os.path.join(tmp, ""),
                             num_threads=self.num_threads, selection=self.selection,
                             non_ascii_exponent=self.non_ascii_exponent,
                             raw_han_exponent=self.raw_han_exponent, **budget)

    def counts_trainer(self, counts: Any, tmp: str) -> "_core.Trainer":
        """The trainer of :func:`cnfmce.train_from_counts` (local and Ray backends), its
        counting done by ``counts`` (a mapping, a counts file or parquet counts, loaded through
        ``tmp``): only the filtering passes are left. The caller closes it."""
        trainer = self.trainer(tmp, counting=False)
        try:
            pool = self.raw_pool(self.raw_vocab_size)
            trainer.use_counts(*load_any_counts(counts, pool, tmp, memory_budget(None)[1]))
        except BaseException:
            trainer.close()
            raise
        return trainer

    def counter(self, tmp: str, memory_budget: int) -> "_core.Counter":
        """The core counter of :func:`cnfmce.count` (``raw_vocab_size`` candidates kept)."""
        return _core.Counter(self.rounds, self.raw_vocab_size, memory_budget,
                             os.path.join(tmp, ""), self.num_threads)


def counting_info(rounds: Sequence[Round], raw_vocab_size: Optional[int], limit: int) -> Dict[str, Any]:
    """The start of a counting phase's record (``Counts.info``, a tokenizer's
    ``metadata["counting"]``)."""
    return {"rounds": [list(r) for r in rounds], "raw_vocab_size": raw_vocab_size,
            "memory_limit": limit, "round_stats": []}


def warn_rounds(rounds: Sequence[Round], stacklevel: int = 3) -> None:
    """The core's warning about ``rounds``, if it has one, at the caller's caller."""
    note = _core.rounds_warning(rounds)
    if note:
        warnings.warn(note, RuntimeWarning, stacklevel=stacklevel)


def report_metadata(tok: Any, report: Dict[str, Any], balance: Optional[float] = None) -> None:
    """The selection's part of a trained tokenizer's metadata (local and Ray runs); ``balance``:
    the run's (``TrainConfig.balance``), recorded when it set the exponents."""
    if report["selection"] != "paper":  # covered characters below the raw_vocab_size cut
        tok.metadata["covered_beyond_cut"] = report["covered_beyond_cut"]
    if report["selection"] == "refined-non-ascii":  # fallback prefixes added to the raw vocabulary
        tok.metadata["fallback_prefixes"] = report["fallback_prefixes"]
        tok.metadata["non_ascii_exponent"] = report["non_ascii_exponent"]
        if balance is not None:
            tok.metadata["balance"] = balance
    if report["raw_han_exponent"]:
        tok.metadata["raw_han_exponent"] = report["raw_han_exponent"]
