//! Migration of a misplaced page on a NUMA hinting fault (mm/migrate.c,
//! docs/mechanisms.md#misplaced-page-migration): `numamigrate_isolate_page` takes the folio off
//! the LRU, then `migrate_misplaced_page` → `migrate_pages` allocates a
//! page on the target node, unmaps the old one (`try_to_unmap` puts a
//! migration entry in the PTE, flushing the TLBs that may hold it if the
//! PTE was accessible), copies the page (a real copy through the cache
//! model: loads from the old node, stores to the new one across the socket
//! link), and maps the new page where the migration entry was
//! (`remove_migration_ptes`), freeing the old one.
//!
//! The steps after isolation run as work items on the faulting CPU, in
//! simulated time, so other threads run meanwhile: a thread that faults
//! on the same PROT_NONE page finds the folio isolated and just maps it; a
//! thread that faults on the migration entry sleeps until the migration
//! ends (`migration_entry_wait`, on the folio's hashed wait queue).
//!
//! Anonymous folios are on an LRU list the model does not keep (there is
//! no anonymous reclaim): a folio counts as on its LRU unless `PG_ISOLATED`
//! is set. Only 4 KiB folios mapped once are migrated (the scanner skips
//! shared ones); huge PMDs take the hinting fault but are not migrated.
//!
//! Invariants: the new page gets the old page's content tag when the old
//! one is unmapped (no write can reach the old page after that: its PTE is
//! a migration entry and the TLBs that could hold it were flushed); a folio
//! is isolated by at most one migration at a time; the old page is freed
//! only after the new one is mapped.

use super::hw::Hw;
use super::locking::rwsem::SemRef;
use super::locking::sections::{FREE_ONE_PAGE_INSTR, ISOLATE_INSTR, LRU_ADD_INSTR};
use super::locking::spinlocks::SpinRef;
use super::mm::Pte;
use super::sched::state::PAGE_WAIT_TABLE_SIZE;
use super::sched::wait::WaitQueueId;
use super::vmscan::TlbflushUnmapBatch;
use super::{KFn, KStep, Kernel, StoreHow, Work};
use crate::policy::ClearPage;
use std::collections::VecDeque;

/// Flag in `lru.flags` of an anonymous folio taken off its (unmodelled) LRU.
pub const PG_ISOLATED: u8 = 8;

impl Kernel {
    /// The hashed wait queue of the folio at `pfn` (`folio_waitqueue`).
    pub fn folio_waitqueue(&self, pfn: u64) -> WaitQueueId {
        let h = pfn.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
        self.sched.page_wait_table[h as usize % PAGE_WAIT_TABLE_SIZE]
    }

    /// `numamigrate_isolate_page(pgdat, page)` (5.13): the target node must
    /// have free memory above its high watermark (`migrate_balanced_pgdat`)
    /// and the folio must still be on its LRU.
    pub fn numamigrate_isolate_page(&mut self, pfn: u64, target: usize) -> bool {
        if self.mem.alloc.nr_free[target] <= self.mem.pgdat[target].wmark_high + 1 {
            self.numa.stat.numa_migrate_node_full += 1;
            return false;
        }
        if self.reclaim.lru.test(pfn, PG_ISOLATED) {
            self.numa.stat.numa_isolate_fail += 1;
            return false;
        }
        self.reclaim.lru.set(pfn, PG_ISOLATED);
        true
    }

