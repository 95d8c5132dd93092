//! `Counter`: CNF counting over rounds, fed batches of documents from Python.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use super::util::{guarded, str_bytes, to_py, ForkSafePool};

/// CNF counting over rounds (Algorithm 1); the Python side feeds batches of documents.
#[pyclass(module = "cnfmce._core", name = "Counter", frozen)]
pub(crate) struct PyCounter {
    inner: std::sync::Mutex<crate::count::Counter>,
    pool: ForkSafePool,
}

impl PyCounter {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, crate::count::Counter> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyCounter {
    /// rounds: (min_len, max_len, threshold) triples; budget: table bytes before spilling.
    #[new]
    #[pyo3(signature = (rounds, raw_vocab_size, budget, tmp_dir, num_threads=None))]
    fn new(
        py: Python<'_>,
        rounds: Vec<(usize, usize, u64)>,
        raw_vocab_size: usize,
        budget: usize,
        tmp_dir: std::path::PathBuf,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        let rounds = rounds
            .into_iter()
            .map(|(a, b, t)| crate::count::Round { min_len: a, max_len: b, threshold: t })
            .collect();
        let c = crate::count::Counter::new(rounds, raw_vocab_size, budget, tmp_dir)
            .map_err(|e| to_py(py, e))?;
        if num_threads == Some(0) {
            return Err(pyo3::exceptions::PyValueError::new_err("num_threads must be positive"));
        }
        Ok(PyCounter { inner: std::sync::Mutex::new(c), pool: ForkSafePool::new(num_threads) })
    }

    fn begin_round(&self, py: Python<'_>) -> PyResult<()> {
        let mut g = self.lock();
        let c = &mut *g;
        let pool = &self.pool;
        py.detach(|| guarded(|| pool.install(|| c.begin_round())))??.map_err(|e| to_py(py, e))
    }

    /// Counts a batch of documents with the GIL released.
    fn add(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>) -> PyResult<()> {
        let bytes = str_bytes(&docs)?;
        let mut g = self.lock();
        let c = &mut *g;
        let pool = &self.pool;
        py.detach(|| guarded(|| pool.install(|| c.add(&bytes))))??.map_err(|e| to_py(py, e))
    }

    /// Ends the round; returns its statistics as a dict.
    fn end_round<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let mut g = self.lock();
        let c = &mut *g;
        let pool = &self.pool;
        let st = py.detach(|| guarded(|| pool.install(|| c.end_round())))??.map_err(|e| to_py(py, e))?;
        let d = pyo3::types::PyDict::new(py);
        d.set_item("distinct", st.distinct)?;
        d.set_item("retained", st.retained)?;
        d.set_item("spills", st.spills)?;
        d.set_item("spilled_bytes", st.spilled_bytes)?;
        d.set_item("peak_table_bytes", st.peak_table_bytes)?;
        d.set_item("kept_bytes", c.kept_bytes())?;
        Ok(d)
    }

    #[getter]
    fn table_bytes(&self) -> usize {
        self.lock().table_bytes()
    }

    #[getter]
    fn round(&self) -> usize {
        self.lock().round()
    }

    /// The raw vocabulary: (tokens, counts), best first.
    fn result<'py>(&self, py: Python<'py>) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<u64>)> {
        let c = self.lock();
        let r = self.pool.install(|| c.result())?;
        Ok((r.iter().map(|(k, _)| PyBytes::new(py, k)).collect(), r.iter().map(|e| e.1).collect()))
    }
}
