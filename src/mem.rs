//! Memory hints for the large random-access tables (the vocabulary automaton, counting tables).
//!
//! Random lookups into tables of hundreds of megabytes miss the TLB on almost every access with
//! 4 KiB pages. On Linux, `madvise(MADV_HUGEPAGE)` lets the kernel back them with 2 MiB pages
//! where transparent huge pages are set to `madvise` (a common default). The hint is only a
//! hint: failures are ignored and nothing changes elsewhere.

/// Advises huge pages for the allocation behind `v` (its full capacity), before it is touched.
pub fn advise_huge<T>(v: &Vec<T>) {
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes < (4 << 20) {
        return; // not worth it below a couple of huge pages
    }
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        const MADV_HUGEPAGE: i32 = 14;
        const PAGE: usize = 4096;
        let start = v.as_ptr() as usize;
        let aligned = (start + PAGE - 1) & !(PAGE - 1);
        let end = (start + bytes) & !(PAGE - 1);
        if end > aligned {
            // SAFETY: the range lies inside the vector's own allocation, page aligned; madvise
            // with MADV_HUGEPAGE does not change the memory's contents or validity.
            unsafe {
                madvise(aligned as *mut std::ffi::c_void, end - aligned, MADV_HUGEPAGE);
            }
        }
    }
}

/// Size of a huge page, the alignment of a [`HugeBuf`] of at least that many bytes.
pub const HUGE_PAGE: usize = 2 << 20;
/// A [`HugeBuf`] smaller than this is mapped up to the next huge-page boundary.
const TAIL_ROUNDED: usize = 64 << 20;

/// A fixed-length buffer of plain values whose memory starts at a huge-page boundary (when it
/// is at least [`HUGE_PAGE`] bytes) and is advised for huge pages before it is first written,
/// so that all of it can be backed by 2 MiB pages: a `Vec` starts wherever the allocator puts
/// it, and only the 2 MiB-aligned part of it can be (measured on the CNF-250k automaton's
/// outputs, 3.4 MB in a `Vec` all in 4 KiB pages: the walk with its output pass 1.5x faster with
/// them in huge pages, the TLB misses gone).
pub struct HugeBuf<T: Copy> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
    /// Values the allocation holds (`len` unless made by [`Self::with_capacity`]).
    cap: usize,
    /// Bytes mapped (from a huge-page boundary) when mapped by `mmap`, else 0 (allocated
    /// by the global allocator with `layout`).
    mapped: usize,
    layout: std::alloc::Layout,
}

// SAFETY: a HugeBuf owns its values like a Box<[T]>.
unsafe impl<T: Copy + Send> Send for HugeBuf<T> {}
unsafe impl<T: Copy + Sync> Sync for HugeBuf<T> {}

#[cfg(target_os = "linux")]
mod sys {
    extern "C" {
        pub fn mmap(addr: *mut std::ffi::c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut std::ffi::c_void;
        pub fn munmap(addr: *mut std::ffi::c_void, len: usize) -> i32;
    }
    pub const PROT_READ: i32 = 1;
    pub const PROT_WRITE: i32 = 2;
    pub const MAP_PRIVATE: i32 = 2;
    pub const MAP_ANONYMOUS: i32 = 0x20;
    pub const MAP_FAILED: *mut std::ffi::c_void = !0usize as *mut std::ffi::c_void;
}

impl<T: Copy> HugeBuf<T> {
    /// `len` copies of `value`.
    pub fn filled(len: usize, value: T) -> Self {
        let b = Self::uninit(len);
        for i in 0..len {
            // SAFETY: i < len, inside the allocation; T is Copy (no drop of the old bytes).
            unsafe { b.ptr.as_ptr().add(i).write(value) };
        }
        b
    }

