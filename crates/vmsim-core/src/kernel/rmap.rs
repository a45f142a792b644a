//! The reverse map of page-cache folios (mm/rmap.c): every PTE that maps a
//! folio is found through its file's `i_mmap` (the VMAs mapping the file,
//! standing for the interval tree) and the folio's index, as
//! `rmap_walk_file` does. `folio_referenced` tests and clears the young
//! bits the modeled hardware walk set; `try_to_unmap_one` clears a PTE and
//! drops its mapping (the TLB flush is the caller's, kernel/vmscan.rs).
//!
//! `flush_tlb_batched_pending` (mm/rmap.c) lives here too: it reads the
//! mm's `tlb_flush_batched` count that reclaim's batched unmaps raise.
//!
//! Invariant: the walk finds exactly the PTEs whose frame is the folio's
//! (a test maps one folio from several processes and counts them).

use super::hw::Hw;
use super::mm::{Pte, VmaKind};
use super::tlbflush::flush_tlb_mm_range;
use super::{KFn, Kernel};

impl Kernel {
    /// `rmap_walk_file`: every (mm, address) whose PTE maps page-cache folio `pfn`.
    pub fn rmap_walk_file(&self, pfn: u64) -> Vec<(usize, u64)> {
        let Some(&(ino, index)) = self.pagecache.owner.get(&pfn) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for &(mm, start) in &self.pagecache.inodes[ino].i_mmap {
            let Some(vma) = self.mms[mm].find_vma(start) else {
                continue;
            };
            let VmaKind::FileShared { pgoff, .. } = vma.kind else {
                continue;
            };
            if index < pgoff {
                continue;
            }
            let va = start + ((index - pgoff) << 12);
            if va < vma.end && self.mms[mm].entry(va).is_some_and(|p| p.pfn == pfn) {
                out.push((mm, va));
            }
        }
        out
    }

    /// `folio_referenced`: how many of the folio's PTEs were young (each is
    /// cleared, without a flush as on x86), and how many PTEs were visited.
    pub fn folio_referenced(&mut self, pfn: u64) -> (u32, u32) {
        let maps = self.rmap_walk_file(pfn);
        let mut young = 0;
        for &(mm, va) in &maps {
            if self.mms[mm].pte_test_and_clear_young(va) {
                young += 1;
            }
        }
        (young, maps.len() as u32)
    }

    /// With `kernel.page_tables`, the locked read-modify-write that
    /// `folio_referenced` does on each PTE mapping page-cache folio `pfn`
    /// (`ptep_test_and_clear_young`), on `hw.cpu`; returns the fixed-cost
    /// cycles those accesses now stand for (kernel/pgtable.rs).
    pub fn rmap_entry_rmws(&mut self, hw: &mut Hw, pfn: u64) -> u64 {
        if !self.page_tables() {
            return 0;
        }
        let mut moved = 0;
        for (mm, va) in self.rmap_walk_file(pfn) {
            moved += self.entry_rmw(hw, mm, va, KFn::FolioReferenced);
        }
        moved
    }

    /// The page-table part of `try_to_unmap_one` for one mapping: clears the
    /// PTE and drops its reference (`folio_remove_rmap_pte` + `folio_put`;
    /// the page cache keeps its own). Returns the entry that was cleared.
    pub fn try_to_unmap_one(&mut self, mm: usize, va: u64) -> Option<Pte> {
        let old = self.mms[mm].ptep_get_and_clear(va)?;
        let freed = self.mem.alloc.put_folio(old.pfn);
        debug_assert_eq!(freed, 0, "the page cache holds a reference");
        Some(old)
    }
}