    /// `migrate_misplaced_page(page, vma, node)` of the 4 KiB folio `pfn`
    /// mapped at `addr` in `mm`: isolation, then the migration queued on
    /// `work`. False if it could not be started (isolation or allocation
    /// failed), with nothing left isolated.
    pub fn migrate_misplaced_page(
        &mut self,
        mm: usize,
        addr: u64,
        pfn: u64,
        target: usize,
        work: &mut VecDeque<Work>,
    ) -> bool {
        if !self.numamigrate_isolate_page(pfn, target) {
            return false;
        }
        // alloc_misplaced_dst_page(): __GFP_THISNODE, no reclaim.
        let new = self.alloc_pages_node(target, 0);
        self.queue_pending_wakes(work, KFn::MigratePages);
        let Some(new) = new else {
            self.reclaim.lru.clear(pfn, PG_ISOLATED);
            self.numa.stat.pgmigrate_fail += 1;
            return false;
        };
        self.vmstat.pgalloc += 1;
        // With kernel.spinlocks, isolate_lru_page() and the new page's
        // lru_cache_add() run as sections under the LRU lock
        // (kernel/locking/sections.rs); the fixed cost keeps the rest.
        let moved = self.moved_cycles(ISOLATE_INSTR + LRU_ADD_INSTR, 0);
        let c =
            self.costs.migrate_folio_cycles.saturating_sub(moved) + self.costs.page_alloc_cycles;
        work.push_back(Work::Cycles {
            cycles: c,
            instructions: c,
            what: KFn::MigratePages,
        });
        let old_node = self.mem.alloc.node_of_pfn(pfn);
        if self.locks.spin.is_some() {
            work.push_back(Work::Kernel(KStep::SpinSection {
                lock: SpinRef::Lru(old_node),
                instr: ISOLATE_INSTR,
                what: KFn::MigratePages,
            }));
        }
        self.rmqueue_lock(new, 0, work);
        work.push_back(Work::Kernel(KStep::MigrateUnmap {
            mm,
            addr: addr & !4095,
            old: pfn,
            new,
        }));
        // migrate_page_copy() → copy_highpage() → copy_page(), as a
        // copy-on-write copy is made (kernel/memory.rs).
        let how = match self.cfg.clear_page {
            ClearPage::Erms => StoreHow::String,
            ClearPage::Orig => StoreHow::MovLoop,
        };
        work.push_back(Work::Copy {
            src_line: pfn << 6,
            dst_line: new << 6,
            nlines: 64,
            how,
        });
        work.push_back(Work::Kernel(KStep::MigrateRemap {
            mm,
            addr: addr & !4095,
            old: pfn,
            new,
        }));
        // putback_lru_page(new) → lru_cache_add(); the old page's free to
        // the CPU's list.
        self.lru_cache_add_lock(target, KFn::MigratePages, work);
        let cpu = self.sched.current.cpu;
        if let Some(sl) = self.locks.spin.as_mut() {
            if sl.pcp_free(cpu, old_node) {
                work.push_back(Work::Kernel(KStep::SpinSection {
                    lock: SpinRef::Zone(old_node),
                    instr: FREE_ONE_PAGE_INSTR * self.cfg.tunables.pcp_batch,
                    what: KFn::MigratePages,
                }));
            }
        }
        true
    }

    /// The page-table part of `try_to_unmap` for a migration: the PTE at
    /// `addr` (which must still map `old`) becomes a migration entry and the
    /// new page takes the old one's content. Returns whether the PTE was
    /// accessible (`pte_accessible`: the caller flushes TLBs), or None if
    /// the PTE no longer maps `old` (the migration is abandoned: the new
    /// page is freed and the folio put back).
    pub fn migrate_unmap(&mut self, mm: usize, addr: u64, old: u64, new: u64) -> Option<bool> {
        let cur = self.mms[mm]
            .entry(addr)
            .filter(|p| p.pfn == old && !p.migration);
        let Some(p) = cur else {
            self.abandon_migration(old, new);
            return None;
        };
        self.mms[mm].replace_entry(
            addr,
            Pte {
                migration: true,
                protnone: false,
                ..p
            },
        );
        self.mem.alloc.tags[new as usize] = self.mem.alloc.tags[old as usize];
        // pte_accessible(): present, or PROT_NONE with a flush still pending.
        Some(p.accessible() || self.mms[mm].tlb_flush_pending > 0)
    }

    fn abandon_migration(&mut self, old: u64, new: u64) {
        self.reclaim.lru.clear(old, PG_ISOLATED);
        self.mem.alloc.free(new);
        self.vmstat.pgfree += 1;
        self.numa.stat.pgmigrate_fail += 1;
    }

