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
//!   (`ptep_modify_prot_start`), and `remove_migration_ptes` stores the new
//!   entry.
//!
//! Invariants: a table has a frame from the first entry written into its
//! range until `free_pgtables` finds its range empty; the frames are never
//! on an LRU list nor mapped to user space; every frame is returned to the
//! allocator by the mm's exit.

use super::hw::Hw;
use super::mm::{Level, Pmd, PAGE_SIZE, PMD_SHIFT, PUD_SHIFT};
use super::Kernel;

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
    /// stored.
    pub fn set_entry_at(&mut self, hw: &mut Hw, mm_id: usize, va: u64) {
        if let Some(leaf) = self.alloc_pgtables(hw, mm_id, va) {
            if let Some(line) = self.mms[mm_id].pt.line(va, leaf) {
                hw.store(line);
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
    /// `hw.cpu` (`ptep_get_and_clear`, `ptep_test_and_clear_young`,
    /// `ptep_modify_prot_start`). Returns the cycles of the path's fixed
    /// cost that the access now stands for (the locked operation's own
    /// issue cycles), 0 when page tables are not in memory.
    pub fn entry_rmw(&mut self, hw: &mut Hw, mm_id: usize, va: u64) -> u64 {
        let Some(line) = self.leaf_entry_line(mm_id, va) else {
            return 0;
        };
        hw.atomic(line);
        super::hw::LOCKED_RMW_CYCLES
    }

    /// A store to `va`'s leaf entry in `mm_id` on `hw.cpu`
    /// (`set_pte_at` over an existing table: `remove_migration_ptes`).
    pub fn entry_store(&mut self, hw: &mut Hw, mm_id: usize, va: u64) {
        if let Some(line) = self.leaf_entry_line(mm_id, va) {
            hw.store(line);
        }
    }

    /// The line of `va`'s leaf entry in `mm_id`, if page tables are in
    /// memory and its table has a frame.
    fn leaf_entry_line(&self, mm_id: usize, va: u64) -> Option<u64> {
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
            self.alloc.free(pfn);
            self.pgtable.pgtable_free += 1;
            self.pgtable.nr_page_table_pages -= 1;
        }
    }
}
