//! The vocabulary: ids and bytes both ways, and the automaton that finds every entry starting at
//! each position of a text.
//!
//! The automaton (see `automaton.rs`) is a double-array Aho-Corasick machine over the *reversed*
//! tokens. Walking it over the reversed text, the matches reported after consuming byte `i` are
//! exactly the tokens `x[i:j]` that start at `i`, longest first, so the suffix dynamic program of
//! MCE needs one pass.

use crate::automaton::Automaton;
use hashbrown::HashTable;
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

use crate::Error;

use crate::cost::token_preference;

/// Largest id a vocabulary may use (ids are stored as u32; the top values are reserved).
pub const MAX_ID: u32 = u32::MAX - 1;

/// A byte vocabulary with possibly sparse ids.
pub struct Vocab {
    /// Concatenated token bytes, in id order.
    data: Vec<u8>,
    /// `offsets[id]..offsets[id + 1]` is the token of `id`; an empty range is an unused id.
    offsets: Vec<usize>,
    /// bytes -> id.
    index: HashTable<u32>,
    /// Reversed tokens, value = id and ε(id).
    automaton: Automaton,
    /// Bit `(a << 8) | b`: whether the byte pair `a b` occurs inside some token.
    pairs: Box<[u64; 1024]>,
    max_len: usize,
    len: usize,
}

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = FxHasher::default();
    b.hash(&mut h);
    h.finish()
}

