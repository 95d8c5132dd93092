//! Token spans for `CoreTokenizer.encode*_with_offsets`: Python lists of `(start, end)` tuples.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use super::ints::IdInts;

/// A list of `(start, end)` tuples.
pub(crate) fn spans<'py>(py: Python<'py>, offsets: &[(usize, usize)]) -> PyResult<Bound<'py, PyList>> {
    let items = offsets
        .iter()
        .map(|&(a, b)| PyTuple::new(py, [a, b]))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// `[(ids, spans), ...]`: one pair of lists per input.
pub(crate) fn pairs<'py>(
    py: Python<'py>,
    ints: &IdInts,
    all: &[(Vec<u32>, Vec<(usize, usize)>)],
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (ids, offs) in all {
        out.append((ints.list(py, ids)?, spans(py, offs)?))?;
    }
    Ok(out)
}
