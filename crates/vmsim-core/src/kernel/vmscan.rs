//! Page reclaim (mm/vmscan.c) of page-cache folios, and the TLB flushing
//! it needs after unmapping (mm/rmap.c's `tlbflush_unmap_batch`,
//! docs/mechanisms.md#batched-tlb-flush-after-unmapping).
//!
//! `shrink_node` (one round: a `KStep::ShrinkNode` item, run by kswapd or in
//! direct reclaim) first deactivates from the active file list while the
//! inactive one is the smaller (`inactive_is_low` with `inactive_ratio` 1,
//! the value below 1 GiB), then isolates up to `SWAP_CLUSTER_MAX` (32, `kernel.swap_cluster_max`)
//! folios from the tail of the inactive list and sorts them in
//! `shrink_folio_list`: `folio_check_references` from the PTE young bits
//! (`folio_referenced`) and `PG_referenced` — young PTEs and an earlier
//! reference, or more than one young PTE, activate; one young PTE alone
//! sets `PG_referenced` and keeps the folio; no young PTE reclaims it. A
//! mapped folio to reclaim is unmapped from every PTE (`try_to_unmap`),
//! then taken out of the page cache leaving a shadow entry
//! (`__remove_mapping`, kernel/workingset.rs) and freed after the batch's
//! TLB flush. The files are sparse and never written, so every folio is
//! clean: there is no writeback and `try_to_unmap_flush_dirty` never
//! finds a dirty entry (it is called where the kernel calls it).
//!
//! TLB flushing by `kernel.tlb_flush_on_unmap`:
//! - `per-page`: `ptep_clear_flush` → `flush_tlb_page`: a
//!   `flush_tlb_mm_range` of one page per PTE cleared, an IPI round to the
//!   other CPUs running the mm (kernel/tlbflush.rs);
//! - `batched`: when another CPU may cache the mm (`should_defer_flush`:
//!   `mm_cpumask` has a CPU besides this one), the PTE is cleared without a
//!   flush and `set_tlb_ubc_flush_pending` ORs the mm's CPUs into the batch
//!   and bumps the mm's `tlb_gen`; `try_to_unmap_flush` at the end of the
//!   batch flushes the local TLB in full if this CPU is in the mask and
//!   sends one IPI to every other CPU of the mask that is not lazy (a
//!   batched flush has no mm, so `should_flush_tlb` skips only lazy CPUs),
//!   each flushing its whole TLB. Lazy CPUs catch up when they switch back
//!   (their `tlb_gen` is behind);
//! - `broadcast` (6.15+ with INVLPGB): deferred as `batched`, but
//!   `try_to_unmap_flush` issues one `invlpgb_flush_all_nonglobals`, which
//!   empties every CPU's TLB without an IPI;
//! - a user's policy may also flush a batch page by page (`full_flush`):
//!   each mm's deferred entries by one round of `flush_tlb_mm_pages`.
//!
//! Migration's batch (kernel/migrate.rs) is flushed here too, by the policy
//! of `kernel.migrate_tlb_flush`.
//!
//! A round's unmapping, flushing and freeing run together when its work
//! item executes, so no other CPU can run between a PTE clear and its
//! flush. Each batched unmap still counts in the mm's `tlb_flush_batched`
//! as in Linux, which resets nothing at `try_to_unmap_flush`: the next zap
//! of the mm flushes it once (`flush_tlb_batched_pending`, kernel/rmap.rs).
//!
//! Invariants: a folio is freed only after every TLB that may hold it was
//! flushed (the TLB truth check, sim/access.rs, would catch a
//! stale entry); a batched flush sends at most one IPI per CPU.

