//! The entries of a tiktoken vocabulary file (`<base64 token> <rank>` per line, as in
//! `o200k_base.tiktoken`), for loading published vocabularies from Rust without Python.

use crate::error::Error;

fn sextet(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    } as u32)
}

/// Standard base64 (`=` padding optional, only at the end); `None` for anything else.
fn decode_base64(s: &[u8]) -> Option<Vec<u8>> {
    let body = s.strip_suffix(b"==").or_else(|| s.strip_suffix(b"=")).unwrap_or(s);
    if (s.len() != body.len() && s.len() % 4 != 0) || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for group in body.chunks(4) {
        let mut acc = 0u32;
        for (k, &c) in group.iter().enumerate() {
            acc |= sextet(c)? << (18 - 6 * k);
        }
        out.extend_from_slice(&acc.to_be_bytes()[1..group.len()]);
    }
    Some(out)
}

/// `(rank, token bytes)` of every non-blank line of a tiktoken file's contents, in file order,
/// ready for [`crate::Vocab::new`] or [`crate::Tokenizer::new`] (which check ids and duplicate
/// tokens). A line that is not `<base64> <rank>` is an [`Error::Value`] naming its line number.
pub fn tiktoken_entries(data: &[u8]) -> Result<Vec<(u32, Vec<u8>)>, Error> {
    let mut entries = Vec::new();
    for (k, line) in data.split(|&c| c == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(|c| c.is_ascii_whitespace()) {
            continue;
        }
        let bad = |what: &str| Error::Value(format!("tiktoken line {}: {what}", k + 1));
        let mut parts = line.split(|&c| c == b' ').filter(|p| !p.is_empty());
        let (Some(token), Some(rank), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("expected `<base64 token> <rank>`"));
        };
        let token = decode_base64(token).filter(|t| !t.is_empty()).ok_or_else(|| bad("token is not base64 of at least one byte"))?;
        let rank = std::str::from_utf8(rank).ok().and_then(|r| r.parse::<u32>().ok()).ok_or_else(|| bad("rank is not a number"))?;
        entries.push((rank, token));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_and_refuses_bad_ones() {
        let data = b"IQ== 0\naGVsbG8= 7\r\n\n  \nd29ybGQ 3\nAAEC 9\n";
        let want: Vec<(u32, Vec<u8>)> = vec![(0, b"!".to_vec()), (7, b"hello".to_vec()), (3, b"world".to_vec()), (9, vec![0, 1, 2])];
        assert_eq!(tiktoken_entries(data).unwrap(), want);
        for (bad, line) in [
            (&b"IQ== 0\nIQ==\n"[..], 2),
            (b"IQ== x", 1),
            (b"IQ== -1", 1),
            (b"I 0", 1),
            (b"IQ=x 0", 1),
            (b"I?== 0", 1),
            (b"IQ= 0", 1),
            (b"= 0", 1),
            (b"IQ== 0 1", 1),
        ] {
            let e = tiktoken_entries(bad).unwrap_err();
            assert!(matches!(&e, Error::Value(m) if m.starts_with(&format!("tiktoken line {line}:"))), "{bad:?}: {e}");
        }
    }

    #[test]
    fn decodes_every_length_and_byte() {
        // A tiny encoder, only to check the decoder on all 256 byte values and lengths 1..=7.
        const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let encode = |b: &[u8]| -> Vec<u8> {
            let mut s = Vec::new();
            for g in b.chunks(3) {
                let acc = g.iter().enumerate().fold(0u32, |a, (k, &c)| a | (c as u32) << (16 - 8 * k));
                s.extend((0..=g.len()).map(|k| ABC[(acc >> (18 - 6 * k) & 63) as usize]));
            }
            s
        };
        for len in 1..=7usize {
            for first in 0..=255u8 {
                let bytes: Vec<u8> = (0..len).map(|k| first.wrapping_add(k as u8 * 37)).collect();
                let mut padded = encode(&bytes);
                assert_eq!(decode_base64(&padded).as_deref(), Some(&bytes[..]));
                padded.resize(padded.len().div_ceil(4) * 4, b'=');
                assert_eq!(decode_base64(&padded).as_deref(), Some(&bytes[..]));
            }
        }
    }
}
