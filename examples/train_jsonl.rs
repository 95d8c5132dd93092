//! Trains a CNF vocabulary from a JSON-lines file with the Rust crate alone (no Python):
//!
//! ```text
//! cargo run --release --example train_jsonl -- CORPUS.jsonl VOCAB_SIZE OUT.tiktoken
//! ```
//!
//! Each line of `CORPUS.jsonl` is a JSON object whose `"text"` field is one document (other
//! fields are ignored; gzip is not read here, decompress first). The result is written as a
//! tiktoken file (`<base64 token> <id>` per line, regular tokens only), which
//! `cnfmce.Tokenizer.from_tiktoken` reads; the special tokens, if any, are printed.
//!
//! The `"text"` field is read by a small extractor below instead of a JSON library, to keep the
//! example free of dependencies: it finds the first `"text"` key at any depth and decodes its
//! string value (all JSON escapes, `\u` surrogate pairs included); lines without one are skipped
//! with a note on stderr.

use std::io::{BufRead, BufReader, Write};
use std::time::Instant;

use cnfmce::{train, TrainConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: train_jsonl CORPUS.jsonl VOCAB_SIZE OUT.tiktoken");
        std::process::exit(2);
    }
    let path = &args[1];
    let vocab_size: usize = args[2].parse().unwrap_or_else(|_| fail(&format!("bad VOCAB_SIZE {:?}", args[2])));
    let docs = read_documents(path);
    let bytes: usize = docs.iter().map(|d| d.len()).sum();
    eprintln!("{} documents, {bytes} bytes", docs.len());
    let t0 = Instant::now();
    let config = TrainConfig { vocab_size, ..TrainConfig::default() };
    let tok = train(|| docs.iter(), config).unwrap_or_else(|e| fail(&e.to_string()));
    eprintln!("trained {} ids in {:.1}s", tok.num_ids(), t0.elapsed().as_secs_f64());
    let text: Vec<u8> = docs.iter().take(100).flat_map(|d| d.bytes()).collect();
    let n = tok.encode(&text, None).len();
    eprintln!("first documents: {:.3} bytes per token", text.len() as f64 / n.max(1) as f64);
    let mut out = std::io::BufWriter::new(std::fs::File::create(&args[3]).unwrap_or_else(|e| fail(&format!("{}: {e}", args[3]))));
    for (id, token) in tok.vocab().iter() {
        writeln!(out, "{} {id}", base64(token)).unwrap_or_else(|e| fail(&e.to_string()));
    }
    out.flush().unwrap_or_else(|e| fail(&e.to_string()));
}

fn fail(msg: &str) -> ! {
    eprintln!("train_jsonl: {msg}");
    std::process::exit(1)
}

fn read_documents(path: &str) -> Vec<String> {
    let f = std::fs::File::open(path).unwrap_or_else(|e| fail(&format!("{path}: {e}")));
    let mut docs = Vec::new();
    for (k, line) in BufReader::new(f).lines().enumerate() {
        let line = line.unwrap_or_else(|e| fail(&format!("{path}:{}: {e}", k + 1)));
        if line.trim().is_empty() {
            continue;
        }
        match text_field(&line) {
            Some(t) => docs.push(t),
            None => eprintln!("{path}:{}: no \"text\" string, skipped", k + 1),
        }
    }
    docs
}

/// The decoded string value of the first `"text"` key in a line of JSON, if any.
fn text_field(line: &str) -> Option<String> {
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let (s, end) = json_string(b, i)?;
            i = end;
            // a key is a string followed by ':'
            let mut j = i;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if s == "text" && b.get(j) == Some(&b':') {
                j += 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                return if b.get(j) == Some(&b'"') { json_string(b, j).map(|v| v.0) } else { None };
            }
        } else {
            i += 1;
        }
    }
    None
}

/// Decodes the JSON string starting at the quote `b[start]`; returns it and the index after
/// its closing quote.
fn json_string(b: &[u8], start: usize) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut i = start + 1;
    let hex4 = |i: usize| -> Option<u32> { u32::from_str_radix(std::str::from_utf8(b.get(i..i + 4)?).ok()?, 16).ok() };
    loop {
        match *b.get(i)? {
            b'"' => return Some((out, i + 1)),
            b'\\' => {
                let c = *b.get(i + 1)?;
                i += 2;
                match c {
                    b'"' => out.push('"'),
                    b'\\' => out.push('\\'),
                    b'/' => out.push('/'),
                    b'b' => out.push('\u{8}'),
                    b'f' => out.push('\u{c}'),
                    b'n' => out.push('\n'),
                    b'r' => out.push('\r'),
                    b't' => out.push('\t'),
                    b'u' => {
                        let hi = hex4(i)?;
                        i += 4;
                        let cp = if (0xD800..0xDC00).contains(&hi) && b.get(i..i + 2) == Some(b"\\u") {
                            let lo = hex4(i + 2)?;
                            if (0xDC00..0xE000).contains(&lo) {
                                i += 6;
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            }
                        } else {
                            hi
                        };
                        // A lone surrogate cannot be held by a Rust string: U+FFFD.
                        out.push(char::from_u32(cp).unwrap_or('\u{FFFD}'));
                    }
                    _ => return None,
                }
            }
            _ => {
                // Copy the run of plain bytes (the line is valid UTF-8).
                let end = (i..b.len()).find(|&j| b[j] == b'"' || b[j] == b'\\').unwrap_or(b.len());
                out.push_str(std::str::from_utf8(&b[i..end]).ok()?);
                i = end;
            }
        }
    }
}

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for ch in data.chunks(3) {
        let v = (ch[0] as u32) << 16 | (*ch.get(1).unwrap_or(&0) as u32) << 8 | *ch.get(2).unwrap_or(&0) as u32;
        for k in 0..4 {
            if k <= ch.len() {
                s.push(A[(v >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_text() {
        assert_eq!(text_field(r#"{"id": 1, "text": "a\"b\\n\u00e9\ud83d\ude00"}"#).unwrap(), "a\"b\\n\u{e9}\u{1F600}");
        assert_eq!(text_field(r#"{"title": "text", "text": "x"}"#).unwrap(), "x");
        assert_eq!(text_field(r#"{"meta": {"text": "inner"}}"#).unwrap(), "inner");
        assert!(text_field(r#"{"body": "x"}"#).is_none());
        assert!(text_field(r#"{"text": 5}"#).is_none());
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(base64(b"a"), "YQ==");
    }
}
