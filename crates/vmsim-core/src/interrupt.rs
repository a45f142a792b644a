//! A request from outside a simulation to stop it: Ctrl-C or SIGTERM seen
//! by the caller (the Python binding's main thread polls for them while
//! the core runs on another thread), or the caller's own reason to stop
//! one run (its progress callback raised). The engine reads the request
//! between its steps (every quantum and every event, whatever the workload
//! does) and a run stops with [`Error::Interrupted`](crate::error::Error).
//!
//! Invariants: the process-wide request ([`request`]) stops every run of
//! the process until the caller clears it, as a signal does. A run's own
//! stop ([`RunStop`], its flag given to [`scope`]) stops only the run whose
//! threads carry the flag; the core's threads that work for a run carry
//! it ([`current`], then [`scope`] in the new thread). While no request
//! is set, a check is one relaxed load of a global; no request changes
//! what a run that is not stopped computes.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

static STOP: AtomicBool = AtomicBool::new(false);

/// How many requests are set, the process-wide one and runs' own: while
/// none is, a check is one relaxed load of a global.
static SET: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The flag of the run this thread works for.
    static RUN: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Asks every running simulation of the process to stop.
pub fn request() {
    if !STOP.swap(true, Ordering::Relaxed) {
        SET.fetch_add(1, Ordering::Relaxed);
    }
}

/// Withdraws the request (once the interrupted runs have stopped).
pub fn clear() {
    if STOP.swap(false, Ordering::Relaxed) {
        SET.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether a stop has been requested, for the process or for the run this
/// thread works for.
#[inline]
pub fn requested() -> bool {
    SET.load(Ordering::Relaxed) > 0 && set_for_this_thread()
}

#[cold]
#[inline(never)]
fn set_for_this_thread() -> bool {
    STOP.load(Ordering::Relaxed)
        || RUN.with(|r| {
            r.borrow()
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Relaxed))
        })
}

/// One run's own stop: its flag goes to [`scope`] for the threads that
/// work for the run; [`RunStop::stop`] sets it. Kept by the caller until
/// the run's threads have ended.
pub struct RunStop(Arc<AtomicBool>);

impl RunStop {
    pub fn new() -> RunStop {
        RunStop(Arc::new(AtomicBool::new(false)))
    }

    /// The flag to hand to [`scope`].
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }

    /// Stops the run (and only it).
    pub fn stop(&self) {
        if !self.0.swap(true, Ordering::Relaxed) {
            SET.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Default for RunStop {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for RunStop {
    fn drop(&mut self) {
        if self.0.load(Ordering::Relaxed) {
            SET.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The stop flag of the run this thread works for, to hand to the threads
/// it starts.
pub fn current() -> Option<Arc<AtomicBool>> {
    RUN.with(|r| r.borrow().clone())
}

/// Runs `f` on this thread as part of the run whose own stop flag is
/// `flag`: [`requested`] is true in it once the flag is set.
pub fn scope<T>(flag: Option<Arc<AtomicBool>>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            set(self.0.take());
        }
    }
    fn set(flag: Option<Arc<AtomicBool>>) -> Option<Arc<AtomicBool>> {
        RUN.with(|r| r.replace(flag))
    }
    let _restore = Restore(set(flag));
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_flag_stops_its_own_threads_only() {
        let run = RunStop::new();
        scope(Some(run.flag()), || {
            assert!(!requested());
            run.stop();
            assert!(requested());
            let inherited = current();
            std::thread::scope(|s| {
                s.spawn(|| assert!(scope(inherited, requested)));
                s.spawn(|| assert!(!requested()));
            });
        });
        assert!(!requested(), "the flag is gone once its scope ends");
        assert!(current().is_none());
        drop(run);
        assert_eq!(SET.load(Ordering::Relaxed), 0);
    }
}
