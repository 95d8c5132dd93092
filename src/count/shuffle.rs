//! A counting round spread over machines by candidate (a shuffle), with bounded memory on every
//! machine (docs/spec.md section 6, "Partitioned rounds"):
//!
//! 1. **map** — a [`BlockCounter`] counts a block of documents (given the earlier rounds'
//!    survivors), spilling its table to sorted runs past its memory budget exactly as the local
//!    [`Counter`](super::Counter) does, and splits the exact counts into `P` parts by
//!    [`partition_of`] the candidate's bytes, each part sorted bytewise;
//! 2. **reduce** — a [`CountsMerger`] takes part `p` of every block, sums equal candidates
//!    (u64, exact) in one streaming k-way merge (spilling merged runs to disk past its own budget)
//!    and applies the round's [`RoundSelector`]: the candidates of the partition that reach the
//!    round's threshold and either reach a later round's threshold or are among the partition's
//!    best `raw_vocab_size` (count descending, ties by bytes) — a [`Selection`];
//! 3. **coordinator** — [`Counter::end_round_with_selected`](super::Counter::end_round_with_selected)
//!    merges the partitions' selections and applies the global cut of the local round.
//!
//! This is exact: a candidate among the global best `m` is among the best `m` of its own
//! partition (a subset of all candidates), and the candidates that a later round needs are kept
//! by every partition; the coordinator's selection over this superset is the local selection.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use super::block::{BlockCounts, Survivors};
use super::cands::Cands;
use super::counter::{budget_slices, RoundStats};
use super::keys::CountKey;
use super::parallel::count_batch;
use super::rounds::{Round, MAX_CANDIDATE_LEN};
use super::select::Selector;
use super::table::{with_table, AnyTable};
use crate::error::Error;
use crate::spill::{read_record, write_record};

/// The part (of `parts`) that a candidate belongs to: a fixed 64-bit hash of its bytes (the same
/// on every machine and in every version of the format), mapped onto `0..parts`.
pub fn partition_of(bytes: &[u8], parts: usize) -> usize {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = K ^ (bytes.len() as u64);
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K);
        h ^= h >> 32;
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 32;
    ((h as u128 * parts.max(1) as u128) >> 64) as usize
}

/// Checks that `data` is well-formed records (little-endian `u16` length, bytes, `u64` count),
/// candidates of 1..=1024 bytes, sorted bytewise without repeats; returns how many.
pub(crate) fn check_records(data: &[u8]) -> Result<usize, Error> {
    let bad = |m: String| Error::Value(format!("not cnfmce block counts: {m}"));
    let mut pos = 0usize;
    let mut prev: Option<&[u8]> = None;
    let mut n = 0usize;
    while pos < data.len() {
        if data.len() - pos < 2 {
            return Err(bad("truncated record".into()));
        }
        let len = u16::from_le_bytes([data[pos], data[pos + 1]]) as usize;
        if len == 0 || len > MAX_CANDIDATE_LEN {
            return Err(bad(format!("a candidate of {len} bytes")));
        }
        if data.len() - pos - 2 < len + 8 {
            return Err(bad("truncated record".into()));
        }
        let k = &data[pos + 2..pos + 2 + len];
        if prev.is_some_and(|p| p >= k) {
            return Err(bad("candidates out of order or repeated".into()));
        }
        prev = Some(k);
        pos += 10 + len;
        n += 1;
    }
    Ok(n)
}

/// Reads the record at `pos` of well-formed data; returns (key range, count, next position).
#[inline]
fn record_at(data: &[u8], pos: usize) -> ((usize, usize), u64, usize) {
    let len = u16::from_le_bytes([data[pos], data[pos + 1]]) as usize;
    let start = pos + 2;
    let c = u64::from_le_bytes(data[start + len..start + len + 8].try_into().expect("8 bytes"));
    ((start, start + len), c, start + len + 8)
}

/// One sorted source of a merge.
enum Source {
    /// Checked records in memory.
    Memory { data: Vec<u8>, next: usize, key: (usize, usize), count: u64, live: bool },
    /// A run file written by this module (or by the counter's spill).
    File { r: BufReader<File>, path: PathBuf, key: Vec<u8>, count: u64, live: bool },
}

impl Source {
    fn memory(data: Vec<u8>) -> Self {
        let mut s = Source::Memory { data, next: 0, key: (0, 0), count: 0, live: true };
        s.advance().expect("memory sources cannot fail");
        s
    }

