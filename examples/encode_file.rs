//! Encodes a text file with a tiktoken vocabulary, for profiling the core without Python:
//! `cargo run --release --example encode_file -- VOCAB.tiktoken TEXT [mce|fmm] [repeats] [units]`
//! (`units`: time `unit_starts` alone first). `benches/phases.py` runs it under a profiler.
use std::time::Instant;

use cnfmce::{Algorithm, Options, Tokenizer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab = std::fs::read(&args[1]).expect("vocab");
    let text = std::fs::read(&args[2]).expect("text");
    let alg = if args.get(3).map(|s| s.as_str()) == Some("fmm") { Algorithm::Fmm } else { Algorithm::Mce };
    let repeats: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(5);
    let entries = cnfmce::tiktoken_entries(&vocab).expect("a tiktoken vocabulary");
    if args.get(5).map(|s| s.as_str()) == Some("units") {
        units_only(&text);
    }
    let t0 = Instant::now();
    let tok = Tokenizer::new(entries, vec![], Options::default().with_algorithm(alg)).unwrap();
    eprintln!("built {} tokens in {:.2}s", tok.vocab().len(), t0.elapsed().as_secs_f64());
    let t0 = Instant::now();
    let mut n = 0;
    for _ in 0..repeats {
        n += tok.encode(&text, None).len();
    }
    let dt = t0.elapsed().as_secs_f64();
    eprintln!("{} tokens, {:.1} MB/s", n / repeats.max(1), (text.len() * repeats) as f64 / dt / 1e6);
}

fn units_only(text: &[u8]) {
    let t0 = Instant::now();
    let mut v = Vec::new();
    for _ in 0..10 {
        cnfmce::unit_starts(text, &mut v);
    }
    eprintln!("unit_starts {:.1} MB/s", (text.len() * 10) as f64 / t0.elapsed().as_secs_f64() / 1e6);
}
