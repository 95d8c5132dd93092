//! `Trainer`: a CNF training run owned by the core (`crate::Trainer`); Python streams the
//! documents of each pass in batches, or ends a pass with the merged results of blocks made
//! elsewhere (`BlockCounts`, `BlockUsage`).

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use super::blocks::{PyBlockCounts, PyBlockUsage, PySurvivors};
use super::shuffle::{PyRoundSelector, PySelection};
use super::counter::round_stats;
use super::options::PyOptions;
use super::tokenizer::PyCoreTokenizer;
use super::util::{guarded, read_positive, read_rounds, rounds_tuple, str_bytes, to_py, ForkSafePool};
use crate::{Pass, PassStats, TrainConfig};

/// A training run (see `crate::Trainer`).
#[pyclass(module = "cnfmce._core", name = "Trainer", frozen)]
pub(crate) struct PyTrainer {
    /// None once finished or closed.
    inner: Mutex<Option<crate::Trainer>>,
    pool: ForkSafePool,
}

/// A pass as Python sees it: `("count", index, (min, max, threshold))`, `("filter", None, None)`
/// or `("refine", index, None)`.
type PyPass = (&'static str, Option<usize>, Option<(usize, usize, u64)>);

fn py_pass(p: Pass) -> PyPass {
    match p {
        Pass::Count { index, round } => ("count", Some(index), Some((round.min_len, round.max_len, round.threshold))),
        Pass::Filter => ("filter", None, None),
        Pass::Refine { index, .. } => ("refine", Some(index), None),
    }
}

/// Special tokens from Python: a sequence of strings (the core checks empty ones and repeats).
fn read_specials(v: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if v.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err("special_tokens must be a sequence of strings, not a string"));
    }
    let items = v.try_iter().map_err(|_| PyTypeError::new_err("special_tokens must be a sequence of strings"))?;
    let mut out = Vec::new();
    for s in items {
        let s = s?;
        match s.cast::<PyString>() {
            Ok(t) => out.push(t.to_str()?.to_string()),
            Err(_) => {
                let shown = s.repr().map(|r| r.to_string()).unwrap_or_default();
                return Err(PyValueError::new_err(format!("special tokens must be non-empty strings, got {shown}")));
            }
        }
    }
    Ok(out)
}

impl PyTrainer {
    fn lock(&self) -> MutexGuard<'_, Option<crate::Trainer>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the trainer (GIL released, on this trainer's thread pool).
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut crate::Trainer) -> Result<R, crate::Error> + Send) -> PyResult<R> {
        let mut g = self.lock();
        let t = g.as_mut().ok_or_else(|| PyValueError::new_err("the trainer is finished or closed"))?;
        let pool = &self.pool;
        py.detach(|| guarded(|| pool.install(|| f(t))))??.map_err(|e| to_py(py, e))
    }

    fn stats<'py>(&self, py: Python<'py>, st: PassStats) -> PyResult<Bound<'py, PyDict>> {
        match st {
            PassStats::Count(st) => round_stats(py, &st, 0),
            PassStats::Filter(f) => {
                let d = PyDict::new(py);
                d.set_item("raw_vocab_size", f.raw_vocab_size)?;
                d.set_item("tokens", f.tokens)?;
                d.set_item("bytes", f.bytes)?;
                Ok(d)
            }
        }
    }
}

