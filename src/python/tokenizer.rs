//! `CoreTokenizer` (the Rust tokenizer behind `cnfmce.Tokenizer`) and `SpecialMatcher`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyString};

use super::ints::IdInts;
use super::text::{str_data, surrogate_error, StrData};
use super::options::PyOptions;
use super::util::{batch_helpers, guarded, in_pool, pack_py, read_id, read_ids, to_py, unknown_id, PyPacked};
use crate::tokenizer::{map_texts, OffsetUnit, SpecialMatcher, Tokenizer};
use crate::Options;

/// Texts shorter than this are encoded without releasing the GIL (the release costs more).
const DETACH_BYTES: usize = 16 * 1024;

/// Batches of fewer bytes than this in all are encoded on the calling thread: waking a pool's
/// threads and handing the work over costs more than encoding a few kilobytes.
const HERE_BYTES: usize = 16 * 1024;

/// Whether a batch of texts of `sizes` bytes runs on the calling thread (see [`run_batch`]):
/// when it would run on one thread anyway (`helpers` None: one thread asked for, or one text)
/// or it is small.
fn on_caller(helpers: &Option<std::sync::Arc<rayon::ThreadPool>>, sizes: &[usize]) -> bool {
    helpers.is_none() || sizes.iter().sum::<usize>() < HERE_BYTES
}

/// The batch work `f`: on the calling thread when `here` (see [`on_caller`]; with the GIL
/// released unless the batch is small, and with its batch maps kept on this thread by
/// [`crate::tokenizer::on_this_thread`]), else in the pool of `num_threads` threads with the
/// GIL released.
fn run_batch<R: Send>(py: Python<'_>, num_threads: Option<usize>, here: bool, sizes: &[usize], f: impl FnOnce() -> R + Send) -> PyResult<R> {
    if here {
        let f = || crate::tokenizer::on_this_thread(f);
        if sizes.iter().sum::<usize>() < DETACH_BYTES {
            guarded(f)
        } else {
            py.detach(|| guarded(f))
        }
    } else {
        py.detach(|| guarded(|| in_pool(num_threads, f)))?
    }
}

/// The special tokens that `encode` may match (built by `CoreTokenizer.matcher`).
#[pyclass(module = "cnfmce._core", name = "SpecialMatcher", frozen)]
pub(crate) struct PySpecialMatcher {
    inner: SpecialMatcher,
}

/// The Rust tokenizer behind `cnfmce.Tokenizer`.
#[pyclass(module = "cnfmce._core", name = "CoreTokenizer", frozen)]
pub(crate) struct PyCoreTokenizer {
    inner: Tokenizer,
    ints: IdInts,
}

impl PyCoreTokenizer {
    /// The documents of a `TextBlock` encoded (call it with the GIL released), and their UTF-8
    /// sizes: on the calling thread when `on_caller` says so, else in the pool of `num_threads`.
    fn encode_block(
        &self,
        block: &super::reader::PyTextBlock,
        allowed: Option<&SpecialMatcher>,
        num_threads: Option<usize>,
    ) -> PyResult<(Vec<Vec<u32>>, Vec<usize>)> {
        let t = block.inner.lock().unwrap_or_else(|p| p.into_inner());
        let docs = t.slices();
        let sizes: Vec<usize> = docs.iter().map(|d| d.len()).collect();
        let run = || self.inner.encode_batch(&docs, allowed);
        let all = if on_caller(&batch_helpers(num_threads, docs.len())?, &sizes) {
            guarded(|| crate::tokenizer::on_this_thread(run))?
        } else {
            guarded(|| in_pool(num_threads, run))??
        };
        Ok((all, sizes))
    }

    pub(crate) fn wrap(inner: Tokenizer) -> Self {
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
            .detach(|| guarded(|| in_pool(None, || Tokenizer::new(entries, specials, options))))??
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

    fn with_offsets_detached<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
        unit: OffsetUnit,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let m = allowed.map(|a| &a.get().inner);
        let run = || self.inner.encode_with_offsets(data, m, unit);
        let (ids, offs) = if data.len() < DETACH_BYTES { guarded(run)? } else { py.detach(|| guarded(run))? };
        Ok((self.ints.list(py, &ids)?, super::offsets::spans(py, &self.ints, &offs)?))
    }

