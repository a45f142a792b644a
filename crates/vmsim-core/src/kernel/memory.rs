//! The page-fault handler for anonymous memory (mm/memory.c,
//! mm/huge_memory.c): `handle_mm_fault` → `do_huge_pmd_anonymous_page` or
//! `do_anonymous_page` for a missing page, `do_huge_pmd_wp_page` or
//! `do_wp_page` for a write to a present read-only page (copy-on-write after
//! fork); the huge-page clear `clear_huge_page` and copy
//! `copy_user_huge_page`, both in the policy-selected order.

use super::mm::{pte_index, Pmd, Pte, VmaKind, PMD_SHIFT, PMD_SIZE};
use super::page_alloc::PageAlloc;
use super::page_alloc::{HPAGE_PMD_NR, HPAGE_PMD_ORDER, TAG_ZERO};
use super::policy::cow::{check_copy, CopyCtx, CowAction, CowCtx};
use super::policy::numa::{HintCtx, HintOrder};
use super::{instr, KFn, KStep, Kernel, StoreHow, VmStat, Work};
use crate::policy::{ClearPage, Thp};
use std::collections::VecDeque;

/// Cycles to turn one huge PMD into 512 PTEs (`__split_huge_pmd_locked()`):
/// per PTE, a `set_pte_at` and a locked increment of the sub-page's mapcount.
/// Estimate from that structure (a locked RMW costs some 20 cycles on
/// Haswell-class cores), not a measurement.
pub const SPLIT_PMD_PER_PTE_CYCLES: u64 = 25;

