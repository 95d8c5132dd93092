//! Corpus files read in Rust: JSON-lines (plain or gzip) and one-document text files, turned
//! into blocks of UTF-8 documents without making a Python string per document.
//!
//! The JSON side is a strict fast path, not a second JSON implementation with its own opinion:
//! [`json_field`] returns the field's string only for a line that Python's `json.loads` surely
//! accepts with exactly that string (an object, valid UTF-8, strict JSON, the last of duplicate
//! keys); for anything else (malformed JSON, a missing or non-string field, a lone surrogate in
//! the field, `NaN`, deep nesting, a huge number, a byte-order mark, ...) it says "ask Python",
//! and the caller hands that one line to `json.loads`, which decides, with its own messages.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Nesting deeper than this is left to Python (its recursion limit decides).
const MAX_DEPTH: usize = 64;
/// A number token longer than this is left to Python (its int conversion has a digit limit).
const MAX_NUMBER: usize = 256;

/// JSON's whitespace (what Python's decoder skips between tokens).
#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// A line that Python's `bytes.strip()` makes empty (it strips ASCII whitespace, \x0b and \x0c
/// included): skipped, as the Python reader skips it.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

/// The number of characters (code points) of valid UTF-8: its bytes that are not continuation
/// bytes (what Python's `len` of the decoded str is).
pub fn utf8_chars(s: &[u8]) -> usize {
    s.iter().filter(|&&b| (b as i8) >= -0x40).count()
}

/// The first newline of `s`.
#[inline]
fn find_newline(s: &[u8]) -> Option<usize> {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64; every load reads 16 bytes inside `s`.
    unsafe {
        use std::arch::x86_64::*;
        let nl = _mm_set1_epi8(b'\n' as i8);
        while i + 16 <= s.len() {
            let v = _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i);
            let m = _mm_movemask_epi8(_mm_cmpeq_epi8(v, nl));
            if m != 0 {
                return Some(i + m.trailing_zeros() as usize);
            }
            i += 16;
        }
    }
    s[i..].iter().position(|&b| b == b'\n').map(|k| i + k)
}

/// From `i`, the first byte of `s` that ends a plain run of a JSON string (`"`, `\` or a
/// byte below 0x20), or `s.len()`.
#[inline]
fn plain_run_end(s: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86_64; every load reads 16 bytes inside `s`.
    unsafe {
        use std::arch::x86_64::*;
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let below = _mm_set1_epi8(0x1f);
        while i + 16 <= s.len() {
            let v = _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i);
            // unsigned v <= 0x1f exactly when min(v, 0x1f) == v
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, below), v);
            let hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), control);
            let m = _mm_movemask_epi8(hit);
            if m != 0 {
                return i + m.trailing_zeros() as usize;
            }
            i += 16;
        }
    }
    while i + 8 <= s.len() {
        let w = u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
        if special_in(w) {
            break;
        }
        i += 8;
    }
    while i < s.len() && !matches!(s[i], b'"' | b'\\' | 0..=0x1f) {
        i += 1;
    }
    i
}

