//! PyO3 bindings: the `cnfmce._core` extension module (behind the `python` feature). One file per
//! exposed class; `util` holds what they share. Heavy work runs with the thread detached from the
//! interpreter (GIL released); panics are caught and turned into `RuntimeError`.

mod counter;
mod filter;
mod ints;
mod offsets;
mod text;
mod tokenizer;
mod util;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// 1 where a byte is the first byte of its unit (SPEC section 2), else 0.
#[pyfunction]
fn unit_starts<'py>(py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
    let mut v = Vec::new();
    crate::units::unit_starts(data, &mut v);
    PyBytes::new(py, &v)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<tokenizer::PyCoreTokenizer>()?;
    m.add_class::<tokenizer::PySpecialMatcher>()?;
    m.add_class::<counter::PyCounter>()?;
    m.add_class::<filter::PyFilter>()?;
    m.add_function(wrap_pyfunction!(unit_starts, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
