//! CNF filtering (paper section 3.1.2; SPEC section 4): encode the training documents once with
//! MCE over the raw vocabulary, count how often each token is used, keep the most used.
//!
//! The result always holds all 256 single bytes. Its ids are ordered by usage, most used first,
//! ties by bytes. When fewer tokens were used than requested, the unused raw tokens with the
//! highest counting-phase rank fill the remaining places (usage 0, so they come last, by bytes).

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::error::Error;
use crate::mce::{Encoder, Options};
use crate::vocab::Vocab;

/// Usage counting over a raw vocabulary whose ids are its counting-phase ranks.
pub struct Filter {
    encoder: Encoder,
    usage: Vec<AtomicU64>,
    tokens: u64,
    bytes: u64,
}

/// One selected token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected {
    pub token: Vec<u8>,
    pub usage: u64,
    /// Its id in the raw vocabulary (its counting rank).
    pub raw_id: u32,
}

impl Filter {
    /// The raw vocabulary of SPEC section 4 from counts: ids ranked by count (descending, ties
    /// by bytes), the first `limit` kept, then the missing single bytes in byte order.
    pub fn rank(mut counts: Vec<(Vec<u8>, u64)>, limit: Option<usize>) -> Result<Vec<Vec<u8>>, Error> {
        if counts.iter().any(|c| c.0.is_empty()) {
            return Err(Error::Value("an empty candidate in the counts".into()));
        }
        crate::raw_cut::by_count(&mut counts);
        if let Some(l) = limit {
            counts.truncate(l);
        }
        let mut have = [false; 256];
        for (t, _) in &counts {
            if t.len() == 1 {
                have[t[0] as usize] = true;
            }
        }
        let mut raw: Vec<Vec<u8>> = counts.into_iter().map(|c| c.0).collect();
        raw.extend((0..=255u8).filter(|&b| !have[b as usize]).map(|b| vec![b]));
        Ok(raw)
    }

    /// `raw`: the raw vocabulary, id = index (ranked by count); must hold all 256 single bytes.
    pub fn new(raw: Vec<Vec<u8>>, options: Options) -> Result<Self, Error> {
        Self::with_ids(raw.into_iter().enumerate().map(|(i, t)| (i as u32, t)).collect(), options)
    }

    /// A vocabulary whose ids are given, `(id, bytes)`, unused ids allowed (as a base vocabulary
    /// with extension candidates, [`crate::Extender`]): the usage has one entry per id up to the
    /// largest. Must hold all 256 single bytes.
    pub fn with_ids(entries: Vec<(u32, Vec<u8>)>, options: Options) -> Result<Self, Error> {
        let vocab = Vocab::new(entries)?;
        let usage = (0..vocab.id_bound()).map(|_| AtomicU64::new(0)).collect();
        Ok(Filter { encoder: Encoder::new(vocab, options), usage, tokens: 0, bytes: 0 })
    }

    pub fn vocab(&self) -> &Vocab {
        self.encoder.vocab()
    }

