//! Times the passes of a training run (counting rounds, filtering, selection) in the Rust crate
//! alone, for profiling (`perf record`):
//!
//! ```text
//! cargo run --release --example train_phases -- DOCS.bin VOCAB_SIZE RAW_VOCAB_SIZE [THREADS [PASSES]]
//! ```
//!
//! `DOCS.bin` holds the documents as little-endian u32 lengths each followed by that many bytes
//! (`benches/train.py --dump-docs` writes one). Prints wall and CPU seconds (user + system, all
//! threads, from `/proc/self/stat`) of every step. `THREADS` 0 (the default) uses all cores;
//! `PASSES` stops after that many passes.

use std::time::Instant;

use cnfmce::{PassStats, TrainConfig, Trainer};

fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = 100.0; // USER_HZ on Linux
    let v = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (v(11) + v(12)) / tick
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: train_phases DOCS.bin VOCAB_SIZE RAW_VOCAB_SIZE [THREADS]");
        std::process::exit(2);
    }
    let data = std::fs::read(&args[1]).expect("read DOCS.bin");
    let mut docs: Vec<&[u8]> = Vec::new();
    let mut p = 0usize;
    while p + 4 <= data.len() {
        let n = u32::from_le_bytes(data[p..p + 4].try_into().unwrap()) as usize;
        docs.push(&data[p + 4..p + 4 + n]);
        p += 4 + n;
    }
    let vocab_size: usize = args[2].parse().expect("VOCAB_SIZE");
    let raw: usize = args[3].parse().expect("RAW_VOCAB_SIZE");
    let threads: usize = args.get(4).map(|s| s.parse().expect("THREADS")).unwrap_or(0);
    let passes: usize = args.get(5).map(|s| s.parse().expect("PASSES")).unwrap_or(usize::MAX);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let (w0, c0) = (Instant::now(), cpu_seconds());
        let mut t = Trainer::new(TrainConfig { vocab_size, raw_vocab_size: Some(raw), memory_budget: 8 << 30, ..TrainConfig::default() }).unwrap();
        let step = |label: &str, w: Instant, c: f64| {
            eprintln!("  {label:<12} wall {:7.2}  cpu {:7.2}", w.elapsed().as_secs_f64(), cpu_seconds() - c);
        };
        let mut done = 0;
        while let Some(pass) = t.next_pass() {
            if done == passes {
                return;
            }
            done += 1;
            let (w, c) = (Instant::now(), cpu_seconds());
            t.begin_pass().unwrap();
            for chunk in docs.chunks(2000) {
                t.add(chunk).unwrap();
            }
            step(&format!("{pass:?}").chars().take(12).collect::<String>(), w, c);
            let (w, c) = (Instant::now(), cpu_seconds());
            let st = t.end_pass().unwrap();
            step("  end", w, c);
            match st {
                PassStats::Count(s) => eprintln!("      distinct {} retained {} table {} MB", s.distinct, s.retained, s.peak_table_bytes >> 20),
                PassStats::Filter(s) => eprintln!("      raw vocabulary {} tokens {} bytes {}", s.raw_vocab_size, s.tokens, s.bytes),
            }
        }
        let (w, c) = (Instant::now(), cpu_seconds());
        let tr = t.finish().unwrap();
        step("finish", w, c);
        eprintln!("TOTAL wall {:.2} cpu {:.2}  ids {}", w0.elapsed().as_secs_f64(), cpu_seconds() - c0, tr.tokenizer.num_ids());
    });
}
