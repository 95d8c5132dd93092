//! cnfmce: Counting-and-Filtering vocabularies and Min-Cost Encoding.
//!
//! The core is plain Rust (one idea per module, named after the paper); this file holds only the
//! module list and, behind the `python` feature, the PyO3 bindings.

pub mod automaton;
pub mod count;
pub mod error;
pub mod filter;
pub mod mce;
pub mod mem;
pub mod probe;
pub mod spill;
pub mod tokenizer;
pub mod trie;
pub mod units;
pub mod vocab;

pub use error::{show_bytes, Error};


/// PyO3 bindings: the `cnfmce._core` extension module. Heavy work runs with the thread detached
/// from the interpreter (GIL released); panics are caught and turned into `RuntimeError`.
#[cfg(feature = "python")]
mod bindings {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use pyo3::exceptions::{PyKeyError, PyOSError, PyRuntimeError, PyTypeError, PyValueError};
    use pyo3::prelude::*;
    use pyo3::types::{PyBytes, PyList, PyString};

    use crate::mce::{Algorithm, Options};
    use crate::tokenizer::{SpecialMatcher, Tokenizer};
    use crate::Error;

    /// Texts shorter than this are encoded without releasing the GIL (the release costs more).
    const DETACH_BYTES: usize = 16 * 1024;

    fn to_py(py: Python<'_>, e: Error) -> PyErr {
        match e {
            Error::Value(m) => PyValueError::new_err(m),
            Error::Io(m) => PyOSError::new_err(m),
            Error::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"),
            Error::UnknownId(id) => unknown_id(py, &id.to_string()),
        }
    }

    /// `cnfmce.errors.UnknownIdError` (a KeyError and a ValueError) naming the id.
    fn unknown_id(py: Python<'_>, id: &str) -> PyErr {
        let msg = format!("unknown token id {id}");
        match py.import("cnfmce.errors").and_then(|m| m.getattr("UnknownIdError")) {
            Ok(cls) => match cls.cast_into() {
                Ok(t) => PyErr::from_type(t, msg),
                Err(_) => PyKeyError::new_err(msg),
            },
            Err(_) => PyKeyError::new_err(msg),
        }
    }

