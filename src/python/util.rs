//! What every binding shares: Rust errors as Python exceptions, panics caught, the options'
//! algorithm name, ids read from Python, documents as bytes, packed vocabularies, and thread
//! pools.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyKeyError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::Error;

pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Value(m) => PyValueError::new_err(m),
        Error::Io(m) => PyOSError::new_err(m),
        Error::UnknownId(id) => unknown_id(py, &id.to_string()),
    }
}

/// `cnfmce.errors.UnknownIdError` (a KeyError and a ValueError) naming the id.
pub(crate) fn unknown_id(py: Python<'_>, id: &str) -> PyErr {
    let msg = format!("unknown token id {id}");
    match py.import("cnfmce.errors").and_then(|m| m.getattr("UnknownIdError")) {
        Ok(cls) => match cls.cast_into() {
            Ok(t) => PyErr::from_type(t, msg),
            Err(_) => PyKeyError::new_err(msg),
        },
        Err(_) => PyKeyError::new_err(msg),
    }
}

/// Runs `f`, turning a panic into a `RuntimeError` instead of letting it reach Python.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        PyRuntimeError::new_err(format!("internal error in cnfmce core: {msg}"))
    })
}

/// One id from Python (an int, a numpy integer, ...): `Ok(Some(id))`, or `Ok(None)` for an
/// integer that is no u32 (negative or too large: an unknown id); an int beyond i64 raises
/// `UnknownIdError` at once, a bool or a non-integer `TypeError`.
pub(crate) fn read_id(item: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
    let type_name = || item.get_type().name().map(|n| n.to_string()).unwrap_or_default();
    if item.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err("token ids must be integers, got bool"));
    }
    match item.extract::<i64>() {
        Ok(v) => Ok(u32::try_from(v).ok()),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(item.py()) => {
            Err(unknown_id(item.py(), &item.str().map(|s| s.to_string()).unwrap_or_default()))
        }
        Err(_) => Err(PyTypeError::new_err(format!("token ids must be integers, got {}", type_name()))),
    }
}

/// A sequence of ids read from Python: the ids before the first one that is no u32, and that
/// one (shown as Python shows it).
pub(crate) struct Ids {
    pub(crate) ids: Vec<u32>,
    pub(crate) out_of_range: Option<String>,
}

/// Reads a sequence of ids (every item is type-checked, see [`read_id`]).
pub(crate) fn read_ids(ids: &Bound<'_, PyAny>) -> PyResult<Ids> {
    if ids.is_instance_of::<PyString>() || ids.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err("ids must be a sequence of integers, not a string"));
    }
    let mut out = Ids { ids: Vec::with_capacity(ids.len().unwrap_or(0)), out_of_range: None };
    for item in ids.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "ids must be a sequence of integers, got {}",
            ids.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })? {
        let item = item?;
        match read_id(&item)? {
            Some(id) if out.out_of_range.is_none() => out.ids.push(id),
            Some(_) => {}
            None => {
                if out.out_of_range.is_none() {
                    out.out_of_range = Some(item.str().map(|s| s.to_string()).unwrap_or_default());
                }
            }
        }
    }
    Ok(out)
}

/// The CPUs this process may use, asked once (the question reads the cgroup and affinity
/// settings, about 0.1 ms: more than encoding a short text, and every batch call asks).
pub(crate) fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// The most threads one pool gets: four times the CPUs this process may use, at least 8 (a
/// larger `num_threads` only adds scheduling and memory; 10,000 would start 10,000 OS threads).
pub(crate) fn max_threads() -> usize {
    (4 * cpus()).max(8)
}

/// Held around every look-up of a pool (`ForkSafePool::get`, `sized_pool`) and, by the fork
/// handlers of [`register_fork_handlers`], across `fork()`: a child never inherits the mutex of
/// a pool cell held by a thread of the parent (which does not exist in the child: its first
/// parallel call waited forever).
static POOL_CELLS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lock_pool_cells() -> std::sync::MutexGuard<'static, ()> {
    POOL_CELLS.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    /// `POOL_CELLS` held by this thread across a `fork()` it makes.
    static FORK_GUARD: std::cell::RefCell<Option<std::sync::MutexGuard<'static, ()>>> =
        const { std::cell::RefCell::new(None) };
}

