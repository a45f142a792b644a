//! Page-table pages in simulated memory (`kernel.page_tables`): each level
//! of an address space's four-level x86-64 table (PGD, PUD, PMD, PTE pages
//! of 512 eight-byte entries) is a 4 KiB frame taken from the page
//! allocator, so that the hardware walker and the kernel's own walks read
//! and write entries through the caches, and the tables take memory.
//!
//! Which frame holds which table is the mm's (`Mm::pt`, kernel/mm.rs);
//! this file allocates and frees them and does the kernel's accesses.
//!
//! The kernel allocates a table when a fault first needs it (`__pte_alloc`,
//! `__pmd_alloc`, `__pud_alloc`: `GFP_PGTABLE_USER`, zeroed, on the
//! faulting CPU's node under the default policy) and frees it when the
//! range it maps is unmapped (`free_pgtables`); the PGD lives as long as
//! the mm. The model keeps, per mm, which frame holds which table; the
//! entries themselves stay in `Mm` (kernel/mm.rs), and an entry's line is
//! `table frame · 64 + index / 8`.
//!
//! Which accesses go through the caches:
//! - the hardware walk after a TLB miss loads the leaf entry (PTE, or the
//!   PMD/PUD entry of a huge mapping); the upper levels are taken as hits
//!   in the paging-structure caches (Intel SDM Vol. 3A §4.10.3), as the
//!   presets' fixed walk cost already assumed: no size of those caches is
//!   published, so their misses are not modelled;
//! - the fault's `set_pte_at` / `set_pmd_at` stores the new entry, after
//!   the new tables on the way were zeroed (64 line stores each);
//! - an rmap walk (reclaim's `folio_referenced` and `try_to_unmap`,
//!   migration's `try_to_migrate`) does a locked read-modify-write of the
//!   PTE (`ptep_test_and_clear_young`, `ptep_get_and_clear`);
//! - `change_prot_numa` does one on every entry it changes
//!   (`ptep_modify_prot_start`), a NUMA hint fault one on the entry it
//!   makes accessible again (kernel/memory.rs), and `remove_migration_ptes`
//!   stores the new entry.
//!
//! With `kernel.pte_locks` those accesses, but for fork's copies, are made
//! under the table's split lock (`ptlock_ptr()`: a spinlock whose word is
//! the table's `struct page` line), per entry, or per table for
//! `change_prot_numa` as `change_pte_range` takes it.
//!
//! Invariants: a table has a frame from the first entry written into its
//! range until `free_pgtables` finds its range empty; the frames are never
//! on an LRU list nor mapped to user space; every frame is returned to the
//! allocator by the mm's exit.

use super::hw::{Hw, LOCKED_RMW_CYCLES};
use super::locking::sections::SpinRef;
use super::mm::{Level, Pmd, PAGE_SIZE, PMD_SHIFT, PUD_SHIFT};
use super::{KFn, Kernel};

/// An uncontended split-lock round trip with the lock's line in the L1:
/// the acquire's locked operation and the release's store (one issue
/// cycle). `rmap_pte_cycles`, whose estimate names the lock, loses it when
/// the lock is taken as a line (`kernel.pte_locks`).
pub const PTL_ROUND_TRIP_CYCLES: u64 = LOCKED_RMW_CYCLES + 1;

/// What `va`'s mapping is, for the level of its leaf entry.
fn leaf_level(mm: &super::mm::Mm, va: u64) -> Option<Level> {
    if mm.puds.contains_key(&(va >> PUD_SHIFT)) {
        return Some(Level::Pud);
    }
    match mm.pmds.get(&(va >> PMD_SHIFT))? {
        Pmd::Huge(_) => Some(Level::Pmd),
        Pmd::Table(_) => Some(Level::Pte),
    }
}

