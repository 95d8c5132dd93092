"""CNF training, counting, vocabulary extension and corpus tokenization on a Ray cluster
(``pip install "cnfmce[ray]"``), giving the local run's results byte for byte.

>>> counts = cnfmce.ray.count(["s3://bucket/corpus/"], raw_vocab_size=5_000_000)  # doctest: +SKIP
>>> tok = cnfmce.train(paths, vocab_size=250_000, backend="ray")               # doctest: +SKIP
>>> cnfmce.tokenize_corpus(tok, paths, "shards/", backend="ray")               # doctest: +SKIP

How a run goes (docs/spec.md section 6, docs/ray.md):

* The inputs — paths (local, the same on every machine, or any URI pyarrow / fsspec opens; a
  directory stands for the corpus files under it), documents in memory, or a
  ``ray.data.Dataset`` with a text column — are cut into blocks of about ``block_size`` bytes
  (:mod:`cnfmce._blocks`). Each worker reads its own blocks.
* **Counting**, once per round: the survivors of the earlier rounds (the byte trie of Algorithm
  1) go into the object store once (``ray.put``); one task per block counts it with the Rust
  counter under ``memory_limit`` (its table spills to sorted runs and is merged, as locally) and
  splits the exact counts into ``num_partitions`` parts by a hash of the candidate's bytes. One
  reducer task per partition sums its parts (exact u64, streaming, spilling past
  ``memory_limit``) and keeps only what the round can keep: the candidates at the threshold that
  reach a later round's threshold or are among the partition's best ``raw_vocab_size``. Only
  those come back to the driver, whose core ``Trainer`` makes the global cut exactly as a local
  round does.
* **Filtering**: the raw vocabulary goes into the object store once; one actor per node builds
  the MCE filter from it and encodes the blocks sent to it; each block's usage vector comes back
  and is summed exactly; the core selects the vocabulary as locally.
* **Extension** (:func:`extend`, ``cnfmce.extend(..., backend="ray")``): counting as above,
  then each pass as the filtering pass, over the pass's vocabulary (the base and the
  candidates left, ``Extender.pass_vocabulary()``); the summed usage goes into the driver's
  core ``Extender``, which cuts the candidates as locally (the rules shared with the local run
  are in ``cnfmce.extend``).

* **Tokenizing** (:func:`tokenize_corpus`): a Ray Data pipeline, ``map_batches`` of an encoder
  per actor over the file blocks (each read by the actor that encodes it) or the dataset's
  blocks; the driver consumes its output in order and writes the shards with the local writer.

Counting and filtering tasks are plain Ray tasks: a worker that dies mid-round has its task retried by Ray, and the
result does not change (counts of a block do not depend on who counts them or when).
``memory_limit`` is per task and is also requested from Ray's scheduler (``memory``), so a node
runs only as many tasks as fit in its memory.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from . import _core
from ._checks import memory_budget
from ._blocks import (Block, batches, decompressed_size, estimate_text_bytes, iter_block,
                      list_files, plan_blocks, texts_of_column, utf8_size)
from .config import TrainConfig, counting_info, report_metadata, warn_rounds
from .corpus import Documents, classify_inputs
from .errors import CnfmceError
from .workdir import raise_if_interrupted, work_dir
from .tokenizer import DEFAULT_BOUNDARY_PENALTY, Tokenizer

__all__ = ["count", "train", "train_from_counts", "extend", "tokenize_corpus", "ClusterError",
           "DEFAULT_BLOCK_SIZE_RANGE", "RayOptions", "run"]

#: The block size a run picks when none is given: the corpus split into about two blocks per
#: CPU of the cluster, within these bounds (bytes of text).
DEFAULT_BLOCK_SIZE_RANGE = (8 << 20, 512 << 20)
_CONNECT_TIMEOUT = 5.0


class ClusterError(CnfmceError, ConnectionError):
    """The Ray cluster cannot be reached or cannot run the job."""


# --- Ray itself ---------------------------------------------------------------------------------

def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("backend='ray' needs Ray: pip install 'cnfmce[ray]' "
                          "(or pip install 'ray[data]')") from None
    return ray


def _host_port(address: str) -> Optional[Tuple[str, int]]:
    """(host, port) of a cluster address to check before connecting; None for "auto"/"local"."""
    a = address.strip()
    if a in ("auto", "local", ""):
        return None
    default = 6379
    if a.startswith("ray://"):
        a, default = a[len("ray://"):], 10001
    elif "://" in a:
        a = a.split("://", 1)[1]
    a = a.split("/", 1)[0]
    if a.startswith("["):  # [ipv6]:port
        host, _, rest = a[1:].partition("]")
        port = rest.lstrip(":")
    else:
        host, _, port = a.rpartition(":") if a.count(":") == 1 else (a, "", "")
    try:
        return host or a, int(port) if port else default
    except ValueError:
        raise ClusterError(f"not a Ray cluster address: {address!r} (expected host:port, "
                           "ray://host:port or 'auto')") from None


def connect(ray_address: Optional[str] = None) -> Any:
    """Connects to the Ray cluster at ``ray_address`` (``host:port`` of the head, ``ray://...``
    for Ray Client, ``"auto"`` for the cluster this machine belongs to), or to the one
    ``RAY_ADDRESS`` names; without either, uses the Ray already initialized in this process or
    starts a local one. Fails within seconds with :class:`ClusterError` when nothing listens at
    the address (instead of retrying for minutes). Returns the ``ray`` module."""
    ray = _ray()
    if ray_address is None and ray.is_initialized():
        return ray
    address = ray_address if ray_address is not None else os.environ.get("RAY_ADDRESS")
    if address is not None:
        if not isinstance(address, str):
            raise TypeError(f"ray_address must be a str, got {type(address).__name__}")
        hp = _host_port(address)
        if hp is not None:
            try:
                with socket.create_connection(hp, timeout=_CONNECT_TIMEOUT):
                    pass
            except OSError as e:
                raise ClusterError(
                    f"cannot reach the Ray cluster at {address}: nothing answers at "
                    f"{hp[0]}:{hp[1]} ({e.strerror or e}); start one with `ray start --head` "
                    "or pass the head node's address") from None
    if ray.is_initialized():  # already connected (to this address, we trust)
        return ray
    try:
        # no address: a new local Ray ("local"), as documented; address=None would join the
        # cluster last started on this machine instead
        ray.init(address=address if address is not None else "local", ignore_reinit_error=True,
                 log_to_driver=False, logging_level="WARNING")
    except ConnectionError as e:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {e}") from None
    except Exception as e:  # noqa: BLE001 - Ray's start-up errors have no common type
        # one line (Ray's messages run to dozens of lines: the first one says what failed)
        first = next((x.strip() for x in str(e).splitlines() if x.strip()), type(e).__name__)
        where = f"the Ray cluster at {address}" if address is not None else "a local Ray"
        raise ClusterError(f"cannot start {where}: {type(e).__name__}: {first}") from None
    return ray


@dataclass
class _Cluster:
    nodes: List[Tuple[str, int, float]]  # (node id, CPUs, memory) of alive nodes with CPUs

    @property
    def cpus(self) -> int:
        return sum(c for _, c, _ in self.nodes)

    def task_memory(self) -> int:
        """The default memory per task: the smallest memory per CPU of the nodes."""
        return int(min(m / max(1, c) for _, c, m in self.nodes))

    def largest_memory(self) -> float:
        return max(m for _, _, m in self.nodes)


def _cluster(ray: Any) -> _Cluster:
    nodes = []
    for n in ray.nodes():
        res = n.get("Resources", {})
        cpus = int(res.get("CPU", 0))
        if n.get("Alive") and cpus > 0:
            nodes.append((n["NodeID"], cpus, float(res.get("memory", 0)) or float(1 << 30) * cpus))
    if not nodes:
        raise ClusterError("the Ray cluster has no alive node with CPUs")
    return _Cluster(nodes)


def _raise_task_error(ray: Any, e: BaseException) -> None:
    """Re-raises the exception a task raised (a CorpusError naming the file, ...) as itself."""
    cause = getattr(e, "cause", None)
    if isinstance(e, ray.exceptions.RayTaskError) and isinstance(cause, BaseException):
        raise cause from None
    raise e


# --- blocks -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _RefBlock:
    """Documents already in the object store: ``kind`` ``"docs"`` (lists of str) or ``"arrow"``
    (pyarrow tables with a ``field`` column)."""
    kind: str
    refs: Tuple[Any, ...]
    size: int
    field: str = "text"
    stored: int = 0

    def describe(self) -> str:
        return f"{len(self.refs)} {'document list' if self.kind == 'docs' else 'dataset block'}(s)"


AnyBlock = Union[Block, _RefBlock]


def _iter_any(block: AnyBlock) -> Iterator[str]:
    if isinstance(block, Block):
        yield from iter_block(block)
        return
    ray = _ray()
    for ref in block.refs:
        obj = ray.get(ref)
        if block.kind == "docs":
            yield from obj
        else:
            if block.field not in obj.column_names:
                raise CnfmceError(f"the dataset has no {block.field!r} column "
                                  f"(columns: {obj.column_names})")
            yield from texts_of_column(obj.column(block.field),
                                       f"the dataset's {block.field!r} column", TypeError)
        del obj


def _block_batches(block: AnyBlock, batch_bytes: int = 2 << 20) -> Iterator[Tuple[List[str], int]]:
    return batches(_iter_any(block), block.describe(), batch_bytes)


def _check_size(name: str, v: Any) -> Optional[int]:
    if v is None:
        return None
    if isinstance(v, str):
        from .shards import parse_size
        return parse_size(v)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ValueError(f"{name} must be a positive int (bytes) or a size such as '64MB', got {v!r}")
    return v


class _Inputs:
    """The blocks of a run's inputs, made once and read once per pass."""

    def __init__(self, ray: Any, inputs: Any, field: str, block_size: Optional[int], cpus: int):
        self.field = field  # checked by TrainConfig
        self.documents: Optional[int] = None
        self.text_bytes: Optional[int] = None
        self._refs: List[Any] = []  # keeps in-memory documents alive in the object store
        import ray.data
        lo, hi = DEFAULT_BLOCK_SIZE_RANGE

        def choose(total: int) -> int:
            return block_size or max(lo, min(hi, -(-total // max(1, 2 * cpus))))

        self.blocks: List[AnyBlock]
        if isinstance(inputs, ray.data.Dataset):
            ds = inputs
            if field not in (ds.schema().names if ds.schema() is not None else []):
                raise ValueError(f"the dataset has no {field!r} column "
                                 f"(columns: {ds.schema().names if ds.schema() else []})")
            mat = ds.select_columns([field]).materialize()
            refs = mat.to_arrow_refs()
            total = int(mat.size_bytes() or 0)
            n = max(1, min(len(refs), -(-total // choose(total)) if total else len(refs)))
            groups = [tuple(refs[len(refs) * k // n: len(refs) * (k + 1) // n]) for k in range(n)]
            self._refs.append(refs)
            self.blocks = [_RefBlock("arrow", g, total * len(g) // max(1, len(refs)), field)
                           for g in groups if g]
            return
        kind, items = _classify(inputs)
        if kind == "paths":
            files: List[Tuple[str, int]] = []
            for p in items:
                files.extend(list_files(p))
            size = choose(estimate_text_bytes(files))
            self.blocks = list(plan_blocks(files, size, field, measure=lambda ps: _measure(ray, ps)))
            return
        # documents in memory: into the object store in blocks
        self.blocks = []
        size = block_size or lo
        batch: List[str] = []
        nbytes = 0
        ndocs = 0
        total = 0
        for k, d in enumerate(items):
            if not isinstance(d, str):
                raise TypeError(f"document {k} is {type(d).__name__}, expected str")
            batch.append(d)
            b = len(d) if d.isascii() else len(d.encode("utf-8", "surrogatepass"))
            nbytes += b
            total += b
            ndocs += 1
            if nbytes >= size:
                self._put_docs(ray, batch, nbytes)
                batch, nbytes = [], 0
        if batch:
            self._put_docs(ray, batch, nbytes)
        self.documents, self.text_bytes = ndocs, total

    def _put_docs(self, ray: Any, docs: List[str], nbytes: int) -> None:
        ref = ray.put(docs)
        self._refs.append(ref)
        self.blocks.append(_RefBlock("docs", (ref,), nbytes, self.field))

    @property
    def total_size(self) -> int:
        return sum(b.size for b in self.blocks)


def _classify(inputs: Any) -> Tuple[str, Any]:
    """("paths", [str]) or ("documents", iterable): URIs and directories are paths here (the
    local rule of :mod:`cnfmce.corpus` otherwise)."""
    def uri_like(x: Any) -> bool:
        return isinstance(x, str) and "://" in x and "\n" not in x and " " not in x

    def local_dir(x: Any) -> bool:
        try:
            return isinstance(x, (str, os.PathLike)) and os.path.isdir(os.fspath(x))
        except (TypeError, ValueError):
            return False

    if isinstance(inputs, Documents):
        return "documents", inputs.items
    if uri_like(inputs) or local_dir(inputs):
        return "paths", [os.fspath(inputs)]
    if isinstance(inputs, (list, tuple)) and inputs and all(uri_like(x) or local_dir(x) for x in inputs):
        return "paths", [os.fspath(x) for x in inputs]
    if isinstance(inputs, (list, tuple)) and any(uri_like(x) or local_dir(x) for x in inputs):
        rest = [x for x in inputs if not (uri_like(x) or local_dir(x))]
        kind, items = classify_inputs(rest)
        if kind != "paths":
            raise ValueError("inputs mix paths and documents; pass only paths, or documents "
                             "wrapped in cnfmce.Documents([...])")
        return "paths", [os.fspath(x) for x in inputs]
    kind, items = classify_inputs(inputs)
    return ("paths", items) if kind == "paths" else ("documents", items)


# --- remote functions (made once per process, when Ray is there) ----------------------------------

_REMOTE: Dict[str, Any] = {}
_SURVIVORS_CACHE: Dict[str, Any] = {}


def _survivors(box: Sequence[Any]) -> Any:
    """The survivors of the round (cached in the worker process: built once per round)."""
    ray = _ray()
    ref = box[0]
    key = ref.hex()
    s = _SURVIVORS_CACHE.get(key)
    if s is None:
        s = _core.Survivors.from_bytes(ray.get(ref))
        _SURVIVORS_CACHE.clear()
        _SURVIVORS_CACHE[key] = s
    return s


def _map_count(block: AnyBlock, round_: Tuple[int, int, int], survivors_box: Sequence[Any],
               parts: int, memory_limit: int, tmp_dir: Optional[str], threads: int,
               kill_marker: Optional[str]) -> Iterator[Any]:
    """Counts one block; yields its ``parts`` parts (uint8 arrays of sorted records) and then
    its statistics."""
    import numpy as np
    from .readers import peak_rss_bytes as _peak_rss_bytes
    if kill_marker is not None and not os.path.exists(kill_marker):
        with open(kill_marker, "w"):
            pass
        os._exit(1)  # the worker dies mid-round: Ray retries the task elsewhere
    t0 = time.perf_counter()
    survivors = _survivors(survivors_box)
    with work_dir(tmp_dir) as tmp:
        _, budget = memory_budget(memory_limit)
        bc = _core.BlockCounter(round_, budget, os.path.join(tmp, ""), threads)
        for docs, _ in _block_batches(block):
            bc.add(docs, survivors)
        st = bc.stats()
        bc.finish(parts)
        shuffled = 0
        for i in range(parts):
            data = bc.take_part(i)
            shuffled += len(data)
            yield np.frombuffer(data, dtype=np.uint8)
            del data
        st.update(shuffled_bytes=shuffled, seconds=time.perf_counter() - t0,
                  peak_rss=_peak_rss_bytes(), pid=os.getpid())
        yield st


def _reduce_select(selector: Any, part_refs: Sequence[Any], memory_limit: int,
                   tmp_dir: Optional[str], threads: int) -> Tuple[Any, Dict[str, Any]]:
    """Sums one partition's parts and applies the round's selector."""
    from .readers import peak_rss_bytes as _peak_rss_bytes
    ray = _ray()
    t0 = time.perf_counter()
    with work_dir(tmp_dir) as tmp:
        _, budget = memory_budget(memory_limit)
        merger = _core.CountsMerger(budget, os.path.join(tmp, ""), threads)
        for ref in part_refs:
            data = ray.get(ref)
            merger.add_records(data)
            del data
        st = merger.stats()
        sel = merger.select(selector)
    st.update(kept=len(sel), seconds=time.perf_counter() - t0, peak_rss=_peak_rss_bytes(),
              pid=os.getpid())
    return sel, st


class _FilterActor:
    """One per node: the MCE filter over a pass's vocabulary (packed as
    ``CoreTokenizer.packed()``), built once from the object store; encodes the blocks sent to it
    (several at a time) and returns their usage."""

    def __init__(self, vocab_box: Sequence[Any], options: Any, threads: int):
        self.filter = _core.Filter.from_packed(_ray().get(vocab_box[0]), options, threads)

    def ready(self) -> int:
        return os.getpid()

    def usage(self, block: AnyBlock) -> Tuple[Any, Dict[str, Any]]:
        from .readers import peak_rss_bytes as _peak_rss_bytes
        t0 = time.perf_counter()
        total = _core.BlockUsage()
        docs_n = 0
        for docs, _ in _block_batches(block, 8 << 20):
            total = total.merge(self.filter.usage_of(docs))
            docs_n += len(docs)
        return total, {"documents": docs_n, "bytes": total.bytes, "seconds": time.perf_counter() - t0,
                       "peak_rss": _peak_rss_bytes(), "pid": os.getpid()}


# --- tokenize_corpus: a Ray Data map_batches pipeline ------------------------------------------
#
# The encoded documents travel as pyarrow tables, one row per document: "ids" (large_list<uint32>,
# the document's token ids: one flat buffer and offsets), "text_bytes" (int64, its UTF-8 size) and
# "block" (int32: the file block it comes from, an index into the run's plan; 0 for a dataset or
# documents in memory), which gives the driver the input file and the progress. A table with the
# single column "error" carries an input error (pickled) raised by the encoder, so that the driver
# raises it as it is.

_INPUT_ERRORS = (CnfmceError, ValueError, TypeError, OSError)


class _Encoder:
    """The ``map_batches`` callable of :func:`tokenize_corpus`, made once per actor: it holds the
    tokenizer (and, for file inputs, the plan of the blocks), fetched once from the object
    store. Its input batches are either a dataset's text column or rows ``block`` naming file
    blocks of the plan, which it reads itself."""

    def __init__(self, box: Sequence[Any], field: str, threads: int):
        self.tok, self.blocks = _ray().get(box[0])
        self.core = self.tok._core
        self.field = field
        self.threads = threads

    def __call__(self, batch: Any) -> Any:
        import pyarrow as pa
        try:
            if self.blocks is None:
                return self._texts(batch)
            tables = [self._block(k) for k in batch.column("block").to_pylist()]
            return pa.concat_tables(tables) if len(tables) != 1 else tables[0]
        except _INPUT_ERRORS as e:
            import pickle
            return pa.table({"error": pa.array([pickle.dumps(e)], pa.binary())})

    def _texts(self, batch: Any) -> Any:
        if self.field not in batch.column_names:
            raise ValueError(f"the dataset has no {self.field!r} column "
                             f"(columns: {batch.column_names})")
        docs = texts_of_column(batch.column(self.field), f"the dataset's {self.field!r} column",
                               TypeError)
        return self._table(docs, 0)

    def _block(self, k: int) -> Any:
        import pyarrow as pa
        block = self.blocks[k]
        parts = [self._table(docs, k)
                 for docs, _ in batches(iter_block(block), block.describe(), 4 << 20)]
        if not parts:  # e.g. a byte range inside one long line: no document starts in it
            return self._table([], k)
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _table(self, docs: List[str], block: int) -> Any:
        import numpy as np
        import pyarrow as pa
        ids, starts, sizes = self.core.encode_batch_flat(docs, None, self.threads)
        return pa.table({
            "ids": pa.LargeListArray.from_arrays(pa.array(np.frombuffer(starts, dtype=np.int64)),
                                                 pa.array(np.frombuffer(ids, dtype=np.uint32))),
            "text_bytes": pa.array(np.frombuffer(sizes, dtype=np.int64)),
            "block": pa.array(np.full(len(docs), block, dtype=np.int32)),
        })


class _Encoding:
    """The inputs of :func:`cnfmce.shards.tokenize_corpus` with ``backend="ray"``: a Ray Data
    pipeline (``map_batches`` of :class:`_Encoder` on an actor pool) whose output the driver
    consumes in order, streaming, and hands to the local shard writer."""

    def __init__(self, tok: Any, inputs: Any, field: str, num_threads: Optional[int], *,
                 ray_address: Optional[str] = None, block_size: Optional[Union[int, str]] = None,
                 cpus_per_task: int = 1):
        if isinstance(cpus_per_task, bool) or not isinstance(cpus_per_task, int) or cpus_per_task < 1:
            raise ValueError(f"cpus_per_task must be a positive int, got {cpus_per_task!r}")
        bs = _check_size("block_size", block_size)
        self.tok = tok
        self.field = field
        self.cpus_per_task = cpus_per_task
        self.paths: Optional[List[str]] = None
        self.input_info: Optional[List[Dict[str, Any]]] = None
        ray = _ray()
        import ray.data
        is_dataset = isinstance(inputs, ray.data.Dataset)
        kind, items = ("dataset", inputs) if is_dataset else _classify(inputs)
        files: List[Tuple[str, int]] = []
        if kind == "paths":
            for p in items:
                files.extend(list_files(p))
            self.paths = [p for p, _ in files]
            self.input_info = [{"path": p, "bytes": n} for p, n in files]
        elif kind == "dataset":
            schema = inputs.schema()
            names = list(schema.names) if schema is not None else []
            if field not in names:
                raise ValueError(f"the dataset has no {field!r} column (columns: {names})")
        self.ray = ray = connect(ray_address)
        self.cluster = _cluster(ray)
        lo, hi = DEFAULT_BLOCK_SIZE_RANGE
        # file inputs: (file index, block) in order, each read by the actor that encodes it
        self.blocks: Optional[List[Tuple[int, Block]]] = None
        self.dataset: Any = None
        if kind == "paths":
            size = bs or max(lo, min(hi, -(-estimate_text_bytes(files) // max(1, 4 * self.cluster.cpus))))
            self.blocks = []
            for fi, f in enumerate(files):
                for b in plan_blocks([f], size, field, measure=lambda ps: _measure(ray, ps)):
                    self.blocks.append((fi, b))
        elif kind == "dataset":
            self.dataset = inputs.select_columns([field])
        else:
            self.dataset = _documents_dataset(ray, items, field, bs or lo)

    def _pipeline(self, f0: int) -> Any:
        """The encoded documents of the inputs from file ``f0`` on (a lazy Ray Dataset), or None
        when there is nothing to encode."""
        ray = self.ray
        if self.blocks is not None:
            todo = [{"block": k} for k, (fi, _) in enumerate(self.blocks) if fi >= f0]
            if not todo:
                return None
            ds = ray.data.from_items(todo, override_num_blocks=len(todo))
            box = [ray.put((self.tok, [b for _, b in self.blocks]))]
            batch_size: Optional[int] = 1  # one file block per call
        else:
            if self.dataset is None:
                return None
            ds = self.dataset
            box = [ray.put((self.tok, None))]
            batch_size = None  # one dataset block per call
        actors = max(1, self.cluster.cpus // self.cpus_per_task)
        if self.blocks is not None:
            actors = min(actors, len(todo))
        return ds.map_batches(_Encoder, fn_constructor_args=(box, self.field, self.cpus_per_task),
                              batch_format="pyarrow", batch_size=batch_size,
                              compute=ray.data.ActorPoolStrategy(size=actors),
                              num_cpus=self.cpus_per_task)

    def batches(self, start: Tuple[int, int], bar: Any) -> Iterator[Any]:
        """The encoded documents from ``start`` (file index, documents of it already written)
        on, as the writer's batches, in document order."""
        import numpy as np
        from .shards import ShardsError, _Batch
        f0, skip = start
        ds = self._pipeline(f0)
        before: Dict[int, int] = {}
        # per block of the plan: its input file, and the stored bytes of the inputs before it
        # (the progress: once a block's documents arrive, the blocks before it are done)
        plan = self.blocks or [(0, None)]
        block_file = np.array([fi for fi, _ in plan], dtype=np.int64)
        block_pos = np.zeros(len(plan), dtype=np.int64)
        if self.blocks is not None and self.input_info is not None:
            file_pos = np.concatenate([[0], np.cumsum([i["bytes"] for i in self.input_info])])
            prev, pos = -1, 0
            for k, (fi, b) in enumerate(self.blocks):
                if fi != prev:
                    prev, pos = fi, int(file_pos[fi])
                block_pos[k] = pos
                pos += b.stored
        if ds is not None:
            ctx = ds.context
            opts = ctx.execution_options
            saved = (opts.preserve_order, ctx.enable_progress_bars)
            # this call's pipeline keeps the blocks' order; Ray Data's bars would mix with ours
            opts.preserve_order, ctx.enable_progress_bars = True, False
            try:
                for t in ds.iter_batches(batch_size=None, batch_format="pyarrow",
                                         prefetch_batches=2):
                    raise_if_interrupted()
                    if "error" in t.column_names:
                        import pickle
                        raise pickle.loads(t.column("error")[0].as_py())
                    n = t.num_rows
                    if not n:
                        continue
                    blk = t.column("block").to_numpy()
                    if bar is not None:
                        bar.read = max(bar.read, int(block_pos[blk[-1]]))
                    col = t.column("ids")
                    lists = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
                    offsets = lists.offsets.to_numpy()
                    ids = lists.flatten().to_numpy()
                    starts = offsets - offsets[0]
                    sizes = t.column("text_bytes").to_numpy()
                    inp = block_file[blk]
                    cuts = [0, *(np.flatnonzero(np.diff(inp)) + 1).tolist(), n]
                    segments: List[Tuple[int, int, int]] = []
                    drop = 0
                    for a, b in zip(cuts, cuts[1:]):
                        fi = int(inp[a])
                        done = before.get(fi, 0)
                        d = 0
                        if fi == f0 and done < skip:  # documents already in finished shards
                            d = min(b - a, skip - done)  # (the stream starts with file f0)
                            drop += d
                        before[fi] = done + b - a
                        if b - a > d:
                            segments.append((a + d - drop, fi, done + d))
                    if drop:
                        ids = ids[starts[drop]:]
                        starts = starts[drop:] - starts[drop]
                        sizes = sizes[drop:]
                    if segments:
                        yield _Batch([], segments, encoded=(ids, starts, sizes),
                                     input_pos=bar.read if bar is not None and self.paths else None)
            finally:
                opts.preserve_order, ctx.enable_progress_bars = saved
        if bar is not None and self.input_info is not None:  # every input is read
            bar.read = max(bar.read, sum(i["bytes"] for i in self.input_info))
        if skip and before.get(f0, 0) < skip:
            raise ShardsError(f"cannot resume: input {f0} now has {before.get(f0, 0)} documents, "
                              f"fewer than the {skip} the manifest says were done")


def _documents_dataset(ray: Any, items: Any, field: str, block_size: int) -> Any:
    """Documents in memory as a Ray Dataset (a ``field`` column), in blocks of about
    ``block_size`` bytes of text; None when there are none."""
    import pyarrow as pa
    tables = []
    batch: List[str] = []
    nbytes = 0
    for k, d in enumerate(items):
        if not isinstance(d, str):
            raise TypeError(f"document {k} is {type(d).__name__}, expected str")
        nbytes += utf8_size(d, f"document {k}")
        batch.append(d)
        if nbytes >= block_size:
            tables.append(pa.table({field: pa.array(batch, pa.large_string())}))
            batch, nbytes = [], 0
    if batch:
        tables.append(pa.table({field: pa.array(batch, pa.large_string())}))
    return ray.data.from_arrow(tables) if tables else None


def _remote(ray: Any) -> Dict[str, Any]:
    if not _REMOTE:
        _REMOTE["measure"] = ray.remote(num_cpus=1)(decompressed_size)
        _REMOTE["map"] = ray.remote(_map_count)
        _REMOTE["reduce"] = ray.remote(_reduce_select)
        _REMOTE["filter"] = ray.remote(_FilterActor)
    return _REMOTE


def _measure(ray: Any, paths: List[str]) -> List[int]:
    refs = [_remote(ray)["measure"].remote(p) for p in paths]
    try:
        return [int(x) for x in ray.get(refs)]
    except ray.exceptions.RayTaskError as e:
        _raise_task_error(ray, e)
        raise  # pragma: no cover


# --- the run on the driver -------------------------------------------------------------------------

def _fmt(n: float) -> str:
    from .readers import fmt_bytes as _fmt_bytes
    return _fmt_bytes(n)


@dataclass(frozen=True)
class RayOptions:
    """The options of a run on Ray beside its :class:`cnfmce.config.TrainConfig` (the keyword
    arguments of :func:`count` from ``ray_address`` on), checked when made."""
    ray_address: Optional[str] = None
    block_size: Optional[Union[int, str]] = None
    num_partitions: Optional[int] = None
    cpus_per_task: int = 1
    kill_once: Optional[str] = None  # tests: the first map task of round 2 dies once

    def __post_init__(self) -> None:
        n = self.num_partitions
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"num_partitions must be a positive int, got {n!r}")
        c = self.cpus_per_task
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise ValueError(f"cpus_per_task must be a positive int, got {c!r}")
        object.__setattr__(self, "block_size", _check_size("block_size", self.block_size))

    @classmethod
    def of(cls, call: str, options: Dict[str, Any], partitions: bool = True) -> "RayOptions":
        """The options from the keyword arguments ``options`` of ``call`` (``cnfmce.train``'s
        ``backend_options``); an unknown one is a ``TypeError`` naming ``call``."""
        known = {"ray_address", "block_size", "cpus_per_task", "_kill_once"}
        if partitions:
            known.add("num_partitions")
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"{call}() got an unexpected keyword argument {unknown[0]!r}")
        kw = dict(options)
        kill = kw.pop("_kill_once", None)
        return cls(kill_once=kill, **kw)


class _Run:
    """What one call shares across its passes: the cluster, the blocks, the settings (the
    training options ``config`` and the Ray options ``opts``)."""

    def __init__(self, inputs: Any, config: TrainConfig, opts: RayOptions):
        tmp_dir = config.tmp_dir
        if tmp_dir is not None and not isinstance(tmp_dir, (str, os.PathLike)):
            raise TypeError("tmp_dir must be a path")
        self.ray = ray = connect(opts.ray_address)
        self.cluster = _cluster(ray)
        self.cpus_per_task = cpus_per_task = opts.cpus_per_task
        self.memory_limit = config.memory_limit or max(256 << 20, self.cluster.task_memory())
        if self.memory_limit > self.cluster.largest_memory():
            raise ValueError(f"memory_limit {_fmt(self.memory_limit)} per task is more than any node "
                             f"of the cluster has ({_fmt(self.cluster.largest_memory())})")
        self.partitions = opts.num_partitions or max(1, self.cluster.cpus // cpus_per_task)
        self.tmp_dir = os.fspath(tmp_dir) if tmp_dir is not None else None
        self.progress = config.progress
        self.config = config
        self.kill_once = opts.kill_once
        self.inputs = _Inputs(ray, inputs, config.field, opts.block_size, self.cluster.cpus)
        if not self.inputs.blocks:
            raise ValueError("the corpus is empty: no text to train on")
        self.remote = _remote(ray)
        self.info: Dict[str, Any] = {
            "backend": "ray", "blocks": len(self.inputs.blocks), "partitions": self.partitions,
            "cluster_cpus": self.cluster.cpus, "nodes": len(self.cluster.nodes),
            "memory_limit_per_task": self.memory_limit}

    def _task_options(self) -> Dict[str, Any]:
        return {"num_cpus": self.cpus_per_task, "memory": self.memory_limit}

    def _wait_all(self, refs: List[Any], on_done: Any) -> List[Any]:
        """Gets every ref, calling ``on_done(index, value)`` as each arrives (Ctrl-C and task
        errors cancel the rest)."""
        ray = self.ray
        index = {r.hex(): i for i, r in enumerate(refs)}
        out: List[Any] = [None] * len(refs)
        pending = list(refs)
        try:
            while pending:
                raise_if_interrupted()
                done, pending = ray.wait(pending, num_returns=1, timeout=0.5)
                for r in done:
                    i = index[r.hex()]
                    try:
                        out[i] = ray.get(r)
                    except ray.exceptions.RayTaskError as e:
                        _raise_task_error(ray, e)
                    on_done(i, out[i])
        except BaseException:
            for r in pending:
                try:
                    ray.cancel(r, force=True)
                except Exception:  # noqa: BLE001 - best effort
                    pass
            raise
        return out

    # counting ------------------------------------------------------------------------------

    def count_round(self, owner: Any, k: int, n: int, r: Tuple[int, int, int],
                    end: Any, info: Dict[str, Any]) -> None:
        """Counting round ``k`` of ``n`` for ``owner`` (a core Trainer or Counter in a counting
        pass): map, reduce, then ``end(selections)``. With scaled rounds, the first round's maps
        give the corpus's bytes, and the later rounds' threshold is set before its reduce (as
        the local run sets it before the round ends: the same rounds, the same counts)."""
        from .readers import Progress as _Progress, peak_rss_bytes as _peak_rss_bytes
        ray = self.ray
        lo, hi, thr = r
        P = self.partitions
        t0 = time.perf_counter()
        blob = owner.survivors().to_bytes()  # shipped once per round, not once per task
        survivors_bytes = len(blob)
        survivors_ref = ray.put(blob)
        del blob
        scaled = k == 0 and self.config.later_threshold(0) is not None
        thr_label = "" if scaled else f" t={thr}"
        bar = _Progress(self.progress, f"count {k + 1}/{n} [{lo}-{hi}]{thr_label} (ray)",
                        self.inputs.total_size or None)
        docs = [0]
        shuffled = [0]
        maps = []
        stats_refs = []
        blocks = self.inputs.blocks
        try:
            opts = dict(self._task_options(), num_returns=P + 1)
            for i, b in enumerate(blocks):
                kill = self.kill_once if (self.kill_once and k == min(1, n - 1) and i == 0) else None
                refs = self.remote["map"].options(**opts).remote(
                    b, r, [survivors_ref], P, self.memory_limit, self.tmp_dir, self.cpus_per_task, kill)
                maps.append(refs[:P])
                stats_refs.append(refs[P])
            map_stats: List[Dict[str, Any]] = []

            def mapped(i: int, st: Dict[str, Any]) -> None:
                docs[0] += st["documents"]
                shuffled[0] += st["shuffled_bytes"]
                map_stats.append(st)
                bar.update(blocks[i].size, docs=f"{docs[0]:,}", shuffled=_fmt(shuffled[0]),
                           blocks=f"{len(map_stats)}/{len(blocks)}")

            self._wait_all(stats_refs, mapped)
            if scaled:
                text_bytes = sum(s["bytes"] for s in map_stats)
                t_later = self.config.later_threshold(text_bytes)
                owner.set_later_thresholds(t_later)
                info["rounds"] = [list(x) for x in owner.rounds]
                info["scaled_threshold"] = {"corpus_bytes": int(text_bytes), "threshold": t_later}
            selector = owner.round_selector()
            t_map = time.perf_counter() - t0
            reds = [self.remote["reduce"].options(**self._task_options()).remote(
                selector, [maps[i][p] for i in range(len(blocks))], self.memory_limit,
                self.tmp_dir, self.cpus_per_task) for p in range(P)]
            del maps
            red_stats: List[Dict[str, Any]] = []
            results = self._wait_all(reds, lambda i, v: red_stats.append(v[1]))
            sels = [s for s, _ in results]
            del results, reds
            st = dict(end(sels))
        except BaseException:
            bar.close()
            raise
        seconds = time.perf_counter() - t0
        text = sum(s["bytes"] for s in map_stats)
        st.update(round=k + 1, min_len=lo, max_len=hi, threshold=thr, seconds=round(seconds, 3),
                  bytes=text, documents=docs[0], peak_rss=_peak_rss_bytes(),
                  map_seconds=round(t_map, 3), shuffled_bytes=shuffled[0], survivors_bytes=survivors_bytes,
                  kept_from_partitions=sum(len(s) for s in sels),
                  spills=sum(s["spills"] for s in map_stats) + sum(s["spills"] for s in red_stats),
                  spilled_bytes=sum(s["spilled_bytes"] for s in map_stats)
                  + sum(s["spilled_bytes"] for s in red_stats),
                  peak_table_bytes=max([s["peak_table_bytes"] for s in map_stats] or [0]),
                  worker_peak_rss=max([s["peak_rss"] for s in map_stats + red_stats] or [0]))
        info["round_stats"].append(st)
        if self.inputs.documents is None or k == 0:
            self.inputs.documents, self.inputs.text_bytes = docs[0], text
        bar.close(f"  round {k + 1} [{lo}-{hi}] t={thr}: {_fmt(text)} in {seconds:.1f}s "
                  f"({text / max(seconds, 1e-9) / 1e6:.2f} MB/s) on {self.cluster.cpus} CPUs, "
                  f"{len(blocks)} blocks, {P} partitions, {_fmt(shuffled[0])} shuffled, "
                  f"{st['distinct']:,} distinct, {st['retained']:,} retained, "
                  f"{st['spills']} spills, worker peak RSS {_fmt(st['worker_peak_rss'])}")

    # filtering -------------------------------------------------------------------------------

    def filter_pass(self, vocab: Tuple[bytes, bytes, bytes], options: Any, end: Any,
                    label: str = "filter", describe: Optional[Any] = None) -> Dict[str, Any]:
        """A pass over the corpus with MCE over ``vocab`` (packed as ``CoreTokenizer.packed()``,
        :func:`_pack`; ``options``: the encoding options): one filter actor per node, blocks
        dealt to them as they finish; ``end(total_usage)`` with the exact sum; its record with
        the pass's statistics. ``label`` names the pass in the progress; ``describe(record)``
        ends its summary line (default: the vocabulary's size)."""
        import numpy as np
        from .readers import Progress as _Progress
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        t0 = time.perf_counter()
        n_tokens = len(vocab[1]) // 4
        n_ids = int(np.frombuffer(vocab[2], dtype="<u4").max()) + 1 if n_tokens else 0
        vocab_ref = ray.put(vocab)
        def make_actor(node_id: str, cpus: int) -> Any:
            return self.remote["filter"].options(
                num_cpus=cpus, max_concurrency=cpus,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=True),
            ).remote([vocab_ref], options, cpus)

        nodes = self.cluster.nodes
        actors = [make_actor(node_id, cpus) for node_id, cpus, _ in nodes]
        restarts = [0] * len(actors)
        generation = [0] * len(actors)  # bumped when a node's actor is replaced
        bar = _Progress(self.progress, f"{label} (ray)", self.inputs.total_size or None)
        todo = list(range(len(self.inputs.blocks)))[::-1]  # a stack: next block last
        total = _core.BlockUsage()
        stats: List[Dict[str, Any]] = []
        in_flight: Dict[str, Tuple[Any, int, int, int]] = {}
        docs = 0
        try:
            try:
                ray.get([a.ready.remote() for a in actors])
            except ray.exceptions.RayError as e:
                _raise_task_error(ray, e)
            t_build = time.perf_counter() - t0

            def feed(ai: int) -> None:
                busy = sum(1 for _, x, _, _ in in_flight.values() if x == ai)
                while todo and busy < nodes[ai][1] + 1:
                    i = todo.pop()
                    ref = actors[ai].usage.remote(self.inputs.blocks[i])
                    in_flight[ref.hex()] = (ref, ai, i, generation[ai])
                    busy += 1

            for ai in range(len(actors)):
                feed(ai)
            while in_flight:
                raise_if_interrupted()
                done, _ = ray.wait([v[0] for v in in_flight.values()], num_returns=1, timeout=0.5)
                for ref in done:
                    _, ai, i, gen = in_flight.pop(ref.hex())
                    try:
                        usage, st = ray.get(ref)
                    except ray.exceptions.RayActorError:
                        # the node's filter died (its process or node): a new one takes the block
                        if gen == generation[ai]:
                            restarts[ai] += 1
                            if restarts[ai] > 3:
                                raise ClusterError(f"the filter actor on node {nodes[ai][0]} died "
                                                   f"{restarts[ai]} times") from None
                            actors[ai] = make_actor(nodes[ai][0], nodes[ai][1])
                            generation[ai] += 1
                        todo.append(i)
                        feed(ai)
                        continue
                    except ray.exceptions.RayTaskError as e:
                        _raise_task_error(ray, e)
                    total = total.merge(usage)
                    del usage
                    stats.append(st)
                    docs += st["documents"]
                    bar.update(self.inputs.blocks[i].size, docs=f"{docs:,}")
                    feed(ai)
            out = dict(end(total))
        except BaseException:
            bar.close()
            for ref, _, _, _ in in_flight.values():
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001
                    pass
            raise
        finally:
            for a in actors:
                try:
                    ray.kill(a)
                except Exception:  # noqa: BLE001
                    pass
        seconds = time.perf_counter() - t0
        info = {"seconds": round(seconds, 3), "build_seconds": round(t_build, 3),
                "bytes": total.bytes, "tokens": total.tokens, "documents": docs,
                "actors": len(actors), "usage_bytes": 8 * (n_ids + 2) * len(stats),
                "worker_peak_rss": max([s["peak_rss"] for s in stats] or [0])}
        tail = describe(out) if describe is not None else f"raw vocabulary {n_tokens:,}"
        bar.close(f"  {label}: {_fmt(total.bytes)} in {seconds:.1f}s "
                  f"({total.bytes / max(seconds, 1e-9) / 1e6:.2f} MB/s) on {len(actors)} node(s) "
                  f"(filter built in {t_build:.1f}s), {tail}")
        out.update(info)
        return out


def _pack(tokens: List[bytes]) -> Tuple[bytes, bytes, bytes]:
    """``tokens`` with the ids 0, 1, ... packed as ``CoreTokenizer.packed()`` gives a
    vocabulary (what :meth:`_Run.filter_pass` ships)."""
    import numpy as np
    lengths = np.fromiter((len(t) for t in tokens), dtype="<u4", count=len(tokens))
    return b"".join(tokens), lengths.tobytes(), np.arange(len(tokens), dtype="<u4").tobytes()


def _counting_meta(rounds: Any, raw_vocab_size: Optional[int], run: _Run) -> Dict[str, Any]:
    info = counting_info(rounds, raw_vocab_size, run.memory_limit)
    info.update(run.info)
    return info


def _finish_counting(run: _Run, info: Dict[str, Any], t0: float) -> None:
    from .readers import peak_rss_bytes as _peak_rss_bytes
    info.update(documents=run.inputs.documents, bytes=run.inputs.text_bytes,
                seconds=round(time.perf_counter() - t0, 3), peak_rss=_peak_rss_bytes())


def _count_on_cluster(inputs: Any, config: TrainConfig, opts: RayOptions, tmp: str,
                      raw_vocab_size: Optional[int], stacklevel: int) -> Tuple[_Run, Any, Dict[str, Any]]:
    """Every counting round of ``config`` on the cluster (the core counter's files in ``tmp``;
    a warning about the rounds at ``stacklevel`` seen from the caller): the run, the counter
    with its counting done, and the counting record (``raw_vocab_size`` the one it names)."""
    counter = config.counter(tmp, 1 << 30)  # the core checks raw_vocab_size
    warn_rounds(counter.rounds, stacklevel=stacklevel + 1)
    run = _Run(inputs, config, opts)
    info = _counting_meta(counter.rounds, raw_vocab_size, run)
    t0 = time.perf_counter()
    n = len(counter.rounds)
    for k in range(n):
        r = counter.rounds[k]  # read again: the first round may set the later thresholds
        counter.begin_round()
        run.count_round(counter, k, n, r, counter.end_round_with_selected, info)
    _finish_counting(run, info, t0)
    return run, counter, info


# --- public calls -------------------------------------------------------------------------------

def run(call: str, *args: Any) -> Any:
    """``call`` (``"count"``, ``"train"``, ``"train_from_counts"`` or ``"extend"``) on Ray with
    its positional inputs, its :class:`cnfmce.config.TrainConfig` (for ``"extend"``, the run's
    plan, which holds one) and the keyword arguments meant for Ray (``backend_options``): how
    :func:`cnfmce.train` and the others reach this backend."""
    *inputs, config, options = args
    opts = RayOptions.of(call, options, partitions=call != "train_from_counts")
    return _CALLS[call](*inputs, config, opts)


def count(inputs: Any, raw_vocab_size: int = _core.DEFAULT_COUNT_RAW_VOCAB_SIZE,
          rounds: Optional[Sequence[Tuple[int, int, int]]] = None,
          num_threads: Optional[int] = None, progress: bool = True,
          memory_limit: Optional[int] = None, tmp_dir: Optional[str] = None, *,
          ray_address: Optional[str] = None, field: str = "text",
          block_size: Optional[Union[int, str]] = None, num_partitions: Optional[int] = None,
          cpus_per_task: int = 1, _kill_once: Optional[str] = None) -> Any:
    """:func:`cnfmce.count` on a Ray cluster: the same :class:`cnfmce.Counts`, exactly.

    ``inputs``: paths (local ones must be visible at the same path on every node; URIs such as
    ``s3://bucket/corpus/`` and directories are allowed), documents, or a ``ray.data.Dataset``
    with a ``field`` column. ``ray_address``: the cluster (see :func:`connect`). ``block_size``:
    bytes of text per task (default: about two blocks per CPU, 8 MB to 512 MB).
    ``num_partitions``: reducers per round (default: the cluster's CPUs). ``memory_limit``:
    bytes per task (default: the smallest memory per CPU of the nodes), also requested from
    Ray's scheduler; tables beyond it spill to ``tmp_dir`` on the worker (default: its temporary
    directory). ``cpus_per_task``: CPUs (and core threads) of each task. ``num_threads``:
    threads of the driver's selection. Progress (documents, MB, round) shows on the driver.
    """
    config = TrainConfig(raw_vocab_size=raw_vocab_size, rounds=rounds, num_threads=num_threads,
                         progress=progress, memory_limit=memory_limit, tmp_dir=tmp_dir, field=field)
    return _count(inputs, config, RayOptions(ray_address, block_size, num_partitions,
                                             cpus_per_task, _kill_once))


def _count(inputs: Any, config: TrainConfig, opts: RayOptions) -> Any:
    from .counts import Counts
    with work_dir(None) as tmp:
        _, counter, info = _count_on_cluster(inputs, config, opts, tmp, config.raw_vocab_size, 3)
        toks, counts = counter.result()
        return Counts(zip(toks, counts), info=info, characters=dict(zip(*counter.char_counts())))


def _filter_and_finish(run: _Run, trainer: Any, config: TrainConfig, meta: Dict[str, Any]) -> Tokenizer:
    kind, _, _ = trainer.begin_pass()
    assert kind == "filter"
    filtering = run.filter_pass(_pack(trainer.raw_tokens()), config.options, trainer.end_pass_with_usage)
    refining = []
    while trainer.next_pass() is not None:  # the refining passes of selection="refined"
        kind, _, _ = trainer.begin_pass()
        assert kind == "refine"
        refining.append(run.filter_pass(_pack(trainer.raw_tokens()), config.options,
                                        trainer.end_pass_with_usage))
    core, report = trainer.finish()
    if report["warning"]:
        warnings.warn(report["warning"], RuntimeWarning, stacklevel=3)
    tok = Tokenizer(core)
    tok.metadata.update(meta)
    filtering.update(used_tokens=report["used_tokens"])
    tok.metadata.update(trainer="cnfmce", vocab_size=config.vocab_size,
                        raw_vocabulary=report["raw_vocab_size"], filtering=filtering,
                        selection=report["selection"], refining=refining,
                        covered_characters=report["covered_characters"])
    report_metadata(tok, report, config.balance)
    return tok


def train(inputs: Any, vocab_size: int = _core.DEFAULT_VOCAB_SIZE,
          raw_vocab_size: Optional[int] = None,
          rounds: Optional[Sequence[Tuple[int, int, int]]] = None,
          special_tokens: Sequence[str] = (), num_threads: Optional[int] = None,
          progress: bool = True, memory_limit: Optional[int] = None, algorithm: str = "mce",
          boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY, token_preference: bool = True,
          tmp_dir: Optional[str] = None, *, ray_address: Optional[str] = None,
          field: str = "text", block_size: Optional[Union[int, str]] = None,
          num_partitions: Optional[int] = None, cpus_per_task: int = 1,
          _kill_once: Optional[str] = None, selection: Optional[str] = None,
          non_ascii_exponent: Optional[float] = None, raw_han_exponent: Optional[float] = None,
          balance: Optional[float] = None) -> Tokenizer:
    """:func:`cnfmce.train` on a Ray cluster (also ``cnfmce.train(..., backend="ray")``): the
    same vocabulary, byte for byte, whatever the number of workers, blocks and partitions.
    The Ray arguments are those of :func:`count`."""
    config = TrainConfig(vocab_size=vocab_size, raw_vocab_size=raw_vocab_size, rounds=rounds,
                         special_tokens=special_tokens, algorithm=algorithm,
                         boundary_penalty=boundary_penalty, token_preference=token_preference,
                         selection=selection, balance=balance, non_ascii_exponent=non_ascii_exponent,
                         raw_han_exponent=raw_han_exponent, num_threads=num_threads,
                         progress=progress, memory_limit=memory_limit, tmp_dir=tmp_dir, field=field)
    return _train(inputs, config, RayOptions(ray_address, block_size, num_partitions,
                                             cpus_per_task, _kill_once))


def _train(inputs: Any, config: TrainConfig, opts: RayOptions) -> Tokenizer:
    with work_dir(None) as tmp:
        trainer = config.trainer(tmp, 1 << 30)
        try:
            warn_rounds(trainer.rounds)
            run = _Run(inputs, config, opts)
            pool = config.raw_pool(config.counted_raw_vocab_size())
            meta = {"counting": _counting_meta(trainer.rounds, pool, run)}
            t0 = time.perf_counter()
            n = len(trainer.rounds)
            while True:
                step = trainer.next_pass()
                if step is None or step[0] != "count":
                    break
                _, k, r = trainer.begin_pass()
                run.count_round(trainer, k, n, r, trainer.end_pass_with_selected, meta["counting"])
            _finish_counting(run, meta["counting"], t0)
            return _filter_and_finish(run, trainer, config, meta)
        finally:
            trainer.close()


def train_from_counts(counts: Any, inputs: Any, vocab_size: int = _core.DEFAULT_VOCAB_SIZE,
                      special_tokens: Sequence[str] = (), num_threads: Optional[int] = None,
                      progress: bool = True, raw_vocab_size: Optional[int] = None,
                      algorithm: str = "mce", boundary_penalty: float = DEFAULT_BOUNDARY_PENALTY,
                      token_preference: bool = True, tmp_dir: Optional[str] = None, *,
                      ray_address: Optional[str] = None, field: str = "text",
                      block_size: Optional[Union[int, str]] = None, cpus_per_task: int = 1,
                      selection: Optional[str] = None, non_ascii_exponent: Optional[float] = None,
                      raw_han_exponent: Optional[float] = None,
                      balance: Optional[float] = None) -> Tokenizer:
    """:func:`cnfmce.train_from_counts` with the filtering pass on a Ray cluster (counts: a
    mapping, a counts file or parquet counts, as locally)."""
    config = TrainConfig(vocab_size=vocab_size, raw_vocab_size=raw_vocab_size,
                         special_tokens=special_tokens, algorithm=algorithm,
                         boundary_penalty=boundary_penalty, token_preference=token_preference,
                         selection=selection, balance=balance, non_ascii_exponent=non_ascii_exponent,
                         raw_han_exponent=raw_han_exponent, num_threads=num_threads,
                         progress=progress, tmp_dir=tmp_dir, field=field)
    return _train_from_counts(counts, inputs, config,
                              RayOptions(ray_address, block_size, cpus_per_task=cpus_per_task))


def _train_from_counts(counts: Any, inputs: Any, config: TrainConfig, opts: RayOptions) -> Tokenizer:
    with work_dir(None) as tmp:
        trainer = config.counts_trainer(counts, tmp)
        try:
            run = _Run(inputs, config, opts)
            return _filter_and_finish(run, trainer, config, {})
        finally:
            trainer.close()


def extend(base: Any, inputs: Any, new_tokens: int, raw_vocab_size: Optional[int] = None,
           rounds: Optional[Sequence[Tuple[int, int, int]]] = None,
           num_threads: Optional[int] = None, progress: bool = True,
           memory_limit: Optional[int] = None, tmp_dir: Optional[str] = None,
           selection: str = "refined", non_ascii_exponent: Optional[float] = None, *,
           ray_address: Optional[str] = None, field: str = "text",
           block_size: Optional[Union[int, str]] = None, num_partitions: Optional[int] = None,
           cpus_per_task: int = 1, _kill_once: Optional[str] = None) -> Tokenizer:
    """:func:`cnfmce.extend` on a Ray cluster (also ``cnfmce.extend(..., backend="ray")``): the
    same tokenizer, tokens, ids and pieces byte for byte, whatever the number of workers, blocks
    and partitions. The Ray arguments are those of :func:`count`."""
    from .extend import extend as _extend_call
    kill = {} if _kill_once is None else {"_kill_once": _kill_once}
    return _extend_call(base, inputs, new_tokens, raw_vocab_size=raw_vocab_size, rounds=rounds,
                        num_threads=num_threads, progress=progress, memory_limit=memory_limit,
                        tmp_dir=tmp_dir, selection=selection, non_ascii_exponent=non_ascii_exponent,
                        field=field, backend="ray", ray_address=ray_address, block_size=block_size,
                        num_partitions=num_partitions, cpus_per_task=cpus_per_task, **kill)


def _extend(inputs: Any, plan: Any, opts: RayOptions) -> Tokenizer:
    """The counting of :func:`cnfmce.extend` (``plan``: its run, ``cnfmce.extend._Plan``) in the
    partitioned rounds of :func:`count`, then its passes with :meth:`_Run.filter_pass`: each
    pass's vocabulary (the base and the candidates left) goes to the filter actors, their usage
    is summed into the core's run, which cuts the candidates as locally."""
    config = plan.config
    t0 = time.perf_counter()
    with work_dir(None) as tmp:
        run, counter, info = _count_on_cluster(inputs, config, opts, tmp, plan.raw, 6)
        ext = plan.extender(counter, info)
        del counter

        def end(total: Any) -> Dict[str, Any]:
            ext.add_usage(total)
            return ext.end_pass()

        def one_pass(label: str) -> Dict[str, Any]:
            return run.filter_pass(ext.pass_vocabulary(), plan.options, end, label, plan.describe)

        try:
            passes = plan.passes(ext, one_pass)
            # (the caller of cnfmce.extend: _extend <- run <- training._on_ray <- extend)
            return plan.result(ext, info, passes, t0, stacklevel=5)
        finally:
            ext.close()


_CALLS = {"count": _count, "train": _train, "train_from_counts": _train_from_counts, "extend": _extend}


def tokenize_corpus(tokenizer: Any, inputs: Any, output: Any, **kwargs: Any) -> Dict[str, Any]:
    """:func:`cnfmce.tokenize_corpus` with the encoding on a Ray cluster (see
    :func:`cnfmce.shards.tokenize_corpus`, ``backend="ray"``): the same files, byte for byte."""
    from .shards import tokenize_corpus as local
    return local(tokenizer, inputs, output, backend="ray", **kwargs)
