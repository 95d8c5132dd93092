//! Result lists of token ids built from cached Python ints.

use pyo3::prelude::*;
use pyo3::types::PyList;

/// Ids below this get cached Python int objects (see `IdInts`).
const INT_CACHE_MAX: usize = 1 << 20;

/// Python int objects for the ids of one tokenizer, created once: building the result lists
/// then costs an increment per token instead of allocating a new int object.
///
/// A `OnceBox`, not a `PyOnceLock`: the latter detaches from the interpreter while one thread
/// makes the ints, and a process forked then (by another thread, which took the GIL meanwhile)
/// inherited the lock held with no thread to release it: its first encode waited forever. The
/// ints are made without any lock (two threads may both make them; one list is kept).
pub(crate) struct IdInts {
    ints: crate::once_box::OnceBox<Vec<Py<PyAny>>>,
    bound: usize,
}

impl IdInts {
    pub(crate) fn new(bound: usize) -> Self {
        IdInts { ints: crate::once_box::OnceBox::new(), bound: bound.min(INT_CACHE_MAX) }
    }

    fn cache<'a>(&'a self, py: Python<'_>) -> &'a Vec<Py<PyAny>> {
        self.ints.get_or_init(|| {
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
            // table slot holding its pointer, twice as far) are prefetched. 32 rather than 8:
            // the conversion's share of the samples (÷ the encoder's) falls from 0.18 to 0.11
            // with 2 threads (where the other core's encoding keeps the int objects out of the
            // caches) and from 0.12 to 0.075 with one (perf record, en and multi, o200k;
            // 16: 0.15 / 0.10, 64: no better than 32; benches/README.md, batch scaling).
            const AHEAD: usize = 32;
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
        let mut gc = Untracked::default();
        for ids in all {
            let list = self.list(py, ids)?;
            gc.untrack(list.as_any());
            out.append(list)?;
        }
        gc.track_items(&out);
        Ok(out)
    }
}

/// The result lists of a batch, kept out of Python's cyclic garbage collector while the batch
/// is built. CPython (3.11) collects its young containers as soon as 700 more were made than
/// freed: a batch of more than ~700 documents set off a collection in the middle of the batch
/// which read the int object of every id of the lists made so far, twice (the multi test set,
/// 1,122 documents: one collection of 6–8 ms per batch, ~7% of its CPU time; benches/README.md).
/// The lists are tracked again before the batch is returned, so they are collected as any
/// other list (a cycle made through them later is found); the next collection reads them once
/// if they are still alive then, as before.
#[derive(Default)]
pub(crate) struct Untracked {
    /// Slots of the result list whose item was untracked (in the order of `untrack` calls when
    /// the items are appended in order, else by `untrack_at`).
    slots: Vec<usize>,
    appended: usize,
}

impl Untracked {
    /// Untracks `obj`, the next item to be appended to the result list (if it is tracked).
    pub(crate) fn untrack(&mut self, obj: &Bound<'_, PyAny>) {
        let k = self.appended;
        self.appended += 1;
        self.untrack_at(obj, k);
    }

    /// Untracks `obj`, the item of slot `k` of the result list (if it is tracked).
    pub(crate) fn untrack_at(&mut self, obj: &Bound<'_, PyAny>, k: usize) {
        // SAFETY: `obj` is a live object; only a tracked GC object is untracked (a new container
        // that only this batch references).
        unsafe {
            if pyo3::ffi::PyObject_GC_IsTracked(obj.as_ptr()) == 1 {
                pyo3::ffi::PyObject_GC_UnTrack(obj.as_ptr().cast());
                self.slots.push(k);
            }
        }
    }

    /// Tracks again the items this untracked (the result list complete: no slot is NULL).
    pub(crate) fn track_items(self, out: &Bound<'_, PyList>) {
        for k in self.slots {
            if let Ok(item) = out.get_item(k) {
                // SAFETY: a live GC object this untracked; tracked only if still untracked
                // (PyObject_GC_Track aborts on a tracked object).
                unsafe {
                    if pyo3::ffi::PyObject_GC_IsTracked(item.as_ptr()) == 0 {
                        pyo3::ffi::PyObject_GC_Track(item.as_ptr().cast());
                    }
                }
            }
        }
    }
}