    /// The ids of each text and its UTF-8 size, encoded in parallel (longest first) with the
    /// GIL released; the UTF-8 of each str is made in the workers.
    fn encode_strs(
        &self,
        py: Python<'_>,
        texts: &[Bound<'_, PyString>],
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
        num_threads: Option<usize>,
    ) -> PyResult<(Vec<Vec<u32>>, Vec<usize>)> {
        let m = allowed.map(|a| &a.get().inner);
        let all = self.map_strs(py, texts, num_threads, |tok, bytes, scratch| {
            (tok.encode_with_scratch(bytes, m, scratch), bytes.len())
        })?;
        Ok(all.into_iter().unzip())
    }

    /// `f(tokenizer, utf8, scratch)` for each text, in parallel (longest first) with the GIL
    /// released; the UTF-8 of each str is made in the workers. A lone surrogate is a ValueError
    /// naming the text.
    fn map_strs<R: Send>(
        &self,
        py: Python<'_>,
        texts: &[Bound<'_, PyString>],
        num_threads: Option<usize>,
        f: impl Fn(&Tokenizer, &[u8], &mut crate::Scratch) -> R + Sync,
    ) -> PyResult<Vec<R>> {
        let datas: Vec<StrData<'_>> = texts.iter().map(str_data).collect::<PyResult<_>>()?;
        let tok = &self.inner;
        let sizes: Vec<usize> = datas.iter().map(StrData::utf8_size_hint).collect();
        let run = || map_texts(&sizes, |k, buf| datas[k].utf8(buf), |bytes, scratch| f(tok, bytes, scratch));
        let here = on_caller(&batch_helpers(num_threads, sizes.len())?, &sizes);
        run_batch(py, num_threads, here, &sizes, run)?.map_err(|(k, ())| surrogate_error(Some(k)))
    }

    fn batch<'py, T: AsRef<[u8]> + Sync>(
        &self,
        py: Python<'py>,
        texts: &[T],
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let m = allowed.map(|a| &a.get().inner);
        let sizes: Vec<usize> = texts.iter().map(|t| t.as_ref().len()).collect();
        let helpers = batch_helpers(num_threads, texts.len())?;
        let here = on_caller(&helpers, &sizes);
        if let (Some(helpers), false) = (helpers, here) {
            let tok = &self.inner;
            let encode = |k: usize, _: &mut Vec<u8>, scratch: &mut crate::Scratch| {
                Ok(tok.encode_with_scratch(texts[k].as_ref(), m, scratch))
            };
            return self.streamed(py, &helpers, &sizes, encode, |ids| Ok(self.ints.list(py, &ids)?.into_any()));
        }
        let all = run_batch(py, num_threads, here, &sizes, || self.inner.encode_batch(texts, m))?;
        self.ints.lists(py, &all)
    }

    /// `streamed` over strs: `f(tokenizer, utf8, scratch)` for each text, the UTF-8 of each str
    /// made in the workers as in `map_strs` (a lone surrogate is a ValueError naming the text).
    fn streamed_strs<'py, R: Send>(
        &self,
        py: Python<'py>,
        helpers: &rayon::ThreadPool,
        texts: &[Bound<'_, PyString>],
        f: impl Fn(&Tokenizer, &[u8], &mut crate::Scratch) -> R + Sync,
        make: impl Fn(R) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let datas: Vec<StrData<'_>> = texts.iter().map(str_data).collect::<PyResult<_>>()?;
        let sizes: Vec<usize> = datas.iter().map(StrData::utf8_size_hint).collect();
        let tok = &self.inner;
        let encode = |k: usize, buf: &mut Vec<u8>, scratch: &mut crate::Scratch| {
            let bytes = datas[k].utf8(buf)?;
            Ok(f(tok, bytes.unwrap_or(&buf[..]), scratch))
        };
        self.streamed(py, helpers, &sizes, encode, make)
    }

    /// The list of `make(encode(k, ..))` for every item k of a batch: `encode` runs on the
    /// calling thread and the threads of `helpers`, `make` (the Python object of one item's
    /// result) on the calling thread soon after the item is encoded (see
    /// `stream::stream_map`). `Err` from `encode`: a text that is no valid Unicode; the first
    /// failing item in index order is the error.
    fn streamed<'py, R: Send>(
        &self,
        py: Python<'py>,
        helpers: &rayon::ThreadPool,
        sizes: &[usize],
        encode: impl Fn(usize, &mut Vec<u8>, &mut crate::Scratch) -> Result<R, ()> + Sync,
        make: impl Fn(R) -> PyResult<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let n = sizes.len() as pyo3::ffi::Py_ssize_t;
        // SAFETY: PyList_New returns a new list of n NULL slots (or NULL with an exception set);
        // each slot is set at most once below (stream_map passes every index once) with a new
        // reference, and the list is returned only when every slot is set (a list with NULL
        // slots may be freed: its deallocation skips them).
        let out = unsafe {
            let list = pyo3::ffi::PyList_New(n);
            if list.is_null() {
                return Err(PyErr::fetch(py));
            }
            Bound::from_owned_ptr(py, list).cast_into_unchecked::<PyList>()
        };
        let mut bad: Option<usize> = None;
        let mut set = 0usize;
        let mut gc = super::ints::Untracked::default();
        let work = |k: usize, buf: &mut Vec<u8>| crate::mce::with_thread_scratch(|scratch| encode(k, buf, scratch));
        guarded(|| {
            super::stream::stream_map(py, helpers, sizes, work, |k, r| {
                match r {
                    Ok(r) if bad.is_none() => {
                        let list = make(r)?;
                        gc.untrack_at(&list, k);
                        // SAFETY: k < n and slot k is still NULL (see above).
                        unsafe { pyo3::ffi::PyList_SET_ITEM(out.as_ptr(), k as pyo3::ffi::Py_ssize_t, list.into_ptr()) };
                        set += 1;
                    }
                    Ok(_) => {}
                    Err(()) => bad = Some(bad.map_or(k, |b| b.min(k))),
                }
                Ok(())
            })
        })??;
        if let Some(k) = bad {
            return Err(surrogate_error(Some(k)));
        }
        if set != sizes.len() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err("internal error in cnfmce core: a batch item was not encoded"));
        }
        gc.track_items(&out);
        Ok(out)
    }
}