    fn file(path: &Path) -> Result<Self, Error> {
        let f = File::open(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        let r = BufReader::with_capacity(1 << 16, f);
        let mut s = Source::File { r, path: path.to_path_buf(), key: Vec::new(), count: 0, live: true };
        s.advance()?;
        Ok(s)
    }

    #[inline]
    fn live(&self) -> bool {
        match self {
            Source::Memory { live, .. } | Source::File { live, .. } => *live,
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        match self {
            Source::Memory { data, key, .. } => &data[key.0..key.1],
            Source::File { key, .. } => key,
        }
    }

    #[inline]
    fn count(&self) -> u64 {
        match self {
            Source::Memory { count, .. } | Source::File { count, .. } => *count,
        }
    }

    fn advance(&mut self) -> Result<(), Error> {
        match self {
            Source::Memory { data, next, key, count, live } => {
                if *next >= data.len() {
                    *live = false;
                    *data = Vec::new();
                } else {
                    let (k, c, n) = record_at(data, *next);
                    *key = k;
                    *count = c;
                    *next = n;
                }
            }
            Source::File { r, path, key, count, live } => {
                let mut len = [0u8; 2];
                match r.read_exact(&mut len) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                        *live = false;
                        return Ok(());
                    }
                    Err(e) => return Err(Error::Io(format!("{}: {e}", path.display()))),
                }
                key.resize(u16::from_le_bytes(len) as usize, 0);
                let mut c = [0u8; 8];
                r.read_exact(key)
                    .and_then(|_| r.read_exact(&mut c))
                    .map_err(|e| Error::Io(format!("{}: truncated run ({e})", path.display())))?;
                *count = u64::from_le_bytes(c);
            }
        }
        Ok(())
    }
}

/// A streaming k-way merge of sorted sources that sums equal candidates (exact u64).
pub(crate) struct Merged {
    sources: Vec<Source>,
    /// Indices of live sources, a binary min-heap by (key, index).
    heap: Vec<usize>,
    key: Vec<u8>,
}

impl Merged {
    fn new(sources: Vec<Source>) -> Self {
        let heap: Vec<usize> = (0..sources.len()).filter(|&i| sources[i].live()).collect();
        let mut m = Merged { sources, heap, key: Vec::new() };
        for i in (0..m.heap.len() / 2).rev() {
            m.sift_down(i);
        }
        m
    }

    #[inline]
    fn less(&self, a: usize, b: usize) -> bool {
        let (x, y) = (self.heap[a], self.heap[b]);
        match self.sources[x].key().cmp(self.sources[y].key()) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => x < y,
        }
    }

    fn sift_down(&mut self, mut i: usize) {
        let n = self.heap.len();
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut best = i;
            if l < n && self.less(l, best) {
                best = l;
            }
            if r < n && self.less(r, best) {
                best = r;
            }
            if best == i {
                return;
            }
            self.heap.swap(i, best);
            i = best;
        }
    }

    /// Advances the source at the top of the heap and restores the heap.
    fn pop_top(&mut self) -> Result<(), Error> {
        let top = self.heap[0];
        self.sources[top].advance()?;
        if !self.sources[top].live() {
            let last = self.heap.pop().expect("non-empty");
            if !self.heap.is_empty() {
                self.heap[0] = last;
            }
        }
        if !self.heap.is_empty() {
            self.sift_down(0);
        }
        Ok(())
    }

    /// The next distinct candidate with its summed count, in bytewise order.
    pub(crate) fn next(&mut self) -> Result<Option<(&[u8], u64)>, Error> {
        if self.heap.is_empty() {
            return Ok(None);
        }
        let top = self.heap[0];
        self.key.clear();
        self.key.extend_from_slice(self.sources[top].key());
        let mut sum = self.sources[top].count();
        self.pop_top()?;
        while let Some(&t) = self.heap.first() {
            if self.sources[t].key() != self.key.as_slice() {
                break;
            }
            sum = sum.checked_add(self.sources[t].count()).ok_or_else(|| {
                Error::Value(format!("the count of {:?} overflows u64", crate::show_bytes(&self.key)))
            })?;
            self.pop_top()?;
        }
        Ok(Some((&self.key, sum)))
    }
}

fn unique_path(dir: &Path, what: &str) -> PathBuf {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    dir.join(format!("{what}-{}-{}.bin", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)))
}

/// Writes a merged stream into one run file; returns the bytes written.
fn write_merged(path: &Path, m: &mut Merged) -> Result<u64, Error> {
    let f = File::create(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut written = 0u64;
    while let Some((k, c)) = m.next()? {
        written += write_record(&mut w, k, c)?;
    }
    w.flush().map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    Ok(written)
}

/// What a partitioned round's selection keeps (see the module documentation): made by
/// [`Counter::round_selector`](super::Counter::round_selector) on the coordinator, applied to a
/// partition's merged counts on a reducer. Travels as 25 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundSelector {
    /// The round's threshold.
    pub threshold: u64,
    /// The lowest threshold of the later rounds (None in the last round).
    pub later_threshold: Option<u64>,
    /// The raw vocabulary size `m`.
    pub raw_vocab_size: usize,
}

