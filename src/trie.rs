//! The byte trie of candidates retained in earlier counting rounds (Algorithm 1, line 5).
//!
//! Built once per round from the retained candidates whose count reaches the round's threshold,
//! so a walk answers the second early-stop question ("is this prefix in the trie with a count of
//! at least t?") with a flag. Nodes are stored breadth first with their children contiguous and
//! sorted by byte; the root has a direct 256-entry table.
//!
//! Next to the trie, a Bloom filter of the keys answers "is this string certainly not a key?"
//! with one cache-line read: counting rounds ask it first about the one prefix most likely to be
//! missing and walk the trie only when it may be a key (see `count::candidates`).

/// A node: children are `nodes[first..first + count]`.
#[derive(Clone, Copy, Debug, Default)]
struct Node {
    first: u32,
    count: u16,
    byte: u8,
    /// The string of this node is a retained candidate with a count >= the threshold.
    terminal: bool,
}

pub struct ByteTrie {
    nodes: Vec<Node>,
    root_table: Box<[u32; 256]>,
    bloom: Bloom,
}

/// A Bloom filter over byte strings, blocked by 64-bit word: a key sets [`BLOOM_BITS`] bits of
/// one word, so a query reads one word. No false negatives; about 16 bits per key keep false
/// positives near 0.5%.
struct Bloom {
    words: Vec<u64>,
    mask: usize,
}

/// Bits set per key (within one word).
const BLOOM_BITS: u32 = 4;

impl Bloom {
    fn new(keys: usize) -> Self {
        let words = (keys.saturating_mul(16) / 64).max(8).next_power_of_two();
        Bloom { words: vec![0; words], mask: words - 1 }
    }