use super::hw::Hw;
use super::kthread::{KthreadFn, KthreadStep};
use super::locking::sections::{
    FREE_ONE_PAGE_INSTR, ISOLATE_INSTR, PUTBACK_INSTR, TREE_DELETE_INSTR,
};
use super::locking::spinlocks::SpinRef;
use super::mm::Mm;
use super::policy::registry::Hook;
use super::policy::tlb::{BatchFlush, FlushCtx, FlushKind, MaskSampled, UnmapFlush};
use super::reclaim::{PG_ACTIVE, PG_LRU, PG_REFERENCED};
use super::tlbflush::{flush_tlb_mm_pages, invlpgb_flush_all_nonglobals, TlbState};
use super::{KFn, KStep, Kernel, Work};
use crate::machine::ipi::CpuMask;
use std::collections::VecDeque;

/// `MAX_RECLAIM_RETRIES`: kswapd rounds without progress before it gives up on a node.
pub const MAX_RECLAIM_RETRIES: u32 = 16;

/// `struct tlbflush_unmap_batch` of the reclaiming task.
#[derive(Clone, Debug, Default)]
pub struct TlbflushUnmapBatch {
    pub cpumask: CpuMask,
    pub flush_required: bool,
    pub writable: bool,
    /// Entries deferred into the batch since its last flush.
    pub pending: u32,
    /// Those entries, `(mm, address)`, kept only for a user's policy (it may
    /// flush the batch page by page); Linux's batch keeps none.
    pub pages: Vec<(usize, u64)>,
}

impl TlbflushUnmapBatch {
    /// `set_tlb_ubc_flush_pending()` → `arch_tlbbatch_add_pending()` for an
    /// entry of `mm` just cleared: `inc_mm_tlb_gen`, the mm's CPUs into the
    /// batch, and the mm's `tlb_flush_batched` raised if the entry was
    /// present to the hardware; a dirty entry makes the batch writable.
    /// Reclaim's `try_to_unmap` and migration's unmap share it.
    pub fn set_tlb_ubc_flush_pending(&mut self, mm: &mut Mm, accessible: bool, dirty: bool) {
        mm.tlb_gen += 1;
        if !mm.inject_no_shootdown {
            self.cpumask.or(&mm.cpumask);
        }
        self.flush_required = true;
        self.pending += 1;
        if accessible {
            mm.set_tlb_flush_batched_pending();
        }
        if dirty {
            self.writable = true;
        }
    }
}

/// What `folio_check_references` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FolioRef {
    Activate,
    Keep,
    Reclaim,
}

/// kswapd of one node (mm/vmscan.c `kswapd`): sleeps on the node's
/// `kswapd_wait`; woken, it reclaims a round at a time until the node is
/// above its high watermark (`balance_pgdat`), or until
/// `MAX_RECLAIM_RETRIES` rounds in a row found nothing to reclaim.
pub struct Kswapd {
    pub node: usize,
}

impl KthreadFn for Kswapd {
    fn name(&self) -> String {
        format!("kswapd{}", self.node)
    }
    fn step(
        &mut self,
        k: &mut Kernel,
        _cpu: usize,
        _now: u64,
        work: &mut VecDeque<Work>,
    ) -> KthreadStep {
        let n = self.node;
        if k.mem.alloc.nr_free[n] >= k.mem.pgdat[n].wmark_high
            || k.reclaim.kswapd_failures[n] >= MAX_RECLAIM_RETRIES
        {
            return KthreadStep::Wait(k.mem.pgdat[n].kswapd_wait);
        }
        work.push_back(Work::Kernel(KStep::ShrinkNode {
            node: n,
            kswapd: true,
        }));
        KthreadStep::Continue
    }
}

impl Kernel {
    /// Page-cache folios on `node`'s LRU lists.
    pub fn nr_file_lru(&self, node: usize) -> usize {
        let l = &self.reclaim.lru.nodes[node];
        l.inactive_file.len() + l.active_file.len()
    }
}

impl Kernel {
    /// `__alloc_pages_direct_reclaim` at fault entry: when every node is at
    /// or below its min watermark, the faulting task reclaims a batch itself,
    /// from its own node first, then the others in zonelist order.
    pub(crate) fn direct_reclaim_if_needed(&mut self, hw: &mut Hw, node: usize) {
        let n = self.mem.alloc.nr_nodes;
        if (0..n).any(|nd| self.mem.alloc.nr_free[nd] > self.mem.pgdat[nd].wmark_min) {
            return;
        }
        self.reclaim.stat.allocstall += 1;
        hw.settle(KFn::ExcPageFault);
        for nd in (0..n).map(|i| (node + i) % n) {
            if self.shrink_node(hw, nd, false) > 0 {
                break;
            }
        }
        hw.settle(KFn::ShrinkFolioList);
    }