/// 8 bytes at a time: nonzero when one of them is `"`, `\` or below 0x20 (the bytes that end
/// a plain run of a JSON string).
#[inline]
fn special_in(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let quote = has_zero(w ^ (ONES * b'"' as u64));
    let backslash = has_zero(w ^ (ONES * b'\\' as u64));
    // bytes below 0x20: (b - 0x20) borrows into the high bit, for bytes without the high bit
    let control = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
    (quote | backslash | control) != 0
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

/// Why the fast path stopped: the line is for Python to decide.
struct Unsure;

type P<T> = Result<T, Unsure>;

impl<'a> Parser<'a> {
    #[inline]
    fn ws(&mut self) {
        while self.i < self.s.len() && is_ws(self.s[self.i]) {
            self.i += 1;
        }
    }

    #[inline]
    fn peek(&self) -> P<u8> {
        self.s.get(self.i).copied().ok_or(Unsure)
    }

    fn hex4(&mut self) -> P<u32> {
        let h = self.s.get(self.i..self.i + 4).ok_or(Unsure)?;
        let mut v = 0u32;
        for &c in h {
            v = v * 16 + (c as char).to_digit(16).ok_or(Unsure)?;
        }
        self.i += 4;
        Ok(v)
    }

    /// A string (the opening quote at `self.i`). With `out`, its value is appended as UTF-8;
    /// a lone surrogate is then `Unsure` (UTF-8 cannot hold it; Python decides what follows).
    /// Without `out`, only checked (lone surrogates are valid JSON).
    fn string(&mut self, mut out: Option<&mut Vec<u8>>) -> P<()> {
        debug_assert_eq!(self.s[self.i], b'"');
        self.i += 1;
        let s = self.s;
        loop {
            // a plain run: 8 bytes at a time, then byte by byte
            let start = self.i;
            self.i = plain_run_end(s, self.i);
            if let Some(o) = out.as_deref_mut() {
                o.extend_from_slice(&s[start..self.i]);
            }
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Ok(());
                }
                b'\\' => {
                    let e = *s.get(self.i + 1).ok_or(Unsure)?;
                    self.i += 2;
                    let c: u8 = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xD800..0xDC00).contains(&cp) {
                                // a high surrogate: a pair only with a low one right after
                                if s.get(self.i..self.i + 2) == Some(b"\\u") {
                                    let save = self.i;
                                    self.i += 2;
                                    let lo = self.hex4()?;
                                    if (0xDC00..0xE000).contains(&lo) {
                                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                    } else {
                                        self.i = save; // lone; the next escape stands alone
                                    }
                                }
                            }
                            match char::from_u32(cp) {
                                Some(ch) => {
                                    if let Some(o) = out.as_deref_mut() {
                                        o.extend_from_slice(ch.encode_utf8(&mut [0u8; 4]).as_bytes());
                                    }
                                }
                                None if out.is_some() => return Err(Unsure), // lone surrogate
                                None => {}
                            }
                            continue;
                        }
                        _ => return Err(Unsure),
                    };
                    if let Some(o) = out.as_deref_mut() {
                        o.push(c);
                    }
                }
                _ => return Err(Unsure), // a control character
            }
        }
    }

    fn number(&mut self) -> P<()> {
        let s = self.s;
        let start = self.i;
        let digits = |i: &mut usize| {
            let d = *i;
            while *i < s.len() && s[*i].is_ascii_digit() {
                *i += 1;
            }
            *i - d
        };
        if s.get(self.i) == Some(&b'-') {
            self.i += 1;
        }
        match s.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut self.i);
            }
            _ => return Err(Unsure), // -Infinity, a bare minus, ...
        }
        if s.get(self.i) == Some(&b'.') {
            self.i += 1;
            if digits(&mut self.i) == 0 {
                return Err(Unsure);
            }
        }
        if matches!(s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(s.get(self.i), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if digits(&mut self.i) == 0 {
                return Err(Unsure);
            }
        }
        if self.i - start > MAX_NUMBER {
            return Err(Unsure);
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> P<()> {
        if self.s.get(self.i..self.i + word.len()) == Some(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(Unsure)
        }
    }

    /// The `:` after an object's key, with the whitespace around it.
    fn colon(&mut self) -> P<()> {
        self.ws();
        if self.peek()? != b':' {
            return Err(Unsure);
        }
        self.i += 1;
        self.ws();
        Ok(())
    }

    /// After an object member or an array element: `true` at the container's `close` byte,
    /// `false` after a comma (each consumed, with the whitespace before it and after a comma).
    fn end_or_comma(&mut self, close: u8) -> P<bool> {
        self.ws();
        match self.peek()? {
            b',' => {
                self.i += 1;
                self.ws();
                Ok(false)
            }
            c if c == close => {
                self.i += 1;
                Ok(true)
            }
            _ => Err(Unsure),
        }
    }

    /// Any value (checked, not kept), at `self.i` after whitespace.
    fn value(&mut self, depth: usize) -> P<()> {
        match self.peek()? {
            b'"' => self.string(None),
            b'{' => {
                if depth >= MAX_DEPTH {
                    return Err(Unsure);
                }
                self.i += 1;
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    if self.peek()? != b'"' {
                        return Err(Unsure);
                    }
                    self.string(None)?;
                    self.colon()?;
                    self.value(depth + 1)?;
                    if self.end_or_comma(b'}')? {
                        return Ok(());
                    }
                }
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return Err(Unsure);
                }
                self.i += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.value(depth + 1)?;
                    if self.end_or_comma(b']')? {
                        return Ok(());
                    }
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Unsure), // NaN, Infinity, or not JSON
        }
    }

    /// A key (at `self.i`, a quote): whether it is `field`. A key without escapes is compared
    /// in place; one with escapes is decoded into `scratch` (a key with a lone surrogate is
    /// never a UTF-8 field name).
    fn key_is(&mut self, field: &[u8], scratch: &mut Vec<u8>) -> P<bool> {
        let start = self.i + 1;
        let plain_end = start + field.len();
        if self.s.get(start..plain_end) == Some(field) && self.s.get(plain_end) == Some(&b'"') {
            // the raw bytes are `field` and a quote: is that quote the end of the key? It is
            // unless escaped, and `field` holds no backslash run to escape it when it has no
            // backslash at all
            if !field.contains(&b'\\') && !field.iter().any(|&b| b < 0x20 || b == b'"') {
                self.i = plain_end + 1;
                return Ok(true);
            }
        }
        scratch.clear();
        let save = self.i;
        match self.string(Some(scratch)) {
            Ok(()) => Ok(scratch.as_slice() == field),
            Err(Unsure) => {
                // a lone surrogate in the key (valid JSON, not our field), or invalid
                self.i = save;
                self.string(None)?;
                Ok(false)
            }
        }
    }
}

