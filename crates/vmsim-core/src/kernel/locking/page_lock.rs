//! The page lock, as 4.x kernels take it (mm/filemap.c): `trylock_page` is a
//! `test_and_set_bit_lock` of `PG_locked`; `lock_page` that fails sleeps on
//! the page's hashed wait queue as an exclusive waiter keyed by the page
//! (`wait_on_page_bit_common(..., lock = true)`), and on waking tries the bit
//! again, going back to the tail of the queue if another task took it first
//! (the lock is not handed over: a task arriving meanwhile may take it);
//! `unlock_page` clears the bit and, if the page has waiters, wakes the first
//! exclusive one (`wake_up_page_bit`). Which queue, and the wake-up itself,
//! are the caller's (kernel/huge_memory_wp.rs); this file keeps who holds
//! which page, who waits since when, and the lock statistics.
//!
//! Invariants: a page is held by at most one task; a task waits for at most
//! one page; a wait is counted as one contention however often the waiter
//! is woken and loses the race.

use super::lock_stat::{LockClass, LockStats};
use std::collections::BTreeMap;

#[derive(Default)]
pub struct PageLocks {
    /// Locked pages (head frames): the owner and when it took the lock.
    held: BTreeMap<u64, (usize, u64)>,
    /// Tasks waiting for a page lock: the page and when the first attempt failed.
    waiting: BTreeMap<usize, (u64, u64)>,
}

impl PageLocks {
    /// `test_and_set_bit_lock(PG_locked)` by `pid` at `now`: true if it took
    /// the lock. A task that was waiting for it stops waiting and its wait
    /// is recorded.
    pub fn trylock(&mut self, pfn: u64, pid: usize, now: u64, stats: &mut LockStats) -> bool {
        if self.held.contains_key(&pfn) {
            return false;
        }
        self.held.insert(pfn, (pid, now));
        let s = stats.class(LockClass::PageLock);
        s.acquisitions += 1;
        if let Some((p, since)) = self.waiting.remove(&pid) {
            debug_assert_eq!(p, pfn, "a task waits for one page");
            let w = now.saturating_sub(since);
            s.wait_cycles += w;
            s.wait_max_cycles = s.wait_max_cycles.max(w);
        }
        true
    }

    /// `pid` found `pfn` locked at `now` and goes to sleep for it; its first
    /// failed attempt counts a contention.
    pub fn sleep(&mut self, pfn: u64, pid: usize, now: u64, stats: &mut LockStats) {
        let s = stats.class(LockClass::PageLock);
        s.sleeps += 1;
        if let std::collections::btree_map::Entry::Vacant(e) = self.waiting.entry(pid) {
            s.contentions += 1;
            e.insert((pfn, now));
        }
    }

    /// Whether `pid` has waited for a page lock it has not yet taken.
    pub fn is_waiting(&self, pid: usize) -> bool {
        self.waiting.contains_key(&pid)
    }

    /// Who holds `pfn`'s lock.
    pub fn owner(&self, pfn: u64) -> Option<usize> {
        self.held.get(&pfn).map(|&(p, _)| p)
    }

    /// `clear_bit_unlock(PG_locked)` at `now` by its owner.
    pub fn unlock(&mut self, pfn: u64, now: u64, stats: &mut LockStats) {
        let (_, since) = self.held.remove(&pfn).expect("unlock of a page not locked");
        let s = stats.class(LockClass::PageLock);
        let h = now.saturating_sub(since);
        s.hold_cycles += h;
        s.hold_max_cycles = s.hold_max_cycles.max(h);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contended_acquisition_counts_one_contention_and_its_whole_wait() {
        let mut l = PageLocks::default();
        let mut st = LockStats::default();
        assert!(l.trylock(512, 1, 100, &mut st));
        assert!(!l.trylock(512, 2, 110, &mut st));
        l.sleep(512, 2, 110, &mut st);
        assert!(l.is_waiting(2));
        l.unlock(512, 300, &mut st);
        // Task 3 barges in before the woken task 2 runs; 2 sleeps again.
        assert!(l.trylock(512, 3, 310, &mut st));
        assert!(!l.trylock(512, 2, 320, &mut st));
        l.sleep(512, 2, 320, &mut st);
        l.unlock(512, 400, &mut st);
        assert!(l.trylock(512, 2, 450, &mut st));
        assert_eq!(l.owner(512), Some(2));
        assert!(!l.is_waiting(2));
        l.unlock(512, 460, &mut st);
        let s = st.get(LockClass::PageLock);
        assert_eq!(s.acquisitions, 3);
        assert_eq!(s.contentions, 1);
        assert_eq!(s.sleeps, 2);
        assert_eq!((s.wait_cycles, s.wait_max_cycles), (340, 340));
        assert_eq!((s.hold_cycles, s.hold_max_cycles), (200 + 90 + 10, 200));
    }
}
