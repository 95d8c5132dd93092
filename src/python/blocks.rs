//! The steps of a distributed training run (docs/spec.md, "Distributed training"): `Survivors`
//! of earlier rounds, `count_block` and its `BlockCounts`, the `BlockUsage` of a block under the
//! raw vocabulary. All three travel between processes as bytes (`to_bytes` / `from_bytes`, and
//! pickling) and merge exactly.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use super::util::{guarded, make_pool, read_round, str_bytes, to_py};

/// Reads a value from its bytes with the GIL released (for `from_bytes`).
fn from_bytes<T: Send>(py: Python<'_>, data: &[u8], read: fn(&[u8]) -> Result<T, crate::Error>) -> PyResult<T> {
    py.detach(|| guarded(|| read(data)))?.map_err(|e| to_py(py, e))
}

/// `__reduce__` for the classes that travel as bytes: `type(x).from_bytes(x.to_bytes())`.
fn reduce_by_bytes<'py, T: pyo3::PyClass>(slf: &Bound<'py, T>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    let slf = slf.as_any();
    let data = slf.call_method0("to_bytes")?;
    Ok((slf.get_type().getattr("from_bytes")?, PyTuple::new(slf.py(), [data])?))
}

/// The candidates of earlier rounds that a counting round extends.
#[pyclass(module = "cnfmce._core", name = "Survivors", frozen)]
pub(crate) struct PySurvivors {
    pub(crate) inner: crate::Survivors,
}

#[pymethods]
impl PySurvivors {
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        Ok(PySurvivors { inner: from_bytes(py, data, crate::Survivors::from_bytes)? })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        reduce_by_bytes(slf)
    }
}

/// Exact counts of one round's candidates in some documents (sorted, u64).
#[pyclass(module = "cnfmce._core", name = "BlockCounts", frozen)]
pub(crate) struct PyBlockCounts {
    pub(crate) inner: crate::BlockCounts,
}

#[pymethods]
impl PyBlockCounts {
    /// No candidates (the neutral element of `merge`).
    #[new]
    fn new() -> Self {
        PyBlockCounts { inner: crate::BlockCounts::default() }
    }

    /// The exact sum of these counts and `other`'s.
    fn merge(&self, py: Python<'_>, other: &Bound<'_, PyBlockCounts>) -> PyResult<Self> {
        let b = &other.get().inner;
        let inner = py.detach(|| guarded(|| self.inner.merge(b)))?.map_err(|e| to_py(py, e))?;
        Ok(PyBlockCounts { inner })
    }

    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        Ok(PyBlockCounts { inner: from_bytes(py, data, crate::BlockCounts::from_bytes)? })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// The counts as (candidates, counts), candidates in bytewise order.
    fn items<'py>(&self, py: Python<'py>) -> (Vec<Bound<'py, PyBytes>>, Vec<u64>) {
        self.inner.iter().map(|(k, c)| (PyBytes::new(py, k), c)).unzip()
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        reduce_by_bytes(slf)
    }
}

/// Usage of the raw vocabulary in some documents (one u64 per raw id, tokens, bytes).
#[pyclass(module = "cnfmce._core", name = "BlockUsage", frozen)]
pub(crate) struct PyBlockUsage {
    pub(crate) inner: crate::BlockUsage,
}

#[pymethods]
impl PyBlockUsage {
    /// No documents (the neutral element of `merge`).
    #[new]
    fn new() -> Self {
        PyBlockUsage { inner: crate::BlockUsage::default() }
    }

    fn merge(&self, py: Python<'_>, other: &Bound<'_, PyBlockUsage>) -> PyResult<Self> {
        let inner = self.inner.merge(&other.get().inner).map_err(|e| to_py(py, e))?;
        Ok(PyBlockUsage { inner })
    }

    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        Ok(PyBlockUsage { inner: from_bytes(py, data, crate::BlockUsage::from_bytes)? })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// Usage count of every raw id.
    #[getter]
    fn usage(&self) -> Vec<u64> {
        self.inner.usage.clone()
    }

    #[getter]
    fn tokens(&self) -> u64 {
        self.inner.tokens
    }

    #[getter]
    fn bytes(&self) -> u64 {
        self.inner.bytes
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        reduce_by_bytes(slf)
    }
}

/// Counts the candidates of `round` (a `(min_length, max_length, threshold)` triple) in `docs`,
/// extending only `survivors` (from `Trainer.survivors()` of the same round); GIL released.
#[pyfunction]
#[pyo3(signature = (docs, round, survivors, num_threads=None))]
pub(crate) fn count_block(
    py: Python<'_>,
    docs: Vec<Bound<'_, PyString>>,
    round: &Bound<'_, PyAny>,
    survivors: &Bound<'_, PySurvivors>,
    num_threads: Option<usize>,
) -> PyResult<PyBlockCounts> {
    let round = read_round(round)?;
    round.check().map_err(|e| to_py(py, e))?;
    let bytes = str_bytes(&docs)?;
    let s = &survivors.get().inner;
    let pool = make_pool(num_threads)?;
    let inner = py.detach(|| guarded(|| pool.install(|| crate::count_block(&bytes, &round, s))))?;
    Ok(PyBlockCounts { inner })
}
