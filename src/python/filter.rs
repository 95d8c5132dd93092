//! `Filter`: the filtering pass's encoder over a raw vocabulary, for the machines of a
//! distributed run (`Filter(trainer.raw_tokens(), options).usage_of(docs)`; an extension run's
//! pass: `Filter.from_packed(extender.pass_vocabulary(), options)`); a local run's filtering
//! happens inside `Trainer` (or `Extender`).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use super::blocks::PyBlockUsage;
use super::options::PyOptions;
use super::util::{guarded, str_bytes, to_py, unpack, ForkSafePool, Packed};
use crate::Algorithm;

/// CNF filtering: usage counts of a raw vocabulary under MCE.
#[pyclass(module = "cnfmce._core", name = "Filter", frozen)]
pub(crate) struct PyFilter {
    inner: crate::Filter,
    pool: ForkSafePool,
}

impl PyFilter {
    /// `make` run on a pool of `num_threads` threads, the GIL released; `options` made MCE.
    fn build(
        py: Python<'_>,
        options: Option<&Bound<'_, PyOptions>>,
        num_threads: Option<usize>,
        make: impl FnOnce(crate::Options) -> Result<crate::Filter, crate::Error> + Send,
    ) -> PyResult<Self> {
        let options = PyOptions::or_default(options).with_algorithm(Algorithm::Mce);
        let pool = ForkSafePool::checked(num_threads)?;
        let inner = py.detach(|| guarded(|| pool.install(|| make(options))))??.map_err(|e| to_py(py, e))?;
        Ok(PyFilter { inner, pool })
    }
}

#[pymethods]
impl PyFilter {
    /// `raw_tokens`: the raw vocabulary, id = index (as `Trainer.raw_tokens()` gives it; all 256
    /// single bytes included); `options`: the training's options (filtering uses MCE with their
    /// λ and ε).
    #[new]
    #[pyo3(signature = (raw_tokens, options=None, num_threads=None))]
    fn new(
        py: Python<'_>,
        raw_tokens: Vec<Vec<u8>>,
        options: Option<&Bound<'_, PyOptions>>,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        Self::build(py, options, num_threads, |o| crate::Filter::new(raw_tokens, o))
    }

    /// A filter over a vocabulary with its own ids, packed as `CoreTokenizer.packed()` gives it
    /// (unused ids allowed; usage has one entry per id up to the largest): a pass of an
    /// extension run on a machine of a distributed run (`Extender.pass_vocabulary()`, the
    /// base's options).
    #[staticmethod]
    #[pyo3(signature = (packed, options=None, num_threads=None))]
    fn from_packed(
        py: Python<'_>,
        packed: Packed,
        options: Option<&Bound<'_, PyOptions>>,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        let entries = unpack(&packed)?;
        Self::build(py, options, num_threads, |o| crate::Filter::with_ids(entries, o))
    }

    /// Size of the raw vocabulary.
    #[getter]
    fn raw_size(&self) -> usize {
        self.inner.vocab().len()
    }

    /// The usage of the raw vocabulary in `docs` (GIL released).
    fn usage_of(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>) -> PyResult<PyBlockUsage> {
        let bytes = str_bytes(&docs)?;
        let (f, pool) = (&self.inner, &self.pool);
        let inner = py.detach(|| guarded(|| pool.install(|| f.usage_of(&bytes))))??;
        Ok(PyBlockUsage { inner })
    }

    /// The raw tokens in raw-id order.
    fn raw_tokens<'py>(&self, py: Python<'py>) -> Vec<Bound<'py, PyBytes>> {
        self.inner.vocab().iter().map(|(_, t)| PyBytes::new(py, t)).collect()
    }
}
