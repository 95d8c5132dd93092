//! Candidates with their counts in one arena (no allocation per candidate), with the orders and
//! cuts the rounds need.

use rayon::prelude::*;

/// Candidates with counts in one arena (no allocation per candidate).
#[derive(Default)]
pub(crate) struct Cands {
    data: Vec<u8>,
    /// (count, offset, length) into `data`.
    items: Vec<(u64, usize, u32)>,
}

impl Cands {
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    #[inline]
    pub(crate) fn push(&mut self, k: &[u8], c: u64) {
        self.items.push((c, self.data.len(), k.len() as u32));
        self.data.extend_from_slice(k);
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> (&[u8], u64) {
        let (c, o, l) = self.items[i];
        (&self.data[o..o + l as usize], c)
    }

    fn key(&self, e: &(u64, usize, u32)) -> &[u8] {
        &self.data[e.1..e.1 + e.2 as usize]
    }

    pub(crate) fn extend(&mut self, other: &Cands) {
        for i in 0..other.len() {
            let (k, c) = other.get(i);
            self.push(k, c);
        }
    }

    /// Sorts by count descending, ties by bytes.
    pub(crate) fn sort(&mut self) {
        let data = &self.data;
        let key = |e: &(u64, usize, u32)| &data[e.1..e.1 + e.2 as usize];
        self.items.par_sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| key(a).cmp(key(b))));
    }

    /// Keeps the best `m` (count descending, ties by bytes), in no particular order, and compacts
    /// the arena; returns the count of the worst kept (0 when fewer than `m` remain).
    pub(crate) fn prune_top(&mut self, m: usize) -> u64 {
        if self.items.len() <= m {
            return 0;
        }
        if m == 0 {
            *self = Cands::default();
            return u64::MAX;
        }
        let data = &self.data;
        let key = |e: &(u64, usize, u32)| &data[e.1..e.1 + e.2 as usize];
        self.items.select_nth_unstable_by(m - 1, |a, b| b.0.cmp(&a.0).then_with(|| key(a).cmp(key(b))));
        self.items.truncate(m);
        let worst = self.items[m - 1].0;
        self.compact();
        worst
    }

    /// Keeps the items for which `keep(index in the current order, count)` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(usize, u64) -> bool) {
        let mut i = 0usize;
        self.items.retain(|e| {
            i += 1;
            keep(i - 1, e.0)
        });
        self.compact();
    }

    fn compact(&mut self) {
        let mut data = Vec::with_capacity(self.items.iter().map(|e| e.2 as usize).sum());
        for e in self.items.iter_mut() {
            let o = data.len();
            data.extend_from_slice(&self.data[e.1..e.1 + e.2 as usize]);
            e.1 = o;
        }
        self.data = data;
        self.items.shrink_to_fit();
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.data.capacity() + self.items.capacity() * std::mem::size_of::<(u64, usize, u32)>()
    }

    /// Keys with a count of at least `t`, sorted bytewise.
    pub(crate) fn keys_at_least(&self, t: u64) -> Vec<&[u8]> {
        let mut keys: Vec<&[u8]> = self.items.iter().filter(|e| e.0 >= t).map(|e| self.key(e)).collect();
        keys.par_sort_unstable();
        keys
    }
}