    /// One round of `shrink_node` on `node` from `cpu`; returns folios reclaimed.
    /// Any progress clears the node's `kswapd_failures`; kswapd counts a
    /// failure when its rounds since the last progress have scanned the
    /// node's file LRU twice over (standing for a `balance_pgdat` pass down
    /// every priority that reclaimed nothing).
    pub(crate) fn shrink_node(&mut self, hw: &mut Hw, node: usize, kswapd: bool) -> u64 {
        let before = hw.kfn_totals();
        let got = self.shrink_node_round(hw, node, kswapd);
        let after = hw.kfn_totals();
        let by_fn = &mut self.reclaim.cycles_by_fn[kswapd as usize];
        for (i, c) in by_fn.iter_mut().enumerate() {
            *c += after[i] - before[i];
        }
        got
    }

    fn shrink_node_round(&mut self, hw: &mut Hw, node: usize, kswapd: bool) -> u64 {
        let batch = self.cfg.tunables.swap_cluster_max as usize;
        let l = &self.reclaim.lru.nodes[node];
        // inactive_is_low(): inactive_ratio is 1 below 1 GiB of file LRU.
        if l.inactive_file.len() < l.active_file.len() {
            self.shrink_active_list(hw, node, batch);
        }
        let got = self.shrink_inactive_list(hw, node, batch, kswapd);
        if got > 0 {
            self.reclaim.kswapd_failures[node] = 0;
            self.reclaim.kswapd_noprogress_scan[node] = 0;
        } else if kswapd {
            let lru = self.nr_file_lru(node) as u64;
            let scanned = &mut self.reclaim.kswapd_noprogress_scan[node];
            *scanned += batch as u64;
            if *scanned > 2 * lru {
                *scanned = 0;
                self.reclaim.kswapd_failures[node] += 1;
            }
        }
        got
    }

    /// `shrink_active_list`: scans up to `nr` folios from the active list's
    /// tail and deactivates them (a referenced mapped file folio stays active
    /// only if executable, and none here is); their young bits are cleared.
    fn shrink_active_list(&mut self, hw: &mut Hw, node: usize, nr: usize) {
        let locks = self.locks.spin.is_some();
        let mut isolated = Vec::new();
        if locks {
            let l = &self.reclaim.lru.nodes[node].active_file;
            isolated.extend(l.iter().rev().take(nr));
            self.lru_section(hw, node, &isolated, ISOLATE_INSTR, KFn::IsolateLru);
        }
        // The fixed cost keeps what the sections do not take (sections.rs).
        let moved = self.moved_cycles(ISOLATE_INSTR + PUTBACK_INSTR, 2);
        let per_folio = self.costs.shrink_folio_cycles.saturating_sub(moved);
        for _ in 0..nr {
            let Some(pfn) = self.reclaim.lru.nodes[node].active_file.pop_back() else {
                break;
            };
            self.reclaim.stat.pgrefill += 1;
            hw.charge(per_folio);
            hw.settle(KFn::ShrinkActiveList);
            if self.mem.alloc.folio_mapcount(pfn) > 0 {
                let sem = self.i_mmap_lock_read(hw, pfn);
                let moved = self.rmap_entry_rmws(hw, pfn);
                let (_, visited) = self.folio_referenced(pfn);
                self.i_mmap_unlock_read(hw, sem);
                let c = (visited as u64 * self.costs.rmap_pte_cycles).saturating_sub(moved);
                hw.charge(c);
                hw.settle(KFn::FolioReferenced);
            }
            self.reclaim.lru.clear(pfn, PG_ACTIVE | PG_REFERENCED);
            self.reclaim.lru.nodes[node].inactive_file.push_front(pfn);
            self.reclaim.stat.pgdeactivate += 1;
        }
        if locks {
            // move_active_pages_to_lru() under the lock again.
            self.lru_section(hw, node, &isolated, PUTBACK_INSTR, KFn::PutbackLru);
        }
    }

