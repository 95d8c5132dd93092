//! The error type of the core; the Python bindings map each kind to a Python exception.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Bad argument or data (Python `ValueError`).
    Value(String),
    /// An id that is not in the vocabulary (Python `KeyError` / `cnfmce.UnknownIdError`).
    UnknownId(u32),
    /// A file could not be read or written (Python `OSError`).
    Io(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Value(m) | Error::Io(m) => f.write_str(m),
            Error::UnknownId(id) => write!(f, "unknown token id {id}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e.to_string())
    }
}

/// A short printable form of a token for messages.
pub fn show_bytes(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(40).collect::<String>())
    } else {
        s.into_owned()
    }
}
