//! PyO3 bindings: the `cnfmce._core` extension module (behind the `python` feature). One file per
//! exposed class; `util` holds what they share. Heavy work runs with the thread detached from the
//! interpreter (GIL released); panics are caught and turned into `RuntimeError`.

mod blocks;
mod counter;
mod extend;
mod filter;
mod ints;
mod options;
mod offsets;
mod reader;
mod shuffle;
mod stream;
mod text;
mod tokenizer;
mod trainer;
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

/// `(partial or forbidden, forbidden)`: how many of the spans cross groups partially (touch two
/// or more groups without covering whole groups only), and how many of those touch three or
/// more (the crossings MCE forbids), by the unit-crossing rule of `crate::cost`. `group_starts`:
/// nonzero where a byte starts a group (a unit, or a character); `spans`: little-endian int64
/// pairs `(start, end)`; empty spans are not counted.
#[pyfunction]
fn crossing_counts(group_starts: &[u8], spans: &[u8]) -> PyResult<(u64, u64)> {
    use crate::cost::{crossing_of, Crossing};
    if spans.len() % 16 != 0 {
        return Err(pyo3::exceptions::PyValueError::new_err("spans must hold int64 (start, end) pairs"));
    }
    let n = group_starts.len() as i64;
    let (mut partial, mut forbidden) = (0u64, 0u64);
    for pair in spans.chunks_exact(16) {
        let s = i64::from_le_bytes(pair[..8].try_into().expect("8 bytes"));
        let e = i64::from_le_bytes(pair[8..].try_into().expect("8 bytes"));
        if e <= s {
            continue;
        }
        if s < 0 || e > n {
            return Err(pyo3::exceptions::PyValueError::new_err("a span lies outside the data"));
        }
        match crossing_of(group_starts, s as usize, e as usize) {
            Crossing::Free => {}
            Crossing::Partial => partial += 1,
            Crossing::Forbidden => {
                partial += 1;
                forbidden += 1;
            }
        }
    }
    Ok((partial, forbidden))
}

/// The raw_vocab_size training uses for `vocab_size` when none is given.
#[pyfunction]
fn default_raw_vocab_size(vocab_size: &Bound<'_, PyAny>) -> PyResult<usize> {
    Ok(crate::default_raw_vocab_size(util::read_positive(vocab_size, "vocab_size")?))
}

/// The candidates counting keeps for a raw vocabulary of `raw_vocab_size` (the pool of the
/// Han-weighted cut when `raw_han_exponent` is above 0).
#[pyfunction]
fn raw_pool_size(raw_vocab_size: &Bound<'_, PyAny>, raw_han_exponent: f64) -> PyResult<usize> {
    Ok(crate::raw_pool_size(util::read_positive(raw_vocab_size, "raw_vocab_size")?, raw_han_exponent))
}

/// A note when valid rounds will not count all they might be expected to (else None).
#[pyfunction]
fn rounds_warning(rounds: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    Ok(crate::rounds_warning(&util::read_rounds(rounds)?))
}

/// The threshold of the rounds after the first for a corpus of `corpus_bytes` bytes of text
/// (the default rounds of `train` and `count`).
#[pyfunction]
fn scaled_threshold(corpus_bytes: u64) -> u64 {
    crate::scaled_threshold(corpus_bytes)
}

/// `(non_ascii_exponent, raw_han_exponent)` that `balance` sets at `vocab_size`.
#[pyfunction]
fn balance_settings(balance: f64, vocab_size: &Bound<'_, PyAny>) -> PyResult<(f64, f64)> {
    let k = util::read_positive(vocab_size, "vocab_size")?;
    let s = crate::balance_settings(balance, k).map_err(|e| util::to_py(vocab_size.py(), e))?;
    Ok((s.non_ascii_exponent, s.raw_han_exponent))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    util::register_fork_handlers();
    m.add_class::<options::PyOptions>()?;
    m.add_class::<tokenizer::PyCoreTokenizer>()?;
    m.add_class::<tokenizer::PySpecialMatcher>()?;
    m.add_class::<counter::PyCounter>()?;
    m.add_class::<filter::PyFilter>()?;
    m.add_class::<trainer::PyTrainer>()?;
    m.add_class::<extend::PyExtender>()?;
    m.add_function(wrap_pyfunction!(extend::pieces_over, m)?)?;
    m.add_class::<reader::PyCorpusReader>()?;
    m.add_class::<reader::PyTextBlock>()?;
    m.add_class::<blocks::PySurvivors>()?;
    m.add_class::<blocks::PyBlockCounts>()?;
    m.add_class::<blocks::PyBlockUsage>()?;
    m.add_function(wrap_pyfunction!(blocks::count_block, m)?)?;
    m.add_class::<shuffle::PyRoundSelector>()?;
    m.add_class::<shuffle::PySelection>()?;
    m.add_class::<shuffle::PyBlockCounter>()?;
    m.add_class::<shuffle::PyCountsMerger>()?;
    m.add_function(wrap_pyfunction!(shuffle::partition_of, m)?)?;
    m.add_function(wrap_pyfunction!(unit_starts, m)?)?;
    m.add_function(wrap_pyfunction!(crossing_counts, m)?)?;
    m.add_function(wrap_pyfunction!(default_raw_vocab_size, m)?)?;
    m.add_function(wrap_pyfunction!(raw_pool_size, m)?)?;
    m.add_function(wrap_pyfunction!(rounds_warning, m)?)?;
    m.add_function(wrap_pyfunction!(scaled_threshold, m)?)?;
    m.add_function(wrap_pyfunction!(balance_settings, m)?)?;
    // The defaults, written once in the core.
    m.add("DEFAULT_BOUNDARY_PENALTY", crate::DEFAULT_BOUNDARY_PENALTY)?;
    m.add("DEFAULT_ROUNDS", pyo3::types::PyTuple::new(m.py(), util::rounds_tuple(&crate::DEFAULT_ROUNDS))?)?;
    m.add("DEFAULT_VOCAB_SIZE", crate::DEFAULT_VOCAB_SIZE)?;
    m.add("DEFAULT_COUNT_RAW_VOCAB_SIZE", crate::DEFAULT_COUNT_RAW_VOCAB_SIZE)?;
    m.add("RAW_VOCAB_PER_TOKEN", crate::RAW_VOCAB_PER_TOKEN)?;
    m.add("SCRIPT_SHARE_EXPONENT", crate::SCRIPT_SHARE_EXPONENT)?;
    m.add("NON_ASCII_SHARE_EXPONENT", crate::NON_ASCII_SHARE_EXPONENT)?;
    m.add("MAX_NON_ASCII_EXPONENT", crate::MAX_NON_ASCII_EXPONENT)?;
    m.add("HAN_POOL_PER_RAW", crate::HAN_POOL_PER_RAW)?;
    m.add("MAX_RAW_HAN_EXPONENT", crate::MAX_RAW_HAN_EXPONENT)?;
    m.add("DEFAULT_MEMORY_BUDGET", crate::DEFAULT_MEMORY_BUDGET)?;
    m.add("DEFAULT_BALANCE", crate::DEFAULT_BALANCE)?;
    m.add("BALANCE_ANCHORS", pyo3::types::PyTuple::new(m.py(), crate::BALANCE_ANCHORS.iter().copied())?)?;
    m.add("PAPER_THRESHOLD", crate::PAPER_THRESHOLD)?;
    m.add("MIN_SCALED_THRESHOLD", crate::MIN_SCALED_THRESHOLD)?;
    m.add("BYTES_PER_THRESHOLD", crate::BYTES_PER_THRESHOLD)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
