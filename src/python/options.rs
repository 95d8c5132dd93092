//! `Options`: the encoding options (algorithm, λ, ε) as one checked Python value. Python's types
//! are checked here (what a number or a bool is); the values by `crate::Options::new`, the one
//! home of their rules. Everything that takes options from Python takes this object, made once.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyString, PyTuple};

use super::util::to_py;
use crate::Algorithm;

/// The encoding options of a tokenizer, checked when made.
#[pyclass(module = "cnfmce._core", name = "Options", frozen, eq)]
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct PyOptions {
    pub(crate) inner: crate::Options,
}

/// λ from Python: any `numbers.Real` (int, float, numpy floats and ints, `Fraction`, ...) but
/// not a bool (`TypeError` otherwise); a real too large for a float (`10**400`) is a
/// `ValueError`, like a negative λ.
fn read_lambda(v: &Bound<'_, PyAny>) -> PyResult<f64> {
    if let Ok(f) = v.cast::<PyFloat>() {
        return Ok(f.value());
    }
    let py = v.py();
    let real = py.import("numbers")?.getattr("Real")?;
    if v.is_instance_of::<PyBool>() || !v.is_instance(&real)? {
        let type_name = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        return Err(PyTypeError::new_err(format!("boundary_penalty must be a number, got {type_name}")));
    }
    match v.extract::<f64>() {
        Ok(f) => Ok(f),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
            let shown = v.str().map(|s| s.to_string()).unwrap_or_default();
            let digits = shown.trim_start_matches('-').len();
            let shown = if shown.len() <= 30 { shown } else { format!("{}...({digits} digits)", shown.chars().take(12).collect::<String>()) };
            Err(PyValueError::new_err(format!(
                "boundary_penalty {shown} is out of range: give a float (math.inf forbids partial crossings)"
            )))
        }
        Err(e) => Err(e),
    }
}

impl PyOptions {
    /// Options from Python values (types checked here, values by the core).
    pub(crate) fn from_values(
        algorithm: &Bound<'_, PyAny>,
        boundary_penalty: &Bound<'_, PyAny>,
        token_preference: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let py = algorithm.py();
        let alg = match algorithm.cast::<PyString>() {
            Ok(s) => s.to_str()?.parse::<Algorithm>().map_err(|e| to_py(py, e))?,
            Err(_) => {
                let shown = algorithm.repr().map(|r| r.to_string()).unwrap_or_default();
                return Err(PyValueError::new_err(format!("algorithm must be \"mce\" or \"fmm\", got {shown}")));
            }
        };
        let lambda = read_lambda(boundary_penalty)?;
        let Ok(tp) = token_preference.cast::<PyBool>() else {
            let shown = token_preference.repr().map(|r| r.to_string()).unwrap_or_default();
            return Err(PyTypeError::new_err(format!("token_preference must be True or False, got {shown}")));
        };
        let inner = crate::Options::new(alg, lambda, tp.is_true()).map_err(|e| to_py(py, e))?;
        Ok(PyOptions { inner })
    }

    /// The options an optional argument stands for (None: the defaults).
    pub(crate) fn or_default(o: Option<&Bound<'_, PyOptions>>) -> crate::Options {
        o.map_or_else(crate::Options::default, |o| o.get().inner)
    }
}

#[pymethods]
impl PyOptions {
    /// All three are required (None is not a value of any of them); `Options.default()` gives
    /// the defaults.
    #[new]
    fn new(
        algorithm: &Bound<'_, PyAny>,
        boundary_penalty: &Bound<'_, PyAny>,
        token_preference: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        PyOptions::from_values(algorithm, boundary_penalty, token_preference)
    }

    /// algorithm="mce", boundary_penalty=DEFAULT_BOUNDARY_PENALTY, token_preference=True.
    #[staticmethod]
    fn default() -> Self {
        PyOptions { inner: crate::Options::default() }
    }

    #[getter]
    fn algorithm(&self) -> &'static str {
        self.inner.algorithm().name()
    }

    #[getter]
    fn boundary_penalty(&self) -> f64 {
        self.inner.boundary_penalty()
    }

    #[getter]
    fn token_preference(&self) -> bool {
        self.inner.token_preference()
    }

    fn __getnewargs__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (self.algorithm(), self.boundary_penalty(), self.token_preference()).into_pyobject(py)
    }

    fn __repr__(&self) -> String {
        let lam = self.boundary_penalty();
        let lam = if lam.is_infinite() { "inf".to_string() } else { format!("{lam:?}") };
        format!(
            "Options(algorithm={:?}, boundary_penalty={lam}, token_preference={})",
            self.algorithm(),
            if self.token_preference() { "True" } else { "False" }
        )
    }
}
