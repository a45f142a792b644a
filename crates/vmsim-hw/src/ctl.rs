//! Run control shared by the host commands: the quiet switch for progress
//! notes, stop requests from SIGINT and SIGTERM, and the host-memory guard.
//!
//! Invariant: while a command runs ([`Session`] alive) SIGINT and SIGTERM only
//! set a flag, which the measurement loops poll ([`check`]) between steps; the
//! command then returns [`HwError::Interrupted`] through the normal path, so
//! every guard (the hugetlb pool size, mappings) is restored before exit. The
//! previous handlers are put back when the session ends.

use crate::{config_err, HwError};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);
static STOP: AtomicI32 = AtomicI32::new(0);

/// A progress note on stderr, unless the command runs quietly.
pub fn note(message: &str) {
    if !QUIET.load(Ordering::Relaxed) {
        eprintln!("vmsim hw: {message}");
    }
}

/// A warning on stderr, unless the command runs quietly (the commands that
/// warn also put their warnings in their JSON).
pub fn warn(message: &str) {
    if !QUIET.load(Ordering::Relaxed) {
        eprintln!("vmsim hw: warning: {message}");
    }
}

/// `Err(Interrupted)` once SIGINT or SIGTERM has arrived.
pub fn check() -> Result<(), HwError> {
    match STOP.load(Ordering::Relaxed) {
        0 => Ok(()),
        sig => Err(HwError::Interrupted(sig)),
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(sig, Ordering::Relaxed);
}

/// Signal handlers and the quiet switch for one command; restored on drop.
pub struct Session {
    old: Vec<(libc::c_int, libc::sigaction)>,
    was_quiet: bool,
}

impl Session {
    pub fn start(quiet: bool) -> Session {
        STOP.store(0, Ordering::Relaxed);
        let was_quiet = QUIET.swap(quiet, Ordering::Relaxed);
        let mut old = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: sigaction with a handler that only stores to an atomic;
            // the previous action is kept and put back in Drop.
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut act.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &act, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Session { old, was_quiet }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for (sig, prev) in self.old.drain(..) {
            // SAFETY: restores the action saved by `start`.
            unsafe { libc::sigaction(sig, &prev, std::ptr::null_mut()) };
        }
        QUIET.store(self.was_quiet, Ordering::Relaxed);
    }
}

/// `MemAvailable` of /proc/meminfo in bytes (None where it cannot be read).
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses to map `bytes` more than three quarters of the host's available
/// memory can hold: the kernel's OOM killer would end the process instead.
pub fn guard_memory(key: &str, bytes: u64) -> Result<(), HwError> {
    let Some(avail) = mem_available() else {
        return Ok(());
    };
    let allowed = avail / 4 * 3;
    if bytes > allowed {
        return Err(config_err(
            key,
            format!(
                "needs {} MiB of host memory; this host has {} MiB available (MemAvailable), so at most {} MiB may be used",
                bytes >> 20,
                avail >> 20,
                allowed >> 20
            ),
        ));
    }
    Ok(())
}
