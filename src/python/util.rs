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

/// Runs `f` on the global rayon pool (`num_threads` None or 0) or on a pool of that many
/// threads (the batch encoders' `num_threads`).
pub(crate) fn in_pool<R: Send>(num_threads: Option<usize>, f: impl FnOnce() -> R + Send) -> PyResult<R> {
    match num_threads {
        None | Some(0) => Ok(f()),
        Some(n) => Ok(make_pool(Some(n))?.install(f)),
    }
}

pub(crate) fn make_pool(num_threads: Option<usize>) -> PyResult<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = num_threads {
        if n == 0 {
            return Err(PyValueError::new_err("num_threads must be positive"));
        }
        b = b.num_threads(n);
    }
    b.build().map_err(|e| PyRuntimeError::new_err(format!("cannot start threads: {e}")))
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
