//! The spinning locks of the allocator, the LRU lists and the page cache
//! (`kernel.spinlocks`), where their words live, and the critical sections
//! the kernel runs under them.
//!
//! Locks and their lines (kernel/kdata.rs): per node, the zone's `lock` and
//! `lru_lock`, each on a line of its own (`ZONE_PADDING` puts them on
//! separate lines, `____cacheline_internodealigned_in_smp`), in the node's
//! own memory as `alloc_node_data` places `pg_data_t`; per file, its
//! `address_space`'s `tree_lock`, from the slab of the node of the CPU that
//! created the file.
//!
//! Sections, as 4.1 (the kernel of batched-tlb-flush's measurement) runs
//! them unless said otherwise, with what the section does under the lock:
//! - `shrink_inactive_list` / `shrink_active_list`: `isolate_lru_pages`
//!   under `lru_lock` (per folio: `__isolate_lru_page`, whose
//!   `get_page_unless_zero` and `ClearPageLRU` are atomics on its `struct
//!   page`, and the list move), then, after sorting, `putback_inactive_pages`
//!   / `move_active_pages_to_lru` under it again (`SetPageLRU`, the list add);
//! - `__remove_mapping` under the file's `tree_lock` (the radix-tree
//!   replacement by a shadow entry);
//! - `add_to_page_cache_lru`: the radix-tree insertion under `tree_lock`,
//!   then `lru_cache_add` into the CPU's pagevec, drained under `lru_lock`
//!   once it holds `PAGEVEC_SIZE` (`kernel.pagevec_size`, 14) pages
//!   (`__pagevec_lru_add`);
//! - the per-CPU page lists: one `zone->lock` section per `batch` pages
//!   allocated (`rmqueue_bulk`) and, once a CPU's list is full, per `batch`
//!   freed (`free_pcppages_bulk`); a huge page's allocation takes
//!   `zone->lock` itself (`__rmqueue`; high-order pages have per-CPU lists
//!   only since 5.13).
//! - a misplaced page's migration (5.12): `isolate_lru_page` under the LRU
//!   lock, the new page from the CPU's list, the new page's `lru_cache_add`
//!   and the old page's free to the CPU's list (kernel/migrate.rs).
//!
//! Instruction counts under the locks are counted from the 4.1 C source
//! (statements and the calls they make, not compiled code). The fixed
//! costs that stood for these paths keep what is not under a lock: with
//! the option on, `shrink_folio_cycles` loses the cycles its isolation and
//! putback now take as instructions and atomics in their sections, and
//! `page_cache_add_cycles` those of the tree insertion and the pagevec
//! drain's share, so that an uncontended run with the lines in L1 costs
//! what the estimates did; misses, line transfers and waiting come on top.
//! The allocator's estimates (`page_alloc_cycles`, `page_free_cycles`) are
//! of the per-CPU list's fast path and keep their value: the refill and
//! drain are new.
//!
//! Simplified: a pagevec drains under the lock of its last page's node
//! (the kernel relocks when the zone changes); the per-CPU lists count
//! pages but keep the allocator's own order (kernel/page_alloc.rs); the
//! fault-side sections touch the lock's line but not the pages' `struct
//! page` lines (reclaim's do, with `kernel.struct_pages`).

use super::spinlocks::SpinRef;
use crate::kernel::hw::{Hw, LOCKED_RMW_CYCLES};
use crate::kernel::{KFn, KStep, Kernel, Work};
use std::collections::VecDeque;

/// Instructions per folio of `isolate_lru_pages` (the `__isolate_lru_page`
/// tests, the list move, the per-zone counters).
pub const ISOLATE_INSTR: u64 = 40;
/// Instructions per folio of `putback_inactive_pages` / `move_active_pages_to_lru`.
pub const PUTBACK_INSTR: u64 = 40;
/// `__delete_from_page_cache` under `tree_lock`: the radix-tree lookup and
/// the shadow entry's store (`page_cache_tree_delete`), the counters.
pub const TREE_DELETE_INSTR: u64 = 150;
/// `__add_to_page_cache_locked` under `tree_lock`: `radix_tree_insert`, the counters.
pub const TREE_INSERT_INSTR: u64 = 150;
/// Per page of `__pagevec_lru_add_fn` (`SetPageLRU`, the list add, counters).
pub const LRU_ADD_INSTR: u64 = 40;
/// Per page of `rmqueue_bulk` (`__rmqueue_smallest`, the list add).
pub const RMQUEUE_INSTR: u64 = 50;
/// Per page of `free_pcppages_bulk` (`__free_one_page`'s buddy merge loop).
pub const FREE_ONE_PAGE_INSTR: u64 = 80;

