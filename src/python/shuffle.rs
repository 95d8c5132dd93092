//! The steps of a counting round spread over machines by candidate (docs/spec.md section 6,
//! "Partitioned rounds"): `BlockCounter` (map: count a block with a memory budget, split its
//! counts into parts), `CountsMerger` (reduce: sum the parts of one partition, streaming, with
//! a memory budget), `RoundSelector` and `Selection` (what a partition keeps, merged by
//! `Trainer.end_pass_with_selected` / `Counter.end_round_with_selected`).

use std::sync::Mutex;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

use super::blocks::{PyBlockCounts, PySurvivors};
use super::util::{guarded, read_round, str_bytes, to_py, ForkSafePool};

/// `__reduce__` for the classes that travel as bytes: `type(x).from_bytes(x.to_bytes())`.
fn reduce_by_bytes<'py, T: pyo3::PyClass>(slf: &Bound<'py, T>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
    let slf = slf.as_any();
    let data = slf.call_method0("to_bytes")?;
    Ok((slf.get_type().getattr("from_bytes")?, PyTuple::new(slf.py(), [data])?))
}

/// The bytes of any object with the buffer protocol (bytes, bytearray, memoryview, a uint8
/// numpy array), copied.
fn buffer_bytes(data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    let buf: PyBuffer<u8> = PyBuffer::get(data).map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err("expected bytes or a buffer of bytes (bytearray, memoryview, uint8 array)")
    })?;
    buf.to_vec(data.py())
}

/// What one partition of a counting round keeps.
#[pyclass(module = "cnfmce._core", name = "RoundSelector", frozen)]
pub(crate) struct PyRoundSelector {
    pub(crate) inner: crate::RoundSelector,
}

#[pymethods]
impl PyRoundSelector {
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        Ok(PyRoundSelector { inner: crate::RoundSelector::from_bytes(data).map_err(|e| to_py(py, e))? })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    #[getter]
    fn threshold(&self) -> u64 {
        self.inner.threshold
    }

    #[getter]
    fn later_threshold(&self) -> Option<u64> {
        self.inner.later_threshold
    }

    #[getter]
    fn raw_vocab_size(&self) -> usize {
        self.inner.raw_vocab_size
    }

    /// The selection of a partition's complete counts held in memory.
    fn select(&self, py: Python<'_>, counts: &Bound<'_, PyBlockCounts>) -> PyResult<PySelection> {
        let c = &counts.get().inner;
        let inner = py.detach(|| guarded(|| self.inner.select(c)))?;
        Ok(PySelection { inner })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        reduce_by_bytes(slf)
    }

    fn __repr__(&self) -> String {
        format!(
            "RoundSelector(threshold={}, later_threshold={:?}, raw_vocab_size={})",
            self.inner.threshold, self.inner.later_threshold, self.inner.raw_vocab_size
        )
    }
}

/// The candidates one partition keeps after a round, best first, with its statistics.
#[pyclass(module = "cnfmce._core", name = "Selection", frozen)]
pub(crate) struct PySelection {
    pub(crate) inner: crate::Selection,
}

#[pymethods]
impl PySelection {
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let data = buffer_bytes(data)?;
        let inner = py.detach(|| guarded(|| crate::Selection::from_bytes(&data)))?.map_err(|e| to_py(py, e))?;
        Ok(PySelection { inner })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// (candidates, counts), best first.
    fn items<'py>(&self, py: Python<'py>) -> (Vec<Bound<'py, PyBytes>>, Vec<u64>) {
        self.inner.iter().map(|(k, c)| (PyBytes::new(py, k), c)).unzip()
    }

    /// Distinct candidates the partition had in the round.
    #[getter]
    fn distinct(&self) -> u64 {
        self.inner.distinct
    }

    /// Candidates of the partition whose count reached the round's threshold.
    #[getter]
    fn retained(&self) -> u64 {
        self.inner.retained
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        reduce_by_bytes(slf)
    }
}

/// The parts of a finished block, taken one at a time.
enum Finished {
    Counting(crate::BlockCounter),
    Parts(Vec<Option<crate::Part>>),
    Gone,
}

/// Counts one round's candidates in a block of documents with a memory budget (spilling to
/// sorted runs in `tmp_dir`), then splits the exact counts into parts by `partition_of`.
#[pyclass(module = "cnfmce._core", name = "BlockCounter", frozen)]
pub(crate) struct PyBlockCounter {
    state: Mutex<Finished>,
    stats: Mutex<crate::RoundStats>,
    totals: Mutex<(u64, u64)>,
    pool: ForkSafePool,
}