/// How much a fault mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapped {
    /// A PMD: the whole 2 MiB around the address.
    Huge,
    /// One 4 KiB PTE.
    Small,
}

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
    pub fn handle_mm_fault(
        &mut self,
        mm_id: usize,
        addr: u64,
        write: bool,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<(), FaultError> {
        let vma = self.mms[mm_id]
            .find_vma(addr)
            .ok_or(FaultError::Segv(addr))?;
        if write && !vma.writable {
            return Err(FaultError::Protection(addr));
        }
        work.push_back(Work::Cycles {
            cycles: self.costs.exception_entry_exit_cycles,
            instructions: 0,
            what: KFn::ExcPageFault,
        });
        // do_user_addr_fault(): mmap_read_trylock() for the whole fault
        // (kernel.rwsems; its cost is the fixed costs' otherwise).
        let locked = self.locks.rwsem.is_some();
        if locked {
            work.push_back(Work::Kernel(KStep::MmapReadLock { mm: mm_id }));
        }
        // hugetlb_faults counts a hugetlb fault whatever its outcome.
        let hugetlb = matches!(vma.kind, VmaKind::Hugetlb(_));
        let r = self.__handle_mm_fault(mm_id, addr, write, node, work);
        if r.is_err() && !hugetlb {
            self.vmstat.pgfault_failed += 1;
        }
        self.queue_pending_wakes(work, KFn::HandleMmFault);
        if locked {
            work.push_back(Work::Kernel(KStep::MmapReadUnlock { mm: mm_id }));
        }
        r?;
        work.push_back(Work::ReturnToUser);
        Ok(())
    }

    /// `faultin_page()` of `__get_user_pages()` (MAP_POPULATE, `mm_populate()`):
    /// the same fault handling, entered from the kernel with no exception.
    pub fn faultin_page(
        &mut self,
        mm_id: usize,
        addr: u64,
        write: bool,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<Mapped, FaultError> {
        let vma = self.mms[mm_id]
            .find_vma(addr)
            .ok_or(FaultError::Segv(addr))?;
        if write && !vma.writable {
            return Err(FaultError::Protection(addr));
        }
        // hugetlb_faults counts a hugetlb fault whatever its outcome.
        let hugetlb = matches!(vma.kind, VmaKind::Hugetlb(_));
        let r = self.__handle_mm_fault(mm_id, addr, write, node, work);
        if r.is_err() && !hugetlb {
            self.vmstat.pgfault_failed += 1;
        }
        self.queue_pending_wakes(work, KFn::HandleMmFault);
        r
    }

    fn __handle_mm_fault(
        &mut self,
        mm_id: usize,
        addr: u64,
        write: bool,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<Mapped, FaultError> {
        let mm = &self.mms[mm_id];
        let vma = mm.find_vma(addr).ok_or(FaultError::Segv(addr))?;
        self.vmstat.pgfault += 1;
        if let VmaKind::Hugetlb(shift) = vma.kind {
            self.hugetlb_fault(mm_id, addr, shift, node, work)?;
            return Ok(Mapped::Huge);
        }
        if let VmaKind::FileShared { .. } = vma.kind {
            if mm.entry(addr).is_some() {
                self.vmstat.pgfault_file_vma += 1;
                return Ok(Mapped::Small); // spurious: mapped meanwhile
            }
            self.do_read_fault(mm_id, addr, node, work)?;
            self.vmstat.pgfault_file_vma += 1;
            return Ok(Mapped::Small);
        }
        let haddr = addr & !(PMD_SIZE - 1);
        match mm.pmds.get(&(addr >> PMD_SHIFT)) {
            Some(Pmd::Huge(p)) if p.protnone => {
                return Ok(self.do_numa_page(mm_id, addr, node, work, Mapped::Huge))
            }
            Some(Pmd::Table(t)) if t[pte_index(addr)].is_some_and(|p| p.migration) => {
                let pfn = t[pte_index(addr)].unwrap().pfn;
                self.vmstat.pgfault_migration_wait += 1;
                self.migration_entry_wait(mm_id, addr, pfn, work);
                return Ok(Mapped::Small);
            }
            Some(Pmd::Table(t)) if t[pte_index(addr)].is_some_and(|p| p.protnone) => {
                return Ok(self.do_numa_page(mm_id, addr, node, work, Mapped::Small));
            }
            Some(Pmd::Huge(p)) => {
                if write && !p.writable {
                    return self.do_huge_pmd_wp_page(mm_id, addr, node, work, false);
                }
                self.vmstat.pgfault_spurious += 1;
                return Ok(Mapped::Huge); // spurious: the entry already allows the access
            }
            Some(Pmd::Table(t)) => {
                if let Some(p) = t[pte_index(addr)] {
                    if write && !p.writable {
                        return self.do_wp_page(mm_id, addr, node, work);
                    }
                    self.vmstat.pgfault_spurious += 1;
                    return Ok(Mapped::Small);
                }
            }
            None => {}
        }
        // hugepage_vma_check(): the sysfs mode and the VMA's madvise flags.
        let wanted = match self.cfg.thp {
            Thp::Always => !vma.nohugepage,
            Thp::Madvise => vma.hugepage && !vma.nohugepage,
            Thp::Never => false,
        };
        let thp_ok =
            wanted && haddr >= vma.start && haddr + PMD_SIZE <= vma.end && mm.pmd_is_none(addr);
        if thp_ok && self.do_huge_pmd_anonymous_page(mm_id, addr, node, work) {
            return Ok(Mapped::Huge);
        }
        self.do_anonymous_page(mm_id, addr, node, work)?;
        Ok(Mapped::Small)
    }

    /// `do_numa_page()` / `do_huge_pmd_numa_page()`: an access to a PROT_NONE
    /// entry of an accessible VMA (a NUMA hinting fault), by task `current`
    /// on a CPU of `node` (docs/mechanisms.md#the-hinting-fault). The policy decides when
    /// the entry becomes accessible again: before the migration is tried
    /// (`map-then-migrate`, before 5.13) or only if the page is not
    /// migrated (`migrate-then-map`, 5.13+). Huge PMDs get their protection
    /// back and stay where they are (THP migration is not modelled).
    fn do_numa_page(
        &mut self,
        mm_id: usize,
        addr: u64,
        node: usize,
        work: &mut VecDeque<Work>,
        m: Mapped,
    ) -> Mapped {
        let super::sched::state::Current { cpu, pid } = self.sched.current;
        self.vmstat.numa_hint_faults += 1;
        let c = self.costs.page_fault_handler_cycles;
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::HandleMmFault,
        });
        let orig = self.mms[mm_id].entry(addr).expect("a PROT_NONE entry");
        let page_nid = self.mem.alloc.node_of_pfn(orig.pfn);
        if page_nid == node {
            self.vmstat.numa_hint_faults_local += 1;
        }
        if m == Mapped::Huge {
            self.mms[mm_id].set_protnone(addr, false);
            self.restore_numa_entry(mm_id, addr, work);
            return m;
        }
        let hint = HintCtx {
            page_node: page_nid,
            cpu_node: node,
        };
        let map_first = match self.cfg.numa_hint_fault.decide(&hint) {
            Ok(order) => order == HintOrder::MapThenMigrate,
            Err(e) => {
                let name = self.cfg.numa_hint_fault.name().to_string();
                self.policy_failed("numa_hint_fault", &name, e);
                false
            }
        };
        if map_first {
            // The PTE is accessible again before the migration is tried.
            self.mms[mm_id].set_protnone(addr, false);
            self.restore_numa_entry(mm_id, addr, work);
        }
        // numa_migrate_prep() → mpol_misplaced() → should_numa_migrate_memory().
        let (migrate, last) = self.should_numa_migrate_memory(pid, orig.pfn, cpu, node);
        let target = (migrate && page_nid != node).then_some(node);
        let mut failed = false;
        let mut mem_node = page_nid;
        match target {
            Some(t) if self.migrate_misplaced_page(mm_id, addr, orig.pfn, t, work) => {
                mem_node = t;
            }
            Some(_) => failed = true,
            None => {}
        }
        if !map_first && mem_node == page_nid {
            // out_map: not migrated; restore the entry if it is still the one
            // the fault saw (a racing fault may have restored it already).
            if self.mms[mm_id].entry(addr).is_some_and(|p| p.same(&orig)) {
                self.mms[mm_id].set_protnone(addr, false);
                self.restore_numa_entry(mm_id, addr, work);
            }
        }
        self.task_numa_fault(pid, mm_id, last, mem_node, node, failed);
        m
    }

    /// The hint fault's restore of the entry it found PROT_NONE
    /// (`ptep_modify_prot_start`/`commit`, an exchange, under the table's
    /// lock; `do_huge_pmd_numa_page`'s `pmd_modify` under `pmd_lock`) as a
    /// locked operation on its line (`kernel.page_tables`, the lock with
    /// `kernel.pte_locks`); nothing without page tables in memory.
    fn restore_numa_entry(&mut self, mm_id: usize, addr: u64, work: &mut VecDeque<Work>) {
        if let Some(line) = self.leaf_entry_line(mm_id, addr) {
            work.push_back(Work::Kernel(KStep::EntryRmw {
                mm: mm_id,
                entries: vec![(addr, line)],
                what: KFn::HandleMmFault,
            }));
        }
    }

    /// A fault on a migration entry (`migration_entry_wait`): the task
    /// waits for the migration to end, then retries.
    fn migration_entry_wait(
        &mut self,
        mm_id: usize,
        addr: u64,
        pfn: u64,
        work: &mut VecDeque<Work>,
    ) {
        self.numa.stat.migration_entry_waits += 1;
        work.push_back(Work::Kernel(KStep::WaitMigration {
            mm: mm_id,
            addr: addr & !4095,
            pfn,
        }));
    }

    pub(super) fn alloc_near(&mut self, node: usize, order: u32) -> Option<u64> {
        // Local node first, then the others in order (the default policy's zonelist).
        let n = self.mem.alloc.nr_nodes;
        (0..n)
            .map(|i| (node + i) % n)
            .find_map(|nd| self.alloc_pages_node(nd, order))
    }

    /// Returns false when no huge page could be had (the caller falls back to 4 KiB).
    fn do_huge_pmd_anonymous_page(
        &mut self,
        mm_id: usize,
        addr: u64,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> bool {
        // THP allocations do not fall back to remote nodes by default (__GFP_THISNODE in
        // the defrag-less fault path of the kernels modeled); they fall back to 4 KiB pages.
        let pfn = self.alloc_pages_node(node, HPAGE_PMD_ORDER);
        self.queue_pending_wakes(work, KFn::HandleMmFault);
        let Some(pfn) = pfn else {
            self.vmstat.thp_fault_fallback += 1;
            return false;
        };
        self.vmstat.pgfault_thp += 1;
        self.vmstat.thp_fault_alloc += 1;
        self.vmstat.pgalloc += HPAGE_PMD_NR;
        work.push_back(Work::Cycles {
            cycles: self.costs.thp_fault_handler_cycles + self.costs.page_alloc_cycles,
            instructions: self.costs.thp_fault_handler_cycles + self.costs.page_alloc_cycles,
            what: KFn::HandleMmFault,
        });
        self.rmqueue_lock(pfn, HPAGE_PMD_ORDER, work);
        self.clear_huge_page(pfn, addr, work);
        let haddr = addr & !(PMD_SIZE - 1);
        work.push_back(Work::Kernel(KStep::InstallPmd {
            mm: mm_id,
            haddr,
            pfn,
            orig: None,
        }));
        true
    }

    fn do_anonymous_page(
        &mut self,
        mm_id: usize,
        addr: u64,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<(), FaultError> {
        let pfn = self.alloc_near(node, 0).ok_or(FaultError::Oom)?;
        self.vmstat.pgfault_anon_4k += 1;
        self.vmstat.pgalloc += 1;
        work.push_back(Work::Cycles {
            cycles: self.costs.page_fault_handler_cycles + self.costs.page_alloc_cycles,
            instructions: self.costs.page_fault_handler_cycles + self.costs.page_alloc_cycles,
            what: KFn::HandleMmFault,
        });
        self.rmqueue_lock(pfn, 0, work);
        self.clear_user_highpage(pfn, work);
        work.push_back(Work::Kernel(KStep::InstallPte {
            mm: mm_id,
            addr: addr & !4095,
            pfn,
            writable: true,
            orig: None,
        }));
        Ok(())
    }

    /// `do_huge_pmd_wp_page()`: a write to a read-only huge PMD. The only
    /// mapper left reuses the huge page; otherwise `thp_cow` decides: copy the
    /// huge page (4.18 .. 5.7) or split the PMD and copy 4 KiB (5.8+).
    ///
    /// With `kernel.struct_pages` the reuse test runs under the page lock, in
    /// simulated time: the fault queues that part (`locked` false) and it
    /// comes back here with the lock taken and released (`locked` true;
    /// kernel/huge_memory_wp.rs).
    pub(super) fn do_huge_pmd_wp_page(
        &mut self,
        mm_id: usize,
        addr: u64,
        node: usize,
        work: &mut VecDeque<Work>,
        locked: bool,
    ) -> Result<Mapped, FaultError> {
        let haddr = addr & !(PMD_SIZE - 1);
        let old = match self.mms[mm_id].pmds.get(&(addr >> PMD_SHIFT)) {
            Some(Pmd::Huge(p)) => *p,
            _ => unreachable!("do_huge_pmd_wp_page without a huge PMD"),
        };
        if self.cfg.struct_pages && !locked {
            return Ok(self.queue_wp_huge_page_locked(mm_id, addr, old.pfn, node, work));
        }
        let ctx = CowCtx {
            nr_pages: HPAGE_PMD_NR,
            exclusive: self.mem.alloc.folio_mapcount(old.pfn) == 1,
        };
        let action = match self.cfg.thp_cow.decide(&ctx) {
            Ok(CowAction::Reuse) if !ctx.exclusive => Err(
                "decided to reuse a huge page another process still maps (copy-on-write would let it see this write)".to_string(),
            ),
            r => r,
        };
        let action = match action {
            Ok(a) => a,
            Err(e) => {
                let name = self.cfg.thp_cow.name().to_string();
                self.policy_failed("thp_cow", &name, e);
                // Splitting is correct whatever the page's sharing; the run stops.
                CowAction::Split
            }
        };
        if action == CowAction::Reuse {
            // Reuse: pmd_mkwrite, no copy, no flush (the entry only gains permission).
            self.vmstat.pgfault_cow_thp += 1;
            self.vmstat.cow_reuse += 1;
            self.mms[mm_id].make_writable(haddr);
            let c = self.costs.page_fault_handler_cycles;
            work.push_back(Work::Cycles {
                cycles: c,
                instructions: c,
                what: KFn::HandleMmFault,
            });
            return Ok(Mapped::Huge);
        }
        if action == CowAction::Copy {
            // alloc_hugepage_vma(): local node only, as for the anonymous THP fault.
            let new = self.alloc_pages_node(node, HPAGE_PMD_ORDER);
            self.queue_pending_wakes(work, KFn::HandleMmFault);
            if let Some(new) = new {
                self.vmstat.pgfault_cow_thp += 1;
                self.vmstat.thp_cow_copies += 1;
                self.vmstat.pgalloc += HPAGE_PMD_NR;
                let c = self.costs.thp_fault_handler_cycles + self.costs.page_alloc_cycles;
                work.push_back(Work::Cycles {
                    cycles: c,
                    instructions: c,
                    what: KFn::HandleMmFault,
                });
                self.rmqueue_lock(new, HPAGE_PMD_ORDER, work);
                // 4.18+: addr_hint = vmf->address, the fault address rounded down to 4 KiB.
                self.copy_user_huge_page(new, old.pfn, addr & !4095, work);
                // pmdp_huge_clear_flush_notify(), set_pmd_at(new), page_remove_rmap + put_page(old).
                work.push_back(Work::Kernel(KStep::FlushTlbRange {
                    mm: mm_id,
                    start: haddr,
                    end: haddr + PMD_SIZE,
                    stride_shift: PMD_SHIFT,
                }));
                work.push_back(Work::Kernel(KStep::InstallPmd {
                    mm: mm_id,
                    haddr,
                    pfn: new,
                    orig: Some(old),
                }));
                work.push_back(Work::Kernel(KStep::PutPage { pfn: old.pfn }));
                return Ok(Mapped::Huge);
            }
            // No huge page: split and copy 4 KiB, as 4.18's fallback does.
            self.vmstat.thp_fault_fallback += 1;
        }
        self.split_huge_pmd(mm_id, haddr, work);
        self.do_wp_page(mm_id, addr, node, work)
    }

    /// `__split_huge_pmd()`: the PMD becomes 512 PTEs of the same folio, each
    /// a mapping of its own; the huge TLB entry is flushed (`pmdp_invalidate`).
    pub fn split_huge_pmd(&mut self, mm_id: usize, haddr: u64, work: &mut VecDeque<Work>) {
        let p = self.mms[mm_id].split_huge_pmd(haddr);
        self.mem
            .alloc
            .map_folio(p.pfn, HPAGE_PMD_NR as u32 - 1, false);
        self.vmstat.thp_split_pmd += 1;
        let c = SPLIT_PMD_PER_PTE_CYCLES * HPAGE_PMD_NR;
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::SplitHugePmd,
        });
        work.push_back(Work::Kernel(KStep::FlushTlbRange {
            mm: mm_id,
            start: haddr,
            end: haddr + PMD_SIZE,
            stride_shift: PMD_SHIFT,
        }));
    }

    /// `do_wp_page()`: a write to a read-only PTE. Reuses the page when this is
    /// its only mapping (the folio's mapcount is 1, as `page_count == 1` in 5.9+),
    /// else `wp_page_copy()`: a new page, `copy_user_highpage()`, the PTE
    /// replaced and flushed, the old page's mapping dropped.
    fn do_wp_page(
        &mut self,
        mm_id: usize,
        addr: u64,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<Mapped, FaultError> {
        let addr = addr & !4095;
        let old = self.mms[mm_id].lookup(addr).expect("present PTE");
        debug_assert!(!old.writable && !old.huge);
        self.vmstat.pgfault_cow_4k += 1;
        if self.mem.alloc.folio_mapcount(old.pfn) == 1 {
            self.vmstat.cow_reuse += 1;
            self.mms[mm_id].make_writable(addr);
            let c = self.costs.page_fault_handler_cycles;
            work.push_back(Work::Cycles {
                cycles: c,
                instructions: c,
                what: KFn::HandleMmFault,
            });
            return Ok(Mapped::Small);
        }
        let new = self.alloc_near(node, 0);
        self.queue_pending_wakes(work, KFn::HandleMmFault);
        let new = new.ok_or(FaultError::Oom)?;
        self.vmstat.pgalloc += 1;
        let c = self.costs.page_fault_handler_cycles + self.costs.page_alloc_cycles;
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::HandleMmFault,
        });
        self.rmqueue_lock(new, 0, work);
        copy_user_highpage(
            &mut self.mem.alloc,
            &mut self.vmstat,
            self.cfg.clear_page,
            new,
            old.pfn,
            work,
        );
        work.push_back(Work::Kernel(KStep::FlushTlbRange {
            mm: mm_id,
            start: addr,
            end: addr + 4096,
            stride_shift: 12,
        }));
        work.push_back(Work::Kernel(KStep::InstallPte {
            mm: mm_id,
            addr,
            pfn: new,
            writable: true,
            orig: self.mms[mm_id].entry(addr),
        }));
        work.push_back(Work::Kernel(KStep::PutPage { pfn: old.pfn }));
        Ok(Mapped::Small)
    }

    fn clear_user_highpage(&mut self, pfn: u64, work: &mut VecDeque<Work>) {
        clear_user_highpage(
            &mut self.mem.alloc,
            &mut self.vmstat,
            self.cfg.clear_page,
            pfn,
            work,
        );
    }

    /// `clear_huge_page(page, addr_hint, pages_per_huge_page)` of a 2 MiB THP:
    /// `folio_zero_user()` with the policy's order (kernel/folio_zero.rs).
    pub fn clear_huge_page(&mut self, pfn: u64, addr_hint: u64, work: &mut VecDeque<Work>) {
        self.folio_zero_user(pfn, HPAGE_PMD_NR, addr_hint, work);
    }

    /// `copy_user_huge_page(dst, src, addr_hint, vma, pages_per_huge_page)`
    /// (4.18 .. ~6.4; later `copy_user_large_folio()`), order by policy.
    pub fn copy_user_huge_page(
        &mut self,
        dst: u64,
        src: u64,
        addr_hint: u64,
        work: &mut VecDeque<Work>,
    ) {
        let skip = self.skip_copy_subpage.take();
        let ctx = CopyCtx {
            nr_pages: HPAGE_PMD_NR,
            target: (addr_hint >> 12) & (HPAGE_PMD_NR - 1),
        };
        let plan = &self.cfg.copy_huge_page;
        let mut order = Vec::with_capacity(HPAGE_PMD_NR as usize);
        // The built-in orders are proved by kernel/policy/cow.rs's tests.
        let checked = plan.checked(plan.plan(&ctx, &mut order), || {
            check_copy(&ctx, &order).map_err(|e| {
                format!(
                    "{e} (a huge page of {} sub-pages, target sub-page {})",
                    ctx.nr_pages, ctx.target
                )
            })
        });
        if let Err(e) = checked {
            let name = plan.name().to_string();
            self.policy_failed("copy_huge_page", &name, e);
            return;
        }
        let (alloc, vmstat, how) = (&mut self.mem.alloc, &mut self.vmstat, self.cfg.clear_page);
        // copy_subpage()
        for i in order {
            if Some(i) != skip {
                copy_user_highpage(alloc, vmstat, how, dst + i, src + i, work);
            } // else: injected defect, the sub-page keeps its stale contents
        }
    }

    /// `set_pmd_at()` of a freshly cleared or copied huge folio, after
    /// rechecking the entry under the page-table lock (`pmd_none` or
    /// `pmd_same(orig)`). False if another thread changed it first: the folio
    /// is released (`folio_put`, or back to the hugetlb pool) and nothing is mapped.
    pub fn install_pmd(&mut self, mm_id: usize, haddr: u64, pfn: u64, orig: Option<Pte>) -> bool {
        let mm = &self.mms[mm_id];
        let cur = match mm.pmds.get(&(haddr >> PMD_SHIFT)) {
            None => None,
            Some(Pmd::Huge(p)) => Some(*p),
            Some(Pmd::Table(_)) => {
                return self.backout_pmd(mm_id, haddr, pfn);
            }
        };
        let same = match (cur, orig) {
            (None, None) => true,
            (Some(c), Some(o)) => c.same(&o),
            _ => false,
        };
        if !same {
            return self.backout_pmd(mm_id, haddr, pfn);
        }
        self.mem.alloc.map_folio(pfn, 1, true);
        self.mms[mm_id].set_pmd_huge(haddr, Pte::new(pfn, true));
        true
    }

    fn backout_pmd(&mut self, mm_id: usize, haddr: u64, pfn: u64) -> bool {
        if let Some(VmaKind::Hugetlb(shift)) = self.mms[mm_id].find_vma(haddr).map(|v| v.kind) {
            self.hugetlb_backout(pfn, shift);
        } else {
            self.vmstat.fault_race_backouts += 1;
            self.vmstat.pgfree += HPAGE_PMD_NR;
            self.mem.alloc.free(pfn);
        }
        false
    }

    /// `set_pte_at()` of a freshly cleared or copied 4 KiB folio after the
    /// recheck under the page-table lock (`pte_none` or `pte_same(orig)`, and
    /// no huge mapping installed meanwhile); false, with the page freed, if
    /// another thread changed the entry first.
    pub fn install_pte(
        &mut self,
        mm_id: usize,
        addr: u64,
        pfn: u64,
        writable: bool,
        orig: Option<Pte>,
    ) -> bool {
        let mm = &self.mms[mm_id];
        let cur = match mm.pmds.get(&(addr >> PMD_SHIFT)) {
            Some(Pmd::Huge(_)) => Some(None),
            Some(Pmd::Table(t)) => Some(t[pte_index(addr)]),
            None => None,
        };
        let same = match (cur, orig) {
            // No PTE table yet (pte_alloc makes one) or an empty slot.
            (None, None) | (Some(None), None) => {
                !matches!(mm.pmds.get(&(addr >> PMD_SHIFT)), Some(Pmd::Huge(_)))
            }
            (Some(Some(c)), Some(o)) => c.same(&o),
            _ => false,
        };
        if !same {
            self.vmstat.fault_race_backouts += 1;
            self.vmstat.pgfree += 1;
            self.mem.alloc.free(pfn);
            return false;
        }
        self.mem.alloc.map_folio(pfn, 1, true);
        self.mms[mm_id].set_pte(addr, Pte::new(pfn, writable));
        true
    }

    /// Drops one mapping of the folio holding `pfn`; returns the 4 KiB frames
    /// freed (counted as `pgfree`).
    pub fn put_page(&mut self, pfn: u64) -> u64 {
        let freed = self.mem.alloc.put_folio(pfn);
        self.vmstat.pgfree += freed;
        freed
    }
}

