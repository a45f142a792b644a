//! The page-fault handler for anonymous memory (mm/memory.c,
//! mm/huge_memory.c): `handle_mm_fault` → `do_huge_pmd_anonymous_page` or
//! `do_anonymous_page`, and the huge-page clear `clear_huge_page` with the
//! policy-selected order.

use super::mm::{Pte, VmaKind, PMD_SIZE};
use super::page_alloc::{HPAGE_PMD_NR, HPAGE_PMD_ORDER, TAG_ZERO};
use super::page_alloc::PageAlloc;
use super::{instr, Kernel, StoreHow, VmStat, Work};
use crate::policy::{ClearPage, Thp};
use std::collections::VecDeque;

#[derive(Debug)]
pub enum FaultError {
    /// No VMA covers the address.
    Segv(u64),
    /// A write to a read-only VMA.
    Protection(u64),
    /// No memory on any node.
    Oom,
}

impl Kernel {
    /// Handles a fault at `addr` taken on `cpu` (NUMA node `node`): queues the
    /// hardware work on `work` and changes kernel state.
    pub fn handle_mm_fault(&mut self, mm_id: usize, addr: u64, write: bool, node: usize, work: &mut VecDeque<Work>) -> Result<(), FaultError> {
        let mm = &self.mms[mm_id];
        let vma = mm.find_vma(addr).ok_or(FaultError::Segv(addr))?.clone();
        if write && !vma.writable {
            return Err(FaultError::Protection(addr));
        }
        self.vmstat.pgfault += 1;
        work.push_back(Work::Cycles { cycles: self.costs.exception_entry_exit_cycles, instructions: 0 });
        if let VmaKind::Hugetlb(shift) = vma.kind {
            self.hugetlb_fault(mm_id, addr, shift, node, work)?;
            work.push_back(Work::ReturnToUser);
            return Ok(());
        }
        let haddr = addr & !(PMD_SIZE - 1);
        let thp_ok = self.cfg.thp == Thp::Always && haddr >= vma.start && haddr + PMD_SIZE <= vma.end && mm.pmd_is_none(addr);
        if thp_ok && self.do_huge_pmd_anonymous_page(mm_id, addr, node, work) {
            work.push_back(Work::ReturnToUser);
            return Ok(());
        }
        self.do_anonymous_page(mm_id, addr, node, work)?;
        work.push_back(Work::ReturnToUser);
        Ok(())
    }

    fn alloc_near(&mut self, node: usize, order: u32) -> Option<u64> {
        // Local node first, then the others in order (the default policy's zonelist).
        let n = self.alloc.nr_nodes;
        (0..n).map(|i| (node + i) % n).find_map(|nd| self.alloc.alloc(nd, order))
    }

    /// Returns false when no huge page could be had (the caller falls back to 4 KiB).
    fn do_huge_pmd_anonymous_page(&mut self, mm_id: usize, addr: u64, node: usize, work: &mut VecDeque<Work>) -> bool {
        // THP allocations do not fall back to remote nodes by default (__GFP_THISNODE in
        // the defrag-less fault path of the kernels modeled); they fall back to 4 KiB pages.
        let Some(pfn) = self.alloc.alloc(node, HPAGE_PMD_ORDER) else {
            self.vmstat.thp_fault_fallback += 1;
            return false;
        };
        self.vmstat.pgfault_thp += 1;
        self.vmstat.thp_fault_alloc += 1;
        self.vmstat.pgalloc += HPAGE_PMD_NR;
        work.push_back(Work::Cycles {
            cycles: self.costs.thp_fault_handler_cycles + self.costs.page_alloc_cycles,
            instructions: self.costs.thp_fault_handler_cycles + self.costs.page_alloc_cycles,
        });
        self.clear_huge_page(pfn, addr, work);
        let haddr = addr & !(PMD_SIZE - 1);
        work.push_back(Work::InstallPmd { mm: mm_id, haddr, pfn });
        true
    }

    fn do_anonymous_page(&mut self, mm_id: usize, addr: u64, node: usize, work: &mut VecDeque<Work>) -> Result<(), FaultError> {
        let pfn = self.alloc_near(node, 0).ok_or(FaultError::Oom)?;
        self.vmstat.pgfault_anon_4k += 1;
        self.vmstat.pgalloc += 1;
        work.push_back(Work::Cycles {
            cycles: self.costs.page_fault_handler_cycles + self.costs.page_alloc_cycles,
            instructions: self.costs.page_fault_handler_cycles + self.costs.page_alloc_cycles,
        });
        self.clear_user_highpage(pfn, work);
        work.push_back(Work::InstallPte { mm: mm_id, addr: addr & !4095, pfn, writable: true });
        Ok(())
    }

    fn clear_user_highpage(&mut self, pfn: u64, work: &mut VecDeque<Work>) {
        clear_user_highpage(&mut self.alloc, &mut self.vmstat, self.cfg.clear_page, pfn, work);
    }

    /// `clear_huge_page(page, addr_hint, pages_per_huge_page)` of a 2 MiB THP:
    /// `folio_zero_user()` with the policy's order (kernel/folio_zero.rs).
    pub fn clear_huge_page(&mut self, pfn: u64, addr_hint: u64, work: &mut VecDeque<Work>) {
        self.folio_zero_user(pfn, HPAGE_PMD_NR, addr_hint, work);
    }

    pub fn install_pmd(&mut self, mm_id: usize, haddr: u64, pfn: u64) {
        self.alloc.folios[pfn as usize].mapcount = 1;
        self.mms[mm_id].set_pmd_huge(haddr, Pte { pfn, writable: true });
    }

    pub fn install_pte(&mut self, mm_id: usize, addr: u64, pfn: u64, writable: bool) {
        self.alloc.folios[pfn as usize].mapcount = 1;
        self.mms[mm_id].set_pte(addr, Pte { pfn, writable });
    }
}

/// `clear_user_highpage()` → `clear_page()`: one 4 KiB page.
pub(super) fn clear_user_highpage(alloc: &mut PageAlloc, vmstat: &mut VmStat, variant: ClearPage, pfn: u64, work: &mut VecDeque<Work>) {
    alloc.tags[pfn as usize] = TAG_ZERO;
    vmstat.subpage_clears += 1;
    let (how, instructions) = match variant {
        ClearPage::Erms => (StoreHow::String, instr::CLEAR_PAGE_ERMS),
        ClearPage::Orig => (StoreHow::MovLoop, 0), // counted per line by the executor
    };
    work.push_back(Work::Cycles { cycles: 0, instructions: instructions + instr::SUBPAGE_STEP });
    work.push_back(Work::Clear { line: pfn << 6, nlines: 64, how });
}
