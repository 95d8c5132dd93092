//! A value made once and shared, without a lock: [`OnceBox`].
//!
//! `std::sync::OnceLock` makes the other threads wait while one of them runs the initialiser.
//! A process forked at that moment (Python's `os.fork`, `multiprocessing`, `datasets.map`)
//! inherits the cell in its "running" state with no thread left to finish it, and its first use
//! of the cell waits forever. A `OnceBox` never waits: every thread that finds it empty makes a
//! value, the first to publish it (one compare-and-swap) wins and the others drop theirs, so a
//! child forked at any moment finds the cell either empty or set.

use std::sync::atomic::{AtomicPtr, Ordering};

pub(crate) struct OnceBox<T> {
    ptr: AtomicPtr<T>,
}

impl<T> OnceBox<T> {
    pub(crate) const fn new() -> Self {
        OnceBox { ptr: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// The value, if one was published.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        let p = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is a published Box, freed only by `drop` (&mut self).
        unsafe { p.as_ref() }
    }

    /// The value, made by `make` when none is published yet (`make` may run in several
    /// threads at once; one value is kept).
    #[inline]
    pub(crate) fn get_or_init(&self, make: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        self.publish(Box::new(make()))
    }

    /// Publishes `value` when the cell is empty; else gives it back.
    #[cfg(test)]
    pub(crate) fn set(&self, value: T) -> Result<(), T> {
        let mine = Box::into_raw(Box::new(value));
        match self.ptr.compare_exchange(std::ptr::null_mut(), mine, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Ok(()),
            // SAFETY: `mine` was never shared.
            Err(_) => Err(*unsafe { Box::from_raw(mine) }),
        }
    }

    #[cold]
    fn publish(&self, mine: Box<T>) -> &T {
        let mine = Box::into_raw(mine);
        match self.ptr.compare_exchange(std::ptr::null_mut(), mine, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: just published, lives as long as self.
            Ok(_) => unsafe { &*mine },
            Err(theirs) => {
                // SAFETY: `mine` was never shared; `theirs` is the published value.
                unsafe {
                    drop(Box::from_raw(mine));
                    &*theirs
                }
            }
        }
    }
}

impl<T> Default for OnceBox<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for OnceBox<T> {
    fn drop(&mut self) {
        let p = *self.ptr.get_mut();
        if !p.is_null() {
            // SAFETY: the published Box, owned by self.
            unsafe { drop(Box::from_raw(p)) };
        }
    }
}

// SAFETY: as OnceLock<T>: the value is shared (&T) between threads and moved in from one.
unsafe impl<T: Send + Sync> Sync for OnceBox<T> {}
unsafe impl<T: Send> Send for OnceBox<T> {}

#[cfg(test)]
mod tests {
    use super::OnceBox;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted<'a>(usize, &'a AtomicUsize);
    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn one_value_kept_the_others_dropped() {
        let dropped = AtomicUsize::new(0);
        let made = AtomicUsize::new(0);
        let cell = OnceBox::new();
        let barrier = std::sync::Barrier::new(8);
        let seen: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|k| {
                    let (cell, barrier, made, dropped) = (&cell, &barrier, &made, &dropped);
                    s.spawn(move || {
                        barrier.wait();
                        cell.get_or_init(|| {
                            made.fetch_add(1, Ordering::Relaxed);
                            Counted(k, dropped)
                        })
                        .0
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(seen.iter().all(|&k| k == seen[0]), "every thread sees the one value: {seen:?}");
        let made = made.load(Ordering::Relaxed);
        assert!(made >= 1);
        assert_eq!(dropped.load(Ordering::Relaxed), made - 1, "the losers' values are dropped");
        assert_eq!(cell.get().map(|c| c.0), Some(seen[0]));
        drop(cell);
        assert_eq!(dropped.load(Ordering::Relaxed), made, "the kept one is dropped with the cell");
    }

    #[test]
    fn empty_until_made() {
        let cell: OnceBox<u32> = OnceBox::new();
        assert!(cell.get().is_none());
        assert_eq!(*cell.get_or_init(|| 7), 7);
        assert_eq!(*cell.get_or_init(|| 8), 7);
        assert_eq!(cell.set(9), Err(9));
        let other: OnceBox<u32> = OnceBox::new();
        assert_eq!(other.set(5), Ok(()));
        assert_eq!(other.get(), Some(&5));
    }
}