/// (ids, starts, sizes) of `encode_batch_flat`: bytearrays of native-endian u32 ids, i64
/// document starts and i64 UTF-8 sizes.
type FlatIds<'py> = (Bound<'py, PyByteArray>, Bound<'py, PyByteArray>, Bound<'py, PyByteArray>);

/// `[bos] ids [eos]` of each document into `buf` as little-endian integers of `N` bytes (the
/// low bytes of each id).
fn frame<const N: usize>(buf: &mut [u8], all: &[Vec<u32>], bos: Option<u32>, eos: Option<u32>) {
    let mut slots = buf.chunks_exact_mut(N);
    let mut put = |id: u32| {
        if let Some(dst) = slots.next() {
            dst.copy_from_slice(&id.to_le_bytes()[..N]);
        }
    };
    for doc in all {
        if let Some(b) = bos {
            put(b);
        }
        for &id in doc {
            put(id);
        }
        if let Some(e) = eos {
            put(e);
        }
    }
}

fn flat<'py>(py: Python<'py>, all: &[Vec<u32>], sizes: &[usize]) -> PyResult<FlatIds<'py>> {
    let total: usize = all.iter().map(Vec::len).sum();
    let ids = PyByteArray::new_with(py, total * 4, |buf| {
        let mut at = 0;
        for doc in all {
            for (dst, id) in buf[at..at + doc.len() * 4].chunks_exact_mut(4).zip(doc) {
                dst.copy_from_slice(&id.to_ne_bytes());
            }
            at += doc.len() * 4;
        }
        Ok(())
    })?;
    let starts = PyByteArray::new_with(py, (all.len() + 1) * 8, |buf| {
        let mut at = 0i64;
        for (k, dst) in buf.chunks_exact_mut(8).enumerate() {
            dst.copy_from_slice(&at.to_ne_bytes());
            if k < all.len() {
                at += all[k].len() as i64;
            }
        }
        Ok(())
    })?;
    let sizes = PyByteArray::new_with(py, sizes.len() * 8, |buf| {
        for (dst, &n) in buf.chunks_exact_mut(8).zip(sizes) {
            dst.copy_from_slice(&(n as i64).to_ne_bytes());
        }
        Ok(())
    })?;
    Ok((ids, starts, sizes))
}

