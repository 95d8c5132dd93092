//! `Counter`: CNF counting over rounds (the counting phase alone, `cnfmce.count`), fed batches
//! of documents from Python, or the merged `BlockCounts` of a round counted elsewhere.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use super::blocks::{PyBlockCounts, PySurvivors};
use super::shuffle::{PyRoundSelector, PySelection};
use super::util::{guarded, read_positive, read_rounds, rounds_tuple, str_bytes, to_py, ForkSafePool};

/// CNF counting over rounds (Algorithm 1); the Python side feeds batches of documents.
#[pyclass(module = "cnfmce._core", name = "Counter", frozen)]
pub(crate) struct PyCounter {
    inner: std::sync::Mutex<crate::Counter>,
    pool: ForkSafePool,
}

impl PyCounter {
    fn lock(&self) -> std::sync::MutexGuard<'_, crate::Counter> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A round's statistics as a Python dict (`kept_bytes`: what the counter keeps afterwards).
pub(crate) fn round_stats<'py>(py: Python<'py>, st: &crate::RoundStats, kept_bytes: usize) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("distinct", st.distinct)?;
    d.set_item("retained", st.retained)?;
    d.set_item("spills", st.spills)?;
    d.set_item("spilled_bytes", st.spilled_bytes)?;
    d.set_item("peak_table_bytes", st.peak_table_bytes)?;
    d.set_item("kept_bytes", kept_bytes)?;
    Ok(d)
}

#[pymethods]
impl PyCounter {
    /// rounds: (min_len, max_len, threshold) triples; budget: table bytes before spilling into
    /// the existing directory tmp_dir.
    #[new]
    #[pyo3(signature = (rounds, raw_vocab_size, budget, tmp_dir, num_threads=None))]
    fn new(
        py: Python<'_>,
        rounds: &Bound<'_, PyAny>,
        raw_vocab_size: &Bound<'_, PyAny>,
        budget: usize,
        tmp_dir: std::path::PathBuf,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        let rounds = read_rounds(rounds)?;
        let m = read_positive(raw_vocab_size, "raw_vocab_size")?;
        let c = crate::Counter::new(rounds, m, budget, tmp_dir).map_err(|e| to_py(py, e))?;
        Ok(PyCounter { inner: std::sync::Mutex::new(c), pool: ForkSafePool::checked(num_threads)? })
    }

    /// The rounds, as (min_len, max_len, threshold) triples.
    #[getter]
    fn rounds(&self) -> Vec<(usize, usize, u64)> {
        rounds_tuple(self.lock().rounds())
    }

    /// During the first round: every later round's threshold becomes `threshold`.
    fn set_later_thresholds(&self, py: Python<'_>, threshold: u64) -> PyResult<()> {
        self.lock().set_later_thresholds(threshold).map_err(|e| to_py(py, e))
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
    fn end_round<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut g = self.lock();
        let c = &mut *g;
        let pool = &self.pool;
        let st = py.detach(|| guarded(|| pool.install(|| c.end_round())))??.map_err(|e| to_py(py, e))?;
        round_stats(py, &st, c.kept_bytes())
    }

    /// The survivors the round in progress extends (for `count_block` elsewhere).
    fn survivors(&self, py: Python<'_>) -> PyResult<PySurvivors> {
        let g = self.lock();
        let c = &*g;
        let pool = &self.pool;
        let inner = py.detach(|| guarded(|| pool.install(|| c.survivors())))??.map_err(|e| to_py(py, e))?;
        Ok(PySurvivors { inner })
    }

    /// Ends the round with the merged counts of its blocks (instead of `add`).
    fn end_round_with<'py>(&self, py: Python<'py>, counts: &Bound<'_, PyBlockCounts>) -> PyResult<Bound<'py, PyDict>> {
        let mut g = self.lock();
        let c = &mut *g;
        let counts = &counts.get().inner;
        let pool = &self.pool;
        let st = py.detach(|| guarded(|| pool.install(|| c.end_round_with(counts))))??.map_err(|e| to_py(py, e))?;
        round_stats(py, &st, c.kept_bytes())
    }

    /// The selection the reducers of a partitioned round apply (`CountsMerger.select`).
    fn round_selector(&self, py: Python<'_>) -> PyResult<PyRoundSelector> {
        let inner = self.lock().round_selector().map_err(|e| to_py(py, e))?;
        Ok(PyRoundSelector { inner })
    }

    /// Ends the round with the selections of disjoint partitions of its candidates.
    fn end_round_with_selected<'py>(&self, py: Python<'py>, parts: Vec<Bound<'_, PySelection>>) -> PyResult<Bound<'py, PyDict>> {
        let mut g = self.lock();
        let c = &mut *g;
        let parts: Vec<&crate::Selection> = parts.iter().map(|p| &p.get().inner).collect();
        let pool = &self.pool;
        let st = py
            .detach(|| guarded(|| pool.install(|| c.end_round_with_selected(&parts))))??
            .map_err(|e| to_py(py, e))?;
        round_stats(py, &st, c.kept_bytes())
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
        Ok(r.into_iter().map(|(k, v)| (PyBytes::new(py, k), v)).unzip())
    }

    /// The multi-byte characters counted, with their counts, whatever the raw vocabulary's cut:
    /// (characters, counts), by bytes. The refined selections rank them
    /// (`Trainer.use_counts(..., char_tokens, char_counts)`).
    fn char_counts<'py>(&self, py: Python<'py>) -> (Vec<Bound<'py, PyBytes>>, Vec<u64>) {
        let c = self.lock();
        c.char_counts().iter().map(|(k, v)| (PyBytes::new(py, k), *v)).unzip()
    }
}
