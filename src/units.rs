//! Word-like unit annotation (SPEC section 2).
//!
//! A character *joins* when its General Category is a letter (`L*`) or a mark (`M*`) and its
//! Script is not Han, Hiragana, Katakana or Bopomofo. A unit is a maximal run of joining
//! characters; every other character is a unit by itself, and so is every byte that is not part
//! of a valid UTF-8 sequence.
//!
//! The encoder and the counter only need to know, for every byte, whether it is the first byte of
//! its unit: the unit index `w[i]` is the number of unit starts at or before `i` minus one, and
//! byte `i` is the last byte of its unit exactly when byte `i + 1` starts a unit (or `i` is the
//! last byte).

use unicode_general_category::{get_general_category, GeneralCategory as Gc};
use unicode_script::{Script, UnicodeScript};

/// Whether `c` joins its neighbours into one unit (computed from the Unicode tables).
pub fn char_joins_slow(c: char) -> bool {
    let letter_or_mark = matches!(
        get_general_category(c),
        Gc::UppercaseLetter
            | Gc::LowercaseLetter
            | Gc::TitlecaseLetter
            | Gc::ModifierLetter
            | Gc::OtherLetter
            | Gc::NonspacingMark
            | Gc::SpacingMark
            | Gc::EnclosingMark
    );
    letter_or_mark
        && !matches!(
            c.script(),
            Script::Han | Script::Hiragana | Script::Katakana | Script::Bopomofo
        )
}

/// Bit table of `char_joins_slow` over the Basic Multilingual Plane (8 KiB), built on first use.
fn bmp_table() -> &'static [u64; 1024] {
    // a OnceBox, not a OnceLock: a process forked while another thread builds it must not wait
    static TABLE: crate::once_box::OnceBox<[u64; 1024]> = crate::once_box::OnceBox::new();
    TABLE.get_or_init(|| {
        let mut t = [0u64; 1024];
        for cp in 0u32..0x10000 {
            if let Some(c) = char::from_u32(cp) {
                if char_joins_slow(c) {
                    t[(cp >> 6) as usize] |= 1u64 << (cp & 63);
                }
            }
        }
        t
    })
}

/// Whether `c` joins; a table lookup for the BMP.
#[inline]
pub fn char_joins(c: char) -> bool {
    let cp = c as u32;
    if cp < 0x80 {
        (c as u8).is_ascii_alphabetic()
    } else if cp < 0x10000 {
        bmp_table()[(cp >> 6) as usize] >> (cp & 63) & 1 == 1
    } else {
        char_joins_slow(c)
    }
}

/// Fills `starts` (resized to `text.len()`) with 1 where a byte is the first byte of its unit and
/// 0 elsewhere. `text` may hold invalid UTF-8; each invalid byte is a unit by itself.
pub fn unit_starts(text: &[u8], starts: &mut Vec<u8>) {
    starts.clear();
    starts.resize(text.len(), 0);
    let mut pos = 0usize;
    for chunk in text.utf8_chunks() {
        let valid = chunk.valid();
        mark_valid(valid, &mut starts[pos..pos + valid.len()]);
        pos += valid.len();
        for _ in chunk.invalid() {
            starts[pos] = 1;
            pos += 1;
        }
    }
}

/// `unit_starts` of text known to be ASCII (no validation, no decoding): a byte starts a unit
/// unless it and the byte before it are both letters. One pass the compiler vectorizes.
pub fn ascii_unit_starts(text: &[u8], starts: &mut Vec<u8>) {
    debug_assert!(text.is_ascii());
    starts.clear();
    starts.resize(text.len(), 0);
    if let Some(first) = starts.first_mut() {
        *first = 1;
    }
    for (s, w) in starts.iter_mut().skip(1).zip(text.windows(2)) {
        *s = 1 ^ (ascii_joins(w[0]) & ascii_joins(w[1]));
    }
}