impl Vocab {
    /// Builds a vocabulary from `(id, token)` pairs. Tokens must be non-empty and distinct, ids
    /// distinct and at most [`MAX_ID`], and all 256 single bytes must be present.
    pub fn new(entries: Vec<(u32, Vec<u8>)>) -> Result<Self, Error> {
        let mut entries = entries;
        entries.sort_unstable_by_key(|e| e.0);
        if let Some(w) = entries.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Error::Value(format!("id {} is used by more than one token", w[0].0)));
        }
        let max_id = entries.last().map_or(0, |e| e.0);
        if max_id > MAX_ID {
            return Err(Error::Value(format!("id {max_id} is too large (at most {MAX_ID})")));
        }
        // Ids index dense tables; refuse id spaces far larger than the vocabulary instead of
        // allocating gigabytes for them.
        let limit = entries.len().saturating_mul(8).saturating_add(1 << 24);
        if max_id as usize >= limit {
            return Err(Error::Value(format!(
                "token ids are too sparse: id {max_id} with only {} tokens (regular ids must be \
                 below {limit}; special tokens may use any id)",
                entries.len()
            )));
        }
        let total: usize = entries.iter().map(|e| e.1.len()).sum();
        let mut data = Vec::with_capacity(total);
        let n_ids = if entries.is_empty() { 0 } else { max_id as usize + 1 };
        let mut offsets = Vec::with_capacity(n_ids + 1);
        offsets.push(0usize);
        let mut max_len = 0usize;
        let mut next = 0u32;
        for (id, tok) in &entries {
            if tok.is_empty() {
                return Err(Error::Value(format!("token {id} is empty")));
            }
            while next < *id {
                offsets.push(data.len());
                next += 1;
            }
            data.extend_from_slice(tok);
            offsets.push(data.len());
            next = id + 1;
            max_len = max_len.max(tok.len());
        }
        let mut index: HashTable<u32> = HashTable::with_capacity(entries.len());
        let token = |_data: &[u8], offsets: &[usize], id: u32| -> std::ops::Range<usize> {
            offsets[id as usize]..offsets[id as usize + 1]
        };
        for (id, tok) in &entries {
            let h = hash_bytes(tok);
            if let Some(&other) = index.find(h, |&o| &data[token(&data, &offsets, o)] == tok.as_slice()) {
                return Err(Error::Value(format!(
                    "token {:?} appears twice (ids {other} and {id})",
                    crate::show_bytes(tok)
                )));
            }
            index.insert_unique(h, *id, |&o| hash_bytes(&data[token(&data, &offsets, o)]));
        }
        let mut missing = Vec::new();
        for b in 0..=255u8 {
            if index.find(hash_bytes(&[b]), |&o| data[token(&data, &offsets, o)] == [b]).is_none() {
                missing.push(b);
            }
        }
        if !missing.is_empty() {
            let shown: Vec<String> = missing.iter().take(8).map(|b| format!("0x{b:02X}")).collect();
            return Err(Error::Value(format!(
                "the vocabulary lacks {} of the 256 single-byte tokens (e.g. {}); every byte must \
                 be a token so that every input has an encoding",
                missing.len(),
                shown.join(", ")
            )));
        }
        let n_entries = entries.len();
        drop(entries);
        // Reversed tokens in one arena (the automaton reads the text right to left).
        let mut rev = Vec::with_capacity(data.len());
        let mut spans = Vec::with_capacity(n_entries);
        let mut values = Vec::with_capacity(n_entries);
        for id in 0..(offsets.len() - 1) as u32 {
            let (a, b) = (offsets[id as usize], offsets[id as usize + 1]);
            if a == b {
                continue;
            }
            let start = rev.len();
            rev.extend(data[a..b].iter().rev());
            spans.push(start..rev.len());
            values.push((id, token_preference(id)));
        }
        let keys: Vec<&[u8]> = spans.iter().map(|r| &rev[r.clone()]).collect();
        let automaton = Automaton::build(&keys, &values)?;
        drop(keys);
        let mut pairs = Box::new([0u64; 1024]);
        for id in 0..(offsets.len() - 1) {
            for w in data[offsets[id]..offsets[id + 1]].windows(2) {
                let k = (w[0] as usize) << 8 | w[1] as usize;
                pairs[k >> 6] |= 1u64 << (k & 63);
            }
        }
        Ok(Vocab { data, offsets, index, automaton, pairs, max_len, len: n_entries })
    }

    /// Number of tokens (ids in use).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One past the largest id.
    pub fn id_bound(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether the byte pair `a b` occurs inside some token. When it does not, no token spans
    /// the position between them, so the encoding problem splits there.
    #[inline(always)]
    pub fn pair_in_token(&self, a: u8, b: u8) -> bool {
        let k = (a as usize) << 8 | b as usize;
        // SAFETY: k < 65536, so k >> 6 < 1024.
        unsafe { *self.pairs.get_unchecked(k >> 6) >> (k & 63) & 1 == 1 }
    }

    /// Length in bytes of the longest token.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The token of `id`, or `None` for an unused or out-of-range id.
    #[inline]
    pub fn token(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        if i + 1 >= self.offsets.len() {
            return None;
        }
        let (a, b) = (self.offsets[i], self.offsets[i + 1]);
        if a == b {
            None
        } else {
            Some(&self.data[a..b])
        }
    }

    /// Length of the token of `id` (0 for an unused id).
    #[inline]
    pub fn token_len(&self, id: u32) -> usize {
        let i = id as usize;
        self.offsets[i + 1] - self.offsets[i]
    }

    /// The id of `token`, if it is in the vocabulary.
    pub fn id_of(&self, token: &[u8]) -> Option<u32> {
        self.index
            .find(hash_bytes(token), |&o| {
                &self.data[self.offsets[o as usize]..self.offsets[o as usize + 1]] == token
            })
            .copied()
    }

    /// All `(id, token)` pairs in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[u8])> + '_ {
        (0..self.id_bound() as u32).filter_map(move |id| self.token(id).map(|t| (id, t)))
    }

    /// The automaton over reversed tokens. After consuming byte `i` of the reversed text, its
    /// matches are the tokens starting at `i`, longest first (the encoder relies on that order);
    /// pattern values are token ids.
    #[inline]
    pub fn automaton(&self) -> &Automaton {
        &self.automaton
    }

    /// Heap bytes held by the vocabulary (approximate).
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity()
            + self.offsets.capacity() * std::mem::size_of::<usize>()
            + self.index.capacity() * (std::mem::size_of::<u32>() + 1)
            + self.automaton.heap_bytes()
            + std::mem::size_of::<[u64; 1024]>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_vocab(extra: &[&[u8]]) -> Vec<(u32, Vec<u8>)> {
        let mut v: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        for (k, t) in extra.iter().enumerate() {
            v.push((256 + k as u32, t.to_vec()));
        }
        v
    }

    #[test]
    fn lookups_both_ways() {
        let v = Vocab::new(bytes_vocab(&[b"ab", b"abc"])).unwrap();
        assert_eq!(v.len(), 258);
        assert_eq!(v.id_of(b"abc"), Some(257));
        assert_eq!(v.id_of(b"abd"), None);
        assert_eq!(v.token(256), Some(&b"ab"[..]));
        assert_eq!(v.token(258), None);
        assert_eq!(v.max_len(), 3);
    }

    #[test]
    fn gaps_and_errors() {
        let mut e = bytes_vocab(&[]);
        e.push((1000, b"xyz".to_vec()));
        let v = Vocab::new(e).unwrap();
        assert_eq!(v.token(500), None);
        assert_eq!(v.token(1000), Some(&b"xyz"[..]));
        assert_eq!(v.id_bound(), 1001);

        let mut e = bytes_vocab(&[b"ab"]);
        e.push((999, b"ab".to_vec()));
        assert!(Vocab::new(e).is_err());
        let e: Vec<(u32, Vec<u8>)> = (0..255u8).map(|b| (b as u32, vec![b])).collect();
        assert!(Vocab::new(e).is_err());
        let mut e = bytes_vocab(&[]);
        e.push((7, b"q".to_vec()));
        assert!(Vocab::new(e).is_err());
    }

    #[test]
    fn automaton_finds_tokens_starting_at_each_position() {
        let v = Vocab::new(bytes_vocab(&[b"ab", b"abc", b"bc"])).unwrap();
        let text = b"abc";
        let a = v.automaton();
        let mut st = a.root();
        let mut found = Vec::new();
        for i in (0..text.len()).rev() {
            st = a.next(st, text[i]);
            let mut here = Vec::new();
            let mut p = a.out(st);
            while p != crate::automaton::NONE {
                here.push(a.pattern(p).len as usize);
                p = a.pattern(p).next;
            }
            found.push((i, here));
        }
        // longest first: the encoder relies on this order
        assert_eq!(found, vec![(2, vec![1]), (1, vec![2, 1]), (0, vec![3, 2, 1])]);
    }
}