extern "C" fn before_fork() {
    let g = lock_pool_cells();
    FORK_GUARD.with(|c| *c.borrow_mut() = Some(g));
}

extern "C" fn after_fork() {
    // in the parent and in the child (the same thread, its only one there)
    FORK_GUARD.with(|c| drop(c.borrow_mut().take()));
}

/// Registers (once per process) the `pthread_atfork` handlers that keep [`POOL_CELLS`] free in
/// a forked child: taken by the forking thread just before `fork()`, released after it in both
/// processes. They run for every fork, Python's `os.fork` and a C library's alike.
pub(crate) fn register_fork_handlers() {
    #[cfg(unix)]
    {
        extern "C" {
            fn pthread_atfork(
                prepare: Option<extern "C" fn()>,
                parent: Option<extern "C" fn()>,
                child: Option<extern "C" fn()>,
            ) -> std::os::raw::c_int;
        }
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: plain functions that live as long as the process (the extension module is
        // never unloaded by CPython).
        ONCE.call_once(|| unsafe {
            pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork));
        });
    }
}

/// A rayon pool that survives `fork()`: rayon's worker threads do not exist in a forked child
/// (Python's `multiprocessing` and `datasets.map(num_proc=...)` fork on Linux), so a pool made
/// before the fork would wait for them forever. The pool remembers the process that built it;
/// another process (the child) gets a fresh pool, and the parent's, whose threads it does not
/// have, is leaked rather than dropped (dropping signals those threads).
pub(crate) struct ForkSafePool {
    threads: Option<usize>,
    cell: std::sync::Mutex<Option<(u32, std::sync::Arc<rayon::ThreadPool>)>>,
}

impl ForkSafePool {
    pub(crate) const fn new(threads: Option<usize>) -> Self {
        ForkSafePool { threads, cell: std::sync::Mutex::new(None) }
    }

    /// A pool of `num_threads` threads (None: one per CPU; 0 is an error), started on first use.
    pub(crate) fn checked(num_threads: Option<usize>) -> PyResult<Self> {
        if num_threads == Some(0) {
            return Err(PyValueError::new_err("num_threads must be positive"));
        }
        Ok(Self::new(num_threads))
    }

    /// The pool of this process, built on first use (`num_threads` None: one thread per CPU).
    pub(crate) fn get(&self) -> PyResult<std::sync::Arc<rayon::ThreadPool>> {
        let pid = std::process::id();
        let _cells = lock_pool_cells();
        let mut g = self.cell.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_ref() {
            Some((owner, pool)) if *owner == pid => return Ok(pool.clone()),
            Some(_) => {
                if let Some((_, stale)) = g.take() {
                    std::mem::forget(stale); // its threads live in another process
                }
            }
            None => {}
        }
        let pool = std::sync::Arc::new(make_pool(self.threads)?);
        *g = Some((pid, pool.clone()));
        Ok(pool)
    }

    /// Runs `f` on this process's pool.
    pub(crate) fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> PyResult<R> {
        let pool = self.get()?;
        Ok(pool.install(f))
    }
}

/// The pool for calls without `num_threads`: one thread per CPU, per process. It replaces
/// rayon's global pool, which a forked child cannot use; every binding that may run parallel
/// code runs it inside `in_pool` or an object's own `ForkSafePool`.
static DEFAULT_POOL: ForkSafePool = ForkSafePool::new(None);

/// Runs `f` on the default pool (`num_threads` None or 0) or on a pool of that many threads
/// (at most `max_threads()`; the batch encoders' `num_threads`).
pub(crate) fn in_pool<R: Send>(num_threads: Option<usize>, f: impl FnOnce() -> R + Send) -> PyResult<R> {
    match num_threads {
        None | Some(0) => DEFAULT_POOL.install(f),
        Some(n) if n.min(max_threads()) == default_threads() => DEFAULT_POOL.install(f),
        Some(n) => Ok(sized_pool(n.min(max_threads()))?.install(f)),
    }
}

/// For a batch of `items` on `num_threads` threads (as `in_pool` counts them): the pool of the
/// threads other than the calling one, which works too (see `stream::stream_map`); None when
/// the batch runs on one thread (or holds at most one item).
pub(crate) fn batch_helpers(num_threads: Option<usize>, items: usize) -> PyResult<Option<std::sync::Arc<rayon::ThreadPool>>> {
    let threads = match num_threads {
        None | Some(0) => default_threads(),
        Some(n) => n.min(max_threads()),
    };
    if threads < 2 || items < 2 {
        return Ok(None);
    }
    let helpers = threads - 1;
    Ok(Some(if helpers == default_threads() { DEFAULT_POOL.get()? } else { sized_pool(helpers)? }))
}