    #[inline]
    fn hash(key: &[u8]) -> u64 {
        use std::hash::Hasher;
        let mut h = rustc_hash::FxHasher::default();
        h.write(key);
        // FxHash's high bits are its best: spread them over the whole word.
        let x = h.finish();
        (x ^ (x >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (x >> 32)
    }

    /// The word index and the bits of `key`.
    #[inline]
    fn slot(&self, key: &[u8]) -> (usize, u64) {
        let h = Self::hash(key);
        let mut bits = 0u64;
        for b in 0..BLOOM_BITS {
            bits |= 1u64 << ((h >> (6 * b)) & 63);
        }
        (((h >> 32) as usize) & self.mask, bits)
    }

    fn insert(&mut self, key: &[u8]) {
        let (w, bits) = self.slot(key);
        self.words[w] |= bits;
    }

    #[cfg(test)]
    fn may_contain(&self, key: &[u8]) -> bool {
        let (w, bits) = self.slot(key);
        self.words[w] & bits == bits
    }

}

/// Index of the root node.
pub const ROOT: u32 = 0;
const NONE: u32 = u32::MAX;

impl ByteTrie {
    /// A trie holding `keys`, which must be sorted (bytewise) and distinct.
    pub fn from_sorted(keys: &[&[u8]]) -> Self {
        debug_assert!(keys.windows(2).all(|w| w[0] < w[1]));
        let mut nodes = vec![Node::default()];
        // Breadth-first: each queue entry is (node index, depth, key range sharing the prefix).
        let mut queue = std::collections::VecDeque::new();
        queue.push_back((0usize, 0usize, 0usize, keys.len()));
        while let Some((node, depth, lo, hi)) = queue.pop_front() {
            let mut k = lo;
            // keys[lo] may end exactly at this depth: it is this node's own string.
            if k < hi && keys[k].len() == depth {
                nodes[node].terminal = true;
                k += 1;
            }
            let first = nodes.len();
            let mut children = 0u16;
            while k < hi {
                let b = keys[k][depth];
                let mut e = k + 1;
                while e < hi && keys[e][depth] == b {
                    e += 1;
                }
                nodes.push(Node { first: 0, count: 0, byte: b, terminal: false });
                queue.push_back((nodes.len() - 1, depth + 1, k, e));
                children += 1;
                k = e;
            }
            nodes[node].first = first as u32;
            nodes[node].count = children;
        }
        let mut root_table = Box::new([NONE; 256]);
        let r = nodes[0];
        for c in r.first..r.first + r.count as u32 {
            root_table[nodes[c as usize].byte as usize] = c;
        }
        let mut bloom = Bloom::new(keys.len());
        for k in keys {
            bloom.insert(k);
        }
        ByteTrie { nodes, root_table, bloom }
    }

    /// False when `key` is certainly not in the trie; true when it may be (always true for the
    /// keys themselves).
    #[cfg(test)]
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.bloom.may_contain(key)
    }

    /// [`ByteTrie::may_contain`] in two steps, for callers that prefetch: the filter's word and
    /// bits for `key`, then [`ByteTrie::bloom_has`].
    #[inline]
    pub fn bloom_slot(&self, key: &[u8]) -> (usize, u64) {
        self.bloom.slot(key)
    }

    #[inline]
    pub fn prefetch_bloom(&self, word: usize) {
        crate::mem::prefetch(&self.bloom.words[word]);
    }

    #[inline]
    pub fn bloom_has(&self, word: usize, bits: u64) -> bool {
        self.bloom.words[word] & bits == bits
    }

    /// The child of `node` by `byte`, if any.
    #[inline]
    pub fn child(&self, node: u32, byte: u8) -> Option<u32> {
        if node == ROOT {
            let c = self.root_table[byte as usize];
            return (c != NONE).then_some(c);
        }
        let n = self.nodes[node as usize];
        let kids = &self.nodes[n.first as usize..n.first as usize + n.count as usize];
        if kids.len() <= 8 {
            kids.iter().position(|k| k.byte == byte).map(|p| n.first + p as u32)
        } else {
            kids.binary_search_by_key(&byte, |k| k.byte).ok().map(|p| n.first + p as u32)
        }
    }

    /// Whether the string of `node` is in the trie.
    #[inline]
    pub fn is_terminal(&self, node: u32) -> bool {
        self.nodes[node as usize].terminal
    }

    pub fn heap_bytes(&self) -> usize {
        self.nodes.capacity() * std::mem::size_of::<Node>() + 256 * 4 + self.bloom.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(t: &ByteTrie, s: &[u8]) -> bool {
        let mut n = ROOT;
        for &b in s {
            match t.child(n, b) {
                Some(c) => n = c,
                None => return false,
            }
        }
        t.is_terminal(n)
    }

    #[test]
    fn membership() {
        let mut keys: Vec<Vec<u8>> = vec![b"a".to_vec(), b"ab".to_vec(), b"abc".to_vec(), b"b".to_vec(), b"zz".to_vec()];
        for c in 0..=255u8 {
            keys.push(vec![b'q', c]);
        }
        keys.sort();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let t = ByteTrie::from_sorted(&refs);
        for k in &keys {
            assert!(lookup(&t, k), "{k:?}");
        }
        assert!(!lookup(&t, b"z"));
        assert!(!lookup(&t, b"q"));
        assert!(!lookup(&t, b"abcd"));
        assert!(!lookup(&t, b""));
        assert!(lookup(&t, b"q\xff"));
        assert!(keys.iter().all(|k| t.may_contain(k)));
    }

    /// The filter never says no to a key, and says yes to few strings that are not keys.
    #[test]
    fn bloom_has_no_false_negatives() {
        let mut x = 7u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut keys: Vec<Vec<u8>> = (0..20_000).map(|_| { let n = 1 + (next() % 20) as usize; (0..n).map(|_| (next() % 4) as u8 + b'a').collect() }).collect();
        keys.sort();
        keys.dedup();
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let t = ByteTrie::from_sorted(&refs);
        assert!(keys.iter().all(|k| t.may_contain(k) && lookup(&t, k)));
        let others: Vec<Vec<u8>> = (0..20_000).map(|_| { let n = 1 + (next() % 20) as usize; (0..n).map(|_| (next() % 4) as u8 + b'e').collect() }).collect();
        let fp = others.iter().filter(|k| t.may_contain(k)).count();
        assert!(fp < 400, "{fp} false positives of 20000");
        let empty = ByteTrie::from_sorted(&[]);
        assert!(!empty.may_contain(b"a"));
    }
}
