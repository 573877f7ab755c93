//! How the large matrices and buffers are allocated (zeroed, with transparent huge
//! pages), and the vector-register state faer's kernels leave behind.

use nalgebra::DMatrix;

/// Below this many bytes a matrix is not worth huge pages.
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// An n x m zero matrix whose storage asks the kernel for transparent huge pages.
///
/// On the machines we measured, first touch of fresh memory costs ~3 us per 4 KiB page:
/// 60-120 ms for a 4000 x 4000 Gram matrix, more than computing it. With 2 MiB pages the
/// same matrix takes 64 faults. numpy does the same for arrays of 4 MiB and more.
///
/// `vec![0.0; len]` allocates through calloc, which maps fresh zero pages for large sizes
/// without writing them, so the advice lands before the first touch and the page faults
/// happen later, in whichever (parallel) blocks first write each page.
pub fn zeros(n: usize, m: usize) -> DMatrix<f64> {
    let len = n * m;
    let mut v: Vec<f64> = vec![0.0; len];
    advise_huge_pages(v.as_mut_ptr().cast(), len * std::mem::size_of::<f64>());
    DMatrix::from_vec(n, m, v)
}

/// `len` zero bytes, asking for transparent huge pages as [`zeros`] does: for buffers of
/// hundreds of MB (an encoded model file) that are written once, front to back.
pub fn zeroed_bytes(len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = vec![0; len];
    advise_huge_pages(v.as_mut_ptr(), len);
    v
}

/// A copy of `values` in fresh memory with huge pages (see [`zeros`]).
pub fn copy_of(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = vec![0.0; values.len()];
    advise_huge_pages(v.as_mut_ptr().cast(), std::mem::size_of_val(values));
    v.copy_from_slice(values);
    v
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, bytes: usize) {
    if bytes < HUGE_PAGE_MIN_BYTES {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let start = (ptr as usize).div_ceil(page) * page;
    let end = (ptr as usize + bytes) / page * page;
    if end > start {
        // SAFETY: [start, end) lies inside the allocation behind `ptr`, which this process
        // owns; MADV_HUGEPAGE only changes how the kernel backs it, never its contents.
        // Failure (THP disabled) is harmless and ignored.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _bytes: usize) {}

/// Marks the upper halves of the vector registers clean (`vzeroupper`).
///
/// faer's AVX-512 kernels return with them dirty; until they are cleared, every
/// non-VEX SSE instruction that follows on the thread pays a transition penalty. glibc's
/// `exp`, which the Gram maps call millions of times, is such code: without this it ran
/// 20x slower right after a faer product. Call it after faer work that hot scalar code
/// follows.
#[inline]
pub fn clear_upper_vector_state() {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx"))]
    // SAFETY: vzeroupper only zeroes the upper register halves, which no live Rust value
    // occupies across this call; the avx target feature guarantees the instruction exists.
    unsafe {
        std::arch::x86_64::_mm256_zeroupper();
    }
}