    /// `shrink_inactive_list`: isolates up to `nr` folios from the tail of the
    /// inactive list and reclaims what `shrink_folio_list` can.
    fn shrink_inactive_list(&mut self, hw: &mut Hw, node: usize, nr: usize, kswapd: bool) -> u64 {
        let mut isolated = Vec::with_capacity(nr);
        while isolated.len() < nr {
            let Some(pfn) = self.reclaim.lru.nodes[node].inactive_file.pop_back() else {
                break;
            };
            self.reclaim.lru.clear(pfn, PG_LRU);
            isolated.push(pfn);
        }
        let scanned = isolated.len() as u64;
        // isolate_lru_pages() under the LRU lock (the lists were taken above).
        self.lru_section(hw, node, &isolated, ISOLATE_INSTR, KFn::IsolateLru);
        let (reclaimed, kept) = self.shrink_folio_list(hw, &isolated);
        // putback_inactive_pages() under it again.
        self.lru_section(hw, node, &kept, PUTBACK_INSTR, KFn::PutbackLru);
        let st = &mut self.reclaim.stat;
        if kswapd {
            st.pgscan_kswapd += scanned;
            st.pgsteal_kswapd += reclaimed;
        } else {
            st.pgscan_direct += scanned;
            st.pgsteal_direct += reclaimed;
        }
        reclaimed
    }

    /// A section of reclaim under `node`'s LRU lock over `folios`,
    /// `per_folio` instructions each (kernel/locking/sections.rs), its
    /// time `what`'s.
    fn lru_section(&mut self, hw: &mut Hw, node: usize, folios: &[u64], per_folio: u64, what: KFn) {
        let instr = per_folio * folios.len() as u64;
        self.spin_section(hw, SpinRef::Lru(node), folios, instr, what);
    }

    /// `folio_check_references`.
    fn folio_check_references(&mut self, hw: &mut Hw, pfn: u64) -> FolioRef {
        let (referenced_ptes, visited, moved) = if self.mem.alloc.folio_mapcount(pfn) > 0 {
            let sem = self.i_mmap_lock_read(hw, pfn);
            let moved = self.rmap_entry_rmws(hw, pfn);
            let (young, visited) = self.folio_referenced(pfn);
            self.i_mmap_unlock_read(hw, sem);
            (young, visited, moved)
        } else {
            (0, 0, 0)
        };
        let c = (visited as u64 * self.costs.rmap_pte_cycles).saturating_sub(moved);
        hw.charge(c);
        hw.settle(KFn::FolioReferenced);
        let referenced_folio = self.reclaim.lru.test(pfn, PG_REFERENCED);
        self.reclaim.lru.clear(pfn, PG_REFERENCED);
        if referenced_ptes > 0 {
            self.reclaim.lru.set(pfn, PG_REFERENCED);
            if referenced_folio || referenced_ptes > 1 {
                return FolioRef::Activate;
            }
            return FolioRef::Keep;
        }
        FolioRef::Reclaim
    }

