//! Page-table pages in simulated memory (`kernel.page_tables`): each level
//! of an address space's four-level x86-64 table (PGD, PUD, PMD, PTE pages
//! of 512 eight-byte entries) is a 4 KiB frame taken from the page
//! allocator, so that the hardware walker and the kernel's own walks read
//! and write entries through the caches, and the tables take memory.
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
use super::mm::{Pmd, PAGE_SIZE, PMD_SHIFT, PUD_SHIFT};
use super::Kernel;
use std::collections::BTreeMap;

/// x86-64's `PGDIR_SHIFT` with four-level paging: one PGD entry maps 512 GiB.
pub const PGDIR_SHIFT: u32 = 39;

/// The level of a page-table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Pgd,
    Pud,
    Pmd,
    Pte,
}

/// Which frame holds which table of one mm.
#[derive(Clone, Debug, Default)]
pub struct PgTables {
    pgd: Option<u64>,
    /// PUD pages by `va >> PGDIR_SHIFT`.
    pud: BTreeMap<u64, u64>,
    /// PMD pages by `va >> PUD_SHIFT`.
    pmd: BTreeMap<u64, u64>,
    /// PTE pages by `va >> PMD_SHIFT`.
    pte: BTreeMap<u64, u64>,
}

/// The line holding entry `index` of the table in frame `pfn`.
#[inline]
fn entry_line(pfn: u64, index: u64) -> u64 {
    (pfn << 6) | ((index & 511) >> 3)
}

impl PgTables {
    /// The line of `va`'s entry at `level`, if that table has a frame.
    #[inline]
    pub fn line(&self, va: u64, level: Level) -> Option<u64> {
        let (pfn, shift) = match level {
            Level::Pgd => (self.pgd?, PGDIR_SHIFT),
            Level::Pud => (*self.pud.get(&(va >> PGDIR_SHIFT))?, PUD_SHIFT),
            Level::Pmd => (*self.pmd.get(&(va >> PUD_SHIFT))?, PMD_SHIFT),
            Level::Pte => (*self.pte.get(&(va >> PMD_SHIFT))?, 12),
        };
        Some(entry_line(pfn, va >> shift))
    }

    /// Frames held by this mm's tables.
    pub fn nr_tables(&self) -> u64 {
        self.pgd.is_some() as u64 + (self.pud.len() + self.pmd.len() + self.pte.len()) as u64
    }

    /// The tables on the way to `va`'s entry at `leaf` that have no frame
    /// yet, top down, with where each would be recorded.
    fn missing(&self, va: u64, leaf: Level) -> Vec<Level> {
        let mut out = Vec::new();
        if self.pgd.is_none() {
            out.push(Level::Pgd);
        }
        if !self.pud.contains_key(&(va >> PGDIR_SHIFT)) {
            out.push(Level::Pud);
        }
        if leaf != Level::Pud && !self.pmd.contains_key(&(va >> PUD_SHIFT)) {
            out.push(Level::Pmd);
        }
        if leaf == Level::Pte && !self.pte.contains_key(&(va >> PMD_SHIFT)) {
            out.push(Level::Pte);
        }
        out
    }

    fn record(&mut self, va: u64, table: Level, pfn: u64) {
        match table {
            Level::Pgd => self.pgd = Some(pfn),
            Level::Pud => {
                self.pud.insert(va >> PGDIR_SHIFT, pfn);
            }
            Level::Pmd => {
                self.pmd.insert(va >> PUD_SHIFT, pfn);
            }
            Level::Pte => {
                self.pte.insert(va >> PMD_SHIFT, pfn);
            }
        }
    }
}

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
        if !self.page_tables() {
            return 0;
        }
        let mm = &self.mms[mm_id];
        let Some(line) = leaf_level(mm, va).and_then(|l| mm.pt.line(va, l)) else {
            return 0;
        };
        hw.atomic(line);
        super::hw::LOCKED_RMW_CYCLES
    }

    /// A store to `va`'s leaf entry in `mm_id` on `hw.cpu`
    /// (`set_pte_at` over an existing table: `remove_migration_ptes`).
    pub fn entry_store(&mut self, hw: &mut Hw, mm_id: usize, va: u64) {
        if !self.page_tables() {
            return;
        }
        let mm = &self.mms[mm_id];
        if let Some(line) = leaf_level(mm, va).and_then(|l| mm.pt.line(va, l)) {
            hw.store(line);
        }
    }

    /// `free_pgtables()` of `mm_id` after a range was unmapped: every table
    /// whose range maps nothing any more goes back to the allocator; with
    /// `all` (the mm's exit), the PGD too.
    pub fn free_pgtables(&mut self, mm_id: usize, all: bool) {
        if !self.page_tables() {
            return;
        }
        let mm = &mut self.mms[mm_id];
        let mut freed = Vec::new();
        let pmds = &mm.pmds;
        mm.pt.pte.retain(|k, pfn| {
            let keep = matches!(pmds.get(k), Some(Pmd::Table(_)));
            if !keep {
                freed.push(*pfn);
            }
            keep
        });
        let puds = &mm.puds;
        mm.pt.pmd.retain(|g, pfn| {
            let keep = pmds.range(g << 9..(g + 1) << 9).next().is_some();
            if !keep {
                freed.push(*pfn);
            }
            keep
        });
        let pmd_pages = &mm.pt.pmd;
        mm.pt.pud.retain(|t, pfn| {
            let r = t << 9..(t + 1) << 9;
            let keep =
                pmd_pages.range(r.clone()).next().is_some() || puds.range(r).next().is_some();
            if !keep {
                freed.push(*pfn);
            }
            keep
        });
        if all {
            freed.extend(mm.pt.pgd.take());
        }
        for pfn in freed {
            self.alloc.free(pfn);
            self.pgtable.pgtable_free += 1;
            self.pgtable.nr_page_table_pages -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_lines_follow_the_x86_64_index_split() {
        let mut pt = PgTables::default();
        let va: u64 = (3 << PGDIR_SHIFT) | (5 << PUD_SHIFT) | (17 << PMD_SHIFT) | (200 << 12);
        assert_eq!(pt.missing(va, Level::Pte).len(), 4);
        assert_eq!(pt.missing(va, Level::Pmd).len(), 3);
        assert_eq!(pt.missing(va, Level::Pud).len(), 2);
        pt.record(va, Level::Pgd, 10);
        pt.record(va, Level::Pud, 11);
        pt.record(va, Level::Pmd, 12);
        pt.record(va, Level::Pte, 13);
        assert!(pt.missing(va, Level::Pte).is_empty());
        // Eight entries a line: entry i of frame f is at line f*64 + i/8.
        assert_eq!(pt.line(va, Level::Pgd), Some(10 * 64));
        assert_eq!(pt.line(va, Level::Pud), Some(11 * 64));
        assert_eq!(pt.line(va, Level::Pmd), Some(12 * 64 + 2));
        assert_eq!(pt.line(va, Level::Pte), Some(13 * 64 + 25));
        // The next 2 MiB has no PTE table; the same PMD table holds its entry.
        let next = va + (1 << PMD_SHIFT);
        assert_eq!(pt.line(next, Level::Pte), None);
        assert_eq!(pt.line(next, Level::Pmd), Some(12 * 64 + 2));
        assert_eq!(pt.missing(next, Level::Pte), vec![Level::Pte]);
        assert_eq!(pt.nr_tables(), 4);
    }
}