/// Page-table pages in use and their traffic (/proc/meminfo `PageTables`,
/// /proc/vmstat has no counter for the rest).
#[derive(Clone, Copy, Debug, Default)]
pub struct PgtableStat {
    /// Table frames held now (`NR_PAGETABLE`).
    pub nr_page_table_pages: u64,
    /// The most held at once.
    pub nr_page_table_pages_max: u64,
    /// Tables allocated and freed.
    pub pgtable_alloc: u64,
    pub pgtable_free: u64,
    /// Tables a path needed that the allocator could not give (the entry
    /// stays, its walks cost the fixed walk as without page tables in
    /// memory).
    pub pgtable_alloc_failed: u64,
}

impl Kernel {
    /// Whether page tables live in simulated memory (`kernel.page_tables`).
    #[inline]
    pub fn page_tables(&self) -> bool {
        self.cfg.page_tables
    }

    /// `set_pte_at` / `set_pmd_at` / `set_pud_at` of `va` in `mm_id` on
    /// `hw.cpu`, after the entry was installed: the tables on the way are
    /// allocated if missing ([`Kernel::alloc_pgtables`]) and the entry is
    /// stored; with `locked` (a fault's install), under the leaf table's
    /// split lock (`kernel.pte_locks`).
    pub fn set_entry_at(&mut self, hw: &mut Hw, mm_id: usize, va: u64, locked: bool) {
        if let Some(leaf) = self.alloc_pgtables(hw, mm_id, va) {
            if let Some(line) = self.mms[mm_id].pt.line(va, leaf) {
                let ptl = if locked {
                    self.ptl_lock(hw, line, KFn::HandleMmFault)
                } else {
                    None
                };
                hw.store(line);
                self.ptl_unlock(hw, ptl);
            }
        }
    }

    /// `__pte_alloc` / `__pmd_alloc` / `__pud_alloc` for `va`'s mapping in
    /// `mm_id` on `hw.cpu`: each table on the way that has no frame gets one
    /// on the CPU's node, zeroed (64 line stores). Returns the level of the
    /// leaf entry, None if `va` is not mapped or page tables are not in memory.
    pub fn alloc_pgtables(&mut self, hw: &mut Hw, mm_id: usize, va: u64) -> Option<Level> {
        if !self.page_tables() {
            return None;
        }
        let leaf = leaf_level(&self.mms[mm_id], va)?;
        let node = self.cpu_nodes.get(hw.cpu).copied().unwrap_or(0);
        for table in self.mms[mm_id].pt.missing(va, leaf) {
            let Some(pfn) = self.alloc_near(node, 0) else {
                self.pgtable.pgtable_alloc_failed += 1;
                return None;
            };
            for l in 0..PAGE_SIZE / 64 {
                hw.store((pfn << 6) | l);
            }
            self.mms[mm_id].pt.record(va, table, pfn);
            let s = &mut self.pgtable;
            s.pgtable_alloc += 1;
            s.nr_page_table_pages += 1;
            s.nr_page_table_pages_max = s.nr_page_table_pages_max.max(s.nr_page_table_pages);
        }
        Some(leaf)
    }

    /// A locked read-modify-write of `va`'s leaf entry in `mm_id` on
    /// `hw.cpu` (`ptep_test_and_clear_young`, `ptep_get_and_clear` of an
    /// rmap walk's `page_vma_mapped_walk`), under the table's split lock
    /// with `kernel.pte_locks`; `what` is the path the time before the lock
    /// goes to. Returns the cycles of `rmap_pte_cycles` (whose estimate
    /// names the locked operation and the lock's round trip) that the
    /// accesses now stand for when the lines are in the L1, 0 when page
    /// tables are not in memory.
    pub fn entry_rmw(&mut self, hw: &mut Hw, mm_id: usize, va: u64, what: KFn) -> u64 {
        let Some(line) = self.leaf_entry_line(mm_id, va) else {
            return 0;
        };
        let ptl = self.ptl_lock(hw, line, what);
        hw.atomic(line);
        let moved = LOCKED_RMW_CYCLES
            + if ptl.is_some() {
                PTL_ROUND_TRIP_CYCLES
            } else {
                0
            };
        self.ptl_unlock(hw, ptl);
        moved
    }