impl Kernel {
    /// `flush_tlb_mm_range(mm, start, end)`: the entries of [start, end) of
    /// `mm_id` flushed from every TLB that may hold them (locally, and by
    /// shootdown on the mm's other CPUs), from `hw.cpu`; the caller settles
    /// the time.
    pub fn flush_tlb_range(&mut self, hw: &mut Hw, mm_id: usize, start: u64, end: u64) {
        flush_tlb_mm_range(
            hw.machine,
            &mut self.vmstat,
            hw.cpu,
            &mut self.mms[mm_id],
            hw.tlbstate,
            start,
            end,
            self.cfg.tlb_single_page_flush_ceiling,
        );
    }

    /// `flush_tlb_page()`: the 4 KiB entry at `addr` of `mm_id`.
    pub fn flush_tlb_page(&mut self, hw: &mut Hw, mm_id: usize, addr: u64) {
        self.flush_tlb_range(hw, mm_id, addr, addr + 4096);
    }

    /// `flush_tlb_batched_pending(mm)`, called on `hw.cpu` by a page-table
    /// walker that changes PTEs of `mm_id` (`zap_pte_range`; Linux also calls
    /// it from `change_pte_range`, `move_ptes` and the madvise walkers): if a
    /// batched unmap of the mm may be unflushed, flush the whole mm
    /// (`flush_tlb_mm`) before going on, so no TLB keeps an entry for a PTE
    /// this walker may now change or free. Returns whether it flushed.
    pub fn flush_tlb_batched_pending(&mut self, hw: &mut Hw, mm_id: usize) -> bool {
        if !self.mms[mm_id].take_tlb_flush_batched_pending() {
            return false;
        }
        self.flush_tlb_range(hw, mm_id, 0, u64::MAX);
        hw.settle(KFn::FlushTlb);
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::filemap::tests::kernel;
    use std::collections::VecDeque;

    #[test]
    fn rmap_finds_every_mapping_of_a_folio() {
        let mut k = kernel();
        let ino = k.create_sparse_file(64 * 4096);
        let other = k.create_sparse_file(64 * 4096);
        // Three processes map the file, one of them twice; a fourth maps another file.
        let mut maps = Vec::new();
        for _ in 0..3 {
            let mm = k.new_mm();
            maps.push((mm, k.mmap_file(mm, ino, 64 * 4096)));
        }
        let mm0 = maps[0].0;
        maps.push((mm0, k.mmap_file(mm0, ino, 64 * 4096)));
        let mm4 = k.new_mm();
        let o = k.mmap_file(mm4, other, 64 * 4096);
        for &(mm, base) in maps.iter().chain([(mm4, o)].iter()) {
            let mut w = VecDeque::new();
            k.handle_mm_fault(mm, base + 7 * 4096, false, 0, &mut w)
                .unwrap();
            for item in w {
                if let crate::kernel::Work::Kernel(crate::kernel::KStep::InstallFilePte {
                    mm,
                    addr,
                    ino,
                    index,
                    pfn,
                }) = item
                {
                    assert!(k.install_file_pte(mm, addr, ino, index, pfn));
                }
            }
        }
        let pfn = k.find_get_page(ino, 7).unwrap();
        let mut found = k.rmap_walk_file(pfn);
        found.sort();
        let mut want: Vec<(usize, u64)> = maps.iter().map(|&(mm, b)| (mm, b + 7 * 4096)).collect();
        want.sort();
        assert_eq!(found, want);
        assert_eq!(k.mem.alloc.folio_mapcount(pfn), 4);
        // All four were young (just mapped); the walk clears them.
        assert_eq!(k.folio_referenced(pfn), (4, 4));
        assert_eq!(k.folio_referenced(pfn), (0, 4));
        // Unmapping every mapping leaves the page cache's reference only.
        for (mm, va) in found {
            assert!(k.try_to_unmap_one(mm, va).is_some());
        }
        assert!(k.rmap_walk_file(pfn).is_empty());
        assert_eq!(
            (
                k.mem.alloc.folio_mapcount(pfn),
                k.mem.alloc.folios[pfn as usize].refcount
            ),
            (0, 1)
        );
    }
}