#[pymethods]
impl PyTrainer {
    /// Checks every argument (nothing is read or written yet). `raw_vocab_size` None: a multiple
    /// of `vocab_size` (`default_raw_vocab_size`) when counting, all the counts with
    /// `use_counts`; `rounds` None: `DEFAULT_ROUNDS`; `tmp_dir`: where spill runs go (None: a
    /// new directory, removed at the end).
    #[new]
    #[pyo3(signature = (vocab_size, raw_vocab_size=None, rounds=None, special_tokens=None, options=None, memory_budget=crate::DEFAULT_MEMORY_BUDGET, tmp_dir=None, num_threads=None, selection=None, non_ascii_exponent=None, raw_han_exponent=0.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        vocab_size: &Bound<'_, PyAny>,
        raw_vocab_size: Option<&Bound<'_, PyAny>>,
        rounds: Option<&Bound<'_, PyAny>>,
        special_tokens: Option<&Bound<'_, PyAny>>,
        options: Option<&Bound<'_, PyOptions>>,
        memory_budget: usize,
        tmp_dir: Option<std::path::PathBuf>,
        num_threads: Option<usize>,
        selection: Option<&Bound<'_, PyAny>>,
        non_ascii_exponent: Option<f64>,
        raw_han_exponent: f64,
    ) -> PyResult<Self> {
        let selection = match selection {
            None => crate::SelectionRule::default(),
            Some(v) => match v.cast::<PyString>() {
                Ok(s) => crate::SelectionRule::parse(s.to_str()?).map_err(|e| to_py(py, e))?,
                Err(_) => return Err(PyTypeError::new_err("selection must be a string ('paper', 'refined', 'refined-scripts' or 'refined-non-ascii')")),
            },
        };
        let mut config = TrainConfig {
            vocab_size: read_positive(vocab_size, "vocab_size")?,
            raw_vocab_size: raw_vocab_size.map(|m| read_positive(m, "raw_vocab_size")).transpose()?,
            options: PyOptions::or_default(options),
            memory_budget,
            tmp_dir,
            selection,
            non_ascii_exponent: non_ascii_exponent.unwrap_or(crate::NON_ASCII_SHARE_EXPONENT),
            raw_han_exponent,
            ..TrainConfig::default()
        };
        if let Some(r) = rounds {
            config.rounds = read_rounds(r)?;
        }
        if let Some(s) = special_tokens {
            config.special_tokens = read_specials(s)?;
        }
        let inner = crate::Trainer::new(config).map_err(|e| to_py(py, e))?;
        Ok(PyTrainer { inner: Mutex::new(Some(inner)), pool: ForkSafePool::checked(num_threads)? })
    }

    /// Skips counting: the raw vocabulary comes from these counts (tokens[i] has counts[i]);
    /// char_tokens / char_counts are the characters counting kept beside the cut
    /// (`Counter.char_counts()`), which the refined selections rank.
    #[pyo3(signature = (tokens, counts, char_tokens=None, char_counts=None))]
    fn use_counts(
        &self,
        py: Python<'_>,
        tokens: Vec<Vec<u8>>,
        counts: Vec<u64>,
        char_tokens: Option<Vec<Vec<u8>>>,
        char_counts: Option<Vec<u64>>,
    ) -> PyResult<()> {
        if tokens.len() != counts.len() {
            return Err(PyValueError::new_err("tokens and counts differ in length"));
        }
        let chars: Vec<(Vec<u8>, u64)> = match (char_tokens, char_counts) {
            (None, None) => Vec::new(),
            (Some(t), Some(c)) if t.len() == c.len() => t.into_iter().zip(c).collect(),
            (Some(_), Some(_)) => {
                return Err(PyValueError::new_err("char_tokens and char_counts differ in length"))
            }
            _ => return Err(PyValueError::new_err("char_tokens and char_counts go together")),
        };
        let pairs: Vec<(Vec<u8>, u64)> = tokens.into_iter().zip(counts).collect();
        self.with(py, |t| t.use_counts_and_chars(pairs, chars))
    }

    /// The counting rounds.
    #[getter]
    fn rounds(&self) -> PyResult<Vec<(usize, usize, u64)>> {
        let g = self.lock();
        let t = g.as_ref().ok_or_else(|| PyValueError::new_err("the trainer is finished or closed"))?;
        Ok(rounds_tuple(&t.config().rounds))
    }

    /// The pass to run next (the one in progress, if any), None when all are done.
    fn next_pass(&self) -> Option<PyPass> {
        self.lock().as_ref().and_then(|t| t.next_pass()).map(py_pass)
    }

    fn begin_pass(&self, py: Python<'_>) -> PyResult<PyPass> {
        self.with(py, |t| t.begin_pass()).map(py_pass)
    }

    /// Feeds a batch of documents to the pass in progress (GIL released).
    fn add(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>) -> PyResult<()> {
        let bytes = str_bytes(&docs)?;
        self.with(py, |t| t.add(&bytes))
    }

    /// Ends the pass in progress; returns its statistics.
    fn end_pass<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.with(py, |t| t.end_pass())?;
        self.stats(py, st)
    }

    /// During the first counting round: every later round's threshold becomes `threshold`.
    fn set_later_thresholds(&self, py: Python<'_>, threshold: u64) -> PyResult<()> {
        self.with(py, |t| t.set_later_thresholds(threshold))
    }

    /// In a counting pass: the survivors that `count_block` needs.
    fn survivors(&self, py: Python<'_>) -> PyResult<PySurvivors> {
        let inner = self.with(py, |t| t.survivors())?;
        Ok(PySurvivors { inner })
    }

    /// Ends a counting pass with the merged counts of its blocks.
    fn end_pass_with_counts<'py>(&self, py: Python<'py>, counts: &Bound<'_, PyBlockCounts>) -> PyResult<Bound<'py, PyDict>> {
        let c = &counts.get().inner;
        let st = self.with(py, |t| t.end_pass_with_counts(c))?;
        self.stats(py, st)
    }

    /// In a counting pass: the selection the reducers of a partitioned round apply.
    fn round_selector(&self, py: Python<'_>) -> PyResult<PyRoundSelector> {
        let inner = self.with(py, |t| t.round_selector())?;
        Ok(PyRoundSelector { inner })
    }

    /// Ends a counting pass with the selections of disjoint partitions of its candidates.
    fn end_pass_with_selected<'py>(&self, py: Python<'py>, parts: Vec<Bound<'_, PySelection>>) -> PyResult<Bound<'py, PyDict>> {
        let parts: Vec<&crate::Selection> = parts.iter().map(|p| &p.get().inner).collect();
        let st = self.with(py, |t| t.end_pass_with_selected(&parts))?;
        self.stats(py, st)
    }

    /// In the filtering pass: the raw vocabulary in raw-id order; in a refining pass, that pass's
    /// vocabulary in id order (for `Filter` elsewhere).
    fn raw_tokens<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let g = self.lock();
        let t = g.as_ref().ok_or_else(|| PyValueError::new_err("the trainer is finished or closed"))?;
        let f = t.filter().map_err(|e| to_py(py, e))?;
        Ok(f.vocab().iter().map(|(_, b)| PyBytes::new(py, b)).collect())
    }

    /// Ends the filtering (or a refining) pass with the summed usage of its blocks.
    fn end_pass_with_usage<'py>(&self, py: Python<'py>, usage: &Bound<'_, PyBlockUsage>) -> PyResult<Bound<'py, PyDict>> {
        let u = &usage.get().inner;
        let st = self.with(py, |t| t.end_pass_with_usage(u))?;
        self.stats(py, st)
    }

    /// Estimated bytes of the counting table now.
    #[getter]
    fn table_bytes(&self) -> usize {
        self.lock().as_ref().map_or(0, |t| t.table_bytes())
    }

    /// The trained tokenizer and a report: raw_vocab_size, tokens, bytes (of the filtering
    /// pass), used_tokens (of the last pass), refine (one dict per refining pass: vocab_size,
    /// tokens, bytes), covered_characters, covered_beyond_cut (covered characters below the
    /// raw_vocab_size cut, added to the raw vocabulary), fallback_prefixes (added to the raw
    /// vocabulary by selection="refined-non-ascii"), selection, non_ascii_exponent,
    /// raw_han_exponent, warning.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<(PyCoreTokenizer, Bound<'py, PyDict>)> {
        let (trained, exponent, han) = self.with(py, |t| {
            let (exponent, han) = (t.config().non_ascii_exponent, t.config().raw_han_exponent);
            Ok((t.finish()?, exponent, han))
        })?;
        // The run's memory and spill files go now.
        self.close();
        let d = PyDict::new(py);
        d.set_item("raw_vocab_size", trained.stats.raw_vocab_size)?;
        d.set_item("tokens", trained.stats.tokens)?;
        d.set_item("bytes", trained.stats.bytes)?;
        d.set_item("used_tokens", trained.used_tokens)?;
        let refine = pyo3::types::PyList::empty(py);
        for r in &trained.refine {
            let e = PyDict::new(py);
            e.set_item("vocab_size", r.raw_vocab_size)?;
            e.set_item("tokens", r.tokens)?;
            e.set_item("bytes", r.bytes)?;
            refine.append(e)?;
        }
        d.set_item("refine", refine)?;
        d.set_item("covered_characters", trained.covered_characters)?;
        d.set_item("covered_beyond_cut", trained.covered_beyond_cut)?;
        d.set_item("fallback_prefixes", trained.fallback_prefixes)?;
        d.set_item("selection", trained.selection.name())?;
        d.set_item("non_ascii_exponent", exponent)?;
        d.set_item("raw_han_exponent", han)?;
        d.set_item("warning", trained.warning)?;
        Ok((PyCoreTokenizer::wrap(trained.tokenizer), d))
    }

    /// Drops the run (its memory and spill files) without finishing it.
    fn close(&self) {
        self.lock().take();
    }
}