impl Kernel {
    /// The allocator's lock for a page of `order` just taken from `node` by
    /// the current CPU, queued on `work`: an order-0 page comes from the
    /// CPU's list, refilled under `zone->lock` once per batch; a higher
    /// order takes `zone->lock` for `__rmqueue` itself (before 5.13 no
    /// high-order page is kept on the per-CPU lists).
    pub(crate) fn rmqueue_lock(&mut self, pfn: u64, order: u32, work: &mut VecDeque<Work>) {
        let cpu = self.sched.current.cpu;
        let node = self.mem.alloc.node_of_pfn(pfn);
        let Some(sl) = self.locks.spin.as_mut() else {
            return;
        };
        let instr = if order > 0 {
            RMQUEUE_INSTR
        } else if sl.pcp_alloc(cpu, node) {
            RMQUEUE_INSTR * sl.pcp_batch as u64
        } else {
            return;
        };
        work.push_back(Work::Kernel(KStep::SpinSection {
            lock: SpinRef::Zone(node),
            instr,
            what: KFn::HandleMmFault,
        }));
    }

    /// `lru_cache_add()` of a page of `node` by the current CPU, queued on
    /// `work`: a full pagevec drains under the node's LRU lock.
    pub(crate) fn lru_cache_add_lock(&mut self, node: usize, what: KFn, work: &mut VecDeque<Work>) {
        let cpu = self.sched.current.cpu;
        if self
            .locks
            .spin
            .as_mut()
            .is_some_and(|s| s.lru_cache_add(cpu))
        {
            work.push_back(Work::Kernel(KStep::SpinSection {
                lock: SpinRef::Lru(node),
                instr: LRU_ADD_INSTR * self.cfg.tunables.pagevec_size,
                what,
            }));
        }
    }

    /// A critical section under `lock` from `hw`'s CPU: the lock, an atomic
    /// on each of `pages`' `struct page` (with `kernel.struct_pages`),
    /// `instr` instructions, the unlock. Cycles before the lock go to
    /// `what`; the spinning to `spin_lock`.
    pub(crate) fn spin_section(
        &mut self,
        hw: &mut Hw,
        lock: SpinRef,
        pages: &[u64],
        instr: u64,
        what: KFn,
    ) {
        let Some(sl) = self.locks.spin.as_mut() else {
            return;
        };
        hw.settle(what);
        let imp = sl.imp;
        sl.lock_of(lock).lock(hw, imp, &mut self.locks.stats);
        hw.settle(KFn::SpinLock);
        if let Some(vm) = &self.mem.vmemmap {
            for &pfn in pages {
                hw.atomic(vm.page_line(pfn));
            }
        }
        hw.instructions(instr);
        let sl = self.locks.spin.as_mut().expect("checked above");
        sl.lock_of(lock).unlock(hw, &mut self.locks.stats);
        hw.settle(what);
    }

    /// Cycles of a fixed cost that sections now take as instructions and
    /// atomics (`instr` instructions at the cores' issue width, `atomics`
    /// locked operations), so that the fixed cost keeps only the rest.
    pub(crate) fn moved_cycles(&self, instr: u64, atomics: u64) -> u64 {
        if self.locks.spin.is_none() {
            return 0;
        }
        instr.div_ceil(self.cpus.issue_width.max(1)) + atomics * LOCKED_RMW_CYCLES
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{embedded_machines, Preset};
    use crate::kernel::locking::spinlock::SpinImpl;
    use crate::kernel::sched::state::Current;
    use crate::kernel::{Kernel, KernelConfig};
    use std::collections::VecDeque;

    #[test]
    fn a_faults_allocation_and_lru_add_count_on_its_cpus_lists_not_its_tasks() {
        let (name, text) = embedded_machines()
            .iter()
            .find(|(n, _)| *n == "xeon-e5-2699v3-2s")
            .unwrap();
        let preset = Preset::parse(text, name).unwrap();
        let cfg = KernelConfig {
            spinlocks: Some(SpinImpl::Queued),
            ..Default::default()
        };
        let mut k = Kernel::new(cfg, preset.kernel_costs(), 1, 64 << 20);
        // Task 7 faults on CPU 3: the first order-0 page refills CPU 3's list.
        k.sched.current = Current { cpu: 3, pid: 7 };
        let mut w = VecDeque::new();
        k.rmqueue_lock(100, 0, &mut w);
        assert_eq!(w.len(), 1, "the first page refills the list");
        let sl = k.locks.spin.as_mut().unwrap();
        assert!(!sl.pcp_alloc(3, 0), "CPU 3's list holds the batch");
        assert!(sl.pcp_alloc(7, 0), "CPU 7's list was never touched");
        // The pagevec is CPU 3's too.
        let size = k.cfg.tunables.pagevec_size;
        let mut w = VecDeque::new();
        for _ in 0..size - 1 {
            k.lru_cache_add_lock(0, crate::kernel::KFn::HandleMmFault, &mut w);
        }
        assert!(w.is_empty());
        let sl = k.locks.spin.as_mut().unwrap();
        assert!(sl.lru_cache_add(3), "CPU 3's pagevec is full");
    }
}
