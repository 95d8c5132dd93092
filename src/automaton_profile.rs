//! Diagnostic (an ignored test, never in the library): the memory behaviour of the encoder's
//! automaton walk on real text. Records the loads of the walk (the 8-byte state of the current
//! state and the check of the slot its transition lands on) in the order of the encoder's
//! 8-lane walk over 32 KiB chunks, and prints the distinct states and 64-byte lines touched, the
//! LRU reuse distance in lines (what an L1 / L2 / L3 of 512 / 32,768 / 524,288 lines would hit),
//! the depth of the states reached, the share of failure steps and of steps out of single-child
//! states, and what a numbering of the states by their visit frequency on training text would
//! do (the same reuse distances with the hot states packed densely).
//!
//! `CNFMCE_BENCH_VOCAB=V.tiktoken CNFMCE_BENCH_TEXT=a.txt,b.txt CNFMCE_BENCH_TRAIN=t1.txt,t2.txt
//! cargo test --release --lib walk_miss_analysis -- --ignored --nocapture`

use super::*;

const CHUNK: usize = 1 << 15;
const LANES: usize = 8;
/// Lines (64 bytes) of a 32 KiB L1d, a 1 MiB L2 (per core: lscpu's "2 MiB (2 instances)"), a
/// 4 MiB and 8 MiB share of the L3 (a pointer chase on this VM: 4 MiB at 46 ns, 8 MiB at
/// 190 ns, i.e. memory) and the whole 32 MiB L3.
const LEVELS: [(usize, &str); 5] = [(512, "32K"), (16_384, "1M"), (65_536, "4M"), (131_072, "8M"), (524_288, "32M")];

struct Fenwick(Vec<u32>);
impl Fenwick {
    fn add(&mut self, mut i: usize, d: i32) {
        i += 1;
        while i < self.0.len() {
            self.0[i] = (self.0[i] as i32 + d) as u32;
            i += i & i.wrapping_neg();
        }
    }
    fn prefix(&self, mut i: usize) -> u64 {
        // sum of [0, i)
        let mut s = 0u64;
        while i > 0 {
            s += self.0[i] as u64;
            i &= i - 1;
        }
        s
    }
}

/// Hits per cache size (in lines) of an LRU over the access sequence `lines`, and the cold
/// (first) accesses.
fn lru_hits(lines: &[u32]) -> ([u64; 5], u64) {
    let mut last: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let mut fw = Fenwick(vec![0; lines.len() + 1]);
    let mut hits = [0u64; 5];
    let mut cold = 0u64;
    for (i, &l) in lines.iter().enumerate() {
        match last.insert(l, i) {
            None => cold += 1,
            Some(j) => {
                // Distinct lines accessed strictly between j and i.
                let d = fw.prefix(i) - fw.prefix(j + 1);
                for (h, &(cap, _)) in hits.iter_mut().zip(LEVELS.iter()) {
                    if (d as usize) < cap {
                        *h += 1;
                    }
                }
                fw.add(j, -1);
            }
        }
        fw.add(i, 1);
    }
    (hits, cold)
}

struct Shape {
    depth: Vec<u8>,
    children: Vec<u16>,
}

fn shape(a: &Automaton) -> Shape {
    let n = a.states.len();
    let mut depth = vec![u8::MAX; n];
    let mut children = vec![0u16; n];
    depth[ROOT as usize] = 0;
    let mut queue = VecDeque::new();
    for c in 0..256 {
        let t = a.root_next[c];
        if t != ROOT {
            depth[t as usize] = 1;
            children[ROOT as usize] += 1;
            queue.push_back(t);
        }
    }
    while let Some(s) = queue.pop_front() {
        let b = a.states[s as usize].base();
        for c in 0..256u32 {
            let t = b ^ c;
            if a.states[t as usize].check() as u32 == c && t != ROOT {
                depth[t as usize] = depth[s as usize].saturating_add(1);
                children[s as usize] += 1;
                queue.push_back(t);
            }
        }
    }
    Shape { depth, children }
}

#[derive(Default)]
struct Trace {
    /// State-array indices loaded, in the lanes' order.
    loads: Vec<u32>,
    /// Per step: (state, reached state, goto).
    steps: Vec<(u32, u32, bool)>,
}

