//! `Filter`: CNF filtering (usage of the raw vocabulary under MCE) and the final selection.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use super::counter::PyCounter;
use super::util::{guarded, str_bytes, to_py, ForkSafePool};
use crate::mce::{Algorithm, Options};

/// CNF filtering: usage counts of the raw vocabulary under MCE.
#[pyclass(module = "cnfmce._core", name = "Filter", frozen)]
pub(crate) struct PyFilter {
    inner: std::sync::Mutex<crate::filter::Filter>,
    pool: ForkSafePool,
}

impl PyFilter {
    /// Ranks the counts into the raw vocabulary and builds its encoder (GIL released).
    fn build(
        py: Python<'_>,
        pairs: Vec<(Vec<u8>, u64)>,
        raw_vocab_size: Option<usize>,
        boundary_penalty: f64,
        token_preference: bool,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        if boundary_penalty.is_nan() || boundary_penalty < 0.0 {
            return Err(PyValueError::new_err("boundary_penalty must be >= 0"));
        }
        let options = Options { algorithm: Algorithm::Mce, boundary_penalty, token_preference };
        if num_threads == Some(0) {
            return Err(PyValueError::new_err("num_threads must be positive"));
        }
        let pool = ForkSafePool::new(num_threads);
        let f = py
            .detach(|| {
                guarded(|| {
                    pool.install(|| {
                        let raw = crate::filter::Filter::rank(pairs, raw_vocab_size)?;
                        crate::filter::Filter::new(raw, options)
                    })
                })
            })??
            .map_err(|e| to_py(py, e))?;
        Ok(PyFilter { inner: std::sync::Mutex::new(f), pool })
    }
}

#[pymethods]
impl PyFilter {
    /// The raw vocabulary from counts (tokens[i] has counts[i]): ranked by count, ties by
    /// bytes, the first raw_vocab_size kept, missing single bytes appended.
    #[new]
    #[pyo3(signature = (tokens, counts, raw_vocab_size=None, boundary_penalty=0.05, token_preference=true, num_threads=None))]
    fn new(
        py: Python<'_>,
        tokens: Vec<Bound<'_, PyBytes>>,
        counts: Vec<u64>,
        raw_vocab_size: Option<usize>,
        boundary_penalty: f64,
        token_preference: bool,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        if tokens.len() != counts.len() {
            return Err(PyValueError::new_err("tokens and counts differ in length"));
        }
        let pairs: Vec<(Vec<u8>, u64)> =
            tokens.iter().zip(counts).map(|(b, c)| (b.as_bytes().to_vec(), c)).collect();
        drop(tokens);
        Self::build(py, pairs, raw_vocab_size, boundary_penalty, token_preference, num_threads)
    }

    /// The filter over the raw vocabulary of a finished counter (no copy through Python).
    #[staticmethod]
    #[pyo3(signature = (counter, boundary_penalty=0.05, token_preference=true, num_threads=None))]
    fn from_counter(
        py: Python<'_>,
        counter: &Bound<'_, PyCounter>,
        boundary_penalty: f64,
        token_preference: bool,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        let c = counter.get();
        let pairs: Vec<(Vec<u8>, u64)> =
            c.lock().result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
        Self::build(py, pairs, None, boundary_penalty, token_preference, num_threads)
    }

    /// Size of the raw vocabulary (missing single bytes included).
    #[getter]
    fn raw_size(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).vocab().len()
    }

    /// Encodes a batch of documents and adds their token usage (GIL released).
    fn add(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>) -> PyResult<()> {
        let bytes = str_bytes(&docs)?;
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let f = &mut *g;
        let pool = &self.pool;
        py.detach(|| guarded(|| pool.install(|| f.add(&bytes))))?
    }

    /// (tokens produced, bytes encoded) so far.
    fn totals(&self) -> (u64, u64) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).totals()
    }

    /// Usage count of every raw id.
    fn usage(&self) -> Vec<u64> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).usage()
    }

    /// The k tokens of the final vocabulary in id order: (tokens, usage, raw ids).
    fn select<'py>(&self, py: Python<'py>, k: usize) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<u64>, Vec<u32>)> {
        let f = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let sel = self.pool.install(|| f.select(k))?.map_err(|e| to_py(py, e))?;
        Ok((
            sel.iter().map(|s| PyBytes::new(py, &s.token)).collect(),
            sel.iter().map(|s| s.usage).collect(),
            sel.iter().map(|s| s.raw_id).collect(),
        ))
    }
}