    /// `len` values whose bytes are all zero, written by nobody: fresh mapped pages are zero
    /// already (backed only when first touched), the allocator's fallback zeroes its memory.
    /// A piece cache of 16 MiB filled value by value cost its first encoding ~6 ms, and every
    /// new encoder of a tokenizer (`with_options`) ~25 ms.
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T`.
    pub unsafe fn zeroed(len: usize) -> Self {
        Self::alloc(len, true)
    }

    /// An empty buffer with room for `cap` values, to be grown in place by [`Self::grow`] and
    /// trimmed by [`Self::trim`] (a table built by appending, e.g. the automaton's states,
    /// whose final size is not known in advance). Mapped, the room costs address space only:
    /// pages are backed when first written.
    pub fn with_capacity(cap: usize) -> Self {
        let mut b = Self::uninit(cap);
        b.len = 0;
        b
    }

    /// Values that fit without growing the allocation (for the tests).
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Appends `n` copies of `value`. Past the capacity the values move to a new buffer of at
    /// least twice the room (a copy, as a `Vec` would make): the capacity is a reservation
    /// sized from an estimate, never a limit.
    pub fn grow(&mut self, n: usize, value: T) {
        let new_len = self.len.checked_add(n).expect("HugeBuf length overflows");
        if new_len > self.cap {
            let mut bigger = Self::uninit(new_len.max(self.cap.saturating_mul(2)));
            // SAFETY: both allocations hold at least `self.len` values and do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), bigger.ptr.as_ptr(), self.len) };
            bigger.len = self.len;
            *self = bigger;
        }
        for i in self.len..new_len {
            // SAFETY: i < cap, inside the allocation; T is Copy (no drop of the old bytes).
            unsafe { self.ptr.as_ptr().add(i).write(value) };
        }
        self.len = new_len;
    }

    /// Gives back the mapped memory past the values (rounded as a new buffer of this length
    /// would be); the capacity becomes what is left.
    pub fn trim(&mut self) {
        #[cfg(target_os = "linux")]
        if self.mapped != 0 {
            let bytes = self.len * std::mem::size_of::<T>();
            let unit = if bytes < TAIL_ROUNDED { HUGE_PAGE } else { 4096 };
            let keep = bytes.div_ceil(unit).max(1) * unit;
            if keep < self.mapped {
                // SAFETY: [ptr + keep, ptr + mapped) is part of this buffer's own mapping and
                // holds no values (keep >= len * size).
                unsafe {
                    sys::munmap((self.ptr.as_ptr() as *mut u8).add(keep) as *mut std::ffi::c_void, self.mapped - keep);
                }
                self.mapped = keep;
                self.cap = keep / std::mem::size_of::<T>();
            }
        }
    }

    /// Room for `len` values, not yet written (the callers above write every one, or set the
    /// length to 0, before the buffer is used).
    fn uninit(len: usize) -> Self {
        Self::alloc(len, false)
    }

    /// Room for `len` values: zero bytes if `zero` (mapped pages are), else not written.
    fn alloc(len: usize, zero: bool) -> Self {
        let size = std::mem::size_of::<T>();
        assert!(size > 0, "HugeBuf of a zero-sized type");
        assert!(std::mem::align_of::<T>() <= 4096);
        let bytes = len.checked_mul(size).expect("HugeBuf size overflows");
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), std::mem::align_of::<T>()).expect("HugeBuf layout");
        let (raw, mapped) = if bytes >= HUGE_PAGE { Self::map(bytes) } else { (std::ptr::null_mut(), 0) };
        let raw = if mapped != 0 {
            raw
        } else {
            // SAFETY: the layout has a non-zero size.
            unsafe { (if zero { std::alloc::alloc_zeroed(layout) } else { std::alloc::alloc(layout) }) as *mut T }
        };
        let Some(ptr) = std::ptr::NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout);
        };
        HugeBuf { ptr, len, cap: len, mapped, layout }
    }

    /// Fresh pages from the kernel (memory the allocator reuses may already be backed by
    /// small pages, which the advice does not change), starting at a huge-page boundary and
    /// advised for huge pages; `(null, 0)` if the mapping fails (the caller falls back).
    #[allow(unused_variables)]
    fn map(bytes: usize) -> (*mut T, usize) {
        #[cfg(target_os = "linux")]
        {
            // Small buffers end on a huge-page boundary too (their last, partial huge page
            // then holds up to 2 MiB more than they need: worth it below TAIL_ROUNDED, where it
            // is a large share of the buffer); large ones end on a small page, costing nothing
            // extra (their tail's small pages are a small share).
            let unit = if bytes < TAIL_ROUNDED { HUGE_PAGE } else { 4096 };
            let want = bytes.div_ceil(unit) * unit;
            let total = want + HUGE_PAGE;
            // SAFETY: an anonymous private mapping; the parts outside the aligned range are
            // unmapped again, the range is advised (a hint) and owned by the HugeBuf.
            unsafe {
                let p = sys::mmap(std::ptr::null_mut(), total, sys::PROT_READ | sys::PROT_WRITE, sys::MAP_PRIVATE | sys::MAP_ANONYMOUS, -1, 0);
                if p == sys::MAP_FAILED || p.is_null() {
                    return (std::ptr::null_mut(), 0);
                }
                let start = p as usize;
                let aligned = (start + HUGE_PAGE - 1) & !(HUGE_PAGE - 1);
                if aligned > start {
                    sys::munmap(p, aligned - start);
                }
                let end = start + total;
                if end > aligned + want {
                    sys::munmap((aligned + want) as *mut std::ffi::c_void, end - aligned - want);
                }
                advise_range(aligned, want);
                (aligned as *mut T, want)
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            (std::ptr::null_mut(), 0)
        }
    }

    /// The values' pointer and count, without making a reference to them: for a buffer whose
    /// values are read and written through other types (e.g. atomics of the same layout), where
    /// a `&[T]` would wrongly assert that nothing changes them.
    pub fn raw_parts(&self) -> (*mut T, usize) {
        (self.ptr.as_ptr(), self.len)
    }

    /// Bytes allocated.
    pub fn bytes(&self) -> usize {
        if self.mapped != 0 {
            self.mapped
        } else {
            self.len * std::mem::size_of::<T>()
        }
    }
}

impl<T: Copy> std::ops::Deref for HugeBuf<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: ptr holds len initialised values.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> std::ops::DerefMut for HugeBuf<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in deref; &mut self is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for HugeBuf<T> {
    fn drop(&mut self) {
        // SAFETY: mapped in `map` with this length, or allocated in `filled` with this layout.
        unsafe {
            #[cfg(target_os = "linux")]
            if self.mapped != 0 {
                sys::munmap(self.ptr.as_ptr() as *mut std::ffi::c_void, self.mapped);
                return;
            }
            std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, self.layout);
        }
    }
}

/// `madvise(MADV_HUGEPAGE)` on the whole pages inside `[start, start + bytes)`.
fn advise_range(start: usize, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
        }
        const MADV_HUGEPAGE: i32 = 14;
        const PAGE: usize = 4096;
        let aligned = (start + PAGE - 1) & !(PAGE - 1);
        let end = (start + bytes) & !(PAGE - 1);
        if end > aligned {
            // SAFETY: the range lies inside an allocation of the caller's, page aligned;
            // MADV_HUGEPAGE does not change the memory's contents or validity.
            unsafe {
                madvise(aligned as *mut std::ffi::c_void, end - aligned, MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

/// Asks the CPU to bring the cache line at `p` into L1 ahead of its use. A hint: any address is
/// allowed, nothing is read or faulted.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; any address is allowed.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const i8, core::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_buffers_read_zero() {
        // Small ones come from the allocator (after memory it hands out again was dirtied),
        // large ones are mapped: every value reads zero, and writes stick.
        for len in [1usize, 7, 1000, HUGE_PAGE / 8 - 1, HUGE_PAGE / 8, 3 * HUGE_PAGE / 8 + 5] {
            drop(vec![0xa5a5_a5a5_a5a5_a5a5u64; len]);
            // SAFETY: all-zero bytes are a valid u64.
            let mut b = unsafe { HugeBuf::<u64>::zeroed(len) };
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0), "len {len}");
            if len * 8 >= HUGE_PAGE {
                assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0, "len {len}");
            }
            b[len - 1] = 3;
            assert_eq!(b[len - 1], 3);
        }
    }

    #[test]
    fn huge_buf_holds_its_values_aligned() {
        for len in [0usize, 1, 7, 1000, HUGE_PAGE / 4 - 1, HUGE_PAGE / 4, HUGE_PAGE / 4 + 3, 3 * HUGE_PAGE / 8 + 5] {
            let mut b = HugeBuf::filled(len, 7u32);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 7));
            if len * 4 >= HUGE_PAGE {
                assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0, "len {len}");
                assert!(b.bytes() >= len * 4);
            }
            for (i, x) in b.iter_mut().enumerate() {
                *x = i as u32;
            }
            assert!(b.iter().enumerate().all(|(i, &x)| x == i as u32));
        }
        let p = HugeBuf::filled(3, (1u64, 2u8));
        assert_eq!(&p[..], &[(1, 2); 3]);
        // Grown past its capacity: the values move, in order, to a larger buffer.
        for cap in [0usize, 1, 7, HUGE_PAGE / 8 + 3] {
            let mut b = HugeBuf::with_capacity(cap);
            let mut want = Vec::new();
            for k in 0..5u64 {
                let n = cap / 2 + 3;
                b.grow(n, k);
                want.resize(want.len() + n, k);
                assert_eq!(&b[..], &want[..], "cap {cap}");
                assert!(b.capacity() >= b.len());
            }
            b.trim();
            assert_eq!(&b[..], &want[..], "cap {cap}");
        }
        // Grown in place, then trimmed: the values stay, the start stays aligned, and the
        // capacity left is what the rounding keeps.
        for (cap, steps) in [(0usize, 0usize), (10, 3), (HUGE_PAGE / 8 * 5 + 7, 40), ((TAIL_ROUNDED / 8) * 2, 70)] {
            let mut b = HugeBuf::with_capacity(cap);
            assert_eq!((b.len(), b.capacity()), (0, cap));
            let mut want = Vec::new();
            for k in 0..steps {
                let n = (cap / steps.max(1) / 3).max(1);
                b.grow(n, k as u64);
                want.resize(want.len() + n, k as u64);
            }
            assert_eq!(&b[..], &want[..]);
            let mapped = b.bytes();
            b.trim();
            assert_eq!(&b[..], &want[..], "cap {cap}");
            assert!(b.capacity() >= b.len());
            if cap * 8 >= HUGE_PAGE {
                assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0, "cap {cap}");
                assert!(b.bytes() < mapped, "cap {cap}: trimmed {} of {mapped}", b.bytes());
                let unit = if want.len() * 8 < TAIL_ROUNDED { HUGE_PAGE } else { 4096 };
                assert_eq!(b.bytes(), (want.len() * 8).div_ceil(unit) * unit);
                for x in b.iter_mut() {
                    *x += 1; // every page kept is still mapped and writable
                }
            }
        }
    }
}