#[pymethods]
impl PyCoreTokenizer {
    /// tokens: the regular tokens; ids: their ids (None: the list index);
    /// specials: (bytes, id) pairs.
    #[new]
    #[pyo3(signature = (tokens, ids=None, specials=Vec::new(), options=None))]
    fn new(
        py: Python<'_>,
        tokens: Vec<Bound<'_, PyBytes>>,
        ids: Option<Vec<u32>>,
        specials: Vec<(Vec<u8>, u32)>,
        options: Option<&Bound<'_, PyOptions>>,
    ) -> PyResult<Self> {
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
        Self::build(py, entries, specials, PyOptions::or_default(options))
    }

    /// A tokenizer from packed tokens: `data` is all token bytes concatenated, `lengths` one
    /// little-endian u32 per token, `ids` (optional) one little-endian u32 per token.
    #[staticmethod]
    #[pyo3(signature = (data, lengths, ids=None, specials=Vec::new(), options=None))]
    fn from_packed(
        py: Python<'_>,
        data: &[u8],
        lengths: &[u8],
        ids: Option<&[u8]>,
        specials: Vec<(Vec<u8>, u32)>,
        options: Option<&Bound<'_, PyOptions>>,
    ) -> PyResult<Self> {
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
        Self::build(py, entries, specials, PyOptions::or_default(options))
    }

