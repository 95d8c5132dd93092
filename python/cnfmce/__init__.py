"""cnfmce: Counting-and-Filtering (CNF) vocabularies and Min-Cost Encoding (MCE).

>>> import cnfmce
>>> tok = cnfmce.Tokenizer.from_tiktoken("o200k_base.tiktoken")   # doctest: +SKIP
>>> tok.encode("hello world")                                      # doctest: +SKIP
>>> tok = cnfmce.train(["first document", "second document"], vocab_size=300)  # doctest: +SKIP
>>> cnfmce.evaluate(tok, ["some text"])["chars_per_token"]               # doctest: +SKIP

``cnfmce.evaluate`` and ``cnfmce.compare`` are the functions of :mod:`cnfmce.evaluation` (the
module that defines the metrics). ``cnfmce.evaluate`` was once the module's name:
``from cnfmce.evaluate import compare`` still works (the old name is an alias of the module), but
``cnfmce.evaluate`` itself is the function. Likewise ``cnfmce.extend`` is the function of the module
:mod:`cnfmce.extend` (``from cnfmce.extend import extension_info`` reaches the module's other
names).
"""

import sys as _sys


def _quiet_interrupt_in_the_command() -> None:
    """In the ``cnfmce`` command only (its console script, or ``python -m cnfmce.cli``): Ctrl-C
    while the package is still being imported (before the command's own handler runs) ends the
    command with one line instead of a traceback (the exit status stays the one of SIGINT)."""
    import os
    argv0 = os.path.basename(_sys.argv[0]) if _sys.argv else ""
    orig = getattr(_sys, "orig_argv", [])
    if argv0 not in ("cnfmce", "cnfmce.exe") and not (
            "-m" in orig and orig[orig.index("-m") + 1:orig.index("-m") + 2] == ["cnfmce.cli"]):
        return
    previous = _sys.excepthook

    def hook(kind, value, tb):  # type: ignore[no-untyped-def]
        if issubclass(kind, KeyboardInterrupt):
            print("cnfmce: interrupted", file=_sys.stderr)
        else:
            previous(kind, value, tb)
    _sys.excepthook = hook
    # Ctrl-C while the command's modules are still being imported is held until they are (a
    # KeyboardInterrupt inside a C extension's import, numpy's, turns into an ImportError with a
    # traceback): cnfmce.cli calls _end_deferred_interrupt(preload=("numpy",))
    global _deferred
    import signal
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            pending: list = []
            signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
            _deferred = pending
    except ValueError:  # not the main thread
        pass


#: the SIGINTs held while the command imports its modules (None: nothing held)
_deferred = None


def _end_deferred_interrupt(preload: tuple = ()) -> None:
    """Ends the hold of :func:`_quiet_interrupt_in_the_command` (when it holds: in the command
    only), after importing the modules ``preload`` names: Ctrl-C works again, and one that came
    during the imports interrupts now."""
    global _deferred
    if _deferred is None:
        return
    import importlib
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    pending, _deferred = _deferred, None
    import signal
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if pending:
        raise KeyboardInterrupt


_quiet_interrupt_in_the_command()
from . import evaluation
from ._core import __version__
from .corpus import Documents
from .errors import CnfmceError, CorpusError, TokenizerFileError, UnknownIdError
from .evaluation import compare, evaluate
from .tokenizer import Tokenizer
from .counts import Counts, load_counts, merge_counts, save_counts
from .training import DEFAULT_ROUNDS, count, train, train_from_counts
from .extend import EXTEND_RAW_PER_NEW_TOKEN, extend, initial_embeddings  # the module cnfmce.extend stays importable by name

__all__ = [
    "__version__",
    "Tokenizer",
    "tokenize_corpus",
    "train",
    "count",
    "train_from_counts",
    "extend",
    "initial_embeddings",
    "EXTEND_RAW_PER_NEW_TOKEN",
    "Counts",
    "save_counts",
    "load_counts",
    "merge_counts",
    "DEFAULT_ROUNDS",
    "Documents",
    "evaluate",
    "compare",
    "evaluation",
    "CnfmceError",
    "CorpusError",
    "TokenizerFileError",
    "UnknownIdError",
]

# The module's former name, for `from cnfmce.evaluate import ...` and `import cnfmce.evaluate`
# (which leaves the attribute cnfmce.evaluate the function, since the submodule is already loaded).
_sys.modules.setdefault(__name__ + ".evaluate", evaluation)


def __getattr__(name: str):
    # Names whose modules need numpy are imported on first use: `import cnfmce` stays light.
    if name == "tokenize_corpus":
        from .shards import tokenize_corpus
        return tokenize_corpus
    if name == "ray":  # cnfmce.ray.count(...): Ray itself is imported only when a call needs it
        import importlib
        return importlib.import_module(".ray", __name__)
    raise AttributeError(f"module 'cnfmce' has no attribute {name!r}")
