//! An open-addressing count table (linear probing) that inserts batches with software
//! prefetching: while item `k` is probed, the slot of item `k + DISTANCE` is already on its way
//! from memory. Counting tables are far larger than the caches, so this turns one memory latency
//! per candidate into overlapped loads.

/// A key with a reserved "empty" value that no real key takes.
pub trait SlotKey: Clone + Eq {
    fn empty() -> Self;
    fn is_empty_key(&self) -> bool;
    /// Heap bytes owned by the key.
    fn heap(&self) -> usize {
        0
    }
}

const DISTANCE: usize = 8;

pub struct ProbeTable<K: SlotKey> {
    slots: Vec<(K, u64)>,
    len: usize,
    hash: fn(&K) -> u64,
}

impl<K: SlotKey> ProbeTable<K> {
    pub fn new(hash: fn(&K) -> u64) -> Self {
        ProbeTable { slots: Vec::new(), len: 0, hash }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots allocated.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Makes room for `extra` more keys at a load of at most 3/4.
    fn reserve(&mut self, extra: usize) {
        let need = self.len + extra;
        if need * 4 <= self.slots.len() * 3 {
            return;
        }
        let mut cap = self.slots.len().max(1024);
        while need * 4 > cap * 3 {
            cap *= 2;
        }
        let mut fresh = Vec::with_capacity(cap);
        crate::mem::advise_huge(&fresh);
        fresh.resize(cap, (K::empty(), 0));
        let old = std::mem::replace(&mut self.slots, fresh);
        let mask = cap - 1;
        for (k, c) in old {
            if k.is_empty_key() {
                continue;
            }
            let mut i = ((self.hash)(&k) as usize) & mask;
            while !self.slots[i].0.is_empty_key() {
                i = (i + 1) & mask;
            }
            self.slots[i] = (k, c);
        }
    }

    /// Adds `(hash, key, count)` items; returns how many keys were new and the heap bytes they
    /// own.
    pub fn add_batch(&mut self, items: &mut Vec<(u64, K, u64)>) -> (usize, usize) {
        self.reserve(items.len());
        let mask = self.slots.len() - 1;
        let mut added = 0usize;
        let mut heap = 0usize;
        let n = items.len();
        for k in 0..n {
            if k + DISTANCE < n {
                crate::mem::prefetch(&self.slots[(items[k + DISTANCE].0 as usize) & mask]);
            }
            let (h, ref key, c) = items[k];
            let mut i = (h as usize) & mask;
            loop {
                let slot = &mut self.slots[i];
                if slot.0 == *key {
                    slot.1 += c;
                    break;
                }
                if slot.0.is_empty_key() {
                    *slot = (key.clone(), c);
                    added += 1;
                    heap += key.heap();
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        items.clear();
        self.len += added;
        (added, heap)
    }

    /// Empties the table, yielding its entries.
    pub fn take(&mut self) -> impl Iterator<Item = (K, u64)> {
        self.len = 0;
        std::mem::take(&mut self.slots).into_iter().filter(|e| !e.0.is_empty_key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl SlotKey for u64 {
        fn empty() -> Self {
            0
        }
        fn is_empty_key(&self) -> bool {
            *self == 0
        }
    }

    #[test]
    fn counts_like_a_map() {
        let mut t: ProbeTable<u64> = ProbeTable::new(|k| k.wrapping_mul(0x9E3779B97F4A7C15));
        let mut want = std::collections::HashMap::new();
        let mut items = Vec::new();
        let mut x = 1u64;
        for round in 0..50 {
            for _ in 0..1000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = x % 5000 + 1;
                items.push((key.wrapping_mul(0x9E3779B97F4A7C15), key, round + 1));
                *want.entry(key).or_insert(0) += round + 1;
            }
            t.add_batch(&mut items);
        }
        assert_eq!(t.len(), want.len());
        let got: std::collections::HashMap<u64, u64> = t.take().collect();
        assert_eq!(got, want);
        assert!(t.is_empty());
    }
}
