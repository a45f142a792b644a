//! `do_huge_pmd_wp_page` under the page lock, as 4.14 .. 5.x kernels run it
//! (mm/huge_memory.c; read in the 4.18 source), with `kernel.struct_pages`:
//!
//! ```text
//! spin_lock(ptl); pmd_same?
//! if (!trylock_page(page)) {          // lock bts on the head's flags
//!         get_page(page);             // lock xadd on the head's _refcount
//!         spin_unlock(ptl);
//!         lock_page(page);            // sleep, exclusive, FIFO; retry when woken
//!         spin_lock(ptl); pmd_same?
//!         put_page(page);
//! }
//! if (reuse_swap_page(page, NULL))    // page_trans_huge_map_swapcount():
//!         ... reuse, unlock_page ...  //   _mapcount of all 512 sub-pages
//! unlock_page(page);                  // clear bit, wake one waiter
//! get_page(page); spin_unlock(ptl);
//! ... allocate, copy_user_huge_page(), or (5.8+) split the PMD ...
//! ```
//!
//! The fault queues this part as work items that run when the CPU reaches
//! them: `WpHugePageLocked` (the lock), then `ReuseSwapPage` (the scan,
//! resumable at a quantum boundary) and `WpHugePageUnlock`, separate so
//! that the lock stays held in simulated time while the scan runs and other
//! CPUs, run lowest clock first, find it taken. The page lock is a line of the
//! simulated memory map (kernel/vmemmap.rs), so the children of
//! anon-cow-seq that write the same huge page at the same moment meet on
//! it, move its line between them, and all but one sleep; `reuse_swap_page`
//! reads 512 `struct page` lines (32 KiB) from the node holding the page's
//! memory map, under the lock; each unlock wakes the next waiter, whose CPU
//! first leaves its idle state (sim/, `Sim::wake_woken`). After the unlock
//! the rest of `do_huge_pmd_wp_page` (kernel/memory.rs) decides reuse or
//! copy as before. The copy's `put_page` and `page_remove_rmap` atomics
//! are charged where the old page is put (`Kernel::put_page_struct_page`).
//!
//! Not modelled: the page-table lock (each child has its own, never
//! contended here), the hashed wait queue's own spinlock, the new page's
//! `struct page` initialisation, and the swap cluster lock (no swap).

use super::hw::Hw;
use super::locking::lock_stat::LockClass;
use super::memory::{FaultError, Mapped};
use super::mm::{Pmd, PMD_SHIFT};
use super::page_alloc::HPAGE_PMD_NR;
use super::{KStep, Kernel, Work};
use std::collections::VecDeque;

/// Instructions per sub-page of `page_trans_huge_map_swapcount()`'s loop
/// (the `_mapcount` load and increment, the two sums, the swap-map test,
/// loop control): 8, counted from the C source, not from compiled code.
pub const REUSE_SWAP_PAGE_INSTR_PER_SUBPAGE: u64 = 8;

/// What became of a fault's attempt at the page lock.
#[derive(Debug, PartialEq, Eq)]
pub enum WpLockStep {
    /// Taken: the scan and the unlock are queued.
    Done,
    /// The page lock is held: the task sleeps on the page's wait queue and
    /// runs the same item again when woken.
    Sleep,
}

