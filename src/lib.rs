//! mercer: kernel machines served over HTTP.
//!
//! The numerical core (`kernel`, `estimator`, `linalg`) knows nothing of HTTP; the HTTP
//! layer (`api`) knows nothing of linear algebra. `service` holds the operations both
//! sides meet at: validate a request into checked inputs, run fits in the `pool`, keep
//! models in the `registry`, which the `replica` keeps in step with the `store`.

pub mod api;
pub mod client;
pub mod config;
pub mod dataset;
pub mod estimator;
#[doc(hidden)]
pub mod fuzzing;
pub mod kernel;
pub mod linalg;
pub mod metrics;
pub mod optimize;
pub mod partner;
pub mod pool;
pub mod registry;
pub mod replica;
pub mod selection;
pub mod server;
pub mod service;
pub mod smo;
pub mod spec;
pub mod store;
pub mod study;
pub mod telemetry;

/// Tunes glibc's allocator for this workload; call once at start.
///
/// Fits and the hyperparameter search allocate and free n x n matrices over and over.
/// glibc returns freed blocks above its trim threshold to the OS, so each new matrix
/// pays its page faults again (~3 us per 4 KiB page here: 5 ms for an 8 MB matrix,
/// more than the arithmetic). Keeping up to 512 MiB of freed memory for reuse, and
/// serving blocks up to glibc's 32 MiB cap from the heap, removes that.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is called before the
    // program allocates in earnest and has no memory-safety preconditions.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}

/// Returns the allocator's free memory to the system. The trim threshold that
/// [`tune_allocator`] sets keeps freed memory for reuse (a fit's large buffers), and over
/// hours of varied load that lets a server's RSS creep up with memory it no longer uses
/// (the live heap stays flat: see BENCHMARKS.md's hour-long soak). The server calls this
/// once a minute, on a blocking thread: it walks the allocator's free lists.
pub fn trim_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Deterministic inputs for unit tests, so that no test needs an RNG crate.
#[cfg(test)]
pub(crate) mod test_support {
    use nalgebra::DMatrix;

    /// A rows x cols matrix of values in [-1, 1) from a xorshift stream seeded by `seed`.
    pub fn seeded_matrix(rows: usize, cols: usize, seed: u64) -> DMatrix<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        DMatrix::from_fn(rows, cols, |_, _| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
    }
}