/// The encoder's walk order: chunks of CHUNK from the end, each in LANES segments advanced in
/// turn (the lanes start from the root; the fix-ups are ignored: few steps).
fn trace(a: &Automaton, text: &[u8]) -> Trace {
    let mut tr = Trace::default();
    let mut end = text.len();
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let n = end - start;
        let seg = n.div_ceil(LANES);
        let mut lanes: Vec<(usize, usize, u32)> = (0..LANES)
            .map(|l| (start + (l * seg).min(n), start + ((l + 1) * seg).min(n), ROOT))
            .collect();
        loop {
            let mut any = false;
            for lane in lanes.iter_mut() {
                let (lo, hi, s) = *lane;
                if hi <= lo {
                    continue;
                }
                any = true;
                let c = text[hi - 1];
                let (t, ok) = a.step(s, c);
                let slot = if s == ROOT { a.root_next[c as usize] } else { a.states[s as usize].base() ^ c as u32 };
                tr.loads.push(s);
                tr.loads.push(slot);
                tr.steps.push((s, t, ok));
                *lane = (lo, if ok { hi - 1 } else { hi }, t);
            }
            if !any {
                break;
            }
        }
        end = start;
    }
    tr
}

fn pct(a: u64, b: u64) -> f64 {
    100.0 * a as f64 / b.max(1) as f64
}

#[test]
#[ignore]
fn walk_miss_analysis() {
    let (Ok(vocab), Ok(texts)) = (std::env::var("CNFMCE_BENCH_VOCAB"), std::env::var("CNFMCE_BENCH_TEXT")) else {
        panic!("set CNFMCE_BENCH_VOCAB (a .tiktoken file) and CNFMCE_BENCH_TEXT (comma-separated files)");
    };
    let toks = crate::tiktoken_entries(&std::fs::read(&vocab).unwrap()).unwrap();
    let v = crate::vocab::Vocab::new(toks).unwrap();
    let a = v.automaton();
    let sh = shape(a);
    let real = sh.depth.iter().filter(|&&d| d != u8::MAX).count();
    eprintln!(
        "automaton: {} slots ({} MiB of states), {} real states, {} lines",
        a.states.len(),
        a.states.len() * 8 >> 20,
        real,
        a.states.len().div_ceil(8)
    );
    // Visit frequency on training text (the state each step reaches, and the loaded slots).
    let mut freq = vec![0u64; a.states.len()];
    if let Ok(train) = std::env::var("CNFMCE_BENCH_TRAIN") {
        for f in train.split(',') {
            let text = std::fs::read(f).unwrap();
            for &s in &trace(a, &text).loads {
                freq[s as usize] += 1;
            }
        }
    }
    let mut order: Vec<u32> = (0..a.states.len() as u32).collect();
    order.sort_by_key(|&s| std::cmp::Reverse(freq[s as usize]));
    let mut rank = vec![0u32; a.states.len()];
    for (r, &s) in order.iter().enumerate() {
        rank[s as usize] = r as u32;
    }
    for f in texts.split(',') {
        let text = std::fs::read(f).unwrap();
        let tr = trace(a, &text);
        let steps = tr.steps.len() as u64;
        let gotos = tr.steps.iter().filter(|s| s.2).count() as u64;
        let single = tr.steps.iter().filter(|s| s.2 && sh.children[s.0 as usize] == 1).count() as u64;
        let same_line = tr.steps.iter().filter(|s| s.2 && s.0 >> 3 == s.1 >> 3).count() as u64;
        let from_shallow = tr.steps.iter().filter(|s| sh.depth[s.0 as usize] <= 2).count() as u64;
        eprintln!("\n{f}: {} bytes, {} steps ({:.3} per byte)", text.len(), steps, steps as f64 / text.len() as f64);
        eprintln!(
            "  gotos {:.1}%, failure steps {:.1}%; gotos out of single-child states {:.1}% of steps; goto within the same line {:.1}%; steps from depth <= 2 {:.1}%",
            pct(gotos, steps),
            pct(steps - gotos, steps),
            pct(single, steps),
            pct(same_line, steps),
            pct(from_shallow, steps)
        );
        let mut hist = [0u64; 8];
        for s in &tr.steps {
            let d = sh.depth[s.1 as usize] as usize;
            let b = match d {
                0..=3 => d,
                4..=7 => 4,
                8..=15 => 5,
                16..=31 => 6,
                _ => 7,
            };
            hist[b] += 1;
        }
        eprintln!(
            "  depth of the state reached: 0 {:.1}%, 1 {:.1}%, 2 {:.1}%, 3 {:.1}%, 4-7 {:.1}%, 8-15 {:.1}%, 16-31 {:.1}%, 32+ {:.1}%",
            pct(hist[0], steps), pct(hist[1], steps), pct(hist[2], steps), pct(hist[3], steps),
            pct(hist[4], steps), pct(hist[5], steps), pct(hist[6], steps), pct(hist[7], steps)
        );
        let mut distinct_states: Vec<u32> = tr.loads.clone();
        distinct_states.sort_unstable();
        distinct_states.dedup();
        let mut distinct_lines: Vec<u32> = distinct_states.iter().map(|s| s >> 3).collect();
        distinct_lines.dedup();
        eprintln!(
            "  distinct slots loaded {} ({:.1} MiB as 8-byte states), distinct lines {} ({:.1} MiB)",
            distinct_states.len(),
            distinct_states.len() as f64 * 8.0 / 1048576.0,
            distinct_lines.len(),
            distinct_lines.len() as f64 * 64.0 / 1048576.0
        );
        let loads = tr.loads.len() as u64;
        let report = |name: &str, lines: &[u32]| {
            let (hits, cold) = lru_hits(lines);
            let mut line = format!("  {name}: LRU hits");
            for (h, l) in hits.iter().zip(LEVELS.iter()) {
                line += &format!(" {} {:.1}%,", l.1, pct(*h, loads));
            }
            eprintln!("{line} cold {:.1}%", pct(cold, loads));
        };
        let lines: Vec<u32> = tr.loads.iter().map(|&s| s >> 3).collect();
        report("current layout", &lines);
        let lines: Vec<u32> = tr.loads.iter().map(|&s| rank[s as usize] >> 3).collect();
        report("by train frequency, 8-byte states", &lines);
        let lines: Vec<u32> = tr.loads.iter().map(|&s| rank[s as usize] >> 4).collect();
        report("by train frequency, 4-byte states", &lines);
        // Share of loads that land in the hottest K slots (by train frequency).
        let total_train: u64 = freq.iter().sum();
        if total_train > 0 {
            let mut line = String::from("  loads in the train-hottest K slots:");
            for k in [4096usize, 32_768, 262_144, 1 << 20, 4 << 20] {
                let inside = tr.loads.iter().filter(|&&s| (rank[s as usize] as usize) < k).count() as u64;
                line += &format!(" {}K ({} MiB) {:.1}%;", k >> 10, k * 8 >> 20, pct(inside, loads));
            }
            eprintln!("{line}");
        }
    }
}

