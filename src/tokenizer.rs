//! A tokenizer: the encoder over the regular vocabulary plus special tokens, decoding and batch
//! encoding.
//!
//! Special tokens are not part of the MCE vocabulary. When allowed, they cut the text into
//! pieces (leftmost-longest match among the allowed ones) and each piece is encoded on its own.

use std::convert::Infallible;

use daachorse::{DoubleArrayAhoCorasick, DoubleArrayAhoCorasickBuilder, MatchKind};
use rustc_hash::FxHashMap;

use crate::error::{show_bytes, Error};
use crate::mce::{Encoder, Options, Scratch};
use crate::vocab::Vocab;

/// `f(state, i)` for every `i < sizes.len()` on all threads of the current rayon pool, results in
/// index order. Items are handed out one at a time, largest `sizes[i]` first (ties in index
/// order): with texts of very different lengths, a long text started last would otherwise keep
/// one thread busy while the others idle. Each thread makes its own `state` with `init`.
///
/// Inside [`on_this_thread`] the items run one after the other on the calling thread instead
/// (one state, same results).
pub fn par_map_largest_first<S, R: Send>(
    sizes: &[usize],
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = sizes.len();
    if ON_THIS_THREAD.with(|t| t.get()) {
        let mut state = init();
        return (0..n).map(|i| f(&mut state, i)).collect();
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]));
    let next = AtomicUsize::new(0);
    let parts: Vec<Vec<(usize, R)>> = rayon::broadcast(|_| {
        let mut mine = Vec::new();
        let mut state = None;
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(k) else { break };
            let st = state.get_or_insert_with(&init);
            mine.push((i, f(st, i)));
        }
        mine
    });
    let mut slots: Vec<Option<R>> = (0..n).map(|_| None).collect();
    for (i, r) in parts.into_iter().flatten() {
        slots[i] = Some(r);
    }
    // Every index was taken exactly once (the counter hands each out once).
    slots.into_iter().flatten().collect()
}

thread_local! {
    /// Set while [`on_this_thread`] runs: batch maps stay on this thread.
    static ON_THIS_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with every batch map it makes ([`par_map_largest_first`], [`map_texts`],
/// `Tokenizer::encode_batch`, ...) done on the calling thread, item after item, instead of on
/// the threads of a rayon pool: for a batch too small to be worth waking other threads (their
/// hand-off costs far more than encoding a short document), or one that would run on one
/// thread anyway.
#[cfg_attr(not(feature = "python"), allow(dead_code))] // the PyO3 layer's small batches
pub(crate) fn on_this_thread<R>(f: impl FnOnce() -> R) -> R {
    /// Restores the flag as it was, also when `f` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ON_THIS_THREAD.with(|t| t.set(self.0));
        }
    }
    let _restore = Restore(ON_THIS_THREAD.with(|t| t.replace(true)));
    f()
}

/// `f(bytes, scratch)` for every item of a batch on all threads of the current rayon pool,
/// results in index order, longest items first (`sizes[i]`: about the length of item `i`; see
/// [`par_map_largest_first`]). `text(i, buf)` gives the bytes of item `i` in the worker: `Some`
/// (borrowed), or `None` after writing them into `buf` (the thread's buffer, for items that
/// must be converted first), or an error; the first failing item in index order is returned with
/// its index.
pub(crate) fn map_texts<'a, R: Send, E: Send>(
    sizes: &[usize],
    text: impl Fn(usize, &mut Vec<u8>) -> Result<Option<&'a [u8]>, E> + Sync,
    f: impl Fn(&[u8], &mut Scratch) -> R + Sync,
) -> Result<Vec<R>, (usize, E)> {
    par_map_largest_first(
        sizes,
        Vec::new,
        |buf, i| {
            let t = match text(i, buf).map_err(|e| (i, e))? {
                Some(t) => t,
                None => &buf[..],
            };
            // The thread's own buffers: they (and their piece cache) outlive the call.
            Ok(crate::mce::with_thread_scratch(|scratch| f(t, scratch)))
        },
    )
    .into_iter()
    .collect()
}