/// Threads of the default pool: one per CPU, at most `max_threads()`.
fn default_threads() -> usize {
    cpus().min(max_threads())
}

/// How many pools of an explicit size (other than the default's) stay alive between calls.
const KEPT_POOLS: usize = 3;

/// The pools of explicit sizes of this process, most recently used last, with the process that
/// built them: `encode_batch(num_threads=n)` reuses its pool (and so its threads' scratch
/// buffers and piece caches) instead of starting `n` threads per call. At most [`KEPT_POOLS`]
/// sizes are kept (the least recently used one is dropped, its threads end once idle); after a
/// `fork()` the parent's pools are leaked, as in [`ForkSafePool`].
static SIZED_POOLS: std::sync::Mutex<(u32, Vec<(usize, std::sync::Arc<rayon::ThreadPool>)>)> =
    std::sync::Mutex::new((0, Vec::new()));

/// The kept pool of `n` threads (`1 <= n <= max_threads()`), built on first use.
fn sized_pool(n: usize) -> PyResult<std::sync::Arc<rayon::ThreadPool>> {
    let pid = std::process::id();
    let _cells = lock_pool_cells();
    let mut g = SIZED_POOLS.lock().unwrap_or_else(|p| p.into_inner());
    if g.0 != pid {
        for stale in std::mem::take(&mut g.1) {
            std::mem::forget(stale); // its threads live in another process
        }
        g.0 = pid;
    }
    if let Some(k) = g.1.iter().position(|(m, _)| *m == n) {
        let e = g.1.remove(k);
        let pool = e.1.clone();
        g.1.push(e);
        return Ok(pool);
    }
    let pool = std::sync::Arc::new(make_pool(Some(n))?);
    if g.1.len() >= KEPT_POOLS {
        g.1.remove(0);
    }
    g.1.push((n, pool.clone()));
    Ok(pool)
}

/// A new pool of `num_threads` threads (None: one per CPU), at most `max_threads()`.
pub(crate) fn make_pool(num_threads: Option<usize>) -> PyResult<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    match num_threads {
        Some(0) => return Err(PyValueError::new_err("num_threads must be positive")),
        Some(n) => b = b.num_threads(n.min(max_threads())),
        None => {
            b = b.num_threads(cpus().min(max_threads()));
        }
    }
    b.thread_name(|i| format!("cnfmce-{i}"))
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start threads: {e}")))
}

/// A vocabulary packed as `CoreTokenizer.packed()` gives it: (concatenated bytes, u32 LE
/// lengths, u32 LE ids), id order.
pub(crate) type Packed = (Vec<u8>, Vec<u8>, Vec<u8>);

/// A vocabulary packed as Python bytes objects: what `CoreTokenizer.packed()` and
/// `Extender.pass_vocabulary()` return (the [`Packed`] layout).
pub(crate) type PyPacked<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// `(id, bytes)` entries packed (in their order) as Python bytes objects.
pub(crate) fn pack_py<'py, 't>(py: Python<'py>, entries: impl Iterator<Item = (u32, &'t [u8])>) -> PyPacked<'py> {
    let (mut data, mut lens, mut ids) = (Vec::new(), Vec::new(), Vec::new());
    for (id, t) in entries {
        data.extend_from_slice(t);
        lens.extend_from_slice(&(t.len() as u32).to_le_bytes());
        ids.extend_from_slice(&id.to_le_bytes());
    }
    (PyBytes::new(py, &data), PyBytes::new(py, &lens), PyBytes::new(py, &ids))
}

