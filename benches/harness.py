"""Helpers shared by the benchmark scripts (`encode.py`, `train.py`): logging, /proc memory
readings and the package snapshot that keeps one run on one build."""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Optional

OUT = Path(__file__).resolve().parent / "out"

__all__ = ["OUT", "log", "proc_status_kib", "reset_peak_rss", "snapshot_package"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def proc_status_kib(field: str, pid: str = "self") -> Optional[int]:
    """A field of /proc/<pid>/status in KiB (VmRSS, VmHWM, ...), or None."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak_rss() -> bool:
    """Resets VmHWM to the current RSS (Linux >= 4.0: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def snapshot_package(reuse: Optional[str] = None) -> Optional[str]:
    """Copies the installed cnfmce package to benches/out/snapshot/<hash>/ and puts that copy first
    on the import path of this process and of its subprocesses, so that one run measures one build
    even if the package is reinstalled meanwhile; with ``reuse``, imports an earlier copy (a folder
    holding ``cnfmce/``) instead. Returns where the package came from."""
    import importlib.util
    import shutil
    if reuse:
        root = Path(reuse).resolve()
        if not (root / "cnfmce" / "__init__.py").exists():
            raise SystemExit(f"--snapshot-dir {reuse}: no cnfmce/ package inside")
        src = str(root)
    else:
        spec = importlib.util.find_spec("cnfmce")
        if spec is None or not spec.submodule_search_locations:
            return None
        srcp = Path(list(spec.submodule_search_locations)[0])
        h = hashlib.sha256()
        for f in sorted(srcp.rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f.relative_to(srcp)).encode() + b"\0" + f.read_bytes())
        root = OUT / "snapshot" / h.hexdigest()[:16]      # one folder per build: reused, never mixed
        if not (root / "cnfmce").exists():
            tmp = OUT / "snapshot" / f"tmp{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(srcp, tmp / "cnfmce", ignore=shutil.ignore_patterns("__pycache__"))
            try:
                os.replace(tmp, root)
            except OSError:                                # another run made it first
                shutil.rmtree(tmp, ignore_errors=True)
        src = str(srcp)
    sys.path.insert(0, str(root))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(root)] + [x for x in [os.environ.get("PYTHONPATH")] if x])
    return src
