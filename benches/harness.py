"""Helpers shared by the benchmark scripts (`encode.py`, `train.py`): logging, /proc memory
readings and the package snapshot that keeps one run on one build."""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

OUT = Path(__file__).resolve().parent / "out"
REPO = Path(__file__).resolve().parent.parent

__all__ = ["OUT", "WAIT_QUIET", "CpuWatch", "core_sha", "f1", "f2", "loadavg", "log",
           "machine_cpu_seconds", "machine_info", "own_cpu_seconds", "proc_status_kib",
           "read_jsonl_docs", "reset_peak_rss", "snapshot_package", "table", "wait_quiet"]


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


def loadavg() -> List[float]:
    """The 1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return []


def core_sha() -> str:
    """Hash of the cnfmce extension module this process loads (to spot a reinstall during a run)."""
    import cnfmce
    return hashlib.sha256(Path(cnfmce._core.__file__).read_bytes()).hexdigest()[:16]  # type: ignore[attr-defined]


def _cpu_info() -> Dict[str, Any]:
    info: Dict[str, Any] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            text = fh.read()
        for line in text.splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        info["virtualized"] = " hypervisor " in f" {text[:4096].replace(chr(10), ' ')} "
    except OSError:
        info["cpu"] = platform.processor() or "?"
    caches = []
    for idx in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            size = (idx / "size").read_text().strip()
        except OSError:
            continue
        if kind != "Instruction":
            caches.append(f"L{level} {size}")
    if caches:
        info["caches_per_cpu0"] = ", ".join(caches)
    info["cores"] = os.cpu_count()
    try:
        info["cores_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["cores_usable"] = os.cpu_count()
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    info["memory_gib"] = round(int(line.split()[1]) / (1 << 20), 1)
    except OSError:
        pass
    return info


def machine_info(libraries: Sequence[str] = ()) -> Dict[str, Any]:
    """What a benchmark report records about the machine and the software: CPU, caches, cores,
    memory, OS, Python, the cnfmce build (path, hash and time of its extension module), the
    versions of ``libraries`` (distribution names), the repository commit, the date, the load
    average and the thread-count environment variables."""
    import importlib.metadata as md

    import cnfmce
    info = _cpu_info()
    info["os"] = f"{platform.system()} {platform.release()}"
    info["python"] = platform.python_version()
    info["cnfmce"] = cnfmce.__version__
    core = Path(cnfmce._core.__file__)  # type: ignore[attr-defined]
    info["cnfmce_core"] = str(core.relative_to(REPO)) if core.is_relative_to(REPO) else str(core)
    info["cnfmce_core_sha256"] = core_sha()
    info["cnfmce_core_mtime"] = _dt.datetime.fromtimestamp(core.stat().st_mtime, _dt.timezone.utc).isoformat(timespec="seconds")
    for lib in libraries:
        try:
            info[lib] = md.version(lib)
        except md.PackageNotFoundError:
            info[lib] = "(not installed)"
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "src", "python"],
                               capture_output=True, text=True).stdout.strip()
        info["git"] = head + (" (src/python modified since)" if dirty else "")
    except OSError:
        pass
    info["date"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    info["loadavg_at_start"] = loadavg()
    for var in ("RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
        info[var] = os.environ.get(var, "(unset)")
    return info


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: Optional[str] = None) -> str:
    """A markdown table; ``align`` has one letter per column, ``l`` or ``r`` (default: the first
    column left, the others right)."""
    align = align or ("l" + "r" * (len(headers) - 1))
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def f1(x: Optional[float]) -> str:
    """One decimal, or a dash for a missing value."""
    return "—" if x is None else f"{x:.1f}"


def f2(x: Optional[float]) -> str:
    """Two decimals, or a dash for a missing value."""
    return "—" if x is None else f"{x:.2f}"


def machine_cpu_seconds() -> Tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot, from /proc/stat."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    hz = os.sysconf("SC_CLK_TCK")
    busy = f[0] + f[1] + f[2] + f[5] + f[6]   # user nice system irq softirq
    steal = f[7] if len(f) > 7 else 0
    return busy / hz, steal / hz


def own_cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


class CpuWatch:
    """CPU time used on the whole machine (/proc/stat) against this process and its waited-for
    children during a section: what other processes took shows how noisy the numbers are."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.busy0, self.steal0 = machine_cpu_seconds()
        self.own0 = own_cpu_seconds()

    def stop(self) -> Dict[str, float]:
        wall = time.perf_counter() - self.t0
        busy, steal = machine_cpu_seconds()
        own = own_cpu_seconds() - self.own0
        other = max(0.0, (busy - self.busy0) - own)
        return {"wall_s": wall, "own_cores": own / wall, "other_cores": other / wall,
                "steal_cores": (steal - self.steal0) / wall}


# Set "max_s" from --wait-quiet; "log" collects one entry per wait for the report.
WAIT_QUIET: Dict[str, Any] = {"max_s": 0.0, "log": []}


def wait_quiet(section: str, threshold: float = 0.3, key: str = "section") -> None:
    """With --wait-quiet S: wait (up to S seconds) until other processes use less than
    ``threshold`` cores over a 2-second window, so that a shared machine disturbs less. The wait
    is logged in ``WAIT_QUIET["log"]`` under ``key`` (the section or run it preceded)."""
    if WAIT_QUIET["max_s"] <= 0:
        return
    t0 = time.perf_counter()
    while True:
        w = CpuWatch()
        time.sleep(2)
        other = w.stop()["other_cores"]
        waited = time.perf_counter() - t0
        if other < threshold or waited >= WAIT_QUIET["max_s"]:
            WAIT_QUIET["log"].append({key: section, "waited_s": round(waited, 1),
                                      "other_cores": round(other, 2), "quiet": other < threshold})
            if other >= threshold:
                log(f"{section}: machine still busy ({other:.2f} other cores) after {waited:.0f} s; going on")
            return


def read_jsonl_docs(path: Path, max_bytes: Optional[int] = None) -> Tuple[List[str], int]:
    """The "text" field of each non-blank line of a ``.jsonl.gz`` file, in file order, and their
    UTF-8 bytes; with ``max_bytes``, documents until their size reaches it (the one that crosses
    it included; none when ``max_bytes <= 0``)."""
    docs: List[str] = []
    total = 0
    if max_bytes is not None and max_bytes <= 0:
        return docs, total
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            text = json.loads(line)["text"]
            docs.append(text)
            total += len(text.encode("utf-8"))
            if max_bytes is not None and total >= max_bytes:
                break
    return docs, total