fn u32s(b: &[u8], what: &str) -> PyResult<Vec<u32>> {
    if b.len() % 4 != 0 {
        return Err(PyValueError::new_err(format!("packed {what} is not a whole number of u32")));
    }
    Ok(b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// The `(id, bytes)` entries of a packed vocabulary.
pub(crate) fn unpack(packed: &Packed) -> PyResult<Vec<(u32, Vec<u8>)>> {
    let (data, lengths, ids) = packed;
    let (lens, ids) = (u32s(lengths, "lengths")?, u32s(ids, "ids")?);
    if lens.len() != ids.len() || lens.iter().map(|&l| l as u64).sum::<u64>() != data.len() as u64 {
        return Err(PyValueError::new_err("packed tokens, lengths and ids do not match"));
    }
    let mut out = Vec::with_capacity(ids.len());
    let mut at = 0usize;
    for (id, l) in ids.into_iter().zip(lens) {
        out.push((id, data[at..at + l as usize].to_vec()));
        at += l as usize;
    }
    Ok(out)
}

pub(crate) fn str_bytes<'a>(docs: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a [u8]>> {
    docs.iter()
        .enumerate()
        .map(|(k, d)| {
            d.to_str().map(|s| s.as_bytes()).map_err(|_| {
                PyValueError::new_err(format!("document {k} is not valid Unicode (lone surrogates)"))
            })
        })
        .collect()
}

/// A positive int argument (`ValueError` otherwise, bools included).
pub(crate) fn read_positive(v: &Bound<'_, PyAny>, name: &str) -> PyResult<usize> {
    let bad = || {
        let shown = v.repr().map(|r| r.to_string()).unwrap_or_default();
        PyValueError::new_err(format!("{name} must be a positive int, got {shown}"))
    };
    if v.is_instance_of::<pyo3::types::PyBool>() || !v.is_instance_of::<pyo3::types::PyInt>() {
        return Err(bad());
    }
    match v.extract::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad()),
    }
}

/// One counting round from Python: a `(min_length, max_length, threshold)` int triple (a tuple
/// or any sequence of three); negative values are refused here, the rest by the core.
pub(crate) fn read_round(item: &Bound<'_, PyAny>) -> PyResult<crate::Round> {
    let shape = || PyTypeError::new_err("rounds must be a sequence of (min_length, max_length, threshold) triples");
    if item.is_instance_of::<PyString>() || item.is_instance_of::<PyBytes>() {
        return Err(shape());
    }
    let parts: Vec<Bound<'_, PyAny>> =
        item.try_iter().and_then(|it| it.collect::<PyResult<Vec<_>>>()).map_err(|_| shape())?;
    let [a, b, t] = parts.as_slice() else { return Err(shape()) };
    let int = |x: &Bound<'_, PyAny>| -> PyResult<i64> {
        if x.is_instance_of::<pyo3::types::PyBool>() {
            return Err(shape());
        }
        x.extract::<i64>().map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(x.py()) {
                // an int, of the right shape, beyond any valid value: a ValueError naming it
                let shown = |y: &Bound<'_, PyAny>| y.repr().map(|r| r.to_string()).unwrap_or_default();
                PyValueError::new_err(format!(
                    "bad round ({}, {}, {}): need 1 <= min <= max and 0 <= threshold < 2**63 (rounds)",
                    shown(a), shown(b), shown(t)
                ))
            } else {
                shape()
            }
        })
    };
    let (a, b, t) = (int(a)?, int(b)?, int(t)?);
    match (usize::try_from(a), usize::try_from(b), u64::try_from(t)) {
        (Ok(min_len), Ok(max_len), Ok(threshold)) => Ok(crate::Round { min_len, max_len, threshold }),
        _ => Err(PyValueError::new_err(format!("bad round ({a}, {b}, {t}): need 1 <= min <= max and threshold >= 0"))),
    }
}

/// Counting rounds from Python (see [`read_round`]), checked by the core.
pub(crate) fn read_rounds(v: &Bound<'_, PyAny>) -> PyResult<Vec<crate::Round>> {
    if v.is_instance_of::<PyString>() || v.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err("rounds must be a sequence of (min_length, max_length, threshold) triples"));
    }
    let items = v.try_iter().map_err(|_| {
        PyTypeError::new_err("rounds must be a sequence of (min_length, max_length, threshold) triples")
    })?;
    let mut out = Vec::new();
    for item in items {
        out.push(read_round(&item?)?);
    }
    crate::validate_rounds(&out).map_err(|e| to_py(v.py(), e))?;
    Ok(out)
}

/// The rounds as Python triples.
pub(crate) fn rounds_tuple(rounds: &[crate::Round]) -> Vec<(usize, usize, u64)> {
    rounds.iter().map(|r| (r.min_len, r.max_len, r.threshold)).collect()
}
