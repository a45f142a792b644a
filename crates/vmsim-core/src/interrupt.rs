//! A request from outside a simulation to stop it: Ctrl-C or SIGTERM seen
//! by the caller (the Python binding's main thread polls for them while
//! the core runs on another thread). The engine reads the request between
//! its steps (every quantum and every event, whatever the workload does)
//! and a run stops with [`Error::Interrupted`](crate::error::Error).
//!
//! Invariant: the request is process-wide, as a signal is: it stops every
//! run of the process until the caller clears it. Reading it is one relaxed
//! atomic load; it never changes what a run that is not stopped computes.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

/// Asks every running simulation of the process to stop.
pub fn request() {
    STOP.store(true, Ordering::Relaxed);
}

/// Withdraws the request (once the interrupted runs have stopped).
pub fn clear() {
    STOP.store(false, Ordering::Relaxed);
}

/// Whether a stop has been requested.
#[inline]
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
