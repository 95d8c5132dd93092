//! `CorpusReader` and `TextBlock`: corpus files read by the core (`crate::read`) into blocks of
//! UTF-8 documents that `CoreTokenizer.encode_block_flat` encodes, with no Python string per
//! document (`cnfmce tokenize`). Reading runs with the GIL released; one `read` call fills one
//! block, so the Python caller sees Ctrl-C between blocks.

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::util::guarded;
use crate::read::{Compression, CorpusReader, Kind, Stop, Texts};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Documents as one UTF-8 buffer (filled by `CorpusReader.read` and `push`).
#[pyclass(module = "cnfmce._core", name = "TextBlock", frozen)]
pub(crate) struct PyTextBlock {
    pub(crate) inner: Mutex<Texts>,
}

#[pymethods]
impl PyTextBlock {
    #[new]
    fn new() -> Self {
        PyTextBlock { inner: Mutex::new(Texts::default()) }
    }

    fn __len__(&self) -> usize {
        lock(&self.inner).len()
    }

    /// Characters (code points) of all documents, as Python's `len` counts them.
    #[getter]
    fn chars(&self) -> usize {
        lock(&self.inner).chars
    }

    /// UTF-8 bytes of all documents.
    #[getter]
    fn nbytes(&self) -> usize {
        lock(&self.inner).data.len()
    }

    /// Appends one document (UTF-8, checked).
    fn push(&self, doc: &[u8]) -> PyResult<()> {
        if std::str::from_utf8(doc).is_err() {
            return Err(pyo3::exceptions::PyValueError::new_err("a document must be valid UTF-8"));
        }
        lock(&self.inner).push(doc);
        Ok(())
    }

    /// Document `k` as bytes (for tests and error messages).
    fn get<'py>(&self, py: Python<'py>, k: usize) -> PyResult<Bound<'py, PyBytes>> {
        let t = lock(&self.inner);
        if k >= t.len() {
            return Err(pyo3::exceptions::PyIndexError::new_err("document index out of range"));
        }
        Ok(PyBytes::new(py, t.get(k)))
    }
}

/// One corpus file read by the core: JSON lines (a field's strings) or a whole text file,
/// plain or gzip-compressed.
#[pyclass(module = "cnfmce._core", name = "CorpusReader", frozen)]
pub(crate) struct PyCorpusReader {
    inner: Mutex<CorpusReader>,
}

#[pymethods]
impl PyCorpusReader {
    /// `text`: the whole file is one document (else JSON lines and `field`); `gzip`: the file
    /// is gzip data; `limit`: the most bytes a line (a text file) may inflate to. OSError when
    /// the file cannot be opened.
    #[new]
    #[pyo3(signature = (path, field, text=false, gzip=false, limit=u64::MAX))]
    fn new(path: &str, field: &[u8], text: bool, gzip: bool, limit: u64) -> PyResult<Self> {
        let kind = if text { Kind::Text } else { Kind::JsonLines };
        let c = if gzip { Compression::Gzip } else { Compression::None };
        let r = CorpusReader::open(path, kind, c, field, limit).map_err(|e| PyOSError::new_err(e.to_string()))?;
        Ok(PyCorpusReader { inner: Mutex::new(r) })
    }

    /// Reads documents into `block` until it holds `max_chars` characters or more, or
    /// `max_docs` documents (GIL released). Returns `(what, lineno, detail)`: `("full", 0, None)`, `("end", 0, None)`,
    /// `("unsure", lineno, line bytes)` (a line for `json.loads` to judge; the reader is past
    /// it), `("too_long", lineno, None)` (lineno 0 for a text file), or `("failed", 0,
    /// message)` (corrupt data, an I/O error, invalid UTF-8 in a text file).
    #[pyo3(signature = (block, max_chars, max_docs=usize::MAX))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        block: &PyTextBlock,
        max_chars: usize,
        max_docs: usize,
    ) -> PyResult<(&'static str, u64, Option<Bound<'py, PyAny>>)> {
        let stop = py.detach(|| {
            let mut r = lock(&self.inner);
            let mut t = lock(&block.inner);
            guarded(|| r.read(&mut t, max_chars, max_docs))
        })?;
        Ok(match stop {
            Stop::Full => ("full", 0, None),
            Stop::End => ("end", 0, None),
            Stop::Unsure { lineno, line } => ("unsure", lineno, Some(PyBytes::new(py, &line).into_any())),
            Stop::TooLong { lineno } => ("too_long", lineno, None),
            Stop::Failed(m) => ("failed", 0, Some(m.into_pyobject(py)?.into_any())),
        })
    }

    /// Counts a document the caller read from an "unsure" line.
    fn count_document(&self) {
        lock(&self.inner).count_document();
    }

    /// Bytes of the stored file read so far.
    #[getter]
    fn raw_position(&self) -> u64 {
        lock(&self.inner).raw_position()
    }

    /// Documents read so far.
    #[getter]
    fn documents(&self) -> u64 {
        lock(&self.inner).documents()
    }

    /// Lines read so far.
    #[getter]
    fn lines(&self) -> u64 {
        lock(&self.inner).lines()
    }
}