    /// `remove_migration_ptes` and the end of `migrate_pages`: the migration
    /// entry at `addr` becomes an accessible PTE of `new` (young; writable
    /// and dirty as the old one was), the old page is freed and the waiters
    /// on it are woken by this CPU (`folio_unlock` → `wake_up_page`; with
    /// `kernel.wakeups` it pays each `try_to_wake_up`).
    pub fn migrate_remap(&mut self, hw: &mut Hw, mm: usize, addr: u64, old: u64, new: u64) {
        let Some(p) = self.mms[mm]
            .entry(addr)
            .filter(|p| p.migration && p.pfn == old)
        else {
            // The range was unmapped meanwhile (munmap or exit zapped the
            // migration entry and put the old page): the new page goes back.
            self.reclaim.lru.clear(old, PG_ISOLATED);
            self.mem.alloc.free(new);
            self.vmstat.pgfree += 1;
            self.numa.stat.pgmigrate_fail += 1;
            let q = self.folio_waitqueue(old);
            self.wake_up_charged(hw, q, true);
            return;
        };
        self.mem.alloc.map_folio(new, 1, true);
        self.mms[mm].replace_entry(
            addr,
            Pte {
                pfn: new,
                young: true,
                migration: false,
                protnone: false,
                ..p
            },
        );
        self.numa.last_cpupid[new as usize] = self.numa.last_cpupid[old as usize];
        self.reclaim.lru.clear(old, PG_ISOLATED);
        let freed = self.mem.alloc.put_folio(old);
        debug_assert_eq!(freed, 1, "the migrated folio had one mapping");
        self.vmstat.pgfree += freed;
        self.numa.stat.numa_pages_migrated += 1;
        self.numa.stat.pgmigrate_success += 1;
        let q = self.folio_waitqueue(old);
        self.wake_up_charged(hw, q, true);
    }
}

impl Kernel {
    /// `try_to_migrate()` of a page being migrated, on `hw.cpu`: its PTE
    /// replaced by a migration entry (`migrate_unmap`), and the TLB flush it
    /// needs if the PTE was accessible — at once (`flush_tlb_page()`) or
    /// through the unmap batch, as `kernel.migrate_tlb_flush` decides
    /// (kernel/policy/tlb.rs). False if the migration was abandoned.
    pub fn try_to_migrate(
        &mut self,
        hw: &mut Hw,
        mm: usize,
        addr: u64,
        old: u64,
        new: u64,
    ) -> bool {
        let cpu = hw.cpu;
        // rmap_walk_anon() under anon_vma_lock_read() (kernel.rwsems).
        self.down_read(hw, SemRef::AnonVma(mm));
        let moved = self.entry_rmw(hw, mm, addr, KFn::TryToUnmap);
        hw.charge(self.costs.rmap_pte_cycles.saturating_sub(moved));
        self.up_read(hw, SemRef::AnonVma(mm));
        hw.settle(KFn::TryToUnmap);
        let Some(accessible) = self.migrate_unmap(mm, addr, old, new) else {
            return false;
        };
        if !accessible {
            hw.settle(KFn::TryToUnmap);
            return true;
        }
        let others = self.mms[mm].cpumask.any_but(cpu);
        if others {
            self.numa.stat.migrate_unmap_flushes += 1;
        }
        // should_defer_flush(): a batch only when another CPU may hold the entry.
        // A hinting fault's batch holds this one folio: nothing is pending before it.
        if self.should_defer_flush(true, mm, others, 0) {
            let mut ubc = TlbflushUnmapBatch::default();
            // set_tlb_ubc_flush_pending(), then try_to_unmap_flush(); the
            // entry was present (accessible) and the batch is flushed here,
            // so whether it was dirty does not matter.
            ubc.set_tlb_ubc_flush_pending(&mut self.mms[mm], true, false);
            if !self.cfg.migrate_tlb_flush.is_builtin() {
                ubc.pages.push((mm, addr));
            }
            hw.settle(KFn::TryToUnmap);
            // migrate_pages_batch() calls try_to_unmap_flush() itself, after
            // the unmaps: its time is not under try_to_unmap. The batch is
            // flushed as kernel.migrate_tlb_flush's policy says.
            self.try_to_unmap_flush(hw, &mut ubc, true);
            return true;
        }
        // ptep_clear_flush() -> flush_tlb_page().
        self.unmap_flush_page(hw, true, mm, addr, 0);
        hw.settle(KFn::TryToUnmap);
        true
    }
}