    /// `shrink_folio_list`: sorts isolated folios; unmaps, removes from the
    /// page cache and frees those to reclaim, flushing TLBs as the policy
    /// says before any is freed. Returns the number freed and the folios
    /// kept (back on a list).
    fn shrink_folio_list(&mut self, hw: &mut Hw, folios: &[u64]) -> (u64, Vec<u64>) {
        let mut ubc = TlbflushUnmapBatch::default();
        let mut free = Vec::new();
        let mut kept = Vec::new();
        let locks = self.locks.spin.is_some();
        for &pfn in folios {
            if !locks {
                hw.charge(self.costs.shrink_folio_cycles);
                hw.settle(KFn::ShrinkFolioList);
            }
            let node = self.mem.alloc.node_of_pfn(pfn);
            let r = self.folio_check_references(hw, pfn);
            if locks {
                // The fixed cost keeps what the sections do not take: the
                // isolation and the putback or the page-cache removal.
                let moved = self.moved_cycles(ISOLATE_INSTR, 1)
                    + match r {
                        FolioRef::Reclaim => self.moved_cycles(TREE_DELETE_INSTR, 1),
                        _ => self.moved_cycles(PUTBACK_INSTR, 1),
                    };
                hw.charge(self.costs.shrink_folio_cycles.saturating_sub(moved));
                hw.settle(KFn::ShrinkFolioList);
            }
            match r {
                FolioRef::Activate => {
                    self.reclaim.lru.set(pfn, PG_LRU | PG_ACTIVE);
                    self.reclaim.lru.nodes[node].active_file.push_front(pfn);
                    self.reclaim.stat.pgactivate += 1;
                    self.reclaim.nonresident_age[node] += 1;
                    kept.push(pfn);
                }
                FolioRef::Keep => {
                    self.reclaim.lru.set(pfn, PG_LRU);
                    self.reclaim.lru.nodes[node].inactive_file.push_front(pfn);
                    kept.push(pfn);
                }
                FolioRef::Reclaim => {
                    self.try_to_unmap(hw, pfn, &mut ubc);
                    // Clean folios only: try_to_unmap_flush_dirty() before a
                    // pageout would flush here if a dirty entry had been cleared.
                    if ubc.writable {
                        self.try_to_unmap_flush(hw, &mut ubc, false);
                    }
                    // __remove_mapping(): out of the page cache, a shadow entry left.
                    let (ino, index) = self
                        .pagecache
                        .owner
                        .remove(&pfn)
                        .expect("a page-cache folio");
                    // Under the file's tree_lock (page_freeze_refs on the
                    // folio's struct page, the radix-tree replacement).
                    self.spin_section(
                        hw,
                        SpinRef::Tree(ino),
                        &[pfn],
                        TREE_DELETE_INSTR,
                        KFn::RemoveMapping,
                    );
                    self.pagecache.inodes[ino].pages.remove(&index);
                    self.pagecache.inodes[ino].readahead.remove(&index);
                    self.workingset_eviction(ino, index, node);
                    self.reclaim.lru.flags[pfn as usize] = 0;
                    free.push(pfn);
                }
            }
        }
        self.try_to_unmap_flush(hw, &mut ubc, false);
        for &pfn in &free {
            debug_assert_eq!(
                self.mem.alloc.folios[pfn as usize].refcount, 1,
                "only the page cache's reference is left"
            );
            let node = self.mem.alloc.node_of_pfn(pfn);
            self.mem.alloc.free(pfn);
            self.vmstat.pgfree += 1;
            let c = self.costs.page_free_cycles;
            hw.charge(c);
            // free_hot_cold_page(): a full per-CPU list goes back in a batch.
            let cpu = hw.cpu;
            if self
                .locks
                .spin
                .as_mut()
                .is_some_and(|s| s.pcp_free(cpu, node))
            {
                self.spin_section(
                    hw,
                    SpinRef::Zone(node),
                    &[],
                    FREE_ONE_PAGE_INSTR * self.cfg.tunables.pcp_batch,
                    KFn::FreePages,
                );
            }
        }
        hw.settle(KFn::FreePages);
        (free.len() as u64, kept)
    }