/// Writes the UTF-8 of the code points `cps` to `utf8` and its `unit_starts` to `starts` (both
/// replaced) in one pass: the characters are known, so nothing is validated or decoded again.
/// `Err` on a surrogate or a value past U+10FFFF (not a character; UTF-8 cannot hold it).
pub fn utf8_with_unit_starts<I: ExactSizeIterator<Item = u32>>(cps: I, utf8: &mut Vec<u8>, starts: &mut Vec<u8>) -> Result<(), ()> {
    utf8.clear();
    starts.clear();
    let cap = cps.len() * 4;
    utf8.reserve(cap);
    // One more for the encoder's sentinel.
    starts.reserve(cap + 1);
    let (out, flags) = (utf8.as_mut_ptr(), starts.as_mut_ptr());
    let mut n = 0usize;
    let mut prev = 0u8;
    for c in cps {
        let (j, len) = if c < 0x80 {
            (ascii_joins(c as u8), 1)
        } else {
            let ch = char::from_u32(c).ok_or(())?;
            (u8::from(char_joins(ch)), ch.len_utf8())
        };
        // SAFETY: each code point takes at most 4 bytes and both buffers have room for 4 per
        // code point; bytes n..n + len are written before the lengths are set below.
        unsafe {
            if len == 1 {
                *out.add(n) = c as u8;
            } else {
                let ch = char::from_u32_unchecked(c);
                ch.encode_utf8(std::slice::from_raw_parts_mut(out.add(n), len));
            }
            *flags.add(n) = 1 ^ (j & prev);
            for k in 1..len {
                *flags.add(n + k) = 0;
            }
        }
        prev = j;
        n += len;
    }
    // SAFETY: bytes 0..n of both were written above.
    unsafe {
        utf8.set_len(n);
        starts.set_len(n);
    }
    Ok(())
}

/// 1 for the ASCII letters (the only joining ASCII characters), else 0; `b` < 0x80. Branch-free,
/// so that loops over ASCII text vectorize.
#[inline(always)]
const fn ascii_joins(b: u8) -> u8 {
    ((b | 0x20).wrapping_sub(b'a') < 26) as u8
}

/// `ASCII_JOINS[b]` is [`ascii_joins`]`(b)`, as a table for the byte loop of UTF-8 text.
const ASCII_JOINS: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut b = 0;
    while b < 128 {
        t[b] = ascii_joins(b as u8);
        b += 1;
    }
    t
};

/// Unit starts of valid UTF-8; the first character always starts a unit.
fn mark_valid(s: &str, starts: &mut [u8]) {
    let bytes = s.as_bytes();
    let n = bytes.len();
    assert!(starts.len() >= n);
    let mut prev: u8 = 0; // 1 when the previous character joins
    let mut i = 0usize;
    while i < n {
        // SAFETY: i < n <= starts.len().
        let b = unsafe { *bytes.get_unchecked(i) };
        if b < 0x80 {
            let j = ASCII_JOINS[b as usize];
            unsafe { *starts.get_unchecked_mut(i) = 1 ^ (j & prev) };
            prev = j;
            i += 1;
        } else {
            let len = utf8_len(b);
            // `s` is valid UTF-8, so the sequence is complete and decodes to one char.
            let c = s[i..i + len].chars().next().unwrap_or('\u{FFFD}');
            let j = u8::from(char_joins(c));
            starts[i] = 1 ^ (j & prev);
            prev = j;
            i += len;
        }
    }
}