/// `clear_user_highpage()` → `clear_page()`: one 4 KiB page.
pub(super) fn clear_user_highpage(
    alloc: &mut PageAlloc,
    vmstat: &mut VmStat,
    variant: ClearPage,
    pfn: u64,
    work: &mut VecDeque<Work>,
) {
    alloc.tags[pfn as usize] = TAG_ZERO;
    vmstat.subpage_clears += 1;
    let (how, instructions) = match variant {
        ClearPage::Erms => (StoreHow::String, instr::CLEAR_PAGE_ERMS),
        ClearPage::Orig => (StoreHow::MovLoop, 0), // counted per line by the executor
    };
    work.push_back(Work::Cycles {
        cycles: 0,
        instructions: instructions + instr::SUBPAGE_STEP,
        what: KFn::ClearPage,
    });
    work.push_back(Work::Clear {
        line: pfn << 6,
        nlines: 64,
        how,
    });
}

/// `copy_user_highpage()` → `copy_page()`: one 4 KiB page. The destination
/// takes the source's content tag at once; the lines move in simulated time.
///
/// arch/x86/lib/copy_page_64.S: `copy_page` is `rep movsq` over 512 quadwords
/// when the CPU has X86_FEATURE_REP_GOOD, else `copy_page_regs`, an unrolled
/// loop of 8 `movq` loads and 8 `movq` stores per 64 B. The model takes the
/// string form where `clear_page` uses `rep stosb` (every ERMS machine also has
/// REP_GOOD) and the loop where it uses `clear_page_orig`.
fn copy_user_highpage(
    alloc: &mut PageAlloc,
    vmstat: &mut VmStat,
    variant: ClearPage,
    dst: u64,
    src: u64,
    work: &mut VecDeque<Work>,
) {
    alloc.tags[dst as usize] = alloc.tags[src as usize];
    vmstat.subpage_copies += 1;
    let (how, instructions) = match variant {
        ClearPage::Erms => (StoreHow::String, instr::COPY_PAGE_REP),
        ClearPage::Orig => (StoreHow::MovLoop, 0), // counted per line by the executor
    };
    work.push_back(Work::Cycles {
        cycles: 0,
        instructions: instructions + instr::SUBPAGE_STEP,
        what: KFn::CopyPage,
    });
    work.push_back(Work::Copy {
        src_line: src << 6,
        dst_line: dst << 6,
        nlines: 64,
        how,
    });
}

