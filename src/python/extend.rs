//! `Extender`: a vocabulary extension run (`crate::Extender`); Python streams the documents of
//! each pass in batches, as for `Trainer`.

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use super::blocks::PyBlockUsage;
use super::options::PyOptions;
use super::tokenizer::PyCoreTokenizer;
use super::util::{guarded, pack_py, str_bytes, to_py, unpack, ForkSafePool, Packed, PyPacked};

/// An extension run (see `crate::Extender`).
#[pyclass(module = "cnfmce._core", name = "Extender", frozen)]
pub(crate) struct PyExtender {
    /// None once finished or closed.
    inner: Mutex<Option<crate::Extender>>,
    pool: ForkSafePool,
}

impl PyExtender {
    fn lock(&self) -> MutexGuard<'_, Option<crate::Extender>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut crate::Extender) -> Result<R, crate::Error> + Send) -> PyResult<R> {
        let mut g = self.lock();
        let e = g.as_mut().ok_or_else(|| PyValueError::new_err("the extension run is finished or closed"))?;
        let pool = &self.pool;
        py.detach(|| guarded(|| pool.install(|| f(e))))??.map_err(|e| to_py(py, e))
    }
}

#[pymethods]
impl PyExtender {
    /// `packed`: the base's `CoreTokenizer.packed()`; `specials`: its `(bytes, id)` pairs;
    /// `candidates`: counted candidates, best first.
    #[new]
    #[pyo3(signature = (packed, specials, options, candidates, new_tokens, num_threads=None, non_ascii_exponent=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        packed: Packed,
        specials: Vec<(Vec<u8>, u32)>,
        options: &Bound<'_, PyOptions>,
        candidates: Vec<Vec<u8>>,
        new_tokens: usize,
        num_threads: Option<usize>,
        non_ascii_exponent: Option<f64>,
    ) -> PyResult<Self> {
        let base = crate::Base { tokens: unpack(&packed)?, specials, options: options.get().inner };
        let pool = ForkSafePool::checked(num_threads)?;
        let inner = py
            .detach(|| {
                guarded(|| {
                    pool.install(|| {
                        let e = crate::Extender::new(base, candidates, new_tokens)?;
                        match non_ascii_exponent {
                            Some(x) => e.with_non_ascii_exponent(x),
                            None => Ok(e),
                        }
                    })
                })
            })??
            .map_err(|e| to_py(py, e))?;
        Ok(PyExtender { inner: Mutex::new(Some(inner)), pool })
    }

    /// The first new id.
    #[getter]
    fn first_new_id(&self) -> PyResult<u32> {
        let g = self.lock();
        Ok(g.as_ref().ok_or_else(|| PyValueError::new_err("the extension run is finished or closed"))?.first_new_id())
    }

    /// Candidates of the current pass.
    #[getter]
    fn num_candidates(&self) -> PyResult<usize> {
        let g = self.lock();
        Ok(g.as_ref().ok_or_else(|| PyValueError::new_err("the extension run is finished or closed"))?.candidates().len())
    }

    /// `("filter", None)`, `("refine", i)` or None when every pass is done.
    fn next_pass(&self) -> PyResult<Option<(&'static str, Option<usize>)>> {
        let g = self.lock();
        let e = g.as_ref().ok_or_else(|| PyValueError::new_err("the extension run is finished or closed"))?;
        Ok(e.next_pass().map(|s| match s {
            None => ("filter", None),
            Some(i) => ("refine", Some(i)),
        }))
    }

    /// The vocabulary of the pass in progress (the base's tokens and the candidates), packed as
    /// `CoreTokenizer.packed()`: what `Filter.from_packed(packed, options)` with the base's
    /// options rebuilds on a machine of a distributed run, whose `usage_of` gives what
    /// `add_usage` takes.
    fn pass_vocabulary<'py>(&self, py: Python<'py>) -> PyResult<PyPacked<'py>> {
        let g = self.lock();
        let e = g.as_ref().ok_or_else(|| PyValueError::new_err("the extension run is finished or closed"))?;
        Ok(pack_py(py, e.pass_vocab()))
    }

    /// Feeds a batch of documents to the pass in progress (GIL released).
    fn add(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>) -> PyResult<()> {
        let bytes = str_bytes(&docs)?;
        self.with(py, |e| e.add(&bytes))
    }

    /// The usage of `docs` under the current pass's vocabulary (distributed runs).
    fn usage_of(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>) -> PyResult<PyBlockUsage> {
        let bytes = str_bytes(&docs)?;
        let inner = self.with(py, |e| Ok(e.usage_of(&bytes)))?;
        Ok(PyBlockUsage { inner })
    }

    /// Adds usage computed elsewhere with the current pass's vocabulary.
    fn add_usage(&self, py: Python<'_>, usage: &Bound<'_, PyBlockUsage>) -> PyResult<()> {
        let u = usage.get().inner.clone();
        self.with(py, move |e| e.add_usage(&u))
    }

    /// Ends the pass: `{"candidates", "tokens", "bytes"}`.
    fn end_pass<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.with(py, |e| e.end_pass())?;
        let d = PyDict::new(py);
        d.set_item("candidates", st.candidates)?;
        d.set_item("tokens", st.tokens)?;
        d.set_item("bytes", st.bytes)?;
        Ok(d)
    }

    /// `(core tokenizer, first new id, pieces, report)`; `pieces`: one list of base ids per new
    /// token, in id order.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<(PyCoreTokenizer, u32, Bound<'py, PyList>, Bound<'py, PyDict>)> {
        let x = self.with(py, |e| e.finish())?;
        self.close();
        let pieces = PyList::empty(py);
        for p in &x.pieces {
            pieces.append(PyList::new(py, p)?)?;
        }
        let d = PyDict::new(py);
        d.set_item("new_tokens", x.new_tokens.len())?;
        d.set_item("used_new_tokens", x.used_new_tokens)?;
        let passes = PyList::empty(py);
        for p in &x.passes {
            let e = PyDict::new(py);
            e.set_item("candidates", p.candidates)?;
            e.set_item("tokens", p.tokens)?;
            e.set_item("bytes", p.bytes)?;
            passes.append(e)?;
        }
        d.set_item("passes", passes)?;
        d.set_item("warning", x.warning)?;
        Ok((PyCoreTokenizer::wrap(x.tokenizer), x.first_new_id, pieces, d))
    }

    /// Drops the run without finishing it.
    fn close(&self) {
        self.lock().take();
    }
}

/// The MCE encoding of each of `tokens` over the base (`CoreTokenizer.packed()`, its options).
#[pyfunction]
#[pyo3(signature = (packed, options, tokens))]
pub(crate) fn pieces_over<'py>(
    py: Python<'py>,
    packed: Packed,
    options: &Bound<'_, PyOptions>,
    tokens: Vec<Vec<u8>>,
) -> PyResult<Bound<'py, PyList>> {
    let base = crate::Base { tokens: unpack(&packed)?, specials: vec![], options: options.get().inner };
    let p = py.detach(|| guarded(|| crate::pieces_over(&base, &tokens)))?.map_err(|e| to_py(py, e))?;
    let out = PyList::empty(py);
    for x in &p {
        out.append(PyList::new(py, x)?)?;
    }
    Ok(out)
}