/// The lane loop of the encoder's walk (as `mce::walk_lanes`, without the fix-ups): the states
/// reached, by position.
fn lane_walk<const L: usize>(a: &Automaton, text: &[u8], states: &mut Vec<u32>, outs: Option<&mut Vec<u32>>) {
    let n = text.len();
    states.clear();
    states.resize(n, 0);
    let seg = n / L;
    let r = n - L * seg;
    let lo: [usize; L] = std::array::from_fn(|l| if l == 0 { 0 } else { r + l * seg });
    let mut left: [usize; L] = std::array::from_fn(|l| r + (l + 1) * seg - lo[l]);
    let mut st = [ROOT; L];
    loop {
        let m = left.iter().copied().min().unwrap_or(0);
        if m == 0 {
            break;
        }
        for _ in 0..m {
            for l in 0..L {
                let k = lo[l] + left[l] - 1;
                unsafe {
                    let (s, consumed) = a.step(st[l], *text.get_unchecked(k));
                    *states.get_unchecked_mut(k) = s;
                    st[l] = s;
                    left[l] -= consumed as usize;
                }
            }
        }
    }
    if let Some(outs) = outs {
        outs.clear();
        outs.extend(states.iter().map(|&s| a.out(s)));
    }
}

/// Walk speed (MB/s, best of 7) over the whole text in 32 KiB chunks, and over one chunk of
/// the text walked again and again (its states then stay in the caches): tells latency of
/// the memory from the cost of the steps themselves.
#[test]
#[ignore]
fn walk_speed_hot_and_cold() {
    let (Ok(vocab), Ok(texts)) = (std::env::var("CNFMCE_BENCH_VOCAB"), std::env::var("CNFMCE_BENCH_TEXT")) else {
        panic!("set CNFMCE_BENCH_VOCAB and CNFMCE_BENCH_TEXT");
    };
    let toks = crate::tiktoken_entries(&std::fs::read(&vocab).unwrap()).unwrap();
    let v = crate::vocab::Vocab::new(toks).unwrap();
    let a = v.automaton();
    for f in texts.split(',') {
        let text = std::fs::read(f).unwrap();
        let mut states = Vec::new();
        let mut outv = Vec::new();
        let mut run = |chunk: usize, span: usize, lanes: usize, with_outs: bool| -> f64 {
            let mut best = f64::INFINITY;
            for _ in 0..7 {
                let t0 = std::time::Instant::now();
                let mut done = 0;
                let mut end = text.len();
                while done < text.len() {
                    if end < chunk || text.len() - end >= span {
                        end = text.len();
                    }
                    let part = &text[end - chunk..end];
                    let o = if with_outs { Some(&mut outv) } else { None };
                    match lanes {
                        1 => lane_walk::<1>(a, part, &mut states, o),
                        4 => lane_walk::<4>(a, part, &mut states, o),
                        8 => lane_walk::<8>(a, part, &mut states, o),
                        _ => lane_walk::<16>(a, part, &mut states, o),
                    }
                    done += chunk;
                    end -= chunk;
                }
                best = best.min(t0.elapsed().as_secs_f64());
            }
            text.len() as f64 / best / 1e6
        };
        for lanes in [1, 4, 8, 16] {
            let cold = run(1 << 15, usize::MAX, lanes, false);
            let cold_out = run(1 << 15, usize::MAX, lanes, true);
            let hot32 = run(1 << 15, 1 << 15, lanes, false);
            let hot4 = run(1 << 12, 1 << 12, lanes, false);
            eprintln!("{f}: {lanes} lanes: MB/s whole text {cold:.1}, with the output pass {cold_out:.1}, one 32 KiB chunk again {hot32:.1}, one 4 KiB chunk again {hot4:.1}");
        }
    }
}

