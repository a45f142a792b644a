//! hugetlbfs memory (mm/hugetlb.c): per-node pools of 2 MiB and 1 GiB huge
//! pages filled from the page allocator at start (as `nr_hugepages` set at
//! boot), `MAP_HUGETLB` faults (`hugetlb_fault` → `hugetlb_no_page` →
//! `folio_zero_user`), and the return of unmapped folios to the pool.
//!
//! Invariants: a pool folio is either on its node's free list or mapped by
//! exactly one PMD (2 MiB) or PUD (1 GiB) entry; pool folios never go back to
//! the page allocator during a run.

use super::memory::FaultError;
use super::mm::{Pte, Vma, VmaKind, PUD_SHIFT};
use super::mmzone::hstate;
use super::page_alloc::HPAGE_PMD_ORDER;
use super::{KFn, KStep, Kernel, Work};
use std::collections::VecDeque;

impl Kernel {
    /// Grows the pool of `1 << shift` pages on `node` by `count` pages taken
    /// from the page allocator (`echo N > .../node*/hugepages/.../nr_hugepages`,
    /// done before the workload starts). Returns how many pages it got.
    pub fn hugetlb_reserve(&mut self, node: usize, shift: u32, count: u64) -> u64 {
        let h = hstate(shift);
        let mut got = 0;
        while got < count {
            let pfn = if shift == PUD_SHIFT {
                self.mem.alloc.alloc_gigantic(node)
            } else {
                self.mem.alloc.alloc(node, HPAGE_PMD_ORDER)
            };
            let Some(pfn) = pfn else { break };
            self.mem.hugetlb.free[h][node].push(pfn);
            got += 1;
        }
        // Hand out the lowest addresses first.
        self.mem.hugetlb.free[h][node].sort_unstable_by(|a, b| b.cmp(a));
        self.mem.hugetlb.nr_huge_pages[h][node] += got;
        got
    }

    /// `hugetlb_fault()` on a `MAP_HUGETLB` VMA with pages of `1 << shift`,
    /// taken on a CPU of `node`: a not-present entry goes to `hugetlb_no_page()`.
    pub(super) fn hugetlb_fault(
        &mut self,
        mm_id: usize,
        addr: u64,
        shift: u32,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<(), FaultError> {
        self.vmstat.hugetlb_faults += 1;
        let mm = &self.mms[mm_id];
        let present = if shift == PUD_SHIFT {
            !mm.pud_is_none(addr)
        } else {
            !mm.pmd_is_none(addr)
        };
        if present {
            return Ok(()); // already mapped: nothing to do
        }
        self.hugetlb_no_page(mm_id, addr, shift, node, work)
    }

    /// `hugetlb_no_page()`: take a folio from the pool (`alloc_hugetlb_folio`,
    /// local node first), zero it with the faulting address as the hint, map it.
    fn hugetlb_no_page(
        &mut self,
        mm_id: usize,
        addr: u64,
        shift: u32,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<(), FaultError> {
        let h = hstate(shift);
        let n = self.mem.alloc.nr_nodes;
        // dequeue_hugetlb_folio_nodemask(): the local node, then the others in zonelist order.
        let nd = (0..n)
            .map(|i| (node + i) % n)
            .find(|&nd| !self.mem.hugetlb.free[h][nd].is_empty())
            .ok_or(FaultError::Oom)?;
        let pfn = self.mem.hugetlb.free[h][nd].pop().expect("non-empty");
        // The THP fault path's software cost stands in for hugetlb's (no separate estimate).
        let c = self.costs.thp_fault_handler_cycles + self.costs.page_alloc_cycles;
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::HandleMmFault,
        });
        self.folio_zero_user(pfn, 1 << (shift - 12), addr, work);
        let haddr = addr & !((1u64 << shift) - 1);
        work.push_back(if shift == PUD_SHIFT {
            Work::Kernel(KStep::InstallPud {
                mm: mm_id,
                haddr,
                pfn,
            })
        } else {
            Work::Kernel(KStep::InstallPmd {
                mm: mm_id,
                haddr,
                pfn,
                orig: None,
            })
        });
        Ok(())
    }

    /// `set_huge_pte_at()` on a PUD after rechecking `huge_pte_none` under the
    /// page-table lock; false (the folio goes back to the pool) if another
    /// thread mapped the page first.
    pub fn install_pud(&mut self, mm_id: usize, haddr: u64, pfn: u64) -> bool {
        if !self.mms[mm_id].pud_is_none(haddr) {
            self.hugetlb_backout(pfn, PUD_SHIFT);
            return false;
        }
        self.mem.alloc.folios[pfn as usize].mapcount = 1;
        self.mms[mm_id].set_pud_huge(haddr, Pte::new(pfn, true));
        true
    }

    /// `hugetlb_no_page()`'s `backout:` path: the folio it took returns to its node's pool.
    pub(super) fn hugetlb_backout(&mut self, pfn: u64, shift: u32) {
        self.vmstat.fault_race_backouts += 1;
        let node = self.mem.alloc.node_of_pfn(pfn);
        self.mem.hugetlb.free[hstate(shift)][node].push(pfn);
    }

    /// Called by munmap with the folios the unmapped VMA held: hugetlb folios
    /// go back to their node's pool (`free_huge_folio`); the rest is returned
    /// for the page allocator.
    pub fn hugetlb_unmap(&mut self, vma: &Vma, freed: Vec<(u64, bool)>) -> Vec<(u64, bool)> {
        let VmaKind::Hugetlb(shift) = vma.kind else {
            return freed;
        };
        let h = hstate(shift);
        for (pfn, _) in freed {
            self.mem.alloc.folios[pfn as usize].mapcount = 0;
            let node = self.mem.alloc.node_of_pfn(pfn);
            self.mem.hugetlb.free[h][node].push(pfn);
        }
        Vec::new()
    }
}
