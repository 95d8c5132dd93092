//! What every binding shares: Rust errors as Python exceptions, panics caught, the options'
//! algorithm name, ids read from Python, documents as bytes, and thread pools.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyKeyError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::mce::Algorithm;
use crate::Error;

pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Value(m) => PyValueError::new_err(m),
        Error::Io(m) => PyOSError::new_err(m),
        Error::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
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

pub(crate) fn parse_algorithm(s: &str) -> PyResult<Algorithm> {
    match s {
        "mce" => Ok(Algorithm::Mce),
        "fmm" => Ok(Algorithm::Fmm),
        _ => Err(PyValueError::new_err(format!(
            "algorithm must be \"mce\" or \"fmm\", got {s:?}"
        ))),
    }
}

/// Reads a sequence of ids (ints, numpy integers, ...) as i64; values beyond i64 are reported
/// as unknown ids.
pub(crate) fn read_ids(ids: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    if ids.is_instance_of::<PyString>() || ids.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err("ids must be a sequence of integers, not a string"));
    }
    let mut out = Vec::with_capacity(ids.len().unwrap_or(0));
    for item in ids.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "ids must be a sequence of integers, got {}",
            ids.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })? {
        let item = item?;
        if item.is_instance_of::<pyo3::types::PyBool>() {
            return Err(PyTypeError::new_err("ids must be integers, got bool"));
        }
        match item.extract::<i64>() {
            Ok(v) => out.push(v),
            Err(e) => {
                if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(ids.py()) {
                    let shown = item.str().map(|s| s.to_string()).unwrap_or_default();
                    return Err(unknown_id(ids.py(), &shown));
                } else {
                    return Err(PyTypeError::new_err(format!(
                        "ids must be integers, got {}",
                        item.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    )));
                }
            }
        }
    }
    Ok(out)
}

/// The most threads one pool gets: four times the CPUs this process may use, at least 8 (a
/// larger `num_threads` only adds scheduling and memory; 10,000 would start 10,000 OS threads).
pub(crate) fn max_threads() -> usize {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    (4 * cpus).max(8)
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

    /// The pool of this process, built on first use (`num_threads` None: one thread per CPU).
    pub(crate) fn get(&self) -> PyResult<std::sync::Arc<rayon::ThreadPool>> {
        let pid = std::process::id();
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
        Some(n) => Ok(make_pool(Some(n))?.install(f)),
    }
}

/// A new pool of `num_threads` threads (None: one per CPU), at most `max_threads()`.
pub(crate) fn make_pool(num_threads: Option<usize>) -> PyResult<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    match num_threads {
        Some(0) => return Err(PyValueError::new_err("num_threads must be positive")),
        Some(n) => b = b.num_threads(n.min(max_threads())),
        None => {
            let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            b = b.num_threads(cpus.min(max_threads()));
        }
    }
    b.thread_name(|i| format!("cnfmce-{i}"))
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start threads: {e}")))
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