/// Whether the automaton's arrays sit in huge pages (the smaps entry of each).
#[test]
#[ignore]
fn automaton_pages() {
    let vocab = std::env::var("CNFMCE_BENCH_VOCAB").expect("set CNFMCE_BENCH_VOCAB");
    let toks = crate::tiktoken_entries(&std::fs::read(&vocab).unwrap()).unwrap();
    let v = crate::vocab::Vocab::new(toks).unwrap();
    let a = v.automaton();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let arrays = [
        ("states", a.states.as_ptr() as usize, a.states.len() * 8),
        ("outs", a.outs.as_ptr() as usize, a.outs.len() * 4),
        ("patterns", a.patterns.as_ptr() as usize, a.patterns.len() * std::mem::size_of::<Pattern>()),
    ];
    let mut cur: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        let head = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = head.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) {
                cur = Some((lo, hi));
                continue;
            }
        }
        if line.starts_with("AnonHugePages") {
            if let Some((lo, hi)) = cur {
                for (name, p, n) in arrays {
                    if p < hi && p + n > lo {
                        eprintln!("{name}: {} KiB at {p:#x}, mapping {} KiB, {line}", n >> 10, (hi - lo) >> 10);
                    }
                }
            }
        }
    }
}

/// A split layout to measure: the walk's array of 4-byte words (base << 8 | check) and the
/// failure links apart (read by the same step, independent of the check's load).
struct Split {
    hot: Vec<u32>,
    fail: Vec<u32>,
}

impl Split {
    fn of(a: &Automaton) -> Self {
        assert!(a.states.len() <= 1 << 24);
        let mut hot = Vec::with_capacity(a.states.len());
        crate::mem::advise_huge(&hot);
        hot.extend(a.states.iter().map(|s| s.base() << 8 | s.check() as u32));
        let fail = a.states.iter().map(|s| s.fail()).collect();
        Split { hot, fail }
    }
    #[inline(always)]
    fn step(&self, a: &Automaton, s: u32, c: u8) -> (u32, bool) {
        unsafe {
            let w = *self.hot.get_unchecked(s as usize);
            let f = *self.fail.get_unchecked(s as usize);
            let at_root = s == ROOT;
            let via_root = *a.root_next.get_unchecked(c as usize);
            let root_mask = 0u32.wrapping_sub(at_root as u32);
            let t = (via_root & root_mask) | (((w >> 8) ^ c as u32) & !root_mask);
            let ok = at_root | (*self.hot.get_unchecked(t as usize) as u8 == c);
            let ok_mask = 0u32.wrapping_sub(ok as u32);
            ((t & ok_mask) | (f & !ok_mask), ok)
        }
    }
}

