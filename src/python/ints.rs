//! Result lists of token ids built from cached Python ints.

use pyo3::prelude::*;
use pyo3::types::PyList;

/// Ids below this get cached Python int objects (see `IdInts`).
const INT_CACHE_MAX: usize = 1 << 20;

/// Python int objects for the ids of one tokenizer, created once: building the result lists
/// then costs an increment per token instead of allocating a new int object.
pub(crate) struct IdInts {
    ints: pyo3::sync::PyOnceLock<Vec<Py<PyAny>>>,
    bound: usize,
}

impl IdInts {
    pub(crate) fn new(bound: usize) -> Self {
        IdInts { ints: pyo3::sync::PyOnceLock::new(), bound: bound.min(INT_CACHE_MAX) }
    }

    fn cache<'a>(&'a self, py: Python<'_>) -> &'a Vec<Py<PyAny>> {
        self.ints.get_or_init(py, || {
            (0..self.bound as u64)
                .map(|i| i.into_pyobject(py).map(|b| b.into_any().unbind()).expect("int"))
                .collect()
        })
    }

    /// A new reference to the Python int `v` (cached below the bound).
    pub(crate) fn int_ptr(&self, py: Python<'_>, v: usize) -> PyResult<*mut pyo3::ffi::PyObject> {
        Ok(match self.cache(py).get(v) {
            Some(o) => o.clone_ref(py).into_ptr(),
            None => v.into_pyobject(py)?.into_ptr(),
        })
    }

    /// A Python list of the ids.
    pub(crate) fn list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        let ints = self.cache(py);
        let n = ids.len() as pyo3::ffi::Py_ssize_t;
        // SAFETY: PyList_New returns a new list of n NULL slots (or NULL with an exception
        // set); every slot is filled exactly once below with a new (owned) reference.
        unsafe {
            let list = pyo3::ffi::PyList_New(n);
            if list.is_null() {
                return Err(PyErr::fetch(py));
            }
            let list = Bound::from_owned_ptr(py, list).cast_into_unchecked::<PyList>();
            // Building the list is one increment of each id's int object, a cache miss for
            // most ids beyond the most frequent: the object of the id AHEAD places on (and the
            // table slot holding its pointer, twice as far) are prefetched.
            const AHEAD: usize = 8;
            let table = ints.as_ptr();
            for (k, &id) in ids.iter().enumerate() {
                if let Some(&far) = ids.get(k + 2 * AHEAD) {
                    crate::mem::prefetch(table.wrapping_add(far as usize));
                }
                if let Some(o) = ids.get(k + AHEAD).and_then(|&near| ints.get(near as usize)) {
                    crate::mem::prefetch(o.as_ptr());
                }
                let obj = match ints.get(id as usize) {
                    Some(o) => o.clone_ref(py).into_ptr(),
                    None => id.into_pyobject(py)?.into_ptr(),
                };
                pyo3::ffi::PyList_SET_ITEM(list.as_ptr(), k as pyo3::ffi::Py_ssize_t, obj);
            }
            Ok(list)
        }
    }

    pub(crate) fn lists<'py>(&self, py: Python<'py>, all: &[Vec<u32>]) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for ids in all {
            out.append(self.list(py, ids)?)?;
        }
        Ok(out)
    }
}
