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
//!   presets' fixed walk cost already assumed, but for the PDE of a 4 KiB
//!   walk on a machine whose STLB holds PDEs (AMD; machine/tlb.rs), loaded
//!   first when it is not there (sim/translate.rs gives the walker each
//!   level's line);
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
//! With `kernel.pte_locks` those accesses are made under the table's split
//! lock (`ptlock_ptr()`: a spinlock whose word is the table's `struct page`
//! line), per entry, or per table for `change_prot_numa` as
//! `change_pte_range` takes it; fork's copies under the child's table's
//! lock and the parent's, once per table (`copy_pte_range`) or huge entry
//! (`copy_huge_pmd`). A zap (kernel/mmap.rs) and fault-around's window
//! (kernel/filemap.rs) take the lock once per table too, with no entry
//! access of their own.
//!
//! Invariants: a table has a frame from the first entry written into its
//! range until `free_pgtables` finds its range empty; the frames are never
//! on an LRU list nor mapped to user space; every frame is returned to the
//! allocator by the mm's exit.

use super::hw::{Hw, LOCKED_RMW_CYCLES};
use super::locking::spinlocks::SpinRef;
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
        let node = self.cpus.nodes.get(hw.cpu).copied().unwrap_or(0);
        for table in self.mms[mm_id].pt.missing(va, leaf) {
            let pfn = self.alloc_near(node, 0);
            self.wake_pending(hw);
            let Some(pfn) = pfn else {
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

    /// Locked read-modify-writes of the entries of `mm_id` in `entries`
    /// (address, and its entry's line when the work was queued:
    /// `change_prot_numa`'s `ptep_modify_prot_start`, or a hint fault's
    /// restore of one entry), each table's under its split lock once
    /// (`change_pte_range` takes it per table; `kernel.pte_locks`). Neither
    /// `change_pte_cycles` nor the fault's estimate names the lock, so
    /// nothing is moved out of them.
    ///
    /// The work runs after the path that queued it: if the table was freed
    /// meanwhile (an unmap in between), its lock went with it and none is
    /// taken (the kernel's paths hold `mmap_lock` for read across the
    /// change, so no unmap can come between; the model's queued work may).
    pub fn entry_rmws(&mut self, hw: &mut Hw, mm_id: usize, entries: &[(u64, u64)], what: KFn) {
        let mut i = 0;
        while i < entries.len() {
            let (va, line) = entries[i];
            let table = line >> 6;
            let n = entries[i..]
                .iter()
                .take_while(|&&(_, l)| l >> 6 == table)
                .count();
            let live = self.cfg.pte_locks
                && self
                    .leaf_entry_line(mm_id, va)
                    .is_some_and(|l| l >> 6 == table);
            let ptl = if live {
                self.ptl_lock(hw, line, what)
            } else {
                None
            };
            for &(_, line) in &entries[i..i + n] {
                hw.atomic(line);
            }
            self.ptl_unlock(hw, ptl);
            i += n;
        }
    }

    /// `cycles` of `va`'s path in `mm_id` under the split lock of the table
    /// holding its leaf entry (`kernel.pte_locks`), as the table is when the
    /// CPU gets there; without the lock, or when the table has no frame,
    /// the cycles alone. Fault-around's window: `filemap_map_pages` maps it
    /// under one lock of the PTE table (`map_pages_per_pte_cycles` a page).
    pub fn ptl_cycles(&mut self, hw: &mut Hw, mm_id: usize, va: u64, cycles: u64, what: KFn) {
        let ptl = self.ptl_lock_at(hw, self.leaf_entry_line(mm_id, va), what);
        hw.charge(cycles);
        self.ptl_unlock(hw, ptl);
    }

    /// One table's share of fork's copy (`kernel.pte_locks`): the child's
    /// entries `vas` of `dst` (one PMD slot's: a PTE table's present
    /// entries, `copy_pte_range`, or one huge PMD, `copy_huge_pmd`) copied
    /// from `src`. The child's tables on the way are allocated first
    /// (`pte_alloc_map_lock`, `pmd_alloc`); then the child's table's lock
    /// is taken, then the parent's (`spin_lock_nested`), and under both
    /// the copy's `cycles` (`COPY_ENTRY_CYCLES` an entry, kernel/fork.rs)
    /// and the child's stores; the parent's lock goes first.
    ///
    /// `copy_pte_range` drops both locks and takes them again only when,
    /// every 32 units of progress, `need_resched()` or (with
    /// `CONFIG_PREEMPT`) `spin_needbreak()` says so; the model's fork runs
    /// whole and nobody waits on a lock mid-path, so it takes them once.
    pub fn copy_table_locked(
        &mut self,
        hw: &mut Hw,
        dst: usize,
        src: usize,
        vas: &[u64],
        cycles: u64,
    ) {
        let Some(&first) = vas.first() else {
            hw.charge(cycles);
            return;
        };
        let leaf = self.alloc_pgtables(hw, dst, first);
        let dst_line = leaf.and_then(|l| self.mms[dst].pt.line(first, l));
        let dst_ptl = self.ptl_lock_at(hw, dst_line, KFn::Fork);
        let src_ptl = self.ptl_lock_at(hw, self.leaf_entry_line(src, first), KFn::Fork);
        hw.charge(cycles);
        if let Some(leaf) = leaf {
            for &va in vas {
                if let Some(line) = self.mms[dst].pt.line(va, leaf) {
                    hw.store(line);
                }
            }
        }
        self.ptl_unlock(hw, src_ptl);
        self.ptl_unlock(hw, dst_ptl);
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
    pub(crate) fn ptl_lock(&mut self, hw: &mut Hw, line: u64, what: KFn) -> Option<SpinRef> {
        if !self.cfg.pte_locks {
            return None;
        }
        let table = line >> 6;
        let word = self.mem.vmemmap.as_ref()?.page_line(table);
        let sl = self.locks.spin.as_mut()?;
        let r = sl.ptl(table, word);
        let imp = sl.imp;
        hw.settle(what);
        sl.lock_of(r).lock(hw, imp, &mut self.locks.stats);
        hw.settle(KFn::SpinLock);
        Some(r)
    }

    /// [`Kernel::ptl_lock`] of the table holding `line`, if there is one
    /// (None: the table has no frame, so no lock is taken).
    pub(crate) fn ptl_lock_at(
        &mut self,
        hw: &mut Hw,
        line: Option<u64>,
        what: KFn,
    ) -> Option<SpinRef> {
        line.and_then(|l| self.ptl_lock(hw, l, what))
    }

    /// `spin_unlock` of a lock [`Kernel::ptl_lock`] took (nothing for None).
    pub(crate) fn ptl_unlock(&mut self, hw: &mut Hw, ptl: Option<SpinRef>) {
        if let (Some(r), Some(sl)) = (ptl, self.locks.spin.as_mut()) {
            sl.lock_of(r).unlock(hw, &mut self.locks.stats);
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
            if let Some(sl) = self.locks.spin.as_mut() {
                sl.drop_ptl(pfn);
            }
            self.mem.alloc.free(pfn);
            self.pgtable.pgtable_free += 1;
            self.pgtable.nr_page_table_pages -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KernelConfig;
    use crate::kernel::locking::spinlock::SpinImpl;
    use crate::kernel::locking::test_hw::{e5_preset, machine, on};
    use crate::kernel::mm::{Pte, VmaKind};

    fn kernel() -> Kernel {
        let preset = e5_preset();
        let cfg = KernelConfig {
            struct_pages: true,
            spinlocks: Some(SpinImpl::Queued),
            page_tables: true,
            pte_locks: true,
            ..KernelConfig::default()
        };
        Kernel::new(cfg, preset.kernel_costs(), 2, 64 << 20)
    }

    fn ptl_frames(k: &Kernel) -> Vec<u64> {
        k.locks.spin.as_ref().unwrap().ptl_frames().collect()
    }

    #[test]
    fn queued_entry_work_takes_no_lock_of_a_table_freed_meanwhile() {
        let mut k = kernel();
        let mut m = machine();
        let mm = k.new_mm();
        let a = k.mms[mm].mmap(4 << 20, VmaKind::AnonPrivate, true);
        let b = a + (2 << 20);
        k.mms[mm].set_pte(a, Pte::new(1000, true));
        k.mms[mm].set_pte(b, Pte::new(1001, true));
        on(&mut m, 0, |hw| {
            k.set_entry_at(hw, mm, a, true);
            k.set_entry_at(hw, mm, b, true);
        });
        let (la, lb) = (
            k.leaf_entry_line(mm, a).unwrap(),
            k.leaf_entry_line(mm, b).unwrap(),
        );
        assert_eq!(ptl_frames(&k), {
            let mut v = vec![la >> 6, lb >> 6];
            v.sort();
            v
        });
        // A hint fault's restore of `a` is queued; then `a`'s table goes
        // (its entry zapped, free_pgtables), and its lock with it.
        k.mms[mm].ptep_get_and_clear(a);
        k.mms[mm].pmds.remove(&(a >> PMD_SHIFT));
        k.free_pgtables(mm, false);
        assert_eq!(ptl_frames(&k), vec![lb >> 6]);
        let taken = k
            .locks
            .stats
            .get(crate::kernel::locking::LockClass::PteLock)
            .acquisitions;
        on(&mut m, 0, |hw| {
            k.entry_rmws(hw, mm, &[(a, la), (b, lb)], KFn::HandleMmFault);
        });
        // `b`'s table is locked; `a`'s frame gets no lock made for it.
        assert_eq!(ptl_frames(&k), vec![lb >> 6]);
        let s = k
            .locks
            .stats
            .get(crate::kernel::locking::LockClass::PteLock);
        assert_eq!(s.acquisitions, taken + 1);
    }
}