impl RoundSelector {
    pub(crate) fn selector(&self) -> Selector {
        Selector::new(self.threshold, self.later_threshold, self.raw_vocab_size)
    }

    /// Little-endian `u64` threshold, `u8` 1 when a later threshold follows (else 0), `u64`
    /// later threshold (0 when none), `u64` raw vocabulary size.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(25);
        out.extend_from_slice(&self.threshold.to_le_bytes());
        out.push(self.later_threshold.is_some() as u8);
        out.extend_from_slice(&self.later_threshold.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&(self.raw_vocab_size as u64).to_le_bytes());
        out
    }

    pub fn from_bytes(data: &[u8]) -> Result<Self, Error> {
        let bad = || Error::Value("not a cnfmce round selector".into());
        if data.len() != 25 || data[8] > 1 {
            return Err(bad());
        }
        let u = |i: usize| u64::from_le_bytes(data[i..i + 8].try_into().expect("8 bytes"));
        let m = usize::try_from(u(17)).map_err(|_| bad())?;
        if m == 0 {
            return Err(bad());
        }
        Ok(RoundSelector { threshold: u(0), later_threshold: (data[8] == 1).then(|| u(9)), raw_vocab_size: m })
    }

    /// The selection of one partition's complete counts.
    pub fn select(&self, counts: &BlockCounts) -> Selection {
        let mut sel = self.selector();
        for (k, c) in counts.iter() {
            sel.offer(k, c);
        }
        Selection::from_selector(sel)
    }
}

/// The candidates one partition keeps after a round (sorted by count descending, ties by
/// bytes), with the number of distinct candidates the partition had and how many reached the
/// threshold (for the round's statistics).
/// It also carries the partition's multi-byte characters at the threshold with their counts,
/// kept or not (see [`Counter::char_counts`](super::Counter::char_counts)).
#[derive(Default)]
pub struct Selection {
    pub(crate) kept: Cands,
    pub distinct: u64,
    pub retained: u64,
    /// Multi-byte characters at the threshold with their counts, sorted by bytes.
    pub(crate) chars: Vec<(Vec<u8>, u64)>,
}

impl Selection {
    fn from_selector(sel: Selector) -> Self {
        let done = sel.finish(Cands::default());
        Selection { kept: done.kept, distinct: done.distinct, retained: done.retained, chars: done.chars }
    }

    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.len() == 0
    }

    /// `(candidate, count)`, best first.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        (0..self.kept.len()).map(|i| self.kept.get(i))
    }

    /// The multi-byte characters at the threshold, kept or not, with their counts (by bytes).
    pub fn chars(&self) -> &[(Vec<u8>, u64)] {
        &self.chars
    }

    /// Little-endian `u64` distinct, `u64` retained, `u64` number of characters, the character
    /// records by bytes, then the candidate records (as in [`BlockCounts::to_bytes`]) best first.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&self.distinct.to_le_bytes());
        out.extend_from_slice(&self.retained.to_le_bytes());
        out.extend_from_slice(&(self.chars.len() as u64).to_le_bytes());
        for (k, c) in &self.chars {
            write_record(&mut out, k, *c).expect("characters are at most 4 bytes");
        }
        for (k, c) in self.iter() {
            write_record(&mut out, k, c).expect("candidates are at most 1024 bytes");
        }
        out
    }

    pub fn from_bytes(data: &[u8]) -> Result<Self, Error> {
        let bad = |m: String| Error::Value(format!("not a cnfmce selection: {m}"));
        if data.len() < 24 {
            return Err(bad("too short".into()));
        }
        let distinct = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
        let retained = u64::from_le_bytes(data[8..16].try_into().expect("8 bytes"));
        let n_chars = u64::from_le_bytes(data[16..24].try_into().expect("8 bytes"));
        let mut rest = &data[24..];
        let mut chars: Vec<(Vec<u8>, u64)> = Vec::new();
        for _ in 0..n_chars {
            match read_record(&mut rest).map_err(bad)? {
                Some((k, c)) if crate::refine::one_multibyte_char(&k) && chars.last().map_or(true, |l| l.0 < k) => {
                    chars.push((k, c))
                }
                Some(_) => return Err(bad("the characters are not single characters sorted by bytes".into())),
                None => return Err(bad("fewer characters than announced".into())),
            }
        }
        let mut kept = Cands::default();
        while let Some((k, c)) = read_record(&mut rest).map_err(bad)? {
            if k.is_empty() || k.len() > MAX_CANDIDATE_LEN {
                return Err(bad(format!("a candidate of {} bytes", k.len())));
            }
            kept.push(&k, c);
        }
        if (kept.len() as u64) > retained || retained > distinct {
            return Err(bad("inconsistent statistics".into()));
        }
        Ok(Selection { kept, distinct, retained, chars })
    }
}

