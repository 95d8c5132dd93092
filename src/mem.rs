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