    /// Runs `f`, turning a panic into a `RuntimeError` instead of letting it reach Python.
    fn guarded<T>(f: impl FnOnce() -> T) -> PyResult<T> {
        catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            PyRuntimeError::new_err(format!("internal error in cnfmce core: {msg}"))
        })
    }

    fn parse_algorithm(s: &str) -> PyResult<Algorithm> {
        match s {
            "mce" => Ok(Algorithm::Mce),
            "fmm" => Ok(Algorithm::Fmm),
            _ => Err(PyValueError::new_err(format!(
                "algorithm must be \"mce\" or \"fmm\", got {s:?}"
            ))),
        }
    }

    /// Reads a sequence of ids (ints, numpy integers, ...) as i64; values beyond i64 are reported
    /// as unknown ids.
    fn read_ids(ids: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
        if ids.is_instance_of::<PyString>() || ids.is_instance_of::<PyBytes>() {
            return Err(PyTypeError::new_err("ids must be a sequence of integers, not a string"));
        }
        let mut out = Vec::with_capacity(ids.len().unwrap_or(0));
        for item in ids.try_iter().map_err(|_| {
            PyTypeError::new_err(format!(
                "ids must be a sequence of integers, got {}",
                ids.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
        })? {
            let item = item?;
            if item.is_instance_of::<pyo3::types::PyBool>() {
                return Err(PyTypeError::new_err("ids must be integers, got bool"));
            }
            match item.extract::<i64>() {
                Ok(v) => out.push(v),
                Err(e) => {
                    if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(ids.py()) {
                        let shown = item.str().map(|s| s.to_string()).unwrap_or_default();
                        return Err(unknown_id(ids.py(), &shown));
                    } else {
                        return Err(PyTypeError::new_err(format!(
                            "ids must be integers, got {}",
                            item.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                        )));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The characters of a Python `str` as stored by CPython, read without asking Python for its
    /// UTF-8 copy: that copy is made under the GIL (serially) and kept alive with the string,
    /// while the conversion below runs in the worker threads.
    enum StrData<'a> {
        Utf8(&'a [u8]),
        Ucs1(&'a [u8]),
        Ucs2(&'a [u16]),
        Ucs4(&'a [u32]),
    }

    impl StrData<'_> {
        /// About how many UTF-8 bytes the text has (to schedule long texts first).
        fn utf8_size_hint(&self) -> usize {
            match self {
                StrData::Utf8(b) => b.len(),
                StrData::Ucs1(b) => b.len(),
                StrData::Ucs2(w) => w.len() * 3,
                StrData::Ucs4(w) => w.len() * 4,
            }
        }

        /// The UTF-8 bytes (borrowed for ASCII, else written to `buf`); `Err` on a lone
        /// surrogate, which UTF-8 cannot hold.
        fn utf8<'b>(&'b self, buf: &'b mut Vec<u8>) -> Result<&'b [u8], ()> {
            /// Appends the UTF-8 of code points (`Err` on a surrogate).
            fn push_all(buf: &mut Vec<u8>, cps: impl ExactSizeIterator<Item = u32>) -> Result<(), ()> {
                buf.clear();
                buf.reserve(cps.len() * 2);
                for c in cps {
                    if c < 0x80 {
                        buf.push(c as u8);
                    } else {
                        let ch = char::from_u32(c).ok_or(())?;
                        buf.extend_from_slice(ch.encode_utf8(&mut [0u8; 4]).as_bytes());
                    }
                }
                Ok(())
            }
            match self {
                StrData::Utf8(b) => return Ok(b),
                StrData::Ucs1(b) => push_all(buf, b.iter().map(|&c| c as u32))?,
                StrData::Ucs2(w) => push_all(buf, w.iter().map(|&c| c as u32))?,
                StrData::Ucs4(w) => push_all(buf, w.iter().copied())?,
            }
            Ok(buf)
        }
    }

    fn str_data<'a>(s: &'a Bound<'_, PyString>) -> PyResult<StrData<'a>> {
        use pyo3::types::string::PyStringData;
        // SAFETY: CPython's compact string representation; the data lives as long as `s`.
        match unsafe { s.data() } {
            Ok(PyStringData::Ucs1(b)) if b.is_ascii() => Ok(StrData::Utf8(b)),
            Ok(PyStringData::Ucs1(b)) => Ok(StrData::Ucs1(b)),
            Ok(PyStringData::Ucs2(w)) => Ok(StrData::Ucs2(w)),
            Ok(PyStringData::Ucs4(w)) => Ok(StrData::Ucs4(w)),
            // Any other representation: Python's own UTF-8 view.
            Err(_) => s.to_str().map(|t| StrData::Utf8(t.as_bytes())).map_err(|_| surrogate_error(None)),
        }
    }

    fn surrogate_error(k: Option<usize>) -> PyErr {
        let which = k.map_or("text".to_string(), |k| format!("text {k}"));
        PyValueError::new_err(format!(
            "{which} is not valid Unicode (it holds lone surrogates); encode it with \
             encode_bytes(text.encode('utf-8', 'surrogatepass')) if that is intended"
        ))
    }

    /// Ids below this get cached Python int objects (see `IdInts`).
    const INT_CACHE_MAX: usize = 1 << 20;

    /// Python int objects for the ids of one tokenizer, created once: building the result lists
    /// then costs an increment per token instead of allocating a new int object.
    struct IdInts {
        ints: pyo3::sync::PyOnceLock<Vec<Py<PyAny>>>,
        bound: usize,
    }

    impl IdInts {
        fn new(bound: usize) -> Self {
            IdInts { ints: pyo3::sync::PyOnceLock::new(), bound: bound.min(INT_CACHE_MAX) }
        }

        /// A Python list of the ids.
        fn list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
            let ints = self.ints.get_or_init(py, || {
                (0..self.bound as u64)
                    .map(|i| i.into_pyobject(py).map(|b| b.into_any().unbind()).expect("int"))
                    .collect()
            });
            let n = ids.len() as pyo3::ffi::Py_ssize_t;
            // SAFETY: PyList_New returns a new list of n NULL slots (or NULL with an exception
            // set); every slot is filled exactly once below with a new (owned) reference.
            unsafe {
                let list = pyo3::ffi::PyList_New(n);
                if list.is_null() {
                    return Err(PyErr::fetch(py));
                }
                let list = Bound::from_owned_ptr(py, list).cast_into_unchecked::<PyList>();
                for (k, &id) in ids.iter().enumerate() {
                    let obj = match ints.get(id as usize) {
                        Some(o) => o.clone_ref(py).into_ptr(),
                        None => id.into_pyobject(py)?.into_ptr(),
                    };
                    pyo3::ffi::PyList_SET_ITEM(list.as_ptr(), k as pyo3::ffi::Py_ssize_t, obj);
                }
                Ok(list)
            }
        }

        fn lists<'py>(&self, py: Python<'py>, all: &[Vec<u32>]) -> PyResult<Bound<'py, PyList>> {
            let out = PyList::empty(py);
            for ids in all {
                out.append(self.list(py, ids)?)?;
            }
            Ok(out)
        }
    }

    /// The special tokens that `encode` may match (built by `CoreTokenizer.matcher`).
    #[pyclass(module = "cnfmce._core", name = "SpecialMatcher", frozen)]
    struct PySpecialMatcher {
        inner: SpecialMatcher,
    }

    /// The Rust tokenizer behind `cnfmce.Tokenizer`.
    #[pyclass(module = "cnfmce._core", name = "CoreTokenizer", frozen)]
    struct PyCoreTokenizer {
        inner: Tokenizer,
        ints: IdInts,
    }

    impl PyCoreTokenizer {
        fn wrap(inner: Tokenizer) -> Self {
            let bound = inner
                .specials()
                .iter()
                .map(|s| s.1 as usize + 1)
                .max()
                .unwrap_or(0)
                .max(inner.vocab().id_bound());
            PyCoreTokenizer { inner, ints: IdInts::new(bound) }
        }

        /// Builds the core tokenizer with the GIL released.
        fn build(
            py: Python<'_>,
            entries: Vec<(u32, Vec<u8>)>,
            specials: Vec<(Vec<u8>, u32)>,
            options: Options,
        ) -> PyResult<Self> {
            let inner = py
                .detach(|| guarded(|| Tokenizer::new(entries, specials, options)))?
                .map_err(|e| to_py(py, e))?;
            Ok(PyCoreTokenizer::wrap(inner))
        }

        fn encode_detached<'py>(
            &self,
            py: Python<'py>,
            data: &[u8],
            allowed: Option<&Bound<'_, PySpecialMatcher>>,
        ) -> PyResult<Bound<'py, PyList>> {
            let m = allowed.map(|a| &a.get().inner);
            let ids = if data.len() < DETACH_BYTES {
                guarded(|| self.inner.encode(data, m))?
            } else {
                py.detach(|| guarded(|| self.inner.encode(data, m)))?
            };
            self.ints.list(py, &ids)
        }

        fn batch<'py, T: AsRef<[u8]> + Sync>(
            &self,
            py: Python<'py>,
            texts: &[T],
            allowed: Option<&Bound<'_, PySpecialMatcher>>,
            num_threads: Option<usize>,
        ) -> PyResult<Bound<'py, PyList>> {
            let m = allowed.map(|a| &a.get().inner);
            let all = py.detach(|| guarded(|| in_pool(num_threads, || self.inner.encode_batch(texts, m))))??;
            self.ints.lists(py, &all)
        }
    }

    #[pymethods]
    impl PyCoreTokenizer {
        /// tokens: the regular tokens; ids: their ids (None: the list index);
        /// specials: (bytes, id) pairs.
        #[new]
        #[pyo3(signature = (tokens, ids=None, specials=Vec::new(), algorithm="mce", boundary_penalty=0.05, token_preference=true))]
        fn new(
            py: Python<'_>,
            tokens: Vec<Bound<'_, PyBytes>>,
            ids: Option<Vec<u32>>,
            specials: Vec<(Vec<u8>, u32)>,
            algorithm: &str,
            boundary_penalty: f64,
            token_preference: bool,
        ) -> PyResult<Self> {
            let algorithm = parse_algorithm(algorithm)?;
            if let Some(ids) = &ids {
                if ids.len() != tokens.len() {
                    return Err(PyValueError::new_err("tokens and ids differ in length"));
                }
            }
            let entries: Vec<(u32, Vec<u8>)> = tokens
                .iter()
                .enumerate()
                .map(|(k, b)| {
                    let id = ids.as_ref().map_or(k as u32, |v| v[k]);
                    (id, b.as_bytes().to_vec())
                })
                .collect();
            if ids.is_none() && tokens.len() > u32::MAX as usize {
                return Err(PyValueError::new_err("too many tokens"));
            }
            Self::build(py, entries, specials, Options { algorithm, boundary_penalty, token_preference })
        }

        /// A tokenizer from packed tokens: `data` is all token bytes concatenated, `lengths` one
        /// little-endian u32 per token, `ids` (optional) one little-endian u32 per token.
        #[staticmethod]
        #[pyo3(signature = (data, lengths, ids=None, specials=Vec::new(), algorithm="mce", boundary_penalty=0.05, token_preference=true))]
        fn from_packed(
            py: Python<'_>,
            data: &[u8],
            lengths: &[u8],
            ids: Option<&[u8]>,
            specials: Vec<(Vec<u8>, u32)>,
            algorithm: &str,
            boundary_penalty: f64,
            token_preference: bool,
        ) -> PyResult<Self> {
            let algorithm = parse_algorithm(algorithm)?;
            let u32s = |b: &[u8], what: &str| -> PyResult<Vec<u32>> {
                if b.len() % 4 != 0 {
                    return Err(PyValueError::new_err(format!("packed {what} is not a whole number of u32")));
                }
                Ok(b.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
            };
            let lens = u32s(lengths, "lengths")?;
            let ids = match ids {
                Some(b) => Some(u32s(b, "ids")?),
                None => None,
            };
            if let Some(ids) = &ids {
                if ids.len() != lens.len() {
                    return Err(PyValueError::new_err("packed ids and lengths differ in count"));
                }
            }
            let total: u64 = lens.iter().map(|&l| l as u64).sum();
            if total != data.len() as u64 {
                return Err(PyValueError::new_err(format!(
                    "packed lengths add up to {total} bytes but the data has {}",
                    data.len()
                )));
            }
            let mut entries = Vec::with_capacity(lens.len());
            let mut at = 0usize;
            for (k, &l) in lens.iter().enumerate() {
                let id = ids.as_ref().map_or(k as u32, |v| v[k]);
                entries.push((id, data[at..at + l as usize].to_vec()));
                at += l as usize;
            }
            Self::build(py, entries, specials, Options { algorithm, boundary_penalty, token_preference })
        }

        /// The regular tokens packed: (concatenated bytes, u32 LE lengths, u32 LE ids), id order.
        fn packed<'py>(&self, py: Python<'py>) -> (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>) {
            let v = self.inner.vocab();
            let mut data = Vec::new();
            let mut lens = Vec::with_capacity(v.len() * 4);
            let mut ids = Vec::with_capacity(v.len() * 4);
            for (id, t) in v.iter() {
                data.extend_from_slice(t);
                lens.extend_from_slice(&(t.len() as u32).to_le_bytes());
                ids.extend_from_slice(&id.to_le_bytes());
            }
            (PyBytes::new(py, &data), PyBytes::new(py, &lens), PyBytes::new(py, &ids))
        }

        /// A new tokenizer over the same vocabulary with other options.
        #[pyo3(signature = (algorithm, boundary_penalty, token_preference))]
        fn with_options(
            &self,
            py: Python<'_>,
            algorithm: &str,
            boundary_penalty: f64,
            token_preference: bool,
        ) -> PyResult<Self> {
            let algorithm = parse_algorithm(algorithm)?;
            let entries: Vec<(u32, Vec<u8>)> =
                self.inner.vocab().iter().map(|(i, t)| (i, t.to_vec())).collect();
            let specials = self.inner.specials().to_vec();
            Self::build(py, entries, specials, Options { algorithm, boundary_penalty, token_preference })
        }

        #[pyo3(signature = (text, allowed=None))]
        fn encode<'py>(
            &self,
            py: Python<'py>,
            text: &Bound<'_, PyString>,
            allowed: Option<&Bound<'_, PySpecialMatcher>>,
        ) -> PyResult<Bound<'py, PyList>> {
            let data = str_data(text)?;
            let mut buf = Vec::new();
            let bytes = data.utf8(&mut buf).map_err(|_| surrogate_error(None))?;
            self.encode_detached(py, bytes, allowed)
        }

        #[pyo3(signature = (data, allowed=None))]
        fn encode_bytes<'py>(
            &self,
            py: Python<'py>,
            data: &[u8],
            allowed: Option<&Bound<'_, PySpecialMatcher>>,
        ) -> PyResult<Bound<'py, PyList>> {
            self.encode_detached(py, data, allowed)
        }

        #[pyo3(signature = (texts, allowed=None, num_threads=None))]
        fn encode_batch<'py>(
            &self,
            py: Python<'py>,
            texts: Vec<Bound<'_, PyString>>,
            allowed: Option<&Bound<'_, PySpecialMatcher>>,
            num_threads: Option<usize>,
        ) -> PyResult<Bound<'py, PyList>> {
            let datas: Vec<StrData<'_>> = texts.iter().map(str_data).collect::<PyResult<_>>()?;
            let m = allowed.map(|a| &a.get().inner);
            let tok = &self.inner;
            let sizes: Vec<usize> = datas.iter().map(StrData::utf8_size_hint).collect();
            let run = || -> Result<Vec<Vec<u32>>, usize> {
                crate::tokenizer::par_map_largest_first(
                    &sizes,
                    || (crate::mce::Scratch::default(), Vec::new()),
                    |(scratch, buf), k| {
                        let bytes = datas[k].utf8(buf).map_err(|_| k)?;
                        let mut out = Vec::with_capacity(bytes.len() / 4 + 1);
                        tok.encode_into(bytes, m, scratch, &mut out);
                        Ok(out)
                    },
                )
                .into_iter()
                .collect()
            };
            let all = py
                .detach(|| guarded(|| in_pool(num_threads, run)))??
                .map_err(|k| surrogate_error(Some(k)))?;
            self.ints.lists(py, &all)
        }

        #[pyo3(signature = (items, allowed=None, num_threads=None))]
        fn encode_bytes_batch<'py>(
            &self,
            py: Python<'py>,
            items: Vec<Bound<'_, PyBytes>>,
            allowed: Option<&Bound<'_, PySpecialMatcher>>,
            num_threads: Option<usize>,
        ) -> PyResult<Bound<'py, PyList>> {
            let data: Vec<&[u8]> = items.iter().map(|b| b.as_bytes()).collect();
            self.batch(py, &data, allowed, num_threads)
        }

        fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
            let ids = read_ids(ids)?;
            let out = self.inner.decode(&ids).map_err(|e| to_py(py, e))?;
            Ok(PyBytes::new(py, &out))
        }

        fn id_to_token<'py>(&self, py: Python<'py>, id: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
            if id.is_instance_of::<pyo3::types::PyBool>() {
                return Err(PyTypeError::new_err("a token id must be an integer, got bool"));
            }
            let id = match id.extract::<i64>() {
                Ok(v) => v,
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
                    let shown = id.str().map(|s| s.to_string()).unwrap_or_default();
                    return Err(unknown_id(py, &shown));
                }
                Err(_) => return Err(PyTypeError::new_err("a token id must be an integer")),
            };
            let b = u32::try_from(id)
                .ok()
                .and_then(|i| self.inner.id_bytes(i))
                .ok_or_else(|| to_py(py, Error::UnknownId(id)))?;
            Ok(PyBytes::new(py, b))
        }

        fn token_to_id(&self, token: &[u8]) -> Option<u32> {
            self.inner.token_to_id(token)
        }

        /// A matcher for the special tokens with these ids (None: all of them).
        #[pyo3(signature = (ids=None))]
        fn matcher(&self, py: Python<'_>, ids: Option<Vec<u32>>) -> PyResult<PySpecialMatcher> {
            let inner = self.inner.matcher(ids.as_deref()).map_err(|e| to_py(py, e))?;
            Ok(PySpecialMatcher { inner })
        }

        /// The regular vocabulary as (ids, tokens), in id order.
        fn tokens<'py>(&self, py: Python<'py>) -> (Vec<u32>, Vec<Bound<'py, PyBytes>>) {
            let mut ids = Vec::with_capacity(self.inner.vocab().len());
            let mut toks = Vec::with_capacity(self.inner.vocab().len());
            for (id, t) in self.inner.vocab().iter() {
                ids.push(id);
                toks.push(PyBytes::new(py, t));
            }
            (ids, toks)
        }

        /// The special tokens as (bytes, id) pairs in id order.
        fn specials<'py>(&self, py: Python<'py>) -> Vec<(Bound<'py, PyBytes>, u32)> {
            self.inner.specials().iter().map(|(b, id)| (PyBytes::new(py, b), *id)).collect()
        }

        #[getter]
        fn algorithm(&self) -> &'static str {
            match self.inner.options().algorithm {
                Algorithm::Mce => "mce",
                Algorithm::Fmm => "fmm",
            }
        }

        #[getter]
        fn boundary_penalty(&self) -> f64 {
            self.inner.options().boundary_penalty
        }

        #[getter]
        fn token_preference(&self) -> bool {
            self.inner.options().token_preference
        }

        /// Ids in use, special tokens included.
        #[getter]
        fn num_ids(&self) -> usize {
            self.inner.num_ids()
        }

        /// Number of regular (non-special) tokens.
        #[getter]
        fn num_regular(&self) -> usize {
            self.inner.vocab().len()
        }

        /// One past the largest id (regular or special).
        #[getter]
        fn id_bound(&self) -> usize {
            let s = self.inner.specials().iter().map(|s| s.1 as usize + 1).max().unwrap_or(0);
            s.max(self.inner.vocab().id_bound())
        }

        #[getter]
        fn max_token_len(&self) -> usize {
            self.inner.vocab().max_len()
        }

        /// Approximate heap bytes of the vocabulary structures.
        #[getter]
        fn heap_bytes(&self) -> usize {
            self.inner.vocab().heap_bytes()
        }
    }

    /// Runs `f` on the global rayon pool (`num_threads` None or 0) or on a pool of that many
    /// threads (the batch encoders' `num_threads`).
    fn in_pool<R: Send>(num_threads: Option<usize>, f: impl FnOnce() -> R + Send) -> PyResult<R> {
        match num_threads {
            None | Some(0) => Ok(f()),
            Some(n) => Ok(make_pool(Some(n))?.install(f)),
        }
    }

    fn make_pool(num_threads: Option<usize>) -> PyResult<rayon::ThreadPool> {
        let mut b = rayon::ThreadPoolBuilder::new();
        if let Some(n) = num_threads {
            if n == 0 {
                return Err(PyValueError::new_err("num_threads must be positive"));
            }
            b = b.num_threads(n);
        }
        b.build().map_err(|e| PyRuntimeError::new_err(format!("cannot start threads: {e}")))
    }

    fn str_bytes<'a>(docs: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a [u8]>> {
        docs.iter()
            .enumerate()
            .map(|(k, d)| {
                d.to_str().map(|s| s.as_bytes()).map_err(|_| {
                    PyValueError::new_err(format!("document {k} is not valid Unicode (lone surrogates)"))
                })
            })
            .collect()
    }

    /// CNF counting over rounds (Algorithm 1); the Python side feeds batches of documents.
    #[pyclass(module = "cnfmce._core", name = "Counter", frozen)]
    struct PyCounter {
        inner: std::sync::Mutex<crate::count::Counter>,
        pool: rayon::ThreadPool,
    }

    impl PyCounter {
        fn lock(&self) -> std::sync::MutexGuard<'_, crate::count::Counter> {
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
            Ok(PyCounter { inner: std::sync::Mutex::new(c), pool: make_pool(num_threads)? })
        }

        fn begin_round(&self, py: Python<'_>) -> PyResult<()> {
            let mut g = self.lock();
            let c = &mut *g;
            py.detach(|| guarded(|| c.begin_round()))?.map_err(|e| to_py(py, e))
        }

        /// Counts a batch of documents with the GIL released.
        fn add(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>) -> PyResult<()> {
            let bytes = str_bytes(&docs)?;
            let mut g = self.lock();
            let c = &mut *g;
            let pool = &self.pool;
            py.detach(|| guarded(|| pool.install(|| c.add(&bytes))))?.map_err(|e| to_py(py, e))
        }

        /// Ends the round; returns its statistics as a dict.
        fn end_round<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
            let mut g = self.lock();
            let c = &mut *g;
            let pool = &self.pool;
            let st = py.detach(|| guarded(|| pool.install(|| c.end_round())))?.map_err(|e| to_py(py, e))?;
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
        fn result<'py>(&self, py: Python<'py>) -> (Vec<Bound<'py, PyBytes>>, Vec<u64>) {
            let c = self.lock();
            let r = c.result();
            (r.iter().map(|(k, _)| PyBytes::new(py, k)).collect(), r.iter().map(|e| e.1).collect())
        }
    }

    /// CNF filtering: usage counts of the raw vocabulary under MCE.
    #[pyclass(module = "cnfmce._core", name = "Filter", frozen)]
    struct PyFilter {
        inner: std::sync::Mutex<crate::filter::Filter>,
        pool: rayon::ThreadPool,
    }

    impl PyFilter {
        /// Ranks the counts into the raw vocabulary and builds its encoder (GIL released).
        fn build(
            py: Python<'_>,
            pairs: Vec<(Vec<u8>, u64)>,
            raw_vocab_size: Option<usize>,
            boundary_penalty: f64,
            token_preference: bool,
            num_threads: Option<usize>,
        ) -> PyResult<Self> {
            if boundary_penalty.is_nan() || boundary_penalty < 0.0 {
                return Err(PyValueError::new_err("boundary_penalty must be >= 0"));
            }
            let options = Options { algorithm: Algorithm::Mce, boundary_penalty, token_preference };
            let pool = make_pool(num_threads)?;
            let f = py
                .detach(|| {
                    guarded(|| {
                        pool.install(|| {
                            let raw = crate::filter::Filter::rank(pairs, raw_vocab_size)?;
                            crate::filter::Filter::new(raw, options)
                        })
                    })
                })?
                .map_err(|e| to_py(py, e))?;
            Ok(PyFilter { inner: std::sync::Mutex::new(f), pool })
        }
    }

    #[pymethods]
    impl PyFilter {
        /// The raw vocabulary from counts (tokens[i] has counts[i]): ranked by count, ties by
        /// bytes, the first raw_vocab_size kept, missing single bytes appended.
        #[new]
        #[pyo3(signature = (tokens, counts, raw_vocab_size=None, boundary_penalty=0.05, token_preference=true, num_threads=None))]
        fn new(
            py: Python<'_>,
            tokens: Vec<Bound<'_, PyBytes>>,
            counts: Vec<u64>,
            raw_vocab_size: Option<usize>,
            boundary_penalty: f64,
            token_preference: bool,
            num_threads: Option<usize>,
        ) -> PyResult<Self> {
            if tokens.len() != counts.len() {
                return Err(PyValueError::new_err("tokens and counts differ in length"));
            }
            let pairs: Vec<(Vec<u8>, u64)> =
                tokens.iter().zip(counts).map(|(b, c)| (b.as_bytes().to_vec(), c)).collect();
            drop(tokens);
            Self::build(py, pairs, raw_vocab_size, boundary_penalty, token_preference, num_threads)
        }

        /// The filter over the raw vocabulary of a finished counter (no copy through Python).
        #[staticmethod]
        #[pyo3(signature = (counter, boundary_penalty=0.05, token_preference=true, num_threads=None))]
        fn from_counter(
            py: Python<'_>,
            counter: &Bound<'_, PyCounter>,
            boundary_penalty: f64,
            token_preference: bool,
            num_threads: Option<usize>,
        ) -> PyResult<Self> {
            let c = counter.get();
            let pairs: Vec<(Vec<u8>, u64)> =
                c.lock().result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
            Self::build(py, pairs, None, boundary_penalty, token_preference, num_threads)
        }

        /// Size of the raw vocabulary (missing single bytes included).
        #[getter]
        fn raw_size(&self) -> usize {
            self.inner.lock().unwrap_or_else(|p| p.into_inner()).vocab().len()
        }

        /// Encodes a batch of documents and adds their token usage (GIL released).
        fn add(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>) -> PyResult<()> {
            let bytes = str_bytes(&docs)?;
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let f = &mut *g;
            let pool = &self.pool;
            py.detach(|| guarded(|| pool.install(|| f.add(&bytes))))
        }

        /// (tokens produced, bytes encoded) so far.
        fn totals(&self) -> (u64, u64) {
            self.inner.lock().unwrap_or_else(|p| p.into_inner()).totals()
        }

        /// Usage count of every raw id.
        fn usage(&self) -> Vec<u64> {
            self.inner.lock().unwrap_or_else(|p| p.into_inner()).usage()
        }

        /// The k tokens of the final vocabulary in id order: (tokens, usage, raw ids).
        fn select<'py>(&self, py: Python<'py>, k: usize) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<u64>, Vec<u32>)> {
            let f = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let sel = f.select(k).map_err(|e| to_py(py, e))?;
            Ok((
                sel.iter().map(|s| PyBytes::new(py, &s.token)).collect(),
                sel.iter().map(|s| s.usage).collect(),
                sel.iter().map(|s| s.raw_id).collect(),
            ))
        }
    }

    /// 1 where a byte is the first byte of its unit (SPEC section 2), else 0.
    #[pyfunction]
    fn unit_starts<'py>(py: Python<'py>, data: &[u8]) -> Bound<'py, PyBytes> {
        let mut v = Vec::new();
        crate::units::unit_starts(data, &mut v);
        PyBytes::new(py, &v)
    }

    #[pymodule]
    fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add_class::<PyCoreTokenizer>()?;
        m.add_class::<PySpecialMatcher>()?;
        m.add_class::<PyCounter>()?;
        m.add_class::<PyFilter>()?;
        m.add_function(wrap_pyfunction!(unit_starts, m)?)?;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        Ok(())
    }
}
