"""The private temporary directory of a training run (``cnfmce-<pid>-XXXX``, locked while the run
lives, removed at the end, on an exception, Ctrl-C or SIGTERM), where spooled inputs and spilled
counting runs go; the removal of the ones that killed runs left behind; and the signal rules of
long runs (SIGTERM cleans up like Ctrl-C; a Ctrl-C is never swallowed)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
from typing import Any, Iterator, List, Optional

__all__ = ["WORK_DIR_PREFIX", "interrupts_kept", "raise_if_interrupted", "remove_stale_work_dirs",
           "work_dir"]

WORK_DIR_PREFIX = "cnfmce-"
_LOCK_NAME = ".cnfmce-lock"
_WORK_DIR_RE = re.compile(r"cnfmce-(\d+)-[A-Za-z0-9_]+\Z")


class _Terminated(BaseException):
    """Raised by the SIGTERM handler installed while training runs (see :func:`_sigterm_cleans_up`)."""


def _handler_is(signum: int, expected: Any) -> bool:
    """Whether a block may install its own handler of ``signum``: in the main thread, and only
    when the current handler is ``expected`` (the program set none of its own)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        return signal.getsignal(signum) is expected
    except (ValueError, OSError):  # pragma: no cover - no signals here
        return False


def _restore(signum: int, handler: Any, default: Any) -> None:
    """Puts ``default`` back as the handler of ``signum`` if ``handler`` (a block's) is still
    the one installed."""
    try:
        if signal.getsignal(signum) is handler:
            signal.signal(signum, default)
    except ValueError:  # pragma: no cover - a generator closed from another thread
        pass


@contextlib.contextmanager
def _sigterm_cleans_up() -> Iterator[None]:
    """While the block runs, SIGTERM (``kill``, ``timeout``, Docker, Slurm, Kubernetes) unwinds
    like Ctrl-C, so temporary files are removed, and then kills the process with SIGTERM as the
    sender expects. Only in the main thread and only when the program has no SIGTERM handler of
    its own; a signal that arrives while the core works is handled when that call returns (a
    batch, or a merge of spilled runs)."""
    if not _handler_is(signal.SIGTERM, signal.SIG_DFL):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Terminated()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGTERM)  # dies here (default action)
        raise SystemExit(128 + signal.SIGTERM)  # pragma: no cover - SIGTERM blocked by the caller
    finally:
        _restore(signal.SIGTERM, handler, signal.SIG_DFL)


#: set by the SIGINT handler of :func:`interrupts_kept` (a Ctrl-C that may have been swallowed)
_interrupted = threading.Event()


@contextlib.contextmanager
def interrupts_kept() -> Iterator[None]:
    """While the block runs, a Ctrl-C is never lost: Python ignores a KeyboardInterrupt raised
    inside a finalizer (``__del__``, which Ray's handles run when they are dropped), so the
    handler also records it, and the block's checkpoints (:func:`raise_if_interrupted`) and
    its end raise it again (without the "Exception ignored" traceback Python would print for
    it). Only in the main thread and only when SIGINT has Python's default handler; nested
    blocks share the outer one."""
    if not _handler_is(signal.SIGINT, signal.default_int_handler):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        _interrupted.set()
        raise KeyboardInterrupt

    previous_hook = sys.unraisablehook

    def unraisable(u: Any) -> None:
        if not (isinstance(u.exc_type, type) and issubclass(u.exc_type, KeyboardInterrupt)
                and _interrupted.is_set()):
            previous_hook(u)

    _interrupted.clear()
    signal.signal(signal.SIGINT, handler)
    sys.unraisablehook = unraisable
    try:
        yield
        raise_if_interrupted()
    finally:
        if sys.unraisablehook is unraisable:
            sys.unraisablehook = previous_hook
        _restore(signal.SIGINT, handler, signal.default_int_handler)
        _interrupted.clear()


def raise_if_interrupted() -> None:
    """Raises KeyboardInterrupt when a Ctrl-C came during :func:`interrupts_kept`'s block (it may
    have been swallowed by a finalizer); a no-op otherwise."""
    if _interrupted.is_set():
        raise KeyboardInterrupt


def remove_stale_work_dirs(base: Optional[str] = None) -> List[str]:
    """Removes the temporary directories (``cnfmce-<pid>-*`` under ``base``, default the system's
    temporary directory) left by training runs that were killed (SIGKILL, power loss, ...): a
    directory is removed only when the lock its run held is free, i.e. no living process owns
    it. Returns the removed paths. Called at the start of every training run."""
    base = base or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    for name in names:
        if not _WORK_DIR_RE.match(name):
            continue
        d = os.path.join(base, name)
        lock = os.path.join(d, _LOCK_NAME)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue  # not ours, or being created / removed right now
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a running process holds it
        try:
            shutil.rmtree(d, ignore_errors=True)
            if not os.path.exists(d):
                removed.append(d)
        finally:
            os.close(fd)
    return removed


@contextlib.contextmanager
def work_dir(tmp_dir: Optional[str]) -> Iterator[str]:
    """A private temporary directory ``cnfmce-<pid>-XXXX`` (under ``tmp_dir`` or the system's
    temporary directory) for spooled inputs and spilled counting runs, locked for the run's
    lifetime and removed at the end, on an exception, Ctrl-C or SIGTERM; stale ones of killed
    runs are removed first (:func:`remove_stale_work_dirs`). While it lives, a Ctrl-C is never
    lost (:func:`interrupts_kept`)."""
    with _sigterm_cleans_up(), interrupts_kept():
        remove_stale_work_dirs(tmp_dir)
        d = tempfile.mkdtemp(prefix=f"{WORK_DIR_PREFIX}{os.getpid()}-", dir=tmp_dir)
        fd = -1
        try:
            # locked before it gets its name, so that no other run can find it unlocked
            tmp_lock = os.path.join(d, _LOCK_NAME + ".new")
            fd = os.open(tmp_lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(tmp_lock, os.path.join(d, _LOCK_NAME))
            yield d
        finally:
            shutil.rmtree(d, ignore_errors=True)
            if fd >= 0:
                os.close(fd)