    /// The MCE encoder over the raw vocabulary.
    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }

    /// Encodes a batch of documents (parallel on the current rayon pool) and adds the usage.
    pub fn add(&mut self, docs: &[&[u8]]) {
        self.tokens += count_usage(&self.encoder, docs, &self.usage);
        self.bytes += docs.iter().map(|d| d.len() as u64).sum::<u64>();
    }

    /// The usage of a block of documents alone (the filter's own totals are left as they are):
    /// what each machine of a distributed run computes for its part of the corpus.
    pub fn usage_of(&self, docs: &[&[u8]]) -> BlockUsage {
        let usage: Vec<AtomicU64> = (0..self.usage.len()).map(|_| AtomicU64::new(0)).collect();
        let tokens = count_usage(&self.encoder, docs, &usage);
        BlockUsage {
            usage: usage.into_iter().map(AtomicU64::into_inner).collect(),
            tokens,
            bytes: docs.iter().map(|d| d.len() as u64).sum(),
        }
    }

    /// Adds the usage of blocks encoded elsewhere (by filters over the same raw vocabulary).
    pub fn add_usage(&mut self, block: &BlockUsage) -> Result<(), Error> {
        if block.usage.len() != self.usage.len() {
            return Err(Error::Value(format!(
                "the usage has {} entries but the raw vocabulary {} tokens",
                block.usage.len(),
                self.usage.len()
            )));
        }
        for (u, &b) in self.usage.iter().zip(&block.usage) {
            let sum = u.load(Ordering::Relaxed).checked_add(b).ok_or_else(overflow)?;
            u.store(sum, Ordering::Relaxed);
        }
        self.tokens = self.tokens.checked_add(block.tokens).ok_or_else(overflow)?;
        self.bytes = self.bytes.checked_add(block.bytes).ok_or_else(overflow)?;
        Ok(())
    }

    /// Tokens produced and bytes encoded so far.
    pub fn totals(&self) -> (u64, u64) {
        (self.tokens, self.bytes)
    }

    /// Usage count of every raw id.
    pub fn usage(&self) -> Vec<u64> {
        self.usage.iter().map(|u| u.load(Ordering::Relaxed)).collect()
    }

    /// The `k` tokens of the final vocabulary in id order (see the module documentation).
    pub fn select(&self, k: usize) -> Result<Vec<Selected>, Error> {
        if k < 256 {
            return Err(Error::Value(format!(
                "the vocabulary needs at least 256 regular tokens (one per byte), asked for {k}"
            )));
        }
        let vocab = self.vocab();
        let usage = self.usage();
        let mut singles = Vec::with_capacity(256);
        let mut used = Vec::new();
        let mut unused = Vec::new();
        for (id, tok) in vocab.iter() {
            let u = usage[id as usize];
            let s = Selected { token: tok.to_vec(), usage: u, raw_id: id };
            if tok.len() == 1 {
                singles.push(s);
            } else if u > 0 {
                used.push(s);
            } else {
                unused.push(s);
            }
        }
        let by_usage = |a: &Selected, b: &Selected| b.usage.cmp(&a.usage).then_with(|| a.token.cmp(&b.token));
        used.par_sort_unstable_by(by_usage);
        // Unused tokens are taken by counting rank (raw id), best first.
        unused.sort_unstable_by_key(|s| s.raw_id);
        let rest = k - singles.len();
        let mut chosen = singles;
        chosen.extend(used.into_iter().chain(unused).take(rest));
        chosen.par_sort_unstable_by(by_usage);
        Ok(chosen)
    }
}

/// Encodes `docs` with `encoder` (parallel on the current rayon pool), adding one to `usage[id]`
/// per token; returns the number of tokens.
fn count_usage(encoder: &Encoder, docs: &[&[u8]], usage: &[AtomicU64]) -> u64 {
    docs.par_iter()
        .map_init(
            Vec::new,
            |out, doc| {
                out.clear();
                // The thread's buffers (and piece cache) outlive the rayon split.
                crate::mce::with_thread_scratch(|scratch| encoder.encode_into(doc, scratch, out));
                for &id in out.iter() {
                    usage[id as usize].fetch_add(1, Ordering::Relaxed);
                }
                out.len() as u64
            },
        )
        .sum()
}

fn overflow() -> Error {
    Error::Value("a usage count overflows u64".into())
}

/// The usage of the raw vocabulary in some documents: one u64 per raw id, with the tokens
/// produced and the bytes encoded. Sums of blocks are exact, in any order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockUsage {
    pub usage: Vec<u64>,
    pub tokens: u64,
    pub bytes: u64,
}

impl BlockUsage {
    /// The sum of two blocks' usage over the same raw vocabulary (`BlockUsage::default()`, no
    /// documents, is the neutral element).
    pub fn merge(&self, other: &BlockUsage) -> Result<BlockUsage, Error> {
        let nothing = |b: &BlockUsage| b.usage.is_empty() && b.tokens == 0 && b.bytes == 0;
        if nothing(self) || nothing(other) {
            return Ok(if nothing(self) { other.clone() } else { self.clone() });
        }
        if other.usage.len() != self.usage.len() {
            return Err(Error::Value(format!(
                "usage over raw vocabularies of different sizes ({} and {})",
                self.usage.len(),
                other.usage.len()
            )));
        }
        let mut out = self.clone();
        for (u, &b) in out.usage.iter_mut().zip(&other.usage) {
            *u = u.checked_add(b).ok_or_else(overflow)?;
        }
        out.tokens = out.tokens.checked_add(other.tokens).ok_or_else(overflow)?;
        out.bytes = out.bytes.checked_add(other.bytes).ok_or_else(overflow)?;
        Ok(out)
    }

