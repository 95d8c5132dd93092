//! Sorted runs of `(candidate, count)` spilled to disk when the counting tables outgrow their
//! memory budget, and the k-way merge that sums them back into one sorted stream.
//!
//! Record format (little endian): `u16 length`, the candidate bytes, `u64 count`. Runs are
//! sorted bytewise; equal candidates in different runs are summed by the merge. The same records
//! carry the partial counts of a block between machines (`BlockCounts::to_bytes`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// Appends one record to `w`; returns its size in bytes.
pub fn write_record(w: &mut impl Write, k: &[u8], c: u64) -> Result<u64, Error> {
    let len = u16::try_from(k.len()).map_err(|_| Error::Value("candidate longer than 65535 bytes".into()))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(k)?;
    w.write_all(&c.to_le_bytes())?;
    Ok(10 + k.len() as u64)
}

/// Reads one record from `r`: `Ok(None)` at a clean end, `Err(message)` when the input ends
/// inside a record or cannot be read.
pub fn read_record(r: &mut impl Read) -> Result<Option<(Vec<u8>, u64)>, String> {
    let mut len = [0u8; 2];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let mut k = vec![0u8; u16::from_le_bytes(len) as usize];
    let mut c = [0u8; 8];
    r.read_exact(&mut k).and_then(|_| r.read_exact(&mut c)).map_err(|e| format!("truncated record ({e})"))?;
    Ok(Some((k, u64::from_le_bytes(c))))
}

/// Writes sorted `(bytes, count)` records to `path`.
pub fn write_run<B: AsRef<[u8]>>(
    path: &Path,
    records: impl Iterator<Item = (B, u64)>,
) -> Result<u64, Error> {
    let f = File::create(path).map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut written = 0u64;
    for (k, c) in records {
        written += write_record(&mut w, k.as_ref(), c)?;
    }
    w.flush()?;
    Ok(written)
}

struct RunReader {
    r: BufReader<File>,
    path: PathBuf,
}

impl RunReader {
    fn next(&mut self) -> Result<Option<(Vec<u8>, u64)>, Error> {
        read_record(&mut self.r).map_err(|e| Error::Io(format!("{}: spill run: {e}", self.path.display())))
    }
}

/// Merges sorted sources (spill runs plus one sorted in-memory sequence) into one sorted stream
/// of `(bytes, summed count)`, calling `sink` once per distinct candidate.
pub fn merge(
    runs: &[PathBuf],
    memory: impl Iterator<Item = (Vec<u8>, u64)>,
    mut sink: impl FnMut(Vec<u8>, u64) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut readers = Vec::with_capacity(runs.len());
    for p in runs {
        let f = File::open(p).map_err(|e| Error::Io(format!("{}: {e}", p.display())))?;
        readers.push(RunReader { r: BufReader::with_capacity(1 << 20, f), path: p.clone() });
    }
    let mem_idx = readers.len();
    let mut mem = memory;
    // Heap of (key, source); Reverse for a min-heap.
    let mut heap: BinaryHeap<Reverse<(Vec<u8>, usize, u64)>> = BinaryHeap::new();
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some((k, c)) = r.next()? {
            heap.push(Reverse((k, i, c)));
        }
    }
    if let Some((k, c)) = mem.next() {
        heap.push(Reverse((k, mem_idx, c)));
    }
    let mut cur: Option<(Vec<u8>, u64)> = None;
    while let Some(Reverse((k, src, c))) = heap.pop() {
        let next = if src == mem_idx { mem.next() } else { readers[src].next()? };
        if let Some((nk, nc)) = next {
            heap.push(Reverse((nk, src, nc)));
        }
        match &mut cur {
            Some((ck, cc)) if *ck == k => *cc += c,
            _ => {
                if let Some((ck, cc)) = cur.take() {
                    sink(ck, cc)?;
                }
                cur = Some((k, c));
            }
        }
    }
    if let Some((ck, cc)) = cur {
        sink(ck, cc)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_and_sum() {
        let dir = std::env::temp_dir().join(format!("cnfmce-spill-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a");
        let b = dir.join("b");
        let ra: Vec<(&[u8], u64)> = vec![(b"a", 1), (b"b", 2), (b"d", 5)];
        let rb: Vec<(&[u8], u64)> = vec![(b"b", 3), (b"c", 1)];
        write_run(&a, ra.into_iter()).unwrap();
        write_run(&b, rb.into_iter()).unwrap();
        let mem = vec![(b"a".to_vec(), 10), (b"e".to_vec(), 1)];
        let mut out = Vec::new();
        merge(&[a, b], mem.into_iter(), |k, c| {
            out.push((k, c));
            Ok(())
        })
        .unwrap();
        let want: Vec<(Vec<u8>, u64)> =
            vec![(b"a".to_vec(), 11), (b"b".to_vec(), 5), (b"c".to_vec(), 1), (b"d".to_vec(), 5), (b"e".to_vec(), 1)];
        assert_eq!(out, want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