    /// `try_to_unmap(folio, TTU_BATCH_FLUSH)`: clears every PTE of the folio;
    /// flushes each at once (`per-page`) or adds it to the batch (`batched`).
    fn try_to_unmap(&mut self, hw: &mut Hw, pfn: u64, ubc: &mut TlbflushUnmapBatch) {
        let cpu = hw.cpu;
        let sem = self.i_mmap_lock_read(hw, pfn);
        for (mm, va) in self.rmap_walk_file(pfn) {
            let moved = self.entry_rmw(hw, mm, va, KFn::RmapWalk);
            let pte = self.try_to_unmap_one(mm, va).expect("the walk found it");
            hw.charge(self.costs.rmap_pte_cycles.saturating_sub(moved));
            hw.settle(KFn::RmapWalk);
            // should_defer_flush() → arch_tlbbatch_should_defer() (kernel/policy/tlb.rs).
            let others = self.mms[mm].cpumask.any_but(cpu);
            let defer = self.should_defer_flush(false, mm, others, ubc.pending);
            if defer {
                ubc.set_tlb_ubc_flush_pending(&mut self.mms[mm], pte.accessible(), pte.dirty);
                if !self.cfg.tlb_flush_on_unmap.is_builtin() {
                    ubc.pages.push((mm, va));
                }
            } else {
                // ptep_clear_flush() → flush_tlb_page().
                self.unmap_flush_page(hw, false, mm, va, ubc.pending);
                hw.settle(KFn::FlushTlb);
            }
        }
        self.i_mmap_unlock_read(hw, sem);
    }

    /// The unmap-flush hook of migration (`kernel.migrate_tlb_flush`) or
    /// reclaim (`kernel.tlb_flush_on_unmap`), and its key.
    fn unmap_flush_hook(&self, migration: bool) -> (&Hook<dyn UnmapFlush>, &'static str) {
        if migration {
            (&self.cfg.migrate_tlb_flush, "migrate_tlb_flush")
        } else {
            (&self.cfg.tlb_flush_on_unmap, "tlb_flush_on_unmap")
        }
    }

    /// Asks the unmap-flush policy (`defer`: `should_defer`, else
    /// `full_flush`); a user's answer is also set beside the built-ins'
    /// (kernel/policy/agreement.rs). A policy that fails answers false (the run stops).
    fn ask_unmap_flush(&mut self, migration: bool, defer: bool, ctx: &FlushCtx) -> bool {
        let (hook, key) = self.unmap_flush_hook(migration);
        let r = if defer {
            hook.should_defer(ctx)
        } else {
            hook.full_flush(ctx)
        };
        match r {
            Ok(d) => {
                if !hook.is_builtin() {
                    let batch = hook.batch_flush();
                    self.flush_agreement[migration as usize]
                        .record(migration, defer, ctx, d, batch);
                }
                d
            }
            Err(e) => {
                let name = hook.name().to_string();
                self.policy_failed(key, &name, e);
                false
            }
        }
    }

    /// `should_defer_flush()` for an entry of `mm` just cleared, by the
    /// policy of `kernel.migrate_tlb_flush` (`migration`) or
    /// `kernel.tlb_flush_on_unmap`; `others`: a CPU other than this one
    /// may hold it (the mm's cpumask sampled now, at the unmap); `pending`:
    /// entries already deferred into the batch.
    pub(crate) fn should_defer_flush(
        &mut self,
        migration: bool,
        mm: usize,
        others: bool,
        pending: u32,
    ) -> bool {
        let ctx = FlushCtx {
            others,
            nr_cpus: self.mms[mm].cpumask.count(),
            pending,
            nr_pages: 1,
            kind: FlushKind::Page,
            sampled: MaskSampled::Unmap,
            ceiling: self.cfg.tlb_single_page_flush_ceiling,
        };
        self.ask_unmap_flush(migration, true, &ctx)
    }

    /// `ptep_clear_flush()` → `flush_tlb_page()` of the entry at `va` of
    /// `mm` just cleared and not deferred: the page alone or the whole TLB,
    /// as the hook's `full_flush` decides (the kernel's ceiling rule for the
    /// built-ins); the caller settles the time.
    pub(crate) fn unmap_flush_page(
        &mut self,
        hw: &mut Hw,
        migration: bool,
        mm: usize,
        va: u64,
        pending: u32,
    ) {
        let cpu = hw.cpu;
        let mask = &self.mms[mm].cpumask;
        let ctx = FlushCtx {
            others: mask.any_but(cpu),
            nr_cpus: mask.count(),
            pending,
            nr_pages: 1,
            kind: FlushKind::Page,
            sampled: MaskSampled::Unmap,
            ceiling: self.cfg.tlb_single_page_flush_ceiling,
        };
        let full = self.ask_unmap_flush(migration, false, &ctx);
        flush_tlb_mm_pages(
            hw.machine,
            &mut self.vmstat,
            cpu,
            &mut self.mms[mm],
            hw.tlbstate,
            (!full).then_some(&[va][..]),
        );
    }