/// The string value of the top-level `field` of one JSON line (the last one when the key
/// repeats, as `json.loads` keeps it), appended to `out` as UTF-8, when the line is a JSON
/// object that `json.loads` surely accepts and that value is a string without lone surrogates:
/// `true`. Otherwise `false` and `out` is unchanged: the line is for Python to judge (an error,
/// or a value only Python can hold). `line` may end in a newline.
pub fn json_field(line: &[u8], field: &[u8], out: &mut Vec<u8>) -> bool {
    let mark = out.len();
    let ok = json_field_inner(line, field, out, mark).is_ok();
    if !ok {
        out.truncate(mark);
    }
    ok
}

fn json_field_inner(line: &[u8], field: &[u8], out: &mut Vec<u8>, mark: usize) -> P<()> {
    // json.loads decodes the whole line first: invalid UTF-8 anywhere is its error
    if std::str::from_utf8(line).is_err() {
        return Err(Unsure);
    }
    let mut p = Parser { s: line, i: 0 };
    p.ws();
    if p.peek()? != b'{' {
        return Err(Unsure); // not an object (or a byte-order mark): Python's message
    }
    p.i += 1;
    p.ws();
    let mut found = false;
    let mut scratch = Vec::new();
    if p.peek()? == b'}' {
        p.i += 1;
    } else {
        loop {
            if p.peek()? != b'"' {
                return Err(Unsure);
            }
            let is_field = p.key_is(field, &mut scratch)?;
            p.colon()?;
            if is_field {
                if p.peek()? == b'"' {
                    out.truncate(mark); // a repeated key: the last one counts
                    let save = p.i;
                    if p.string(Some(out)).is_ok() {
                        found = true;
                    } else {
                        // a lone surrogate (or invalid): only Python can hold it, unless a
                        // later duplicate replaces it
                        p.i = save;
                        p.string(None)?;
                        out.truncate(mark);
                        found = false;
                    }
                } else {
                    // not a string (unless a later duplicate is): Python's error
                    p.value(1)?;
                    out.truncate(mark);
                    found = false;
                }
            } else {
                p.value(1)?;
            }
            if p.end_or_comma(b'}')? {
                break;
            }
        }
    }
    p.ws();
    if p.i != line.len() || !found {
        return Err(Unsure);
    }
    Ok(())
}