/// Length of the UTF-8 sequence that starts with lead byte `b` (1 for anything else).
#[inline]
pub fn utf8_len(b: u8) -> usize {
    match b {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts_of(s: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        unit_starts(s, &mut v);
        v
    }

    #[test]
    fn ascii_words_spaces_digits() {
        // "co-advisor 12": co | - | advisor | ' ' | 1 | 2
        let s = starts_of(b"co-advisor 12");
        assert_eq!(s, vec![1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn cjk_is_singleton_and_marks_join() {
        // "漢字" two singleton units; "é" (e + U+0301) one unit; "ー" (Lm, Common) joins.
        let s = starts_of("漢字".as_bytes());
        assert_eq!(s, vec![1, 0, 0, 1, 0, 0]);
        let s = starts_of("e\u{301}x".as_bytes());
        assert_eq!(s, vec![1, 0, 0, 0]);
        assert!(!char_joins('漢'));
        assert!(!char_joins('か'));
        assert!(!char_joins('カ'));
        assert!(!char_joins('ㄅ'));
        assert!(char_joins('한'));
        assert!(char_joins('ก'));
        assert!(char_joins('\u{0E31}')); // Thai vowel sign, Mn
        assert!(!char_joins('5'));
        assert!(!char_joins('_'));
    }

    #[test]
    fn invalid_bytes_are_units() {
        // "a", 0xFF, "b", truncated 3-byte sequence, "c"
        let s = starts_of(b"a\xffb\xe4\xb8c");
        assert_eq!(s, vec![1, 1, 1, 1, 1, 1]);
        let s = starts_of(b"ab\xe4\xb8\xadcd");
        assert_eq!(s, vec![1, 0, 1, 0, 0, 1, 0]);
    }

    /// Random texts over ASCII, Latin, marks, Cyrillic, Han, Hangul, emoji (4-byte) and mixed.
    fn random_texts() -> Vec<String> {
        let pool: Vec<char> = "aZ .,-_9\n\té\u{301}жЖΩ漢字かカ한ก\u{E31}ー😀𝔸\u{10FFFF}".chars().collect();
        let mut rng = crate::mce::tests::Rng(0x1234_5678_9abc_def0);
        let mut next = move || rng.next();
        (0..400)
            .map(|k| {
                let len = (next() % 70) as usize;
                let ascii = k % 3 == 0;
                (0..len)
                    .map(|_| {
                        let c = pool[(next() as usize) % pool.len()];
                        if ascii && !c.is_ascii() { 'q' } else { c }
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn fused_annotations_match_unit_starts() {
        for s in random_texts() {
            let want = starts_of(s.as_bytes());
            let (mut utf8, mut starts) = (vec![7u8; 3], vec![9u8; 5]);
            utf8_with_unit_starts(s.chars().map(|c| c as u32).collect::<Vec<u32>>().into_iter(), &mut utf8, &mut starts).unwrap();
            assert_eq!(utf8, s.as_bytes(), "{s:?}");
            assert_eq!(starts, want, "{s:?}");
            let ucs2: Vec<u16> = s.chars().filter(|&c| (c as u32) < 0x10000).map(|c| c as u32 as u16).collect();
            let bmp: String = s.chars().filter(|&c| (c as u32) < 0x10000).collect();
            utf8_with_unit_starts(ucs2.iter().map(|&c| c as u32), &mut utf8, &mut starts).unwrap();
            assert_eq!((utf8.as_slice(), starts.clone()), (bmp.as_bytes(), starts_of(bmp.as_bytes())));
            if s.is_ascii() {
                let mut a = vec![3u8; 2];
                ascii_unit_starts(s.as_bytes(), &mut a);
                assert_eq!(a, want, "{s:?}");
            }
        }
        let (mut utf8, mut starts) = (Vec::new(), Vec::new());
        assert!(utf8_with_unit_starts([0x61, 0xD800].into_iter(), &mut utf8, &mut starts).is_err());
        assert!(utf8_with_unit_starts([0x110000].into_iter(), &mut utf8, &mut starts).is_err());
        // Every ASCII byte pair (letters are exactly A-Z and a-z).
        for a in 0u8..128 {
            for b in 0u8..128 {
                let mut v = Vec::new();
                ascii_unit_starts(&[a, b], &mut v);
                assert_eq!(v, starts_of(&[a, b]), "{a} {b}");
            }
        }
    }

    #[test]
    fn fused_annotations_of_every_code_point() {
        // Each character between letters, after a digit and next to a copy of itself.
        let mut text = String::new();
        for c in (0u32..0x110000).filter_map(char::from_u32) {
            for x in ['a', c, 'b', c, c, '1', c, ' '] {
                text.push(x);
            }
        }
        let cps: Vec<u32> = text.chars().map(|c| c as u32).collect();
        let (mut utf8, mut starts) = (Vec::new(), Vec::new());
        utf8_with_unit_starts(cps.into_iter(), &mut utf8, &mut starts).unwrap();
        assert!(utf8 == text.as_bytes());
        assert!(starts == starts_of(text.as_bytes()));
    }

    #[test]
    fn table_matches_slow_path() {
        for b in 0u8..0x80 {
            assert_eq!(ascii_joins(b) == 1, char_joins_slow(b as char), "{b:#04x}");
        }
        for cp in 0u32..0x10000 {
            if let Some(c) = char::from_u32(cp) {
                assert_eq!(char_joins(c), char_joins_slow(c), "U+{cp:04X}");
            }
        }
    }
}