/// The current step, with the failure state's load started beside the check's (both depend
/// only on the current state), so that a failure step finds its state on the way.
#[inline(always)]
fn step_pf(a: &Automaton, s: u32, c: u8) -> (u32, bool) {
    let st = unsafe { *a.states.get_unchecked(s as usize) };
    crate::mem::prefetch(a.states.as_ptr().wrapping_add(st.fail() as usize));
    a.step(s, c)
}

fn lane_walk_pf<const L: usize>(a: &Automaton, text: &[u8], states: &mut Vec<u32>) {
    lane_walk_by::<L>(text, states, |s, c| step_pf(a, s, c));
}

/// The encoder's lane walk (lanes of equal segments walked right to left, in turn) with the
/// step given: the variants of this file differ only in their step.
fn lane_walk_by<const L: usize>(text: &[u8], states: &mut Vec<u32>, step: impl Fn(u32, u8) -> (u32, bool)) {
    let n = text.len();
    states.clear();
    states.resize(n, 0);
    let seg = n / L;
    let r = n - L * seg;
    let lo: [usize; L] = std::array::from_fn(|l| if l == 0 { 0 } else { r + l * seg });
    let mut left: [usize; L] = std::array::from_fn(|l| r + (l + 1) * seg - lo[l]);
    let mut st = [ROOT; L];
    loop {
        let m = left.iter().copied().min().unwrap_or(0);
        if m == 0 {
            break;
        }
        for _ in 0..m {
            for l in 0..L {
                let k = lo[l] + left[l] - 1;
                unsafe {
                    let (s, consumed) = step(st[l], *text.get_unchecked(k));
                    *states.get_unchecked_mut(k) = s;
                    st[l] = s;
                    left[l] -= consumed as usize;
                }
            }
        }
    }
}

fn lane_walk_dense<const L: usize>(a: &Automaton, text: &[u8], states: &mut Vec<u32>) {
    assert!(a.root_next.iter().all(|&t| t != ROOT));
    lane_walk_by::<L>(text, states, |s, c| a.step_dense(s, c));
}

fn wide_of(a: &Automaton) -> Vec<(u64, u64)> {
    let mut w = Vec::with_capacity(a.states.len());
    crate::mem::advise_huge(&w);
    w.extend(a.states.iter().zip(a.outs.iter()).map(|(s, &o)| (s.0, o as u64)));
    w
}

fn lane_walk_wide<const L: usize>(w: &[(u64, u64)], text: &[u8], states: &mut Vec<u32>, outs: &mut Vec<u32>) {
    let n = text.len();
    states.clear();
    states.resize(n, 0);
    outs.clear();
    outs.resize(n, NONE);
    let seg = n / L;
    let r = n - L * seg;
    let lo: [usize; L] = std::array::from_fn(|l| if l == 0 { 0 } else { r + l * seg });
    let mut left: [usize; L] = std::array::from_fn(|l| r + (l + 1) * seg - lo[l]);
    let mut st = [ROOT; L];
    loop {
        let m = left.iter().copied().min().unwrap_or(0);
        if m == 0 {
            break;
        }
        for _ in 0..m {
            for l in 0..L {
                let k = lo[l] + left[l] - 1;
                unsafe {
                    let c = *text.get_unchecked(k);
                    let e = *w.get_unchecked(st[l] as usize);
                    let cur = State(e.0);
                    let t = cur.base() ^ c as u32;
                    let te = *w.get_unchecked(t as usize);
                    let ok = State(te.0).check() == c;
                    let ok_mask = 0u32.wrapping_sub(ok as u32);
                    let s = (t & ok_mask) | (cur.fail() & !ok_mask);
                    *states.get_unchecked_mut(k) = s;
                    *outs.get_unchecked_mut(k) = te.1 as u32;
                    st[l] = s;
                    left[l] -= ok as usize;
                }
            }
        }
    }
}

