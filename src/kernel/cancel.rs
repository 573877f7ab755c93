//! Cancellation inside long kernel computations. A fit installs its cancel flag for the
//! duration of the fit ([`with_cancel`]); the costly per-column loops (a string kernel's
//! Gram, where one pair can take milliseconds) read it on the calling thread ([`current`])
//! and stop between columns once it is set. The matrix they return is then incomplete,
//! which is harmless: the fit checks its flag after the kernel work and ends Cancelled.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

thread_local! {
    static CANCEL: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `f` with `flag` as this thread's cancel flag (the previous one restored after).
pub fn with_cancel<R>(flag: Arc<AtomicBool>, f: impl FnOnce() -> R) -> R {
    let previous = CANCEL.with(|c| c.replace(Some(flag)));
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CANCEL.with(|c| *c.borrow_mut() = previous);
        }
    }
    let _restore = Restore(previous);
    f()
}

/// This thread's cancel flag, to be read before handing work to other threads.
pub(crate) fn current() -> Option<Arc<AtomicBool>> {
    CANCEL.with(|c| c.borrow().clone())
}

/// Whether `flag` (from [`current`]) has been set.
pub(crate) fn is_set(flag: &Option<Arc<AtomicBool>>) -> bool {
    flag.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
}