    /// The regular tokens packed: (concatenated bytes, u32 LE lengths, u32 LE ids), id order.
    fn packed<'py>(&self, py: Python<'py>) -> PyPacked<'py> {
        pack_py(py, self.inner.vocab().iter())
    }

    /// Counts of the piece cache's events (replays, solves, busy and torn reads, lost writer
    /// races, inserts, promotions), or None before it is made; only in builds with the
    /// `cache-stats` feature (measurements, benches/README.md).
    #[cfg(feature = "cache-stats")]
    fn _piece_cache_stats(&self) -> Option<[u64; 7]> {
        self.inner.encoder().piece_cache_stats()
    }

    /// A new tokenizer over the same vocabulary with other options.
    /// The vocabulary and its automaton are shared with `self`, only the costs change.
    fn with_options(&self, options: &Bound<'_, PyOptions>) -> Self {
        PyCoreTokenizer::wrap(self.inner.with_options(options.get().inner))
    }

    #[pyo3(signature = (text, allowed=None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'_, PyString>,
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let data = str_data(text)?;
        if Tokenizer::matches_no_special(allowed.map(|a| &a.get().inner)) {
            // One pass over the characters writes the UTF-8 and annotates the units.
            let hint = data.utf8_size_hint();
            let run = || self.inner.encode_filled(hint, |buf, starts| data.utf8_with_starts(buf, starts));
            let ids = if hint < DETACH_BYTES { guarded(run)? } else { py.detach(|| guarded(run))? };
            return self.ints.list(py, &ids.map_err(|_| surrogate_error(None))?);
        }
        let mut buf = Vec::new();
        let bytes = data.utf8(&mut buf).map_err(|_| surrogate_error(None))?;
        self.encode_detached(py, bytes.unwrap_or(&buf), allowed)
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
        let m = allowed.map(|a| &a.get().inner);
        let helpers = batch_helpers(num_threads, texts.len())?;
        if Tokenizer::matches_no_special(m) {
            // As `encode`: the UTF-8 and the unit starts of each text in one pass (in the workers).
            let datas: Vec<StrData<'_>> = texts.iter().map(str_data).collect::<PyResult<_>>()?;
            let sizes: Vec<usize> = datas.iter().map(StrData::utf8_size_hint).collect();
            let tok = &self.inner;
            let one = |k: usize, scratch: &mut crate::Scratch| {
                tok.encode_filled_with_scratch(scratch, sizes[k], |buf, starts| datas[k].utf8_with_starts(buf, starts))
            };
            let here = on_caller(&helpers, &sizes);
            if let (Some(helpers), false) = (helpers, here) {
                let encode = |k: usize, _: &mut Vec<u8>, scratch: &mut crate::Scratch| one(k, scratch);
                return self.streamed(py, &helpers, &sizes, encode, |ids| Ok(self.ints.list(py, &ids)?.into_any()));
            }
            let run = || {
                let all = crate::tokenizer::par_map_largest_first(&sizes, || (), |_, k| {
                    crate::mce::with_thread_scratch(|scratch| one(k, scratch)).map_err(|()| k)
                });
                all.into_iter().collect::<Result<Vec<_>, usize>>()
            };
            let all = run_batch(py, num_threads, here, &sizes, run)?.map_err(|k| surrogate_error(Some(k)))?;
            return self.ints.lists(py, &all);
        }
        let sizes: Vec<usize> = texts.iter().map(|t| str_data(t).map(|d| d.utf8_size_hint())).collect::<PyResult<_>>()?;
        let here = on_caller(&helpers, &sizes);
        if let (Some(helpers), false) = (helpers, here) {
            let encode = |tok: &Tokenizer, bytes: &[u8], scratch: &mut crate::Scratch| tok.encode_with_scratch(bytes, m, scratch);
            return self.streamed_strs(py, &helpers, &texts, encode, |ids| Ok(self.ints.list(py, &ids)?.into_any()));
        }
        let (all, _) = self.encode_strs(py, &texts, allowed, num_threads)?;
        self.ints.lists(py, &all)
    }

    /// `encode_batch` with the ids of all texts in one flat buffer: (ids, starts, sizes) as
    /// bytearrays of native-endian u32 ids, i64 document starts (len(texts) + 1 of them; text
    /// k's ids are ids[starts[k]..starts[k + 1]]) and i64 UTF-8 sizes of the texts. No Python
    /// int is made per token; the Python side wraps them with numpy.frombuffer (no copy).
    #[pyo3(signature = (texts, allowed=None, num_threads=None))]
    fn encode_batch_flat<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'_, PyString>>,
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
        num_threads: Option<usize>,
    ) -> PyResult<FlatIds<'py>> {
        let (all, sizes) = self.encode_strs(py, &texts, allowed, num_threads)?;
        flat(py, &all, &sizes)
    }

    /// The documents of a `TextBlock` encoded (GIL released) and framed as shards store them:
    /// `(tokens, lengths, sizes)` as bytearrays: each document's `[bos] ids [eos]` as
    /// little-endian integers of `itemsize` bytes (2 or 4; the caller chose a dtype every id
    /// fits), the documents' token counts (bos/eos included) and UTF-8 sizes as i64.
    #[pyo3(signature = (block, itemsize, bos=None, eos=None, num_threads=None))]
    fn encode_block_framed<'py>(
        &self,
        py: Python<'py>,
        block: &super::reader::PyTextBlock,
        itemsize: usize,
        bos: Option<u32>,
        eos: Option<u32>,
        num_threads: Option<usize>,
    ) -> PyResult<FlatIds<'py>> {
        if itemsize != 2 && itemsize != 4 {
            return Err(PyValueError::new_err("itemsize must be 2 or 4"));
        }
        let (all, sizes) = py.detach(|| self.encode_block(block, None, num_threads))?;
        let extra = bos.is_some() as usize + eos.is_some() as usize;
        let total: usize = all.iter().map(|d| d.len() + extra).sum();
        let tokens = PyByteArray::new_with(py, total * itemsize, |buf| {
            if itemsize == 2 {
                frame::<2>(buf, &all, bos, eos);
            } else {
                frame::<4>(buf, &all, bos, eos);
            }
            Ok(())
        })?;
        let lengths = PyByteArray::new_with(py, all.len() * 8, |buf| {
            for (dst, doc) in buf.chunks_exact_mut(8).zip(&all) {
                dst.copy_from_slice(&((doc.len() + extra) as i64).to_le_bytes());
            }
            Ok(())
        })?;
        let sizes = PyByteArray::new_with(py, sizes.len() * 8, |buf| {
            for (dst, &n) in buf.chunks_exact_mut(8).zip(&sizes) {
                dst.copy_from_slice(&(n as i64).to_le_bytes());
            }
            Ok(())
        })?;
        Ok((tokens, lengths, sizes))
    }

    /// `encode_batch_flat` of the documents of a `TextBlock` (UTF-8 already: no Python string
    /// per document), GIL released; the same (ids, starts, sizes).
    #[pyo3(signature = (block, allowed=None, num_threads=None))]
    fn encode_block_flat<'py>(
        &self,
        py: Python<'py>,
        block: &super::reader::PyTextBlock,
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
        num_threads: Option<usize>,
    ) -> PyResult<FlatIds<'py>> {
        let m = allowed.map(|a| &a.get().inner);
        let (all, sizes) = py.detach(|| self.encode_block(block, m, num_threads))?;
        flat(py, &all, &sizes)
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

    /// `encode` and each token's `(start, end)` character span in `text`.
    #[pyo3(signature = (text, allowed=None))]
    fn encode_with_offsets<'py>(
        &self,
        py: Python<'py>,
        text: &Bound<'_, PyString>,
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let data = str_data(text)?;
        let mut buf = Vec::new();
        let bytes = data.utf8(&mut buf).map_err(|_| surrogate_error(None))?;
        self.with_offsets_detached(py, bytes.unwrap_or(&buf), allowed, OffsetUnit::Char)
    }

    /// `encode_bytes` and each token's `(start, end)` byte span in `data`.
    #[pyo3(signature = (data, allowed=None))]
    fn encode_bytes_with_offsets<'py>(
        &self,
        py: Python<'py>,
        data: &[u8],
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        self.with_offsets_detached(py, data, allowed, OffsetUnit::Byte)
    }

    /// `encode_with_offsets` of every text, in parallel: a list of `(ids, spans)`.
    #[pyo3(signature = (texts, allowed=None, num_threads=None))]
    fn encode_batch_with_offsets<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'_, PyString>>,
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let m = allowed.map(|a| &a.get().inner);
        let sizes: Vec<usize> = texts.iter().map(|t| str_data(t).map(|d| d.utf8_size_hint())).collect::<PyResult<_>>()?;
        let helpers = batch_helpers(num_threads, texts.len())?;
        if let (Some(helpers), false) = (helpers.clone(), on_caller(&helpers, &sizes)) {
            let encode = |tok: &Tokenizer, bytes: &[u8], scratch: &mut crate::Scratch| {
                tok.encode_with_offsets_scratch(bytes, m, OffsetUnit::Char, scratch)
            };
            return self.streamed_strs(py, &helpers, &texts, encode, |r| super::offsets::pair(py, &self.ints, &r));
        }
        let all = self.map_strs(py, &texts, num_threads, |tok, bytes, scratch| {
            tok.encode_with_offsets_scratch(bytes, m, OffsetUnit::Char, scratch)
        })?;
        super::offsets::pairs(py, &self.ints, &all)
    }

    /// `encode_bytes_with_offsets` of every input, in parallel: a list of `(ids, spans)`.
    #[pyo3(signature = (items, allowed=None, num_threads=None))]
    fn encode_bytes_batch_with_offsets<'py>(
        &self,
        py: Python<'py>,
        items: Vec<Bound<'_, PyBytes>>,
        allowed: Option<&Bound<'_, PySpecialMatcher>>,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let data: Vec<&[u8]> = items.iter().map(|b| b.as_bytes()).collect();
        let m = allowed.map(|a| &a.get().inner);
        let sizes: Vec<usize> = data.iter().map(|d| d.len()).collect();
        let helpers = batch_helpers(num_threads, data.len())?;
        let here = on_caller(&helpers, &sizes);
        if let (Some(helpers), false) = (helpers, here) {
            let tok = &self.inner;
            let encode = |k: usize, _: &mut Vec<u8>, scratch: &mut crate::Scratch| {
                Ok(tok.encode_with_offsets_scratch(data[k], m, OffsetUnit::Byte, scratch))
            };
            return self.streamed(py, &helpers, &sizes, encode, |r| super::offsets::pair(py, &self.ints, &r));
        }
        let all = run_batch(py, num_threads, here, &sizes, || self.inner.encode_batch_with_offsets(&data, m, OffsetUnit::Byte))?;
        super::offsets::pairs(py, &self.ints, &all)
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let read = read_ids(ids)?;
        // An unknown id before the first out-of-range one is reported first (index order).
        let out = self.inner.decode(&read.ids).map_err(|e| to_py(py, e))?;
        match read.out_of_range {
            Some(shown) => Err(unknown_id(py, &shown)),
            None => Ok(PyBytes::new(py, &out)),
        }
    }

    fn id_to_token<'py>(&self, py: Python<'py>, id: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        match read_id(id)?.and_then(|i| self.inner.id_bytes(i)) {
            Some(b) => Ok(PyBytes::new(py, b)),
            None => Err(unknown_id(py, &id.str().map(|s| s.to_string()).unwrap_or_default())),
        }
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

    /// The encoding options.
    #[getter]
    fn options(&self) -> PyOptions {
        PyOptions { inner: self.inner.options() }
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
