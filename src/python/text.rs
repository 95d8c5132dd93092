//! Python `str` data read in place (CPython's compact representations) and turned into UTF-8 in
//! the worker threads.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

/// The characters of a Python `str` as stored by CPython, read without asking Python for its
/// UTF-8 copy: that copy is made under the GIL (serially) and kept alive with the string,
/// while the conversion below runs in the worker threads.
pub(crate) enum StrData<'a> {
    Utf8(&'a [u8]),
    Ucs1(&'a [u8]),
    Ucs2(&'a [u16]),
    Ucs4(&'a [u32]),
}

impl<'a> StrData<'a> {
    /// About how many UTF-8 bytes the text has (to schedule long texts first).
    pub(crate) fn utf8_size_hint(&self) -> usize {
        match self {
            StrData::Utf8(b) => b.len(),
            StrData::Ucs1(b) => b.len(),
            StrData::Ucs2(w) => w.len() * 3,
            StrData::Ucs4(w) => w.len() * 4,
        }
    }

    /// The UTF-8 bytes: `Some` (borrowed) for ASCII, else `None` with the bytes written to
    /// `buf` (as `tokenizer::map_texts` takes
    /// them); `Err` on a lone surrogate, which UTF-8 cannot hold.
    pub(crate) fn utf8(&self, buf: &mut Vec<u8>) -> Result<Option<&'a [u8]>, ()> {
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
            StrData::Utf8(b) => return Ok(Some(b)),
            StrData::Ucs1(b) => push_all(buf, b.iter().map(|&c| c as u32))?,
            StrData::Ucs2(w) => push_all(buf, w.iter().map(|&c| c as u32))?,
            StrData::Ucs4(w) => push_all(buf, w.iter().copied())?,
        }
        Ok(None)
    }
}

impl<'a> StrData<'a> {
    /// The UTF-8 bytes with their unit starts (`units::unit_starts`) in `starts`, in one pass
    /// over the characters: `Some` (borrowed) for UTF-8 data, else `None` with the bytes
    /// written to `buf`; `Err` on a lone surrogate (see `Tokenizer::encode_filled`).
    pub(crate) fn utf8_with_starts(&self, buf: &mut Vec<u8>, starts: &mut Vec<u8>) -> Result<Option<&'a [u8]>, ()> {
        use crate::units::{ascii_unit_starts, unit_starts, utf8_with_unit_starts};
        match self {
            StrData::Utf8(b) if b.is_ascii() => {
                ascii_unit_starts(b, starts);
                return Ok(Some(b));
            }
            StrData::Utf8(b) => {
                unit_starts(b, starts);
                return Ok(Some(b));
            }
            StrData::Ucs1(b) => utf8_with_unit_starts(b.iter().map(|&c| c as u32), buf, starts)?,
            StrData::Ucs2(w) => utf8_with_unit_starts(w.iter().map(|&c| c as u32), buf, starts)?,
            StrData::Ucs4(w) => utf8_with_unit_starts(w.iter().copied(), buf, starts)?,
        }
        Ok(None)
    }
}

pub(crate) fn str_data<'a>(s: &'a Bound<'_, PyString>) -> PyResult<StrData<'a>> {
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

pub(crate) fn surrogate_error(k: Option<usize>) -> PyErr {
    let which = k.map_or("text".to_string(), |k| format!("text {k}"));
    PyValueError::new_err(format!(
        "{which} is not valid Unicode (it holds lone surrogates); encode it with \
         encode_bytes(text.encode('utf-8', 'surrogatepass')) if that is intended"
    ))
}