/// The reducer of a partitioned round: sums sorted partial counts (parts of blocks) exactly in
/// one streaming merge. Parts are kept in memory up to `budget` bytes; past it they are merged
/// into a sorted run in `tmp_dir` (removed when the merger is dropped or finished), so memory
/// stays bounded whatever the number and size of the parts.
pub struct CountsMerger {
    budget: usize,
    tmp_dir: PathBuf,
    memory: Vec<Vec<u8>>,
    memory_bytes: usize,
    runs: Vec<PathBuf>,
    /// Records added, spills made and bytes spilled.
    pub records: u64,
    pub spills: usize,
    pub spilled_bytes: u64,
}

impl CountsMerger {
    /// `tmp_dir`: an existing directory the merger may write runs into.
    pub fn new(budget: usize, tmp_dir: PathBuf) -> Self {
        CountsMerger {
            budget: budget.max(1),
            tmp_dir,
            memory: Vec::new(),
            memory_bytes: 0,
            runs: Vec::new(),
            records: 0,
            spills: 0,
            spilled_bytes: 0,
        }
    }

    /// Adds partial counts as records sorted bytewise (what [`BlockCounts::to_bytes`] and
    /// [`BlockCounter::finish`] write); refuses malformed or unsorted data.
    pub fn add_records(&mut self, data: Vec<u8>) -> Result<(), Error> {
        self.records += check_records(&data)? as u64;
        if data.is_empty() {
            return Ok(());
        }
        self.memory_bytes += data.len();
        self.memory.push(data);
        if self.memory_bytes > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Adds counts in any order (repeats are summed).
    pub fn add_counts(&mut self, mut counts: Vec<(Vec<u8>, u64)>) -> Result<(), Error> {
        if let Some((k, _)) = counts.iter().find(|(k, _)| k.is_empty() || k.len() > MAX_CANDIDATE_LEN) {
            return Err(Error::Value(format!("a candidate of {} bytes (1 to {MAX_CANDIDATE_LEN} allowed)", k.len())));
        }
        counts.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut data = Vec::new();
        let mut i = 0;
        while i < counts.len() {
            let mut sum = counts[i].1;
            let mut j = i + 1;
            while j < counts.len() && counts[j].0 == counts[i].0 {
                sum = sum.checked_add(counts[j].1).ok_or_else(|| {
                    Error::Value(format!("the count of {:?} overflows u64", crate::show_bytes(&counts[i].0)))
                })?;
                j += 1;
            }
            write_record(&mut data, &counts[i].0, sum)?;
            i = j;
        }
        self.add_records(data)
    }

    fn spill(&mut self) -> Result<(), Error> {
        let memory = std::mem::take(&mut self.memory);
        self.memory_bytes = 0;
        let path = unique_path(&self.tmp_dir, "merge");
        let mut m = Merged::new(memory.into_iter().map(Source::memory).collect());
        let written = write_merged(&path, &mut m);
        self.runs.push(path);
        self.spilled_bytes += written?;
        self.spills += 1;
        Ok(())
    }

    /// The merged stream of everything added (the runs are removed when the merger is dropped).
    pub(crate) fn stream(&mut self) -> Result<Merged, Error> {
        let mut sources = Vec::with_capacity(self.runs.len() + self.memory.len());
        for p in &self.runs {
            sources.push(Source::file(p)?);
        }
        sources.extend(std::mem::take(&mut self.memory).into_iter().map(Source::memory));
        self.memory_bytes = 0;
        Ok(Merged::new(sources))
    }

    /// The selection of the merged counts.
    pub fn select(mut self, selector: &RoundSelector) -> Result<Selection, Error> {
        let mut sel = selector.selector();
        let mut m = self.stream()?;
        while let Some((k, c)) = m.next()? {
            sel.offer(k, c);
        }
        Ok(Selection::from_selector(sel))
    }

    /// The merged counts, bytewise, in chunks of at most `chunk` candidates (`f` is called once
    /// per chunk).
    pub fn for_each_chunk(
        mut self,
        chunk: usize,
        mut f: impl FnMut(Vec<(Vec<u8>, u64)>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let mut m = self.stream()?;
        let mut buf = Vec::with_capacity(chunk.clamp(1, 1 << 16));
        while let Some((k, c)) = m.next()? {
            buf.push((k.to_vec(), c));
            if buf.len() >= chunk.max(1) {
                f(std::mem::take(&mut buf))?;
            }
        }
        if !buf.is_empty() {
            f(buf)?;
        }
        Ok(())
    }

    /// The best `limit` merged candidates (all when None), count descending, ties by bytes.
    pub fn top(mut self, limit: Option<usize>) -> Result<Vec<(Vec<u8>, u64)>, Error> {
        let m_limit = limit.unwrap_or(usize::MAX >> 1).max(1);
        let mut sel = Selector::new(0, None, m_limit);
        let mut m = self.stream()?;
        while let Some((k, c)) = m.next()? {
            sel.offer(k, c);
        }
        let kept = sel.finish(Cands::default()).kept;
        Ok((0..kept.len()).map(|i| kept.get(i)).map(|(k, c)| (k.to_vec(), c)).collect())
    }

    /// Bytes held in memory now.
    pub fn memory_bytes(&self) -> usize {
        self.memory_bytes
    }
}

impl Drop for CountsMerger {
    fn drop(&mut self) {
        for p in &self.runs {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// One part of a block's counts: records in memory, or a file of records (when the block's
/// counting spilled; the caller reads and removes it).
pub enum Part {
    Memory(Vec<u8>),
    File(PathBuf),
}

/// The map side of a partitioned round: counts the documents of a block (in as many batches as
/// needed) into one exact table with the local counter's memory budget and spilling, then splits
/// the counts into parts by [`partition_of`].
pub struct BlockCounter {
    round: Round,
    table: Option<AnyTable>,
    budget: usize,
    tmp_dir: PathBuf,
    runs: Vec<PathBuf>,
    pub stats: RoundStats,
    /// Documents and bytes counted.
    pub documents: u64,
    pub bytes: u64,
}

impl BlockCounter {
    /// `budget`: table bytes before spilling into `tmp_dir` (an existing directory).
    pub fn new(round: Round, budget: usize, tmp_dir: PathBuf) -> Result<Self, Error> {
        round.check()?;
        Ok(BlockCounter {
            round,
            table: Some(AnyTable::for_round(&round)),
            budget: budget.max(1),
            tmp_dir,
            runs: Vec::new(),
            stats: RoundStats::default(),
            documents: 0,
            bytes: 0,
        })
    }

    /// Counts a batch (parallel on the current rayon pool), extending only `survivors` (the
    /// earlier rounds' candidates at this round's threshold; unused in a round from length 1).
    /// The budget is checked as in [`Counter::add`](super::Counter::add).
    pub fn add(&mut self, docs: &[&[u8]], survivors: &Survivors) -> Result<(), Error> {
        let r = self.round;
        let trie = (r.min_len > 1).then(|| survivors.trie());
        for (slice, size) in budget_slices(docs) {
            let table = self.table.as_ref().ok_or_else(|| Error::Value("the block is finished".into()))?;
            with_table!(table, t => count_batch(t, &docs[slice.clone()], &r, trie));
            let bytes = with_table!(table, t => t.bytes());
            self.stats.peak_table_bytes = self.stats.peak_table_bytes.max(bytes);
            if with_table!(table, t => t.bytes_after_growth()) > self.budget {
                self.spill()?;
            }
            self.documents += slice.len() as u64;
            self.bytes += size as u64;
        }
        Ok(())
    }

    /// Estimated bytes of the table now.
    pub fn table_bytes(&self) -> usize {
        self.table.as_ref().map_or(0, |t| with_table!(t, t => t.bytes()))
    }

    fn spill(&mut self) -> Result<(), Error> {
        let path = unique_path(&self.tmp_dir, "block");
        let written = match self.table.as_ref() {
            None => return Ok(()),
            Some(t) => with_table!(t, t => {
                let sorted = t.drain_sorted();
                crate::spill::write_run(&path, sorted.iter().map(|(k, c)| (k.bytes(), *c)))
            }),
        };
        self.runs.push(path);
        self.stats.spilled_bytes += written?;
        self.stats.spills += 1;
        Ok(())
    }

    /// The block's exact counts split into `parts` parts by [`partition_of`], each sorted
    /// bytewise: in memory when nothing spilled, else as files in `tmp_dir` (written in one
    /// merge of the runs).
    pub fn finish(mut self, parts: usize) -> Result<Vec<Part>, Error> {
        if parts == 0 {
            return Err(Error::Value("parts must be positive".into()));
        }
        let table = self.table.take().ok_or_else(|| Error::Value("the block is finished".into()))?;
        // Bucketed and sorted by key (the keys' order is bytewise and inline words compare
        // without touching the heap), the bytes written out only once, into the records.
        let encoded: Vec<Vec<u8>> = with_table!(&table, t => {
            let mut buckets: Vec<Vec<_>> = (0..parts).map(|_| Vec::new()).collect();
            let mut buf = Vec::with_capacity(64);
            for (k, c) in t.take_all() {
                let p = if parts == 1 {
                    0
                } else {
                    buf.clear();
                    k.write_bytes(&mut buf);
                    partition_of(&buf, parts)
                };
                buckets[p].push((k, c));
            }
            buckets
                .into_par_iter()
                .map(|mut b| {
                    b.sort_unstable_by(|x, y| x.0.cmp(&y.0));
                    let mut out = Vec::with_capacity(b.len() * 24);
                    let mut buf = Vec::with_capacity(64);
                    for (k, c) in b {
                        buf.clear();
                        k.write_bytes(&mut buf);
                        write_record(&mut out, &buf, c).expect("candidates are at most 1024 bytes");
                    }
                    out
                })
                .collect()
        });
        drop(table);
        if self.runs.is_empty() {
            return Ok(encoded.into_iter().map(Part::Memory).collect());
        }
        // Spilled: merge the runs and the table once, writing each part to its own file.
        let mut sources = Vec::with_capacity(self.runs.len() + parts);
        for p in &self.runs {
            sources.push(Source::file(p)?);
        }
        sources.extend(encoded.into_iter().map(Source::memory));
        let mut merged = Merged::new(sources);
        let paths: Vec<PathBuf> = (0..parts).map(|_| unique_path(&self.tmp_dir, "part")).collect();
        let result = (|| {
            let mut writers = Vec::with_capacity(parts);
            for p in &paths {
                let f = File::create(p).map_err(|e| Error::Io(format!("{}: {e}", p.display())))?;
                writers.push(BufWriter::with_capacity(1 << 16, f));
            }
            while let Some((k, c)) = merged.next()? {
                write_record(&mut writers[partition_of(k, parts)], k, c)?;
            }
            for w in &mut writers {
                w.flush()?;
            }
            Ok(())
        })();
        drop(merged);
        for p in self.runs.drain(..) {
            let _ = std::fs::remove_file(p);
        }
        if let Err(e) = result {
            for p in &paths {
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
        Ok(paths.into_iter().map(Part::File).collect())
    }
}

impl Drop for BlockCounter {
    fn drop(&mut self) {
        for p in &self.runs {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{count_block, Counter};
    use super::*;

    const DOCS: &[&str] = &[
        "1600 B.C. was a significant year in human history.",
        "the cat sat on the mat; the cat sat on the hat",
        "co-advisor co-advisor co-advisors 漢字漢字 かなカナ e\u{301}te\u{301}",
        "the the the the the cat cat and the dog, the dog",
        "    indented code() { return x + y; }\n    indented code() { return x - y; }",
        "significant significance signify the the cat",
    ];

    fn rounds() -> Vec<Round> {
        vec![
            Round { min_len: 1, max_len: 5, threshold: 0 },
            Round { min_len: 6, max_len: 10, threshold: 2 },
            Round { min_len: 11, max_len: 40, threshold: 2 },
        ]
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cnfmce-shuffle-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn local(docs: &[&[u8]], m: usize) -> Vec<(Vec<u8>, u64)> {
        let mut c = Counter::new(rounds(), m, 1 << 30, std::env::temp_dir()).unwrap();
        for _ in rounds() {
            c.begin_round().unwrap();
            c.add(docs).unwrap();
            c.end_round().unwrap();
        }
        c.result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect()
    }

    /// A small deterministic generator (no dependency) for random partitionings.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n.max(1)
        }
    }

    fn read_part(p: Part) -> Vec<u8> {
        match p {
            Part::Memory(v) => v,
            Part::File(path) => {
                let v = std::fs::read(&path).unwrap();
                std::fs::remove_file(&path).unwrap();
                v
            }
        }
    }

    /// Any split into blocks, any number of partitions, spilled or not on the map and reduce
    /// sides, selections merged in any order: the local counter's result, exactly.
    #[test]
    fn partitioned_selection_equals_local_selection() {
        let dir = tmp("select");
        let mut docs: Vec<&[u8]> = DOCS.iter().map(|d| d.as_bytes()).collect();
        docs.extend(DOCS.iter().rev().map(|d| d.as_bytes()));
        let mut rng = Lcg(7);
        let ms = [1, 3, 7, 20, 60, 1000];
        let wants: Vec<Vec<(Vec<u8>, u64)>> = ms.iter().map(|&m| local(&docs, m)).collect();
        let chars = {
            let mut c = Counter::new(rounds(), 1, 1 << 30, std::env::temp_dir()).unwrap();
            for _ in rounds() {
                c.begin_round().unwrap();
                c.add(&docs).unwrap();
                c.end_round().unwrap();
            }
            c.char_counts().to_vec()
        };
        assert!(chars.len() >= 6);
        for trial in 0..24 {
            let m = ms[trial % 6];
            let want = &wants[trial % 6];
            let parts = 1 + rng.next(9);
            let nblocks = 1 + rng.next(docs.len());
            let budget = if trial % 3 == 0 { 1 } else { 1 << 30 };
            let mut c = Counter::new(rounds(), m, 1 << 30, std::env::temp_dir()).unwrap();
            for _ in rounds() {
                c.begin_round().unwrap();
                let survivors = Survivors::from_bytes(&c.survivors().unwrap().to_bytes()).unwrap();
                let r = c.rounds()[c.round()];
                let selector = RoundSelector::from_bytes(&c.round_selector().unwrap().to_bytes()).unwrap();
                // random assignment of documents to blocks
                let mut blocks: Vec<Vec<&[u8]>> = vec![Vec::new(); nblocks];
                for d in &docs {
                    blocks[rng.next(nblocks)].push(d);
                }
                let mut mergers: Vec<CountsMerger> = (0..parts).map(|_| CountsMerger::new(budget.max(64), dir.clone())).collect();
                for b in &blocks {
                    let mut bc = BlockCounter::new(r, budget, dir.clone()).unwrap();
                    for chunk in b.chunks(2) {
                        bc.add(chunk, &survivors).unwrap();
                    }
                    for (p, part) in bc.finish(parts).unwrap().into_iter().enumerate() {
                        mergers[p].add_records(read_part(part)).unwrap();
                    }
                }
                let mut sels: Vec<Selection> = mergers
                    .into_iter()
                    .map(|mg| Selection::from_bytes(&mg.select(&selector).unwrap().to_bytes()).unwrap())
                    .collect();
                if trial % 2 == 1 {
                    sels.reverse();
                }
                c.end_round_with_selected(&sels).unwrap();
            }
            let got: Vec<(Vec<u8>, u64)> = c.result().into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
            assert_eq!(&got, want, "trial {trial}: m {m}, {parts} parts, {nblocks} blocks, budget {budget}");
            assert_eq!(c.char_counts(), &chars[..], "trial {trial}: characters");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn round_statistics_match() {
        let docs: Vec<&[u8]> = DOCS.iter().map(|d| d.as_bytes()).collect();
        let mut a = Counter::new(rounds(), 30, 1 << 30, std::env::temp_dir()).unwrap();
        let mut b = Counter::new(rounds(), 30, 1 << 30, std::env::temp_dir()).unwrap();
        for _ in rounds() {
            a.begin_round().unwrap();
            a.add(&docs).unwrap();
            let sa = a.end_round().unwrap();
            b.begin_round().unwrap();
            let s = b.survivors().unwrap();
            let r = b.rounds()[b.round()];
            let sel = b.round_selector().unwrap();
            let mut mg: Vec<CountsMerger> = (0..4).map(|_| CountsMerger::new(1 << 20, std::env::temp_dir())).collect();
            let mut bc = BlockCounter::new(r, 1 << 30, std::env::temp_dir()).unwrap();
            bc.add(&docs, &s).unwrap();
            for (p, part) in bc.finish(4).unwrap().into_iter().enumerate() {
                mg[p].add_records(read_part(part)).unwrap();
            }
            let sels: Vec<Selection> = mg.into_iter().map(|m| m.select(&sel).unwrap()).collect();
            let sb = b.end_round_with_selected(&sels).unwrap();
            assert_eq!((sa.distinct, sa.retained), (sb.distinct, sb.retained));
        }
    }

    #[test]
    fn parts_are_partitions_of_the_block_counts() {
        let docs: Vec<&[u8]> = DOCS.iter().map(|d| d.as_bytes()).collect();
        let none = Survivors::from_sorted(&[]).unwrap();
        // every key type of the tables: inline words of 16 and 32 bytes, boxed slices
        for max_len in [8, 20, 40] {
            let r = Round { min_len: 1, max_len, threshold: 0 };
            let whole = count_block(&docs, &r, &none);
            for (parts, budget) in [(1, 1 << 30), (5, 1 << 30), (3, 1), (1, 1)] {
                let mut bc = BlockCounter::new(r, budget, std::env::temp_dir()).unwrap();
                bc.add(&docs, &none).unwrap();
                let spilled = bc.stats.spills > 0;
                assert_eq!(spilled, budget == 1);
                let mut merger = CountsMerger::new(1 << 30, std::env::temp_dir());
                for (p, part) in bc.finish(parts).unwrap().into_iter().enumerate() {
                    let data = read_part(part);
                    let b = BlockCounts::from_bytes(&data).unwrap();
                    assert!(b.iter().all(|(k, _)| partition_of(k, parts) == p));
                    merger.add_records(data).unwrap();
                }
                let mut got = Vec::new();
                merger.for_each_chunk(3, |c| { got.extend(c); Ok(()) }).unwrap();
                let want: Vec<(Vec<u8>, u64)> = whole.iter().map(|(k, c)| (k.to_vec(), c)).collect();
                assert_eq!(got, want, "{parts} parts, budget {budget}, max_len {max_len}");
            }
        }
    }

    #[test]
    fn merger_streams_and_spills() {
        let dir = tmp("merge");
        let mut rng = Lcg(3);
        let mut want = std::collections::BTreeMap::<Vec<u8>, u64>::new();
        let mut small = CountsMerger::new(100, dir.clone());
        let mut big = CountsMerger::new(1 << 30, dir.clone());
        for _ in 0..30 {
            let mut batch = Vec::new();
            for _ in 0..40 {
                let k: Vec<u8> = (0..1 + rng.next(3)).map(|_| b'a' + rng.next(4) as u8).collect();
                let c = 1 + rng.next(5) as u64;
                *want.entry(k.clone()).or_default() += c;
                batch.push((k, c));
            }
            small.add_counts(batch.clone()).unwrap();
            big.add_counts(batch).unwrap();
        }
        assert!(small.spills > 0 && big.spills == 0);
        assert!(std::fs::read_dir(&dir).unwrap().count() > 0);
        let mut best: Vec<(Vec<u8>, u64)> = want.into_iter().collect();
        best.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        assert_eq!(small.top(Some(10)).unwrap(), best[..10].to_vec());
        assert_eq!(big.top(None).unwrap(), best);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "runs removed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_data_is_refused() {
        let mut m = CountsMerger::new(1 << 20, std::env::temp_dir());
        let mut rec = Vec::new();
        write_record(&mut rec, b"b", 1).unwrap();
        write_record(&mut rec, b"a", 1).unwrap();
        assert!(m.add_records(rec.clone()).is_err()); // unsorted
        assert!(m.add_records(rec[..5].to_vec()).is_err()); // truncated
        assert!(m.add_records(vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err()); // empty candidate
        assert!(m.add_counts(vec![(Vec::new(), 1)]).is_err());
        let mut big = Vec::new();
        write_record(&mut big, b"a", u64::MAX).unwrap();
        m.add_records(big.clone()).unwrap();
        m.add_records(big).unwrap();
        assert!(m.top(None).is_err()); // overflow
        assert!(RoundSelector::from_bytes(&[0; 24]).is_err());
        assert!(Selection::from_bytes(&[0; 15]).is_err());
        assert!(Selection::from_bytes(&[0; 23]).is_err());
        {
            // characters: announced but missing, not a single character, out of order
            let head = |n: u64| [1u64.to_le_bytes(), 1u64.to_le_bytes(), n.to_le_bytes()].concat();
            assert!(Selection::from_bytes(&head(1)).is_err());
            for recs in [vec!["ab"], vec!["中", "é"], vec!["中文"]] {
                let mut d = head(recs.len() as u64);
                for r in &recs {
                    write_record(&mut d, r.as_bytes(), 1).unwrap();
                }
                assert!(Selection::from_bytes(&d).is_err(), "{recs:?}");
            }
            let mut d = head(2);
            write_record(&mut d, "é".as_bytes(), 3).unwrap();
            write_record(&mut d, "中".as_bytes(), 1).unwrap();
            let s = Selection::from_bytes(&d).unwrap();
            assert_eq!(s.chars().len(), 2);
            assert_eq!(Selection::from_bytes(&s.to_bytes()).unwrap().chars(), s.chars());
        }
        let sel = RoundSelector { threshold: 2, later_threshold: Some(5), raw_vocab_size: 9 };
        assert_eq!(RoundSelector::from_bytes(&sel.to_bytes()).unwrap(), sel);
        let last = RoundSelector { later_threshold: None, ..sel };
        assert_eq!(RoundSelector::from_bytes(&last.to_bytes()).unwrap(), last);
        // the same candidate from two selections: not a partition
        let r = Round { min_len: 1, max_len: 3, threshold: 0 };
        let mut c = Counter::new(vec![r], 10, 1 << 30, std::env::temp_dir()).unwrap();
        c.begin_round().unwrap();
        let one = c.round_selector().unwrap().select(&count_block(&[b"ab"], &r, &Survivors::from_sorted(&[]).unwrap()));
        let two = Selection::from_bytes(&one.to_bytes()).unwrap();
        assert!(c.end_round_with_selected(&[one, two]).is_err());
        assert!(BlockCounter::new(r, 1, std::env::temp_dir()).unwrap().finish(0).is_err());
    }

    #[test]
    fn partition_function_is_fixed() {
        // part of the wire format: the same on every machine
        assert_eq!(partition_of(b"the", 1), 0);
        let spread: Vec<usize> = (0..1000u32).map(|i| partition_of(&i.to_le_bytes(), 7)).collect();
        for p in 0..7 {
            let n = spread.iter().filter(|&&q| q == p).count();
            assert!((100..190).contains(&n), "part {p}: {n}");
        }
        assert_eq!(partition_of(b"hello world", 1000), partition_of(b"hello world", 1000));
    }
}
