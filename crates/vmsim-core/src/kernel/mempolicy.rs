//! NUMA balancing's page-table side and placement decision
//! (mm/mempolicy.c, mm/mprotect.c, docs/mechanisms.md#the-scanner and docs/mechanisms.md#the-placement-decision):
//! `change_prot_numa` turns the present entries of a range PROT_NONE so the
//! next access takes a hinting fault; `mpol_misplaced` with
//! `should_numa_migrate_memory` decides at that fault whether the page
//! moves to the faulting CPU's node. Every frame keeps the `cpupid` (CPU
//! and pid) of the last hinting fault on it, for the two-stage filter.
//!
//! Not modelled: NUMA groups (`numa_group`: tasks sharing memory are not
//! grouped, so a shared fault from the destination node migrates, as the
//! kernel does for a task without a group); the task's preferred node
//! (`numa_preferred_nid` stays NUMA_NO_NODE: tasks are bound by the
//! workload and never placed by NUMA balancing); memory tiering; the VMA
//! PID filter and per-VMA scan delay of 6.4+.
//!
//! Invariants: an entry is made PROT_NONE only if it was present and its
//! folio is mapped once (a COW-shared folio is skipped, as current kernels
//! do); the range's TLB entries are flushed after the change (as mprotect
//! does, through `flush_tlb_mm_range`).

use super::mm::Level;
use super::mm::{pmd_keys, Pmd, VmaKind, PMD_SHIFT, PMD_SIZE};
use super::numa_balancing::{cpupid, cpupid_to_cpu, cpupid_to_pid, CPUPID_UNSET};
use super::{KFn, KStep, Kernel, Work};
use std::collections::VecDeque;

impl Kernel {
    /// `page_cpupid_xchg_last`: records `new` on the frame, returns what it held.
    pub fn page_cpupid_xchg_last(&mut self, pfn: u64, new: u32) -> u32 {
        std::mem::replace(&mut self.numa.last_cpupid[pfn as usize], new)
    }

    /// `change_prot_numa(vma, start, end)`: present entries of anonymous
    /// memory in [start, end) become PROT_NONE; the range is then flushed
    /// (queued on `work`). `this_node` is the scanning task's node, used as
    /// `change_pte_range`'s target node when the mm has one user. Returns
    /// the entries changed (`nr_updated`, a huge PMD counting 512).
    pub fn change_prot_numa(
        &mut self,
        mm_id: usize,
        start: u64,
        end: u64,
        this_node: usize,
        work: &mut VecDeque<Work>,
    ) -> u64 {
        let mm = &self.mms[mm_id];
        // target_node = numa_node_id() only for a private mm with one user.
        let target_node = (mm.mm_users == 1).then_some(this_node);
        let mut visited = 0u64;
        let mut nr = 0u64;
        let mut huge = 0u64;
        let keys: Vec<u64> = mm
            .pmds
            .range(pmd_keys(start, end))
            .map(|(k, _)| *k)
            .collect();
        let alloc = &self.mem.alloc;
        let mm = &mut self.mms[mm_id];
        // ptep_modify_prot_start() on each entry changed (kernel.page_tables).
        let mut rmw_lines = Vec::new();
        let in_memory = self.cfg.page_tables;
        for key in keys {
            let base = key << PMD_SHIFT;
            match mm.pmds.get_mut(&key).expect("key") {
                Pmd::Huge(p) => {
                    visited += 1;
                    // change_huge_pmd() on a PMD the range covers whole.
                    if base < start || base + PMD_SIZE > end {
                        continue;
                    }
                    // Unlike change_pte_range(), change_huge_pmd() (4.x to
                    // 6.x) skips only the huge zero page and an entry
                    // already PROT_NONE: a shared COW huge page, or one on
                    // the scanning task's node, is marked too.
                    if !p.accessible() {
                        continue;
                    }
                    p.protnone = true;
                    nr += 512;
                    huge += 1;
                    if in_memory {
                        rmw_lines.extend(mm.pt.line(base, Level::Pmd).map(|l| (base, l)));
                    }
                }
                Pmd::Table(t) => {
                    let lo = if base < start {
                        (start - base) >> 12
                    } else {
                        0
                    };
                    let hi = if base + PMD_SIZE > end {
                        (end - base) >> 12
                    } else {
                        512
                    };
                    for (i, e) in t[lo as usize..hi as usize].iter_mut().enumerate() {
                        let Some(e) = e else { continue };
                        visited += 1;
                        if !e.accessible()
                            || alloc.folio_mapcount(e.pfn) > 1
                            || Some(alloc.node_of_pfn(e.pfn)) == target_node
                        {
                            continue;
                        }
                        e.protnone = true;
                        nr += 1;
                        if in_memory {
                            let va = base + ((lo + i as u64) << 12);
                            rmw_lines.extend(mm.pt.line(va, Level::Pte).map(|l| (va, l)));
                        }
                    }
                }
            }
        }
        if nr > 0 {
            mm.generation += 1;
        }
        self.vmstat.numa_pte_updates += nr;
        self.vmstat.numa_huge_pte_updates += huge;
        // The locked exchanges below are part of the fixed cost no more.
        let moved = rmw_lines.len() as u64 * super::hw::LOCKED_RMW_CYCLES;
        let c = (visited * self.costs.change_pte_cycles).saturating_sub(moved);
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::TaskNumaWork,
        });
        if !rmw_lines.is_empty() {
            work.push_back(Work::Kernel(KStep::EntryRmw {
                mm: mm_id,
                entries: rmw_lines,
                what: KFn::TaskNumaWork,
            }));
        }
        if nr > 0 {
            // inc_tlb_flush_pending() before the change; tlb_finish_mmu()
            // flushes the gathered range (in full above the ceiling), then
            // dec_tlb_flush_pending().
            self.mms[mm_id].tlb_flush_pending += 1;
            work.push_back(Work::Kernel(KStep::FlushTlbRange {
                mm: mm_id,
                start,
                end,
                stride_shift: 12,
            }));
            work.push_back(Work::Kernel(KStep::DecTlbFlushPending { mm: mm_id }));
        }
        nr
    }

    /// `vma_migratable` and the scanner's other VMA checks: anonymous,
    /// not hugetlb, not a read-only file mapping.
    pub fn vma_numa_scannable(kind: VmaKind) -> bool {
        matches!(kind, VmaKind::AnonPrivate)
    }

    /// `should_numa_migrate_memory(p, page, src_nid, dst_cpu)` for task
    /// `pid` faulting on `pfn` from `dst_cpu` on node `dst_nid`. Records
    /// this fault's cpupid on the frame; returns the decision and the
    /// cpupid the frame held.
    pub fn should_numa_migrate_memory(
        &mut self,
        pid: usize,
        pfn: u64,
        dst_cpu: usize,
        dst_nid: usize,
    ) -> (bool, u32) {
        let this = cpupid(dst_cpu, pid);
        let last = self.page_cpupid_xchg_last(pfn, this);
        let unset = last == CPUPID_UNSET;
        let same_pid = !unset && cpupid_to_pid(last) == pid;
        // Early in the task's life, or with no preferred node (always, in the
        // model): a first fault or a private fault migrates at once.
        if unset || same_pid {
            return (true, last);
        }
        // Two-stage filter: the previous fault must have come from dst_nid too.
        if self.cpus.nodes.get(cpupid_to_cpu(last)).copied() != Some(dst_nid) {
            return (false, last);
        }
        // A shared fault; no numa_group: migrate.
        (true, last)
    }
}