    /// Little-endian u64s: tokens, bytes, then the usage of every raw id.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 * (self.usage.len() + 2));
        for v in [self.tokens, self.bytes].iter().chain(&self.usage) {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Reads what [`BlockUsage::to_bytes`] wrote.
    pub fn from_bytes(data: &[u8]) -> Result<Self, Error> {
        if data.len() % 8 != 0 || data.len() < 16 {
            return Err(Error::Value("not cnfmce block usage: not a whole number of u64 counts".into()));
        }
        let mut v = data.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")));
        let tokens = v.next().expect("length checked");
        let bytes = v.next().expect("length checked");
        Ok(BlockUsage { usage: v.collect(), tokens, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(extra: &[&str]) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = extra.iter().map(|s| s.as_bytes().to_vec()).collect();
        for b in 0..=255u8 {
            if !v.contains(&vec![b]) {
                v.push(vec![b]);
            }
        }
        v
    }

    #[test]
    fn raw_ranking() {
        let c = vec![(b"b".to_vec(), 5), (b"ab".to_vec(), 7), (b"a".to_vec(), 5), (b"zz".to_vec(), 1)];
        let r = Filter::rank(c.clone(), Some(3)).unwrap();
        assert_eq!(&r[..3], &[b"ab".to_vec(), b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(r.len(), 3 + 254);
        assert_eq!(r[3], vec![0u8]);
        let mut dup = c;
        dup.push((b"a".to_vec(), 1));
        // duplicates are caught when the vocabulary is built
        assert!(Filter::new(Filter::rank(dup, None).unwrap(), Options::default()).is_err());
    }

    #[test]
    fn usage_and_selection() {
        let mut f = Filter::new(raw(&["the", " cat", "at", "zzz"]), Options::default()).unwrap();
        f.add(&[b"the cat", b"the"]);
        let usage = f.usage();
        assert_eq!(usage[0], 2); // "the"
        assert_eq!(usage[1], 1); // " cat"
        assert_eq!(usage[2], 0); // "at": " cat" wins
        // the usage of blocks, summed in another order, is the same
        let parts: Vec<BlockUsage> = [&b"the"[..], b"the cat"].iter().map(|d| f.usage_of(&[d])).collect();
        let sum = parts[0].merge(&BlockUsage::from_bytes(&parts[1].to_bytes()).unwrap()).unwrap();
        assert_eq!(BlockUsage::default().merge(&sum).unwrap().usage, usage);
        assert_eq!((sum.tokens, sum.bytes), f.totals());
        let mut g = Filter::new(raw(&["the", " cat", "at", "zzz"]), Options::default()).unwrap();
        g.add_usage(&sum).unwrap();
        assert_eq!(g.select(258).unwrap(), f.select(258).unwrap());
        assert!(g.add_usage(&BlockUsage { usage: vec![1], tokens: 1, bytes: 1 }).is_err());
        let sel = f.select(258).unwrap();
        assert_eq!(sel.len(), 258);
        assert_eq!(sel[0].token, b"the");
        assert_eq!(sel[1].token, b" cat");
        // all single bytes present, unused ones last, by bytes
        assert_eq!(sel.iter().filter(|s| s.token.len() == 1).count(), 256);
        assert!(sel[2..].iter().all(|s| s.usage == 0));
        assert!(sel[2..].windows(2).all(|w| w[0].token < w[1].token));
        // asking for more than were used fills with unused raw tokens by rank ("at" before "zzz")
        let sel = f.select(259).unwrap();
        assert!(sel.iter().any(|s| s.token == b"at"));
        assert!(!sel.iter().any(|s| s.token == b"zzz"));
        assert!(f.select(255).is_err());
    }
}