impl PyBlockCounter {
    fn lock(&self) -> std::sync::MutexGuard<'_, Finished> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl PyBlockCounter {
    /// round: (min_len, max_len, threshold); budget: table bytes before spilling into the
    /// existing directory tmp_dir.
    #[new]
    #[pyo3(signature = (round, budget, tmp_dir, num_threads=None))]
    fn new(
        py: Python<'_>,
        round: &Bound<'_, PyAny>,
        budget: usize,
        tmp_dir: std::path::PathBuf,
        num_threads: Option<usize>,
    ) -> PyResult<Self> {
        let round = read_round(round)?;
        let inner = crate::BlockCounter::new(round, budget, tmp_dir).map_err(|e| to_py(py, e))?;
        Ok(PyBlockCounter {
            state: Mutex::new(Finished::Counting(inner)),
            stats: Mutex::new(crate::RoundStats::default()),
            totals: Mutex::new((0, 0)),
            pool: ForkSafePool::checked(num_threads)?,
        })
    }

    /// Counts a batch of documents (GIL released), extending only `survivors`.
    fn add(&self, py: Python<'_>, docs: Vec<Bound<'_, PyString>>, survivors: &Bound<'_, PySurvivors>) -> PyResult<()> {
        let bytes = str_bytes(&docs)?;
        let s = &survivors.get().inner;
        let mut g = self.lock();
        let Finished::Counting(c) = &mut *g else {
            return Err(PyValueError::new_err("the block is finished"));
        };
        let pool = &self.pool;
        py.detach(|| guarded(|| pool.install(|| c.add(&bytes, s))))??.map_err(|e| to_py(py, e))?;
        *self.stats.lock().unwrap_or_else(|p| p.into_inner()) = c.stats.clone();
        *self.totals.lock().unwrap_or_else(|p| p.into_inner()) = (c.documents, c.bytes);
        Ok(())
    }

    /// Estimated bytes of the counting table now.
    #[getter]
    fn table_bytes(&self) -> usize {
        match &*self.lock() {
            Finished::Counting(c) => c.table_bytes(),
            _ => 0,
        }
    }

    /// documents, bytes, spills, spilled_bytes, peak_table_bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let (docs, bytes) = *self.totals.lock().unwrap_or_else(|p| p.into_inner());
        let d = PyDict::new(py);
        d.set_item("documents", docs)?;
        d.set_item("bytes", bytes)?;
        d.set_item("spills", st.spills)?;
        d.set_item("spilled_bytes", st.spilled_bytes)?;
        d.set_item("peak_table_bytes", st.peak_table_bytes)?;
        Ok(d)
    }

    /// Ends the block: its counts split into `parts` parts (GIL released); take them with
    /// `take_part`.
    fn finish(&self, py: Python<'_>, parts: usize) -> PyResult<()> {
        let mut g = self.lock();
        let Finished::Counting(_) = &*g else {
            return Err(PyValueError::new_err("the block is finished"));
        };
        let Finished::Counting(c) = std::mem::replace(&mut *g, Finished::Gone) else { unreachable!() };
        let pool = &self.pool;
        let out = py.detach(|| guarded(|| pool.install(|| c.finish(parts))))??.map_err(|e| to_py(py, e))?;
        *g = Finished::Parts(out.into_iter().map(Some).collect());
        Ok(())
    }

    /// Part `i` of the finished block: records sorted bytewise (`BlockCounts.to_bytes()`
    /// format); each part can be taken once (its memory or file goes with it).
    fn take_part<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyBytes>> {
        let mut g = self.lock();
        let Finished::Parts(parts) = &mut *g else {
            return Err(PyValueError::new_err("the block is not finished: call finish first"));
        };
        let part = parts
            .get_mut(i)
            .ok_or_else(|| PyValueError::new_err(format!("no part {i}")))?
            .take()
            .ok_or_else(|| PyValueError::new_err(format!("part {i} was taken already")))?;
        match part {
            crate::Part::Memory(v) => Ok(PyBytes::new(py, &v)),
            crate::Part::File(p) => {
                let data = std::fs::read(&p).map_err(|e| to_py(py, crate::Error::Io(format!("{}: {e}", p.display()))));
                let _ = std::fs::remove_file(&p);
                Ok(PyBytes::new(py, &data?))
            }
        }
    }
}

impl Drop for PyBlockCounter {
    fn drop(&mut self) {
        if let Finished::Parts(parts) = &*self.lock() {
            for p in parts.iter().flatten() {
                if let crate::Part::File(path) = p {
                    let _ = std::fs::remove_file(path);
                }
            }
        }
    }
}

/// Sums sorted partial counts (the parts of one partition), streaming, with a memory budget
/// (merged runs spill into `tmp_dir`); then selects (`select`) or gives the counts.
#[pyclass(module = "cnfmce._core", name = "CountsMerger", frozen)]
pub(crate) struct PyCountsMerger {
    inner: Mutex<Option<crate::CountsMerger>>,
    pool: ForkSafePool,
}

