//! Batch work shared by the calling thread and a rayon pool, whose results the calling thread
//! consumes while the work goes on: the Python lists of `encode_batch` are built (under the
//! GIL, on the calling thread) for the documents already encoded while the rest are encoded,
//! instead of all of them after the pool has finished (5–15% of the one-thread time, added to
//! the wall time of every batch). The calling thread encodes too, between its conversions, so
//! the batch runs on as many threads as it asked for (a third thread on two cores would take
//! turns with the encoding threads, at the cost of their caches).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use pyo3::prelude::*;

/// A worker hands its finished results over once they stand for this many input bytes (or when
/// it runs out of work): one lock and at most one wake-up of the calling thread per handover,
/// not per (tiny) document.
const HANDOVER_BYTES: usize = 32 * 1024;

struct Done<R> {
    items: Vec<(usize, R)>,
    /// Workers still running.
    running: usize,
    /// The calling thread sleeps on the condition variable (only then do workers signal it).
    waiting: bool,
}

struct Shared<R> {
    done: Mutex<Done<R>>,
    cv: Condvar,
    stop: AtomicBool,
}

impl<R> Shared<R> {
    fn lock(&self) -> MutexGuard<'_, Done<R>> {
        self.done.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn hand_over(&self, mine: &mut Vec<(usize, R)>) {
        if mine.is_empty() {
            return;
        }
        let mut g = self.lock();
        g.items.append(mine);
        if g.waiting {
            self.cv.notify_one();
        }
    }
}

/// Counts a worker out (also when its work panics), waking the calling thread.
struct Exit<'a, R>(&'a Shared<R>);

impl<R> Drop for Exit<'_, R> {
    fn drop(&mut self) {
        let mut g = self.0.lock();
        g.running -= 1;
        if g.waiting {
            self.0.cv.notify_one();
        }
    }
}

/// `work(i, buf)` for every item `i` of `sizes`, largest items first (`sizes[i]`: about its
/// input bytes; `buf`: the worker's own buffer), on the calling thread and every thread of
/// `helpers` (so `helpers` has one thread fewer than the work should use: no thread waits for
/// a core while another converts), and `take(i, result)` on the calling thread for each result
/// (in no particular order; each index once): the calling thread — which must hold the GIL and
/// not be one of the helpers — takes the results the helpers handed over before it encodes its
/// next group of items (with the GIL released), and waits for the helpers' last ones at the
/// end (GIL released too). After the first error of `take` no new items are started, later
/// results are dropped and that error is returned once the helpers are done; so is an
/// exception raised by a signal handler (Ctrl-C), checked between groups. A panic in
/// `work` is raised again on the calling thread after every helper has stopped.
pub(crate) fn stream_map<R: Send>(
    py: Python<'_>,
    helpers: &rayon::ThreadPool,
    sizes: &[usize],
    work: impl Fn(usize, &mut Vec<u8>) -> R + Sync,
    mut take: impl FnMut(usize, R) -> PyResult<()>,
) -> PyResult<()> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]));
    // rest[k]: the bytes of the items from the k-th of `order` on (what is left to start).
    let mut rest = vec![0usize; order.len() + 1];
    for k in (0..order.len()).rev() {
        rest[k] = rest[k + 1] + sizes[order[k]];
    }
    let threads = helpers.current_num_threads() + 1;
    let next = AtomicUsize::new(0);
    let shared = Shared {
        done: Mutex::new(Done { items: Vec::new(), running: helpers.current_num_threads(), waiting: false }),
        cv: Condvar::new(),
        stop: AtomicBool::new(false),
    };
    // Items up to HANDOVER_BYTES from the shared order (at least one while any is left); less
    // near the end (a quarter of each thread's share of what is left), so that the results the
    // calling thread converts after the last item was encoded stand for few bytes.
    let run_group = |buf: &mut Vec<u8>, mine: &mut Vec<(usize, R)>| {
        let mut pending = 0usize;
        let mut limit = HANDOVER_BYTES;
        while pending < limit && !shared.stop.load(Ordering::Relaxed) {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(k) else { return false };
            limit = limit.min(rest[k] / (4 * threads));
            mine.push((i, work(i, buf)));
            pending += sizes[i];
        }
        !shared.stop.load(Ordering::Relaxed)
    };
    helpers.in_place_scope(|s| {
        s.spawn_broadcast(|_, _| {
            let _exit = Exit(&shared);
            let mut buf = Vec::new();
            let mut mine = Vec::new();
            while run_group(&mut buf, &mut mine) {
                shared.hand_over(&mut mine);
            }
            shared.hand_over(&mut mine);
        });
        let mut result = Ok(());
        let mut consume = |batch: Vec<(usize, R)>, result: &mut PyResult<()>| {
            for (i, r) in batch {
                if result.is_ok() {
                    if let Err(e) = take(i, r) {
                        shared.stop.store(true, Ordering::Relaxed);
                        *result = Err(e);
                    }
                }
            }
        };
        // The calling thread's share of the work, the helpers' results taken in between.
        let mut buf = Vec::new();
        let mut more = true;
        while more {
            let theirs = std::mem::take(&mut shared.lock().items);
            consume(theirs, &mut result);
            // Ctrl-C: a signal handler's exception (KeyboardInterrupt) stops the batch as an
            // error of `take` does (the helpers end their current item).
            if result.is_ok() {
                if let Err(e) = py.check_signals() {
                    shared.stop.store(true, Ordering::Relaxed);
                    result = Err(e);
                }
            }
            let (mine, go) = py.detach(|| {
                let mut mine = Vec::new();
                let go = run_group(&mut buf, &mut mine);
                (mine, go)
            });
            more = go && !mine.is_empty();
            consume(mine, &mut result);
        }
        drop(buf);
        // The helpers' last results.
        loop {
            let (batch, last) = {
                let mut g = shared.lock();
                if g.items.is_empty() && g.running > 0 {
                    drop(g);
                    py.detach(|| {
                        let mut g = shared.lock();
                        while g.items.is_empty() && g.running > 0 {
                            g.waiting = true;
                            g = shared.cv.wait(g).unwrap_or_else(|p| p.into_inner());
                        }
                        g.waiting = false;
                        (std::mem::take(&mut g.items), g.running == 0)
                    })
                } else {
                    let last = g.running == 0;
                    (std::mem::take(&mut g.items), last)
                }
            };
            consume(batch, &mut result);
            if last {
                break;
            }
        }
        result
    })
}