    /// `try_to_unmap_flush` → `arch_tlbbatch_flush` of the batch of
    /// migration (`migration`) or reclaim, by that hook's policy: whole
    /// (the kernel's way: a full local flush if this CPU is in the batch,
    /// one full-flush IPI to every other CPU of it that is not lazy, or one
    /// INVLPGB where the policy's `batch_flush` asks for it and the CPU has
    /// it), or, if a user's `full_flush` says so, page by page: each mm's
    /// deferred entries by one `flush_tlb_mm_range`-like round.
    pub(crate) fn try_to_unmap_flush(
        &mut self,
        hw: &mut Hw,
        ubc: &mut TlbflushUnmapBatch,
        migration: bool,
    ) {
        let cpu = hw.cpu;
        if !ubc.flush_required {
            return;
        }
        let ctx = FlushCtx {
            others: ubc.cpumask.any_but(cpu),
            nr_cpus: ubc.cpumask.count(),
            pending: ubc.pending,
            nr_pages: ubc.pending as u64,
            kind: FlushKind::Batch,
            sampled: MaskSampled::Batch,
            ceiling: self.cfg.tlb_single_page_flush_ceiling,
        };
        if !self.ask_unmap_flush(migration, false, &ctx) {
            self.flush_batch_by_pages(hw, ubc);
            return;
        }
        let (hook, _) = self.unmap_flush_hook(migration);
        // arch_tlbbatch_flush() with X86_FEATURE_INVLPGB (6.15, "x86/mm: Use
        // broadcast TLB flushing for page reclaim TLB flushing"):
        // invlpgb_flush_all_nonglobals() empties every CPU's TLB, lazy or
        // not, this one's included, and no IPI is sent.
        if hook.batch_flush() == BatchFlush::Broadcast
            && invlpgb_flush_all_nonglobals(hw.machine, cpu, hw.tlbstate, &self.mms)
        {
            self.reclaim.stat.tlb_ubc_invlpgb += 1;
            hw.settle(KFn::FlushTlb);
            *ubc = TlbflushUnmapBatch::default();
            return;
        }
        let mut targets = CpuMask::empty();
        for c in ubc.cpumask.iter() {
            if c != cpu && !hw.tlbstate[c].is_lazy {
                targets.set(c);
                catch_up(&mut hw.tlbstate[c], &self.mms);
            }
        }
        if !targets.is_empty() {
            let n = targets.count() as u64;
            let vs = &mut self.vmstat;
            vs.nr_tlb_remote_flush += 1;
            vs.nr_tlb_remote_flush_received += n;
            self.reclaim.stat.tlb_ubc_flushes += 1;
            self.reclaim.stat.tlb_ubc_ipis += n;
            hw.machine.send_tlb_flush_ipis(cpu, &targets, 0, None);
        }
        if ubc.cpumask.test(cpu) {
            let ts = &mut hw.tlbstate[cpu];
            match ts.loaded_mm {
                Some(mm) if ts.is_lazy => {
                    // flush_tlb_func() on a lazy CPU switches it to init_mm.
                    self.mms[mm].cpumask.clear(cpu);
                    *ts = TlbState::default();
                    hw.machine.flush_tlb_local_all(cpu);
                }
                Some(_) => {
                    catch_up(ts, &self.mms);
                    self.vmstat.nr_tlb_local_flush_all += 1;
                    hw.machine.flush_tlb_local_all(cpu);
                }
                None => {}
            }
        }
        hw.settle(KFn::FlushTlb);
        *ubc = TlbflushUnmapBatch::default();
    }

