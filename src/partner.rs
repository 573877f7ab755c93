//! A second thread that shares a loop's work with the calling thread, for loops too short
//! for a thread pool's hand-off (an SMO iteration's passes take tens of microseconds;
//! waking a sleeping pool worker costs about as much).
//!
//! The partner spins for a while after each job, so the next job of a busy loop starts
//! within a fraction of a microsecond, then parks; it is only worth its spinning while the
//! caller keeps it busy and owns both cores (`Parallelism::Parallel`). Each job splits a
//! range in two halves at the same place every time the range is the same, so each core
//! keeps working on the same data in its own cache.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::thread::{Scope, Thread};
use std::time::{Duration, Instant};

const IDLE: u8 = 0;
const GO: u8 = 1;
const DONE: u8 = 2;
const QUIT: u8 = 3;

/// How long the partner spins for the next job before parking.
const SPIN: Duration = Duration::from_micros(200);

type Job<'a> = &'a (dyn Fn(usize) + Sync);

struct Shared {
    state: AtomicU8,
    parked: AtomicBool,
    /// The current job, valid while state is GO (lifetime erased; see `run`).
    job: std::sync::Mutex<Option<Job<'static>>>,
    panicked: AtomicBool,
}

/// The calling thread's handle on its partner thread.
pub struct Partner<'scope> {
    shared: &'scope Shared,
    thread: Thread,
}

/// Runs `f` with a partner thread living inside `f`'s scope.
pub fn with_partner<R>(f: impl FnOnce(&Partner<'_>) -> R) -> R {
    let shared = Shared {
        state: AtomicU8::new(IDLE),
        parked: AtomicBool::new(false),
        job: std::sync::Mutex::new(None),
        panicked: AtomicBool::new(false),
    };
    std::thread::scope(|scope| {
        let partner = Partner::start(scope, &shared);
        let out = f(&partner);
        partner.stop();
        out
    })
}

impl<'scope> Partner<'scope> {
    fn start<'env>(scope: &'scope Scope<'scope, 'env>, shared: &'scope Shared) -> Partner<'scope> {
        let handle = scope.spawn(move || serve(shared));
        Partner { shared, thread: handle.thread().clone() }
    }

    fn stop(&self) {
        self.shared.state.store(QUIT, Ordering::Release);
        self.thread.unpark();
    }

    /// Runs `job(0)` here and `job(1)` on the partner, and returns when both are done.
    pub fn run(&self, job: &(dyn Fn(usize) + Sync)) {
        // SAFETY: the job is only called between the GO store below and the partner's DONE
        // store, which this function waits for before returning, so the borrow outlives
        // every use.
        let erased: Job<'static> = unsafe { std::mem::transmute::<Job<'_>, Job<'static>>(job) };
        *self.shared.job.lock().expect("job slot") = Some(erased);
        // SeqCst on both sides of this store/load pair (and the partner's): otherwise each
        // could miss the other's store, and a parking partner would sleep out its timeout.
        self.shared.state.store(GO, Ordering::SeqCst);
        if self.shared.parked.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
        // Even if our half panics, the partner may still be using the job's borrows:
        // wait for it before unwinding.
        let ours = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(0)));
        while self.shared.state.load(Ordering::Acquire) != DONE {
            std::hint::spin_loop();
        }
        self.shared.state.store(IDLE, Ordering::Relaxed);
        if let Err(payload) = ours {
            std::panic::resume_unwind(payload);
        }
        if self.shared.panicked.load(Ordering::Acquire) {
            panic!("the partner thread's half of a job panicked");
        }
    }

    /// Splits `range` at its middle and runs `f(0, first half)` here and
    /// `f(1, second half)` on the partner.
    pub fn split(&self, range: Range<usize>, f: &(dyn Fn(usize, Range<usize>) + Sync)) {
        let mid = range.start + range.len() / 2;
        self.run(&|part| if part == 0 { f(0, range.start..mid) } else { f(1, mid..range.end) });
    }
}

fn serve(shared: &Shared) {
    let mut idle_since = Instant::now();
    // The clock is read once per 256 spins: reading it costs more than a spin.
    let mut spins = 1u32;
    loop {
        match shared.state.load(Ordering::Acquire) {
            GO => {
                let job = shared.job.lock().expect("job slot").take().expect("a job is set with GO");
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(1))).is_err() {
                    shared.panicked.store(true, Ordering::Release);
                }
                shared.state.store(DONE, Ordering::Release);
                idle_since = Instant::now();
            }
            QUIT => return,
            _ if !spins.is_multiple_of(256) || idle_since.elapsed() < SPIN => {
                spins = spins.wrapping_add(1);
                std::hint::spin_loop()
            }
            _ => {
                shared.parked.store(true, Ordering::SeqCst);
                // Re-check after announcing: a job posted before `parked` was visible
                // would otherwise wait for the next unpark.
                if matches!(shared.state.load(Ordering::SeqCst), IDLE | DONE) {
                    std::thread::park_timeout(Duration::from_millis(50));
                }
                shared.parked.store(false, Ordering::SeqCst);
                idle_since = Instant::now();
            }
        }
    }
}

/// Disjoint mutable halves of one slice for a [`Partner::split`] job.
pub struct SplitSlice<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: a SplitSlice only hands out disjoint ranges (checked by the callers' split), and
// the slice it came from is exclusively borrowed for the SplitSlice's lifetime.
unsafe impl<T: Send> Sync for SplitSlice<T> {}
unsafe impl<T: Send> Send for SplitSlice<T> {}

impl<T> SplitSlice<T> {
    pub fn new(slice: &mut [T]) -> SplitSlice<T> {
        SplitSlice { ptr: slice.as_mut_ptr(), len: slice.len() }
    }

    /// # Safety
    /// Ranges taken concurrently must not overlap, and the slice passed to `new` must not
    /// be used otherwise until every range is dropped.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range(&self, r: Range<usize>) -> &mut [T] {
        assert!(r.start <= r.end && r.end <= self.len);
        std::slice::from_raw_parts_mut(self.ptr.add(r.start), r.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn both_halves_run_once_per_job() {
        with_partner(|p| {
            for round in 0..2000 {
                let mut data = vec![0usize; 1001];
                let out = SplitSlice::new(&mut data);
                // SAFETY: the two halves of `split` are disjoint.
                p.split(0..1001, &|_, r| unsafe { out.range(r) }.iter_mut().for_each(|v| *v += round + 1));
                assert!(data.iter().all(|&v| v == round + 1));
            }
        });
    }

    #[test]
    fn partner_wakes_after_parking() {
        with_partner(|p| {
            let count = AtomicUsize::new(0);
            std::thread::sleep(SPIN * 3);
            p.run(&|_| {
                count.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(count.load(Ordering::Relaxed), 2);
        });
    }
}