pub(crate) fn fault_error(t: usize, e: FaultError) -> crate::error::Error {
    match e {
        // The workload's accesses are the user's (a program, a trace): a
        // signal the real kernel would send is the workload's error.
        FaultError::Segv(a) => crate::error::Error::Config {
            key: "workload".into(),
            message: format!("task {t}: segmentation fault (SIGSEGV) at {a:#x}: no mapping there"),
        },
        FaultError::Protection(a) => crate::error::Error::Config {
            key: "workload".into(),
            message: format!("task {t}: segmentation fault (SIGSEGV) at {a:#x}: a write to a read-only mapping"),
        },
        // The configuration gave the workload too little memory: the user's to fix.
        FaultError::Oom => crate::error::Error::Config {
            key: "sim.node_memory_mib".into(),
            message: format!("task {t} ran out of simulated memory; raise it, or set 0 to size memory from the workload"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KernelConfig;
    use crate::kernel::huge_memory::process_huge_page_order;
    use crate::kernel::locking::test_hw::e5_preset;
    use crate::policy::HugePageOrder;

    fn kernel(order: HugePageOrder) -> Kernel {
        let preset = e5_preset();
        let cfg = KernelConfig {
            clear_huge_page: crate::policy::ClearHugePage::from(order).into(),
            copy_huge_page: order.into(),
            thp_cow: crate::policy::ThpCow::Copy.into(),
            ..KernelConfig::default()
        };
        Kernel::new(cfg, preset.kernel_costs(), 1, 16 << 20)
    }

    /// Sub-page indices in the order their clears / copies were queued.
    fn clear_order(work: &VecDeque<Work>, base: u64) -> Vec<u64> {
        work.iter()
            .filter_map(|w| {
                if let Work::Clear { line, .. } = w {
                    Some((line >> 6) - base)
                } else {
                    None
                }
            })
            .collect()
    }
    fn copy_order(work: &VecDeque<Work>, dst: u64, src: u64) -> Vec<u64> {
        work.iter()
            .filter_map(|w| match w {
                Work::Copy {
                    src_line, dst_line, ..
                } => {
                    assert_eq!(
                        (dst_line >> 6) - dst,
                        (src_line >> 6) - src,
                        "sub-page i is copied to sub-page i"
                    );
                    Some((dst_line >> 6) - dst)
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn one_order_implementation_serves_clear_and_copy() {
        for order in [HugePageOrder::Sequential, HugePageOrder::TargetLast] {
            for n in [0u64, 1, 100, 255, 256, 300, 510, 511] {
                let mut k = kernel(order);
                let (a, b, c) = (
                    k.mem.alloc.alloc(0, 9).unwrap(),
                    k.mem.alloc.alloc(0, 9).unwrap(),
                    k.mem.alloc.alloc(0, 9).unwrap(),
                );
                let hint = (5u64 << 21) + n * 4096 + 17;
                let mut w = VecDeque::new();
                k.clear_huge_page(a, hint, &mut w);
                let cleared = clear_order(&w, a);
                let mut w = VecDeque::new();
                k.copy_user_huge_page(c, b, hint, &mut w);
                let copied = copy_order(&w, c, b);
                let want = match order {
                    HugePageOrder::Sequential => (0..512).collect::<Vec<_>>(),
                    HugePageOrder::TargetLast => process_huge_page_order(n, 512),
                };
                assert_eq!(cleared, want, "{order:?} n={n}");
                assert_eq!(copied, want, "{order:?} n={n}");
            }
        }
    }

    #[test]
    fn copy_moves_tags_and_keeps_the_source() {
        let mut k = kernel(HugePageOrder::TargetLast);
        let (src, dst) = (
            k.mem.alloc.alloc(0, 9).unwrap(),
            k.mem.alloc.alloc(0, 9).unwrap(),
        );
        for i in 0..512 {
            k.mem.alloc.tags[(src + i) as usize] = 1000 + i;
        }
        let mut w = VecDeque::new();
        k.copy_user_huge_page(dst, src, 7 << 21, &mut w);
        for i in 0..512 {
            assert_eq!(k.mem.alloc.tag(dst + i), 1000 + i);
            assert_eq!(k.mem.alloc.tag(src + i), 1000 + i);
        }
        assert_eq!(k.vmstat.subpage_copies, 512);
    }

    #[test]
    fn skipped_copy_leaves_the_stale_tag() {
        let mut k = kernel(HugePageOrder::TargetLast);
        k.skip_copy_subpage = Some(9);
        let (src, dst) = (
            k.mem.alloc.alloc(0, 9).unwrap(),
            k.mem.alloc.alloc(0, 9).unwrap(),
        );
        let stale = k.mem.alloc.tag(dst + 9);
        let mut w = VecDeque::new();
        k.copy_user_huge_page(dst, src, 0, &mut w);
        assert_eq!(k.mem.alloc.tag(dst + 9), stale);
        assert_ne!(stale, k.mem.alloc.tag(src + 9));
        assert_eq!(copy_order(&w, dst, src).len(), 511);
        assert_eq!(
            k.skip_copy_subpage, None,
            "only the first huge copy is affected"
        );
    }
}