    /// Locked read-modify-writes of the entries in `lines` (`change_prot_numa`'s
    /// `ptep_modify_prot_start`, or a hint fault's restore of one entry),
    /// each table's under its split lock once (`change_pte_range` takes it
    /// per table; `kernel.pte_locks`). Neither `change_pte_cycles` nor the
    /// fault's estimate names the lock, so nothing is moved out of them.
    pub fn entry_rmws(&mut self, hw: &mut Hw, lines: &[u64], what: KFn) {
        let mut i = 0;
        while i < lines.len() {
            let table = lines[i] >> 6;
            let n = lines[i..].iter().take_while(|&&l| l >> 6 == table).count();
            let ptl = self.ptl_lock(hw, lines[i], what);
            for &line in &lines[i..i + n] {
                hw.atomic(line);
            }
            self.ptl_unlock(hw, ptl);
            i += n;
        }
    }

    /// A store to `va`'s leaf entry in `mm_id` on `hw.cpu` (`set_pte_at`
    /// over an existing table: `remove_migration_ptes`), under the table's
    /// split lock with `kernel.pte_locks`. Returns the cycles of
    /// `rmap_pte_cycles` the lock's round trip now stands for.
    pub fn entry_store(&mut self, hw: &mut Hw, mm_id: usize, va: u64, what: KFn) -> u64 {
        let Some(line) = self.leaf_entry_line(mm_id, va) else {
            return 0;
        };
        let ptl = self.ptl_lock(hw, line, what);
        hw.store(line);
        let moved = if ptl.is_some() {
            PTL_ROUND_TRIP_CYCLES
        } else {
            0
        };
        self.ptl_unlock(hw, ptl);
        moved
    }

    /// `spin_lock(ptlock_ptr(page))` of the table holding the entry on
    /// `line` (`kernel.pte_locks`; None when off): the lock's word is in
    /// the table's `struct page` (`USE_SPLIT_PTE_PTLOCKS` without lockdep:
    /// the spinlock fits in the page's `ptl` field). Time before the lock
    /// goes to `what`, the spinning to `KFn::SpinLock`.
    fn ptl_lock(&mut self, hw: &mut Hw, line: u64, what: KFn) -> Option<SpinRef> {
        if !self.cfg.pte_locks {
            return None;
        }
        let table = line >> 6;
        let word = self.vmemmap.as_ref()?.page_line(table);
        let sl = self.spinlocks.as_mut()?;
        let r = sl.ptl(table, word);
        let imp = sl.imp;
        hw.settle(what);
        sl.lock_of(r).lock(hw, imp, &mut self.lock_stats);
        hw.settle(KFn::SpinLock);
        Some(r)
    }

    /// `spin_unlock` of a lock [`Kernel::ptl_lock`] took (nothing for None).
    fn ptl_unlock(&mut self, hw: &mut Hw, ptl: Option<SpinRef>) {
        if let (Some(r), Some(sl)) = (ptl, self.spinlocks.as_mut()) {
            sl.lock_of(r).unlock(hw, &mut self.lock_stats);
        }
    }

    /// The line of `va`'s leaf entry in `mm_id`, if page tables are in
    /// memory and its table has a frame.
    pub(crate) fn leaf_entry_line(&self, mm_id: usize, va: u64) -> Option<u64> {
        if !self.page_tables() {
            return None;
        }
        let mm = &self.mms[mm_id];
        leaf_level(mm, va).and_then(|l| mm.pt.line(va, l))
    }

    /// `free_pgtables()` of `mm_id` after a range was unmapped: every table
    /// whose range maps nothing any more goes back to the allocator; with
    /// `all` (the mm's exit), the PGD too.
    pub fn free_pgtables(&mut self, mm_id: usize, all: bool) {
        if !self.page_tables() {
            return;
        }
        let freed = self.mms[mm_id].take_unused_tables(all);
        for pfn in freed {
            if let Some(sl) = self.spinlocks.as_mut() {
                sl.drop_ptl(pfn);
            }
            self.alloc.free(pfn);
            self.pgtable.pgtable_free += 1;
            self.pgtable.nr_page_table_pages -= 1;
        }
    }
}