    /// A batch flushed page by page, as a user's `full_flush` may ask: the
    /// deferred entries of each mm (in the order the mms first entered the
    /// batch) by one round of `flush_tlb_mm_pages` from this CPU, which
    /// skips the CPUs that no longer run the mm (their switch flushed them).
    fn flush_batch_by_pages(&mut self, hw: &mut Hw, ubc: &mut TlbflushUnmapBatch) {
        let mut entries = std::mem::take(&mut ubc.pages);
        let mut rest = Vec::with_capacity(entries.len());
        let mut pages = Vec::with_capacity(entries.len());
        while let Some(&(mm, _)) = entries.first() {
            pages.clear();
            rest.clear();
            for &(m, va) in &entries {
                if m == mm {
                    pages.push(va);
                } else {
                    rest.push((m, va));
                }
            }
            flush_tlb_mm_pages(
                hw.machine,
                &mut self.vmstat,
                hw.cpu,
                &mut self.mms[mm],
                hw.tlbstate,
                Some(&pages),
            );
            std::mem::swap(&mut entries, &mut rest);
        }
        hw.settle(KFn::FlushTlb);
        *ubc = TlbflushUnmapBatch::default();
    }
}

/// A full flush brings a CPU up to date with the mm it has loaded.
fn catch_up(ts: &mut TlbState, mms: &[super::mm::Mm]) {
    if let Some(mm) = ts.loaded_mm {
        ts.tlb_gen = mms[mm].tlb_gen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::filemap::tests::kernel;

    #[test]
    fn kswapd_is_woken_below_low_and_sleeps_at_high() {
        let mut k = kernel();
        let q = k.mem.pgdat[0].kswapd_wait;
        let (low, high) = (k.mem.pgdat[0].wmark_low, k.mem.pgdat[0].wmark_high);
        let mut ks = Kswapd { node: 0 };
        let mut w = VecDeque::new();
        // Plenty free: kswapd sleeps on its queue.
        assert_eq!(ks.step(&mut k, 0, 0, &mut w), KthreadStep::Wait(q));
        k.sched.waitq.wait(q, 7);
        // Page-cache allocations down to the low watermark do not wake it ...
        let mut index = 0;
        let mut pfns = Vec::new();
        while k.mem.alloc.nr_free[0] > low {
            pfns.push(k.alloc_pages_node(0, 0).unwrap());
            index += 1;
        }
        assert_eq!(k.mem.pgdat[0].nr_kswapd_wakeups, 0, "{index} pages");
        // ... the one that leaves the node below low does.
        pfns.push(k.alloc_pages_node(0, 0).unwrap());
        assert_eq!(k.mem.pgdat[0].nr_kswapd_wakeups, 1);
        let woken: Vec<usize> = k.sched.waitq.take_woken().iter().map(|w| w.pid).collect();
        assert_eq!(woken, vec![7]);
        // Woken, it reclaims round after round while the node is below high ...
        assert_eq!(ks.step(&mut k, 0, 0, &mut w), KthreadStep::Continue);
        assert!(matches!(
            w.pop_front(),
            Some(Work::Kernel(KStep::ShrinkNode {
                node: 0,
                kswapd: true
            }))
        ));
        while k.mem.alloc.nr_free[0] < high {
            k.mem.alloc.free(pfns.pop().unwrap());
            assert_eq!(
                ks.step(&mut k, 0, 0, &mut w),
                if k.mem.alloc.nr_free[0] < high {
                    KthreadStep::Continue
                } else {
                    KthreadStep::Wait(q)
                }
            );
        }
        // ... and sleeps at high; a node it failed on too often is left alone.
        assert_eq!(ks.step(&mut k, 0, 0, &mut w), KthreadStep::Wait(q));
        k.mem.alloc.alloc(0, 0);
        k.reclaim.kswapd_failures[0] = MAX_RECLAIM_RETRIES;
        assert_eq!(ks.step(&mut k, 0, 0, &mut w), KthreadStep::Wait(q));
    }
}