impl Kernel {
    /// The fault's part before the page lock: queue the rest for when the CPU gets there.
    pub(super) fn queue_wp_huge_page_locked(
        &mut self,
        mm: usize,
        addr: u64,
        pfn: u64,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Mapped {
        work.push_back(Work::Kernel(KStep::WpHugePageLocked {
            mm,
            addr,
            pfn,
            node,
        }));
        // As a 4 KiB mapping to MAP_POPULATE: it steps on and finds the PMD done.
        Mapped::Small
    }

    /// `KStep::WpHugePageLocked` executed on `hw.cpu` for task `pid`:
    /// `trylock_page` of the huge page at `pfn`. Taken: the scan
    /// (`KStep::ReuseSwapPage`) and the unlock with the rest of the fault
    /// (`KStep::WpHugePageUnlock`) go on `work`, as items of their own, so
    /// that the lock stays held in simulated time while the scan runs and
    /// other CPUs find it taken. Held: the task sleeps on the page's wait
    /// queue, an exclusive waiter at its tail.
    pub fn wp_huge_page_trylock(
        &mut self,
        hw: &mut Hw,
        pid: usize,
        item: (usize, u64, u64, usize),
        work: &mut VecDeque<Work>,
    ) -> WpLockStep {
        let (mm, addr, pfn, node) = item;
        let head = self.struct_page_line(pfn);
        let retry = self.locks.page.is_waiting(pid);
        // trylock_page(), or the woken waiter's test_and_set_bit_lock().
        hw.atomic(head);
        if !self
            .locks
            .page
            .trylock(pfn, pid, hw.now(), &mut self.locks.stats)
        {
            if !retry {
                // get_page() before dropping the page-table lock to sleep.
                hw.atomic(head);
            }
            self.locks
                .page
                .sleep(pfn, pid, hw.now(), &mut self.locks.stats);
            let q = self.folio_waitqueue(pfn);
            self.sched.waitq.wait_exclusive(q, pid, pfn);
            return WpLockStep::Sleep;
        }
        if retry {
            // lock_page() returned: put_page() of the reference taken to sleep.
            hw.atomic(head);
        }
        work.push_back(Work::Kernel(KStep::ReuseSwapPage { pfn }));
        work.push_back(Work::Kernel(KStep::WpHugePageUnlock {
            mm,
            addr,
            pfn,
            node,
        }));
        WpLockStep::Done
    }

    /// `reuse_swap_page()` → `page_trans_huge_map_swapcount()` under the page
    /// lock: the `_mapcount` of every sub-page of the huge page at `pfn`, one
    /// `struct page` (one line) each, the loads independent of one another,
    /// from sub-page `from` on until the CPU's clock reaches `deadline`.
    /// Returns where it stopped (`HPAGE_PMD_NR`: done).
    pub fn reuse_swap_page_scan(&mut self, hw: &mut Hw, pfn: u64, from: u64, deadline: u64) -> u64 {
        let head = self.struct_page_line(pfn);
        let mut i = from;
        while i < HPAGE_PMD_NR && hw.now() < deadline {
            hw.load(head + i, true);
            hw.instructions(REUSE_SWAP_PAGE_INSTR_PER_SUBPAGE);
            i += 1;
        }
        i
    }

    /// `KStep::WpHugePageUnlock`: `unlock_page()` (clear `PG_locked`; with
    /// waiters, `wake_up_page()` wakes the first exclusive one, which pays
    /// the waker `try_to_wake_up`), then the rest of `do_huge_pmd_wp_page`,
    /// whose work goes on `work`.
    pub fn wp_huge_page_unlock(
        &mut self,
        hw: &mut Hw,
        item: (usize, u64, u64, usize),
        work: &mut VecDeque<Work>,
    ) -> Result<(), FaultError> {
        let (mm, addr, pfn, node) = item;
        let head = self.struct_page_line(pfn);
        hw.atomic(head);
        self.locks.page.unlock(pfn, hw.now(), &mut self.locks.stats);
        let q = self.folio_waitqueue(pfn);
        if self.sched.waitq.has_key(q, pfn) {
            hw.charge(self.costs.try_to_wake_up_cycles);
            let n = self.sched.waitq.wake_up_key(q, pfn, hw.now()).len() as u64;
            self.locks.stats.class(LockClass::PageLock).wakeups += n;
        }
        // pmd_same(): only this task changes its own PMD here, but stay safe.
        let same = matches!(
            self.mms[mm].pmds.get(&(addr >> PMD_SHIFT)),
            Some(Pmd::Huge(p)) if p.pfn == pfn && !p.writable
        );
        if !same {
            return Ok(());
        }
        if self.mem.alloc.folio_mapcount(pfn) > 1 {
            // Not reused: get_page() holds the page across the copy.
            hw.atomic(head);
        }
        self.do_huge_pmd_wp_page(mm, addr, node, work, true)?;
        Ok(())
    }

    /// The line of frame `pfn`'s `struct page`.
    fn struct_page_line(&self, pfn: u64) -> u64 {
        self.mem
            .vmemmap
            .as_ref()
            .expect("the locked THP copy-on-write path runs with kernel.struct_pages")
            .page_line(pfn)
    }

    /// The `struct page` atomics of dropping a copy-on-write source page's
    /// mapping (`KStep::PutPage` with `kernel.struct_pages`), before the put:
    /// for the head of a huge page, `put_page()` of the reference taken for
    /// the copy, `page_remove_rmap()` on `compound_mapcount` (the first tail
    /// page's line) and `put_page()` of the mapping's reference; for a 4 KiB
    /// page (alone or a sub-page of a split huge page), `page_remove_rmap()`
    /// on its `_mapcount` and `put_page()` on its folio's `_refcount`.
    pub fn put_page_struct_page(&mut self, hw: &mut Hw, pfn: u64) {
        let Some(v) = self.mem.vmemmap.as_ref() else {
            return;
        };
        let folio = self.mem.alloc.page_folio(pfn);
        let (page, head) = (v.page_line(pfn), v.page_line(folio));
        if folio == pfn && self.mem.alloc.folios[folio as usize].order > 0 {
            hw.atomic(head);
            hw.atomic(head + 1);
        } else {
            hw.atomic(page);
        }
        hw.atomic(head);
    }
}