/// [`map_texts`] over byte slices.
fn map_slices<T: AsRef<[u8]> + Sync, R: Send>(texts: &[T], f: impl Fn(&[u8], &mut Scratch) -> R + Sync) -> Vec<R> {
    let sizes: Vec<usize> = texts.iter().map(|t| t.as_ref().len()).collect();
    match map_texts(&sizes, |i, _| Ok::<_, Infallible>(Some(texts[i].as_ref())), f) {
        Ok(all) => all,
        Err((_, never)) => match never {},
    }
}

/// What the positions of [`Tokenizer::offsets`] count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetUnit {
    /// Bytes of the input.
    Byte,
    /// Unicode characters (code points) of a valid UTF-8 input, as Python's `str` indexes them.
    Char,
}

/// A UTF-8 continuation byte (`10xxxxxx`): not the first byte of a character.
#[inline]
fn is_continuation(b: u8) -> bool {
    (b as i8) < -64
}

/// Number of bytes of `s` that start a character (every byte but the continuation bytes).
#[inline]
fn count_char_starts(s: &[u8]) -> usize {
    s.iter().filter(|&&b| !is_continuation(b)).count()
}

/// Finds allowed special tokens in a text.
pub struct SpecialMatcher {
    automaton: Option<DoubleArrayAhoCorasick<u32>>,
}

impl SpecialMatcher {
    /// A matcher for the given `(bytes, id)` special tokens.
    pub fn new(specials: &[(&[u8], u32)]) -> Result<Self, Error> {
        if specials.is_empty() {
            return Ok(SpecialMatcher { automaton: None });
        }
        let automaton = DoubleArrayAhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build_with_values(specials.iter().map(|(b, id)| (*b, *id)))
            .map_err(|e| Error::Value(format!("cannot build the special-token matcher: {e}")))?;
        Ok(SpecialMatcher { automaton: Some(automaton) })
    }
}

pub struct Tokenizer {
    encoder: Encoder,
    /// Special tokens in id order.
    specials: Vec<(Vec<u8>, u32)>,
    special_index: FxHashMap<u32, usize>,
}

