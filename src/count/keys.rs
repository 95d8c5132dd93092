//! Keys of the counting tables: a candidate packed so that key order is bytewise order, inline
//! words for short candidates and a boxed slice for long ones.

use std::hash::Hash;

use crate::probe::SlotKey;

/// Keys of the counting tables: candidates packed so that key order is bytewise order. The
/// empty key (length 0) marks free slots: candidates are never empty.
pub(crate) trait CountKey: SlotKey + Clone + Eq + Hash + Ord + Send + Sync + 'static {
    /// Longest candidate the key can hold.
    const MAX_LEN: usize;
    fn from_bytes(b: &[u8]) -> Self;
    /// Appends the candidate's bytes to `out`.
    fn write_bytes(&self, out: &mut Vec<u8>);
    /// False when the candidate cannot be one multi-byte UTF-8 character (2 to 4 bytes, a lead
    /// byte of at least 0xC2); a cheap test before writing the bytes.
    fn maybe_multibyte_char(&self) -> bool;
    fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.write_bytes(&mut v);
        v
    }
}

/// A candidate of up to `8 * N - 1` bytes in `N` big-endian words, zero padded, the length in
/// the lowest byte of the last word. Word compares keep equality and order inline (a byte array
/// compares through `memcmp`), and the derived order is bytewise. [`K16`] (two words, table
/// entries of 24 bytes) holds the first round's candidates, [`K32`] the next rounds'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Words<const N: usize> {
    w: [u64; N],
}

/// Up to 15 bytes.
pub(crate) type K16 = Words<2>;
/// Up to 31 bytes.
pub(crate) type K32 = Words<4>;

impl<const N: usize> SlotKey for Words<N> {
    fn empty() -> Self {
        Words { w: [0; N] }
    }
    #[inline]
    fn is_empty_key(&self) -> bool {
        self.w[N - 1] & 0xFF == 0
    }
}

impl<const N: usize> Words<N> {
    /// Writes the candidate's bytes to the start of `out` (at least `8 * N` bytes, padding
    /// included) and returns its length.
    #[inline]
    pub(crate) fn write_to(&self, out: &mut [u8]) -> usize {
        for (chunk, word) in out.chunks_exact_mut(8).zip(&self.w) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        (self.w[N - 1] & 0xFF) as usize
    }
}

impl SlotKey for Box<[u8]> {
    fn empty() -> Self {
        Box::new([])
    }
    #[inline]
    fn is_empty_key(&self) -> bool {
        self.is_empty()
    }
    fn heap(&self) -> usize {
        self.len() + 16
    }
}

impl<const N: usize> CountKey for Words<N> {
    const MAX_LEN: usize = 8 * N - 1;
    #[inline]
    fn from_bytes(b: &[u8]) -> Self {
        let mut w = [0u64; N];
        for (word, chunk) in w.iter_mut().zip(b.chunks(8)) {
            let mut x = [0u8; 8];
            x[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_be_bytes(x);
        }
        w[N - 1] |= b.len() as u64;
        Words { w }
    }
    #[inline]
    fn maybe_multibyte_char(&self) -> bool {
        (2..=4).contains(&(self.w[N - 1] & 0xFF)) && (self.w[0] >> 56) >= 0xC2
    }
    fn write_bytes(&self, out: &mut Vec<u8>) {
        let len = (self.w[N - 1] & 0xFF) as usize;
        let start = out.len();
        for word in &self.w {
            out.extend_from_slice(&word.to_be_bytes());
        }
        out.truncate(start + len);
    }
}

impl CountKey for Box<[u8]> {
    const MAX_LEN: usize = usize::MAX;
    fn from_bytes(b: &[u8]) -> Self {
        b.into()
    }
    fn maybe_multibyte_char(&self) -> bool {
        (2..=4).contains(&self.len()) && self[0] >= 0xC2
    }
    fn write_bytes(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_preserve_byte_order() {
        let mut v: Vec<Vec<u8>> = vec![b"".to_vec(), b"a".to_vec(), b"a\0".to_vec(), b"a\x01".to_vec(), b"ab".to_vec(), b"b".to_vec(), vec![0xff; 15]];
        v.sort();
        let k16: Vec<K16> = v.iter().map(|b| K16::from_bytes(b)).collect();
        assert!(k16.windows(2).all(|w| w[0] < w[1]));
        assert!(v.iter().all(|b| K16::from_bytes(b).bytes() == *b));
        v.push(vec![0xff; 31]);
        v.push([vec![b'a'; 30], vec![0]].concat());
        v.sort();
        assert!(v.iter().all(|b| K32::from_bytes(b).bytes() == *b));
        let mut buf = [0u8; 32];
        assert!(v.iter().all(|b| { let n = K32::from_bytes(b).write_to(&mut buf); buf[..n] == b[..] }));
        let k32: Vec<K32> = v.iter().map(|b| K32::from_bytes(b)).collect();
        assert!(k32.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn multibyte_char_prefilter_never_misses_one() {
        let chars = ["é", "中", "𝒳", "ß", "\u{80}", "\u{10FFFF}"];
        for c in chars {
            let b = c.as_bytes();
            assert!(K16::from_bytes(b).maybe_multibyte_char() && K32::from_bytes(b).maybe_multibyte_char());
            assert!(Box::<[u8]>::from(b).maybe_multibyte_char());
        }
        for b in [&b"a"[..], b"ab", "é!".as_bytes(), b"\xC1\x81", "中文".as_bytes(), "é".as_bytes().split_at(1).0] {
            let many = b.len() > 4 || b.len() < 2;
            if many || b[0] < 0xC2 {
                assert!(!K16::from_bytes(b).maybe_multibyte_char() && !Box::<[u8]>::from(b).maybe_multibyte_char());
            }
        }
    }
}