/// Documents as one UTF-8 buffer: document `k` is `data[ends[k - 1]..ends[k]]` (from 0 for
/// the first).
#[derive(Default, Debug, Clone)]
pub struct Texts {
    pub data: Vec<u8>,
    pub ends: Vec<usize>,
    /// Characters (code points) of all documents.
    pub chars: usize,
}

impl Texts {
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Document `k`.
    pub fn get(&self, k: usize) -> &[u8] {
        let start = if k == 0 { 0 } else { self.ends[k - 1] };
        &self.data[start..self.ends[k]]
    }

    /// All documents as slices.
    pub fn slices(&self) -> Vec<&[u8]> {
        (0..self.len()).map(|k| self.get(k)).collect()
    }

    /// Appends a document (valid UTF-8).
    pub fn push(&mut self, doc: &[u8]) {
        self.data.extend_from_slice(doc);
        self.close_doc();
    }

    /// Ends the document made of the bytes appended to `data` since the last one.
    fn close_doc(&mut self) {
        let start = self.ends.last().copied().unwrap_or(0);
        self.chars += utf8_chars(&self.data[start..]);
        self.ends.push(self.data.len());
    }
}

/// How a file is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

/// What a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// One JSON object per line; the documents are a field's strings.
    JsonLines,
    /// The whole file is one document.
    Text,
}

/// Why [`CorpusReader::read`] returned.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// The block holds at least the characters asked for.
    Full,
    /// The file is read to its end.
    End,
    /// Line `lineno` (from 1) is for Python to judge (see [`json_field`]); the reader is past it.
    Unsure { lineno: u64, line: Vec<u8> },
    /// Line `lineno` (or a text file, `lineno` 0) inflates past the size limit.
    TooLong { lineno: u64 },
    /// The file could not be read (corrupt or truncated compressed data, invalid UTF-8 in a
    /// text file, an I/O error): the documents so far were read.
    Failed(String),
}

/// Counts the bytes read from the stored file (for progress).
struct Counting {
    inner: File,
    read: Arc<AtomicU64>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A corpus file read document by document into [`Texts`] blocks.
pub struct CorpusReader {
    src: Box<dyn BufRead + Send>,
    kind: Kind,
    field: Vec<u8>,
    /// The longest line (or text file) accepted, in bytes.
    limit: u64,
    raw: Arc<AtomicU64>,
    lineno: u64,
    docs: u64,
    line: Vec<u8>,
    done: bool,
    /// The largest block read so far, in bytes (to size the next one).
    last_block: usize,
}

const BUF: usize = 1 << 20;

impl CorpusReader {
    /// Opens `path`. `field`: the JSON field (for [`Kind::JsonLines`]); `limit`: the most
    /// bytes a line (a text file) may inflate to.
    pub fn open(path: &str, kind: Kind, compression: Compression, field: &[u8], limit: u64) -> io::Result<Self> {
        Self::open_buffered(path, kind, compression, field, limit, BUF)
    }