impl Tokenizer {
    /// `tokens`: the regular vocabulary as `(id, bytes)`; `specials`: `(bytes, id)` pairs whose ids
    /// must not be regular ids. `options` were checked when they were made.
    pub fn new(
        tokens: Vec<(u32, Vec<u8>)>,
        mut specials: Vec<(Vec<u8>, u32)>,
        options: Options,
    ) -> Result<Self, Error> {
        let vocab = Vocab::new(tokens)?;
        specials.sort_by_key(|s| s.1);
        let mut special_index = FxHashMap::default();
        let mut seen: FxHashMap<&[u8], u32> = FxHashMap::default();
        for (k, (b, id)) in specials.iter().enumerate() {
            if b.is_empty() {
                return Err(Error::Value("a special token is empty".into()));
            }
            if vocab.token(*id).is_some() {
                return Err(Error::Value(format!(
                    "special token {:?} has id {id}, which a regular token already uses",
                    show_bytes(b)
                )));
            }
            if special_index.insert(*id, k).is_some() {
                return Err(Error::Value(format!("two special tokens share id {id}")));
            }
            if let Some(other) = seen.insert(b.as_slice(), *id) {
                return Err(Error::Value(format!(
                    "special token {:?} appears twice (ids {other} and {id})",
                    show_bytes(b)
                )));
            }
        }
        Ok(Tokenizer { encoder: Encoder::new(vocab, options), specials, special_index })
    }

    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }

    /// The same tokenizer with other options; the vocabulary and its automaton are shared.
    pub fn with_options(&self, options: Options) -> Tokenizer {
        Tokenizer {
            encoder: self.encoder.with_options(options),
            specials: self.specials.clone(),
            special_index: self.special_index.clone(),
        }
    }

    pub fn vocab(&self) -> &Vocab {
        self.encoder.vocab()
    }

    pub fn options(&self) -> Options {
        self.encoder.options()
    }

    pub fn specials(&self) -> &[(Vec<u8>, u32)] {
        &self.specials
    }

    /// Number of ids in use, special tokens included.
    pub fn num_ids(&self) -> usize {
        self.vocab().len() + self.specials.len()
    }

    /// A matcher for the special tokens with the given ids (all of them for `None`).
    pub fn matcher(&self, allowed: Option<&[u32]>) -> Result<SpecialMatcher, Error> {
        let chosen: Vec<(&[u8], u32)> = match allowed {
            None => self.specials.iter().map(|(b, id)| (b.as_slice(), *id)).collect(),
            Some(ids) => {
                let mut v = Vec::with_capacity(ids.len());
                for &id in ids {
                    let k = *self
                        .special_index
                        .get(&id)
                        .ok_or_else(|| Error::Value(format!("{id} is not a special token id")))?;
                    v.push((self.specials[k].0.as_slice(), id));
                }
                v.sort_unstable_by_key(|e| e.1);
                v.dedup_by_key(|e| e.1);
                v
            }
        };
        SpecialMatcher::new(&chosen)
    }

    /// Encodes `text`, appending ids to `out`; special tokens are matched only through `allowed`.
    pub fn encode_into(
        &self,
        text: &[u8],
        allowed: Option<&SpecialMatcher>,
        scratch: &mut Scratch,
        out: &mut Vec<u32>,
    ) {
        match allowed.and_then(|m| m.automaton.as_ref()) {
            None => self.encoder.encode_into(text, scratch, out),
            Some(ac) => {
                let mut last = 0usize;
                for m in ac.leftmost_find_iter(text) {
                    self.encoder.encode_into(&text[last..m.start()], scratch, out);
                    out.push(m.value());
                    last = m.end();
                }
                self.encoder.encode_into(&text[last..], scratch, out);
            }
        }
    }

    /// Encodes `text` into a new vector, reusing this thread's scratch buffers.
    pub fn encode(&self, text: &[u8], allowed: Option<&SpecialMatcher>) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        crate::mce::with_thread_scratch(|scratch| self.encode_into(text, allowed, scratch, &mut out));
        out
    }

    /// `encode(text, None)` of the text that `fill(buf, starts)` gives: either borrowed
    /// (`Some`), with `starts` filled with its unit starts, or written into `buf` with them
    /// (`None`); the unit starts exactly as `units::unit_starts` computes them (see
    /// `Encoder::encode_filled`). An `Err` of `fill` is returned.
    pub fn encode_filled<'t, E>(
        &self,
        size_hint: usize,
        fill: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> Result<Option<&'t [u8]>, E>,
    ) -> Result<Vec<u32>, E> {
        crate::mce::with_thread_scratch(|scratch| self.encode_filled_with_scratch(scratch, size_hint, fill))
    }

    /// [`Self::encode_filled`] with the given scratch buffers.
    pub(crate) fn encode_filled_with_scratch<'t, E>(
        &self,
        scratch: &mut Scratch,
        size_hint: usize,
        fill: impl FnOnce(&mut Vec<u8>, &mut Vec<u8>) -> Result<Option<&'t [u8]>, E>,
    ) -> Result<Vec<u32>, E> {
        let mut out = Vec::with_capacity(size_hint / 4 + 1);
        self.encoder.encode_filled(scratch, &mut out, size_hint, fill)?;
        Ok(out)
    }

    /// Whether `encode` with `allowed` matches no special token (one pass of the encoder).
    pub fn matches_no_special(allowed: Option<&SpecialMatcher>) -> bool {
        allowed.and_then(|m| m.automaton.as_ref()).is_none()
    }

    /// Encodes `text` into a new vector with the given scratch buffers.
    pub(crate) fn encode_with_scratch(&self, text: &[u8], allowed: Option<&SpecialMatcher>, scratch: &mut Scratch) -> Vec<u32> {
        let mut out = Vec::with_capacity(text.len() / 4 + 1);
        self.encode_into(text, allowed, scratch, &mut out);
        out
    }

    /// Encodes every text in parallel (rayon, longest texts first); the result equals `encode`
    /// on each.
    pub fn encode_batch<T: AsRef<[u8]> + Sync>(
        &self,
        texts: &[T],
        allowed: Option<&SpecialMatcher>,
    ) -> Vec<Vec<u32>> {
        map_slices(texts, |t, scratch| self.encode_with_scratch(t, allowed, scratch))
    }

    /// Spans of the tokens `ids` in `text`, which they must tile (as `encode` of `text` does):
    /// token `k` holds bytes `[b_k, b_k + len_k)`. With [`OffsetUnit::Byte`] the span is that byte
    /// range. With [`OffsetUnit::Char`] (`text` is valid UTF-8) it counts characters: it starts at
    /// the character holding the token's first byte and ends after the character holding its
    /// last byte, so a token that starts or ends inside a character gets the span of every
    /// character it touches (two tokens splitting one emoji both get that emoji's span).
    pub fn offsets(&self, text: &[u8], ids: &[u32], unit: OffsetUnit) -> Result<Vec<(usize, usize)>, Error> {
        let mut out = Vec::with_capacity(ids.len());
        let mut pos = 0usize;
        // Characters that start in text[..pos].
        let mut chars = 0usize;
        for &id in ids {
            let len = self.id_bytes(id).ok_or(Error::UnknownId(id))?.len();
            let end = pos + len;
            if end > text.len() {
                return Err(Error::Value(format!(
                    "the tokens are longer than the text ({} bytes)",
                    text.len()
                )));
            }
            match unit {
                OffsetUnit::Byte => out.push((pos, end)),
                OffsetUnit::Char => {
                    let start = if is_continuation(text[pos]) { chars.saturating_sub(1) } else { chars };
                    chars += count_char_starts(&text[pos..end]);
                    out.push((start, chars));
                }
            }
            pos = end;
        }
        if pos != text.len() {
            return Err(Error::Value(format!(
                "the tokens cover {pos} of the text's {} bytes",
                text.len()
            )));
        }
        Ok(out)
    }

    /// `encode` and the tokens' [`offsets`](Self::offsets).
    pub fn encode_with_offsets(
        &self,
        text: &[u8],
        allowed: Option<&SpecialMatcher>,
        unit: OffsetUnit,
    ) -> (Vec<u32>, Vec<(usize, usize)>) {
        let ids = self.encode(text, allowed);
        let offsets = self.offsets(text, &ids, unit).expect("encode tiles its text");
        (ids, offsets)
    }

    /// [`encode_with_offsets`](Self::encode_with_offsets) of every text, in parallel like
    /// [`encode_batch`](Self::encode_batch).
    pub fn encode_batch_with_offsets<T: AsRef<[u8]> + Sync>(
        &self,
        texts: &[T],
        allowed: Option<&SpecialMatcher>,
        unit: OffsetUnit,
    ) -> Vec<(Vec<u32>, Vec<(usize, usize)>)> {
        map_slices(texts, |t, scratch| self.encode_with_offsets_scratch(t, allowed, unit, scratch))
    }

    /// [`encode_with_offsets`](Self::encode_with_offsets) with the given scratch buffers.
    pub(crate) fn encode_with_offsets_scratch(
        &self,
        text: &[u8],
        allowed: Option<&SpecialMatcher>,
        unit: OffsetUnit,
        scratch: &mut Scratch,
    ) -> (Vec<u32>, Vec<(usize, usize)>) {
        let ids = self.encode_with_scratch(text, allowed, scratch);
        let offsets = self.offsets(text, &ids, unit).expect("encode tiles its text");
        (ids, offsets)
    }

    /// The bytes of one id (regular or special).
    pub fn id_bytes(&self, id: u32) -> Option<&[u8]> {
        self.vocab()
            .token(id)
            .or_else(|| self.special_index.get(&id).map(|&k| self.specials[k].0.as_slice()))
    }

    /// Concatenated bytes of `ids`; [`Error::UnknownId`] names the first id that is neither a
    /// regular nor a special token.
    pub fn decode(&self, ids: &[u32]) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.id_bytes(id).ok_or(Error::UnknownId(id))?);
        }
        Ok(out)
    }

    /// The id of `token` among regular and special tokens.
    pub fn token_to_id(&self, token: &[u8]) -> Option<u32> {
        self.vocab()
            .id_of(token)
            .or_else(|| self.specials.iter().find(|s| s.0 == token).map(|s| s.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok() -> Tokenizer {
        let mut t: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        t.push((256, b"<|e".to_vec()));
        t.push((257, b"hello".to_vec()));
        Tokenizer::new(t, vec![(b"<|end|>".to_vec(), 300), (b"<|end|>x".to_vec(), 301)], Options::default())
            .unwrap()
    }

    #[test]
    fn specials_split_only_when_allowed() {
        let t = tok();
        let text = b"hello<|end|>hello<|end|>x";
        let plain = t.encode(text, None);
        assert!(!plain.contains(&300));
        assert_eq!(t.decode(&plain).unwrap(), text);
        let all = t.matcher(None).unwrap();
        assert_eq!(t.encode(text, Some(&all)), vec![257, 300, 257, 301]);
        let only = t.matcher(Some(&[300])).unwrap();
        assert_eq!(t.encode(text, Some(&only)), vec![257, 300, 257, 300, b'x' as u32]);
        assert!(t.matcher(Some(&[5])).is_err());
    }

    #[test]
    fn decode_errors_and_batch() {
        let t = tok();
        assert_eq!(t.decode(&[999]), Err(Error::UnknownId(999)));
        assert_eq!(t.decode(&[u32::MAX]), Err(Error::UnknownId(u32::MAX)));
        assert_eq!(t.decode(&[300]).unwrap(), b"<|end|>");
        let texts = vec!["hello world".to_string(), String::new(), "<|end|>".to_string()];
        let b = t.encode_batch(&texts, None);
        for (x, ids) in texts.iter().zip(&b) {
            assert_eq!(&t.encode(x.as_bytes(), None), ids);
        }
    }

    #[test]
    fn offsets_bytes_and_chars() {
        let mut t: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        // "é" is C3 A9; "😀" is F0 9F 98 80. Tokens that cut both.
        t.push((256, b"a\xC3".to_vec()));
        t.push((257, b"\xA9b".to_vec()));
        t.push((258, b"\xF0\x9F".to_vec()));
        t.push((259, b"\x98\x80".to_vec()));
        let tok = Tokenizer::new(t, vec![(b"<s>".to_vec(), 300)], Options::default()).unwrap();
        let text = "a\u{e9}b\u{1F600}<s>x".as_bytes();
        let all = tok.matcher(None).unwrap();
        let (ids, chars) = tok.encode_with_offsets(text, Some(&all), OffsetUnit::Char);
        assert_eq!(ids, vec![256, 257, 258, 259, 300, b'x' as u32]);
        // Characters: a é b 😀 < s > x  (indices 0..8)
        assert_eq!(chars, vec![(0, 2), (1, 3), (3, 4), (3, 4), (4, 7), (7, 8)]);
        let (_, bytes) = tok.encode_with_offsets(text, Some(&all), OffsetUnit::Byte);
        assert_eq!(bytes, vec![(0, 2), (2, 4), (4, 6), (6, 8), (8, 11), (11, 12)]);
        // Ids that do not tile the text are an error, not a wrong answer.
        assert!(tok.offsets(b"ab", &[b'a' as u32], OffsetUnit::Byte).is_err());
        assert!(tok.offsets(b"a", &[256], OffsetUnit::Byte).is_err());
        assert!(tok.offsets(b"a", &[999], OffsetUnit::Byte).is_err());
        let texts = vec![text.to_vec(), Vec::new(), b"\xA9".to_vec()];
        let batch = tok.encode_batch_with_offsets(&texts, Some(&all), OffsetUnit::Byte);
        for (x, got) in texts.iter().zip(&batch) {
            assert_eq!(&tok.encode_with_offsets(x, Some(&all), OffsetUnit::Byte), got);
        }
    }

    #[test]
    fn largest_first_map_keeps_index_order() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        for n in [0usize, 1, 2, 7, 500] {
            let sizes: Vec<usize> = (0..n).map(|i| (i * 7919) % 13).collect();
            let inits = std::sync::atomic::AtomicUsize::new(0);
            let got = pool.install(|| {
                par_map_largest_first(
                    &sizes,
                    || inits.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    |_, i| (i, sizes[i]),
                )
            });
            let want: Vec<(usize, usize)> = (0..n).map(|i| (i, sizes[i])).collect();
            assert_eq!(got, want);
            // One state per thread that took work, never more than the pool's threads.
            assert!(inits.into_inner() <= 3.min(n));
        }
    }

    #[test]
    fn batch_maps_on_this_thread() {
        // Inside on_this_thread the map runs on the calling thread (one state, no pool thread),
        // in index order, with the same results; the flag is restored afterwards, also after a
        // panic.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let caller = std::thread::current().id();
        for n in [0usize, 1, 2, 7, 500] {
            let sizes: Vec<usize> = (0..n).map(|i| (i * 7919) % 13).collect();
            let inits = std::sync::atomic::AtomicUsize::new(0);
            let got = on_this_thread(|| {
                par_map_largest_first(
                    &sizes,
                    || inits.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    |_, i| (i, sizes[i], std::thread::current().id()),
                )
            });
            let want: Vec<_> = (0..n).map(|i| (i, sizes[i], caller)).collect();
            assert_eq!(got, want);
            assert_eq!(inits.into_inner(), 1);
            // Outside, the pool's threads do the work again.
            let ids = pool.install(|| par_map_largest_first(&sizes, || (), |_, _| std::thread::current().id()));
            assert!(ids.iter().all(|&t| t != caller));
        }
        let r = std::panic::catch_unwind(|| on_this_thread(|| panic!("inside")));
        assert!(r.is_err());
        assert!(!ON_THIS_THREAD.with(|t| t.get()));
        // Tokenizer::encode_batch inside it equals encode.
        let mut tokens: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        tokens.push((256, b"ab".to_vec()));
        let tok = Tokenizer::new(tokens, vec![], Options::default()).unwrap();
        let texts = [&b"abab"[..], b"", b"xab", b"ba"];
        let got = on_this_thread(|| tok.encode_batch(&texts, None));
        let want: Vec<Vec<u32>> = texts.iter().map(|t| tok.encode(t, None)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn rejects_bad_specials() {
        let base: Vec<(u32, Vec<u8>)> = (0..=255u8).map(|b| (b as u32, vec![b])).collect();
        assert!(Tokenizer::new(base.clone(), vec![(b"x".to_vec(), 5)], Options::default()).is_err());
        assert!(Tokenizer::new(base.clone(), vec![(b"".to_vec(), 500)], Options::default()).is_err());
        assert!(Tokenizer::new(
            base.clone(),
            vec![(b"x".to_vec(), 500), (b"x".to_vec(), 501)],
            Options::default()
        )
        .is_err());
        assert!(Tokenizer::new(base, vec![(b"x".to_vec(), 500), (b"y".to_vec(), 500)], Options::default()).is_err());
    }
}