impl PyCountsMerger {
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut crate::CountsMerger) -> Result<R, crate::Error> + Send,
    ) -> PyResult<R> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let m = g.as_mut().ok_or_else(|| PyValueError::new_err("the merger is finished"))?;
        let pool = &self.pool;
        py.detach(|| guarded(|| pool.install(|| f(m))))??.map_err(|e| to_py(py, e))
    }

    fn take(&self) -> PyResult<crate::CountsMerger> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.take().ok_or_else(|| PyValueError::new_err("the merger is finished"))
    }
}

#[pymethods]
impl PyCountsMerger {
    #[new]
    #[pyo3(signature = (budget, tmp_dir, num_threads=None))]
    fn new(budget: usize, tmp_dir: std::path::PathBuf, num_threads: Option<usize>) -> PyResult<Self> {
        Ok(PyCountsMerger { inner: Mutex::new(Some(crate::CountsMerger::new(budget, tmp_dir))), pool: ForkSafePool::checked(num_threads)? })
    }

    /// Adds partial counts as records sorted bytewise (any bytes-like object); refuses
    /// malformed or unsorted data.
    fn add_records(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let data = buffer_bytes(data)?;
        self.with(py, |m| m.add_records(data))
    }

    /// Adds counts in any order (tokens[i] has counts[i]; repeats are summed).
    fn add_counts(&self, py: Python<'_>, tokens: Vec<Vec<u8>>, counts: Vec<u64>) -> PyResult<()> {
        if tokens.len() != counts.len() {
            return Err(PyValueError::new_err("tokens and counts differ in length"));
        }
        let pairs: Vec<(Vec<u8>, u64)> = tokens.into_iter().zip(counts).collect();
        self.with(py, |m| m.add_counts(pairs))
    }

    /// records, spills, spilled_bytes, memory_bytes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (records, spills, spilled, mem) = self.with(py, |m| Ok((m.records, m.spills, m.spilled_bytes, m.memory_bytes())))?;
        let d = PyDict::new(py);
        d.set_item("records", records)?;
        d.set_item("spills", spills)?;
        d.set_item("spilled_bytes", spilled)?;
        d.set_item("memory_bytes", mem)?;
        Ok(d)
    }

    /// Ends the merger: the selection of the merged counts.
    fn select(&self, py: Python<'_>, selector: &Bound<'_, PyRoundSelector>) -> PyResult<PySelection> {
        let m = self.take()?;
        let s = &selector.get().inner;
        let pool = &self.pool;
        let inner = py.detach(|| guarded(|| pool.install(|| m.select(s))))??.map_err(|e| to_py(py, e))?;
        Ok(PySelection { inner })
    }

    /// Ends the merger: the best `limit` candidates (all when None), count descending, ties by
    /// bytes, as (tokens, counts).
    #[pyo3(signature = (limit=None))]
    fn top<'py>(&self, py: Python<'py>, limit: Option<usize>) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<u64>)> {
        let m = self.take()?;
        let pool = &self.pool;
        let out = py.detach(|| guarded(|| pool.install(|| m.top(limit))))??.map_err(|e| to_py(py, e))?;
        Ok(out.iter().map(|(k, c)| (PyBytes::new(py, k), *c)).unzip())
    }

    /// Ends the merger: calls `sink(tokens, counts)` with the merged counts in bytewise order,
    /// at most `chunk` candidates at a time (for writing them out without holding them).
    #[pyo3(signature = (sink, chunk=65536))]
    fn for_each_chunk(&self, py: Python<'_>, sink: &Bound<'_, PyAny>, chunk: usize) -> PyResult<()> {
        let m = self.take()?;
        let mut err: Option<PyErr> = None;
        let r = m.for_each_chunk(chunk, |items| {
            let (toks, counts): (Vec<Bound<'_, PyBytes>>, Vec<u64>) =
                items.iter().map(|(k, c)| (PyBytes::new(py, k), *c)).unzip();
            match sink.call1((toks, counts)) {
                Ok(_) => Ok(()),
                Err(e) => {
                    err = Some(e);
                    Err(crate::Error::Value("stopped".into()))
                }
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        r.map_err(|e| to_py(py, e))
    }
}

/// The part (of `parts`) that a candidate belongs to in a partitioned round.
#[pyfunction]
pub(crate) fn partition_of(bytes: &[u8], parts: usize) -> PyResult<usize> {
    if parts == 0 {
        return Err(PyValueError::new_err("parts must be positive"));
    }
    Ok(crate::partition_of(bytes, parts))
}
