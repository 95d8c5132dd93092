//! Token spans for `CoreTokenizer.encode*_with_offsets`: Python lists of `(start, end)` tuples.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::ints::IdInts;

/// A list of `(start, end)` tuples (their ints come from the tokenizer's int cache).
pub(crate) fn spans<'py>(
    py: Python<'py>,
    ints: &IdInts,
    offsets: &[(usize, usize)],
) -> PyResult<Bound<'py, PyList>> {
    // SAFETY: PyList_New / PyTuple_New return new objects with NULL slots (or NULL with an
    // exception set); each slot is filled exactly once with a new (owned) reference, and a
    // partly filled object is only ever released through its owner (`Bound`), which Python
    // allows for lists and tuples (NULL slots are skipped on deallocation).
    unsafe {
        let list = ffi::PyList_New(offsets.len() as ffi::Py_ssize_t);
        if list.is_null() {
            return Err(PyErr::fetch(py));
        }
        let list = Bound::from_owned_ptr(py, list).cast_into_unchecked::<PyList>();
        for (k, &(a, b)) in offsets.iter().enumerate() {
            let t = ffi::PyTuple_New(2);
            if t.is_null() {
                return Err(PyErr::fetch(py));
            }
            let t = Bound::from_owned_ptr(py, t);
            ffi::PyTuple_SET_ITEM(t.as_ptr(), 0, ints.int_ptr(py, a)?);
            ffi::PyTuple_SET_ITEM(t.as_ptr(), 1, ints.int_ptr(py, b)?);
            ffi::PyList_SET_ITEM(list.as_ptr(), k as ffi::Py_ssize_t, t.into_ptr());
        }
        Ok(list)
    }
}

/// `[(ids, spans), ...]`: one pair of lists per input.
pub(crate) fn pairs<'py>(
    py: Python<'py>,
    ints: &IdInts,
    all: &[(Vec<u32>, Vec<(usize, usize)>)],
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for r in all {
        out.append(pair(py, ints, r)?)?;
    }
    Ok(out)
}

/// `(ids, spans)` of one input.
pub(crate) fn pair<'py>(
    py: Python<'py>,
    ints: &IdInts,
    (ids, offs): &(Vec<u32>, Vec<(usize, usize)>),
) -> PyResult<Bound<'py, PyAny>> {
    Ok((ints.list(py, ids)?, spans(py, ints, offs)?).into_pyobject(py)?.into_any())
}