    fn open_buffered(
        path: &str,
        kind: Kind,
        compression: Compression,
        field: &[u8],
        limit: u64,
        buf: usize,
    ) -> io::Result<Self> {
        let raw = Arc::new(AtomicU64::new(0));
        let file = Counting { inner: File::open(path)?, read: raw.clone() };
        let src: Box<dyn BufRead + Send> = match compression {
            Compression::None => Box::new(BufReader::with_capacity(buf, file)),
            Compression::Gzip => Box::new(BufReader::with_capacity(
                buf,
                flate2::bufread::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, file)),
            )),
        };
        Ok(CorpusReader { src, kind, field: field.to_vec(), limit, raw, lineno: 0, docs: 0, line: Vec::new(), done: false, last_block: 0 })
    }

    /// Bytes of the stored file read so far.
    pub fn raw_position(&self) -> u64 {
        self.raw.load(Ordering::Relaxed)
    }

    /// Documents read so far.
    pub fn documents(&self) -> u64 {
        self.docs
    }

    /// Lines read so far.
    pub fn lines(&self) -> u64 {
        self.lineno
    }

    /// Reads documents into `out` until it holds `max_chars` characters or more, or
    /// `max_docs` documents, the file ends, or a line needs Python's judgement.
    pub fn read(&mut self, out: &mut Texts, max_chars: usize, max_docs: usize) -> Stop {
        if self.done {
            return Stop::End;
        }
        if self.kind == Kind::Text {
            return self.read_text(out);
        }
        if out.data.capacity() == 0 {
            out.data.reserve(self.last_block + self.last_block / 8);
        }
        let stop = self.read_lines(out, max_chars, max_docs);
        self.last_block = self.last_block.max(out.data.len());
        stop
    }

    fn read_lines(&mut self, out: &mut Texts, max_chars: usize, max_docs: usize) -> Stop {
        // A line inside the reader's buffer is parsed in place; one that crosses the end of the
        // buffer is gathered in `self.line` first.
        while out.chars < max_chars && out.len() < max_docs {
            let buf = match self.src.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.done = true;
                    return Stop::Failed(e.to_string());
                }
            };
            if buf.is_empty() {
                // the end of the data: the last line may lack its newline
                if self.line.is_empty() {
                    self.done = true;
                    return Stop::End;
                }
                let line = std::mem::take(&mut self.line);
                if let Some(stop) = self.line_into(&line, out) {
                    return stop;
                }
                continue;
            }
            let (n, whole) = match find_newline(buf) {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if !whole || !self.line.is_empty() {
                if self.line.len() as u64 + n as u64 > self.limit {
                    self.done = true;
                    self.lineno += 1;
                    return Stop::TooLong { lineno: self.lineno };
                }
                self.line.extend_from_slice(&buf[..n]);
                self.src.consume(n);
                if whole {
                    let line = std::mem::take(&mut self.line);
                    let r = self.line_into(&line, out);
                    self.line = line;
                    self.line.clear();
                    if let Some(stop) = r {
                        return stop;
                    }
                }
                continue;
            }
            // the whole line is in the buffer
            self.lineno += 1;
            let line = &buf[..n];
            if !is_blank(line) {
                if json_field(line, &self.field, &mut out.data) {
                    out.close_doc();
                    self.docs += 1;
                } else {
                    let line = line.to_vec();
                    self.src.consume(n);
                    return Stop::Unsure { lineno: self.lineno, line };
                }
            }
            self.src.consume(n);
        }
        Stop::Full
    }

    /// One line gathered in `self.line`: `Some` when reading stops at it.
    fn line_into(&mut self, line: &[u8], out: &mut Texts) -> Option<Stop> {
        self.lineno += 1;
        if is_blank(line) {
            return None;
        }
        if json_field(line, &self.field, &mut out.data) {
            out.close_doc();
            self.docs += 1;
            None
        } else {
            Some(Stop::Unsure { lineno: self.lineno, line: line.to_vec() })
        }
    }

    /// Counts a document that the caller read from an [`Stop::Unsure`] line.
    pub fn count_document(&mut self) {
        self.docs += 1;
    }

    fn read_text(&mut self, out: &mut Texts) -> Stop {
        self.done = true;
        let mut data = Vec::new();
        let mut take = (&mut self.src).take(self.limit.saturating_add(1));
        if let Err(e) = take.read_to_end(&mut data) {
            return Stop::Failed(e.to_string());
        }
        if data.len() as u64 > self.limit {
            return Stop::TooLong { lineno: 0 };
        }
        if let Err(e) = std::str::from_utf8(&data) {
            return Stop::Failed(format!("not valid UTF-8 at byte {}", e.valid_up_to()));
        }
        out.push(&data);
        self.docs += 1;
        Stop::End
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(line: &str) -> Option<String> {
        let mut out = b"prefix".to_vec();
        if json_field(line.as_bytes(), b"text", &mut out) {
            Some(String::from_utf8(out[6..].to_vec()).unwrap())
        } else {
            assert_eq!(out, b"prefix");
            None
        }
    }

    #[test]
    fn plain_and_escaped_fields() {
        assert_eq!(field(r#"{"text": "hello"}"#).as_deref(), Some("hello"));
        assert_eq!(field("{\"text\":\"a\"}\n").as_deref(), Some("a"));
        assert_eq!(field(" \t{ \"text\" : \"a\" } \r\n").as_deref(), Some("a"));
        assert_eq!(
            field(r#"{"text": "q\" b\\ s\/ \b\f\n\r\t"}"#).as_deref(),
            Some("q\" b\\ s/ \u{8}\u{c}\n\r\t")
        );
        assert_eq!(field(r#"{"text": "\u00e9\u4E2D\ud83d\ude00"}"#).as_deref(), Some("é中😀"));
        assert_eq!(field(r#"{"text": "é中😀 raw"}"#).as_deref(), Some("é中😀 raw"));
        assert_eq!(field(r#"{"text": ""}"#).as_deref(), Some(""));
        // a long plain run crosses the 8-byte steps
        let long = "abcdefghij".repeat(30);
        assert_eq!(field(&format!(r#"{{"text": "{long}\"{long}"}}"#)), Some(format!("{long}\"{long}")));
    }

    #[test]
    fn other_members_are_checked_and_skipped() {
        let l = r#"{"a": [1, -2.5e+3, {"b": null}, true, false, []], "text": "x", "c": {"d": "\ud800"}, "e": 0}"#;
        assert_eq!(field(l).as_deref(), Some("x"));
        assert_eq!(field(r#"{"te\u0078t": "escaped key"}"#).as_deref(), Some("escaped key"));
        assert_eq!(field(r#"{"\ud800": 1, "text": "y"}"#).as_deref(), Some("y"));
        assert_eq!(field(r#"{"text": "first", "text": "last"}"#).as_deref(), Some("last"));
        assert_eq!(field(r#"{"text": 1, "text": "last"}"#).as_deref(), Some("last"));
        assert_eq!(field(r#"{"text": "first", "text": 2}"#), None);
        assert_eq!(field(r#"{"text": "\ud800", "text": "later"}"#).as_deref(), Some("later"));
        assert_eq!(field(r#"{"text": "later", "text": "\udc00"}"#), None);
        assert_eq!(field(r#"{"textx": "a", "tex": "b"}"#), None);
    }

    #[test]
    fn python_decides_the_rest() {
        for l in [
            "",
            "[]",
            r#""text""#,
            r#"{"text": "a"} x"#,
            r#"{"text": "a",}"#,
            r#"{"text": 'a'}"#,
            r#"{"text": "a\x"}"#,
            r#"{"text": "a\u12"}"#,
            r#"{"text": "\ud800"}"#,
            r#"{"text": "\udc00\ud800"}"#,
            r#"{"text": "ok", "n": NaN}"#,
            r#"{"text": "ok", "n": -Infinity}"#,
            r#"{"text": "ok", "n": 01}"#,
            r#"{"text": "ok", "n": 1.}"#,
            r#"{"text": "ok", "n": .5}"#,
            r#"{"text": "ok", "n": 1e}"#,
            r#"{"text": "ok", "n": tru}"#,
            "{\"text\": \"tab\there\"}",
            "\u{feff}{\"text\": \"bom\"}",
            r#"{"text": "a""#,
            r#"{"text" "a"}"#,
            r#"{text: "a"}"#,
            r#"{"text": "a"}}"#,
            r#"{"other": "a"}"#,
            "{\"text\": \"a\"}\x0c",
        ] {
            assert_eq!(field(l), None, "{l:?}");
        }
        let deep = format!(r#"{{"text": "a", "d": {}{}}}"#, "[".repeat(100), "]".repeat(100));
        assert_eq!(field(&deep), None);
        let shallow = format!(r#"{{"text": "a", "d": {}{}}}"#, "[".repeat(10), "]".repeat(10));
        assert_eq!(field(&shallow).as_deref(), Some("a"));
        let big = format!(r#"{{"text": "a", "n": {}}}"#, "9".repeat(5000));
        assert_eq!(field(&big), None);
        let mut bad = br#"{"text": "a"}"#.to_vec();
        bad[10] = 0xff;
        assert!(!json_field(&bad, b"text", &mut Vec::new()));
        // a field name with characters that need escaping
        let mut out = Vec::new();
        assert!(json_field(br#"{"a\"b": "v"}"#, b"a\"b", &mut out));
        assert_eq!(out, b"v");
    }

    #[test]
    fn blank_lines_and_chars() {
        assert!(is_blank(b" \t\r\n\x0b\x0c"));
        assert!(!is_blank(b" x"));
        assert_eq!(utf8_chars("é中😀a".as_bytes()), 4);
        let mut t = Texts::default();
        t.push("é中".as_bytes());
        t.push(b"");
        t.push(b"ab");
        assert_eq!((t.len(), t.chars), (3, 4));
        assert_eq!(t.slices(), vec!["é中".as_bytes(), b"", b"ab"]);
    }

    fn tmp(name: &str, data: &[u8]) -> String {
        let dir = std::env::temp_dir().join(format!("cnfmce-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        p.to_str().unwrap().to_string()
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn reads_blocks_of_plain_and_gzip_lines() {
        let mut text = String::new();
        for k in 0..1000 {
            text.push_str(&format!("{{\"text\": \"doc {k} é\", \"n\": {k}}}\n"));
            if k % 7 == 0 {
                text.push_str("  \n");
            }
        }
        text.push_str(r#"{"text": "last, no newline"}"#);
        for (name, data, c) in [
            ("a.jsonl", text.as_bytes().to_vec(), Compression::None),
            ("a.jsonl.gz", gzip(text.as_bytes()), Compression::Gzip),
        ] {
            let p = tmp(name, &data);
            let mut r = CorpusReader::open(&p, Kind::JsonLines, c, b"text", u64::MAX).unwrap();
            let mut all = Vec::new();
            loop {
                let mut t = Texts::default();
                let stop = r.read(&mut t, 100, usize::MAX);
                all.extend(t.slices().iter().map(|s| String::from_utf8(s.to_vec()).unwrap()));
                match stop {
                    Stop::Full => assert!(t.chars >= 100),
                    Stop::End => break,
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(all.len(), 1001);
            assert_eq!(all[3], "doc 3 é");
            assert_eq!(all[1000], "last, no newline");
            assert_eq!(r.documents(), 1001);
            assert_eq!(r.raw_position(), data.len() as u64);
        }
    }

    #[test]
    fn lines_across_buffer_ends() {
        const SMALL: usize = 4096;
        // lines of many lengths (one longer than the reader's buffer) over several buffers
        let mut text = String::new();
        let mut want = Vec::new();
        let mut k = 0usize;
        while text.len() < 3 * SMALL + 1234 {
            let doc = if k == 40 { "y".repeat(SMALL + 77) } else { format!("{}{k}", "x\\u00e9".repeat(k % 97)) };
            want.push(doc.replace("\\u00e9", "é"));
            text.push_str(&format!("{{\"text\": \"{doc}\"}}\n"));
            k += 1;
        }
        text.push_str("{\"text\": \"tail\"}");
        want.push("tail".into());
        for (name, data, c) in [
            ("h.jsonl", text.as_bytes().to_vec(), Compression::None),
            ("h.jsonl.gz", gzip(text.as_bytes()), Compression::Gzip),
        ] {
            let p = tmp(name, &data);
            let mut r = CorpusReader::open_buffered(&p, Kind::JsonLines, c, b"text", u64::MAX, SMALL).unwrap();
            let mut got = Vec::new();
            loop {
                let mut t = Texts::default();
                let stop = r.read(&mut t, 2000, usize::MAX);
                got.extend(t.slices().iter().map(|s| String::from_utf8(s.to_vec()).unwrap()));
                if stop == Stop::End {
                    break;
                }
                assert_eq!(stop, Stop::Full);
            }
            assert!(got == want, "{name}");
            assert_eq!(r.lines(), want.len() as u64);
            // the same line too long for a limit below its size
            let mut r = CorpusReader::open_buffered(&p, Kind::JsonLines, c, b"text", (SMALL + 50) as u64, SMALL).unwrap();
            let mut t = Texts::default();
            assert_eq!(r.read(&mut t, usize::MAX, usize::MAX), Stop::TooLong { lineno: 41 });
            assert_eq!(t.len(), 40);
        }
    }

    #[test]
    fn unsure_lines_corrupt_data_and_limits() {
        let p = tmp("b.jsonl", b"{\"text\": \"a\"}\n\n{\"text\": 1}\n{\"text\": \"b\"}\n");
        let mut r = CorpusReader::open(&p, Kind::JsonLines, Compression::None, b"text", u64::MAX).unwrap();
        let mut t = Texts::default();
        assert_eq!(r.read(&mut t, 1000, usize::MAX), Stop::Unsure { lineno: 3, line: b"{\"text\": 1}\n".to_vec() });
        assert_eq!(r.read(&mut t, 1000, usize::MAX), Stop::End);
        assert_eq!(t.slices(), vec![&b"a"[..], b"b"]);

        let gz = gzip(b"{\"text\": \"aaaa\"}\n".repeat(1000).as_slice());
        let p = tmp("c.jsonl.gz", &gz[..gz.len() - 5]);
        let mut r = CorpusReader::open(&p, Kind::JsonLines, Compression::Gzip, b"text", u64::MAX).unwrap();
        let mut t = Texts::default();
        assert!(matches!(r.read(&mut t, usize::MAX, usize::MAX), Stop::Failed(_)));
        let mut bad = gz.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        let p = tmp("d.jsonl.gz", &bad);
        let mut r = CorpusReader::open(&p, Kind::JsonLines, Compression::Gzip, b"text", u64::MAX).unwrap();
        // garbage lines (for Python to judge) may come before the checksum fails
        loop {
            match r.read(&mut Texts::default(), usize::MAX, usize::MAX) {
                Stop::Unsure { .. } => continue,
                Stop::Failed(_) => break,
                other => panic!("{other:?}"),
            }
        }

        let bomb = gzip(&[b'a'; 1 << 16]);
        let p = tmp("e.jsonl.gz", &bomb);
        let mut r = CorpusReader::open(&p, Kind::JsonLines, Compression::Gzip, b"text", 1000).unwrap();
        assert_eq!(r.read(&mut Texts::default(), usize::MAX, usize::MAX), Stop::TooLong { lineno: 1 });

        let p = tmp("f.txt", "whole é file\n".as_bytes());
        let mut r = CorpusReader::open(&p, Kind::Text, Compression::None, b"", u64::MAX).unwrap();
        let mut t = Texts::default();
        assert_eq!(r.read(&mut t, 1, usize::MAX), Stop::End);
        assert_eq!(t.slices(), vec!["whole é file\n".as_bytes()]);
        let p = tmp("g.txt", b"ab\xffc");
        let mut r = CorpusReader::open(&p, Kind::Text, Compression::None, b"", u64::MAX).unwrap();
        assert_eq!(r.read(&mut Texts::default(), 1, usize::MAX), Stop::Failed("not valid UTF-8 at byte 2".into()));
    }
}