fn lane_walk_split<const L: usize>(a: &Automaton, sp: &Split, text: &[u8], states: &mut Vec<u32>) {
    let n = text.len();
    states.clear();
    states.resize(n, 0);
    let seg = n / L;
    let r = n - L * seg;
    let lo: [usize; L] = std::array::from_fn(|l| if l == 0 { 0 } else { r + l * seg });
    let mut left: [usize; L] = std::array::from_fn(|l| r + (l + 1) * seg - lo[l]);
    let mut st = [ROOT; L];
    loop {
        let m = left.iter().copied().min().unwrap_or(0);
        if m == 0 {
            break;
        }
        for _ in 0..m {
            for l in 0..L {
                let k = lo[l] + left[l] - 1;
                unsafe {
                    let (s, consumed) = sp.step(a, st[l], *text.get_unchecked(k));
                    *states.get_unchecked_mut(k) = s;
                    st[l] = s;
                    left[l] -= consumed as usize;
                }
            }
        }
    }
}

/// This thread's CPU time in seconds (wall time is unreliable on the shared machine).
fn cpu_now() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

/// The split layout against the current one: best of 15 interleaved passes over each text in
/// 32 KiB chunks (the states reached must agree), with the output pass.
#[test]
#[ignore]
fn split_layout_speed() {
    let (Ok(vocab), Ok(texts)) = (std::env::var("CNFMCE_BENCH_VOCAB"), std::env::var("CNFMCE_BENCH_TEXT")) else {
        panic!("set CNFMCE_BENCH_VOCAB and CNFMCE_BENCH_TEXT");
    };
    let toks = crate::tiktoken_entries(&std::fs::read(&vocab).unwrap()).unwrap();
    let v = crate::vocab::Vocab::new(toks).unwrap();
    let a = v.automaton();
    let sp = Split::of(a);
    let wide = wide_of(a);
    for f in texts.split(',') {
        let text = std::fs::read(f).unwrap();
        let (mut s1, mut s2, mut o) = (Vec::new(), Vec::new(), Vec::new());
        let mut best = [f64::INFINITY; 9];
        let mut end = text.len();
        while end > 0 {
            let start = end.saturating_sub(1 << 15);
            lane_walk::<8>(a, &text[start..end], &mut s1, None);
            lane_walk_split::<8>(a, &sp, &text[start..end], &mut s2);
            assert_eq!(s1, s2);
            lane_walk_pf::<8>(a, &text[start..end], &mut s2);
            assert_eq!(s1, s2);
            lane_walk_dense::<8>(a, &text[start..end], &mut s2);
            assert_eq!(s1, s2);
            let mut o2 = Vec::new();
            lane_walk_wide::<8>(&wide, &text[start..end], &mut s2, &mut o2);
            assert_eq!(s1, s2);
            // Equal but where a lane stopped on a failure link (the harness has no tail pass).
            assert!(s1.iter().zip(&o2).filter(|&(&s, &o)| a.out(s) != o).count() <= 8);
            end = start;
        }
        for _ in 0..15 {
            for which in 0..9 {
                let t0 = cpu_now();
                let mut end = text.len();
                while end > 0 {
                    let start = end.saturating_sub(1 << 15);
                    let part = &text[start..end];
                    match which {
                        0 => lane_walk::<8>(a, part, &mut s1, None),
                        1 => lane_walk_split::<8>(a, &sp, part, &mut s2),
                        2 => lane_walk::<8>(a, part, &mut s1, Some(&mut o)),
                        4 => lane_walk_pf::<8>(a, part, &mut s1),
                        5 => lane_walk_pf::<16>(a, part, &mut s1),
                        6 => lane_walk_dense::<8>(a, part, &mut s1),
                        7 => {
                            lane_walk_dense::<8>(a, part, &mut s1);
                            o.clear();
                            o.extend(s1.iter().map(|&s| a.out(s)));
                        }
                        8 => lane_walk_wide::<8>(&wide, part, &mut s1, &mut o),
                        _ => {
                            lane_walk_split::<8>(a, &sp, part, &mut s2);
                            o.clear();
                            o.extend(s2.iter().map(|&s| a.out(s)));
                        }
                    }
                    end = start;
                }
                best[which] = best[which].min(cpu_now() - t0);
            }
        }
        let mbs = |t: f64| text.len() as f64 / t / 1e6;
        eprintln!(
            "{f}: MB/s current {:.1}, split {:.1}, fail prefetch {:.1}, fail prefetch 16 lanes {:.1}; with the output pass: current {:.1}, split {:.1}, dense root {:.1}, dense root + output pass {:.1}, 16-byte states with the output {:.1}",
            mbs(best[0]), mbs(best[1]), mbs(best[4]), mbs(best[5]), mbs(best[2]), mbs(best[3]), mbs(best[6]), mbs(best[7]), mbs(best[8])
        );
    }
}
