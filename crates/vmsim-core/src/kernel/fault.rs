//! The page fault's entry (arch/x86/mm/fault.c `do_user_addr_fault`):
//! direct reclaim when a node is short of memory, `handle_mm_fault`, and
//! the allocator's slow path of reclaiming and retrying a fault that found
//! no free page (mm/page_alloc.c `__alloc_pages_slowpath`).
//!
//! Invariant: a fault that failed for want of memory is retried until
//! rounds that freed nothing have scanned every node's file LRU twice over.

use super::hw::Hw;
use super::memory::FaultError;
use super::sched::state::Current;
use super::{Kernel, Work};
use std::collections::VecDeque;

impl Kernel {
    /// A fault of task `task` at `addr` of `mm` on `hw.cpu` (of `node`),
    /// its work queued on `work`.
    #[allow(clippy::too_many_arguments)]
    pub fn do_user_addr_fault(
        &mut self,
        hw: &mut Hw,
        task: usize,
        mm: usize,
        addr: u64,
        write: bool,
        node: usize,
        work: &mut VecDeque<Work>,
    ) -> Result<(), FaultError> {
        if (0..self.mem.alloc.nr_nodes).any(|n| self.nr_file_lru(n) > 0) {
            self.direct_reclaim_if_needed(hw, node);
        }
        self.sched.current = Current {
            cpu: hw.cpu,
            pid: task,
        };
        let mut r = self.handle_mm_fault(mm, addr, write, node, work);
        // __alloc_pages_slowpath(): an allocation that found no free page
        // reclaims and retries; it gives up once rounds that freed nothing
        // have scanned every node's file LRU twice over (standing for
        // do_try_to_free_pages going down every priority to a full scan).
        // Work the failed attempt queued (its handler cost, read-around
        // folios it added) stays: the retry finds those folios cached.
        let mut scanned_no_progress = 0u64;
        while matches!(r, Err(FaultError::Oom)) {
            let n = self.mem.alloc.nr_nodes;
            let lru: u64 = (0..n).map(|nd| self.nr_file_lru(nd) as u64).sum();
            if scanned_no_progress > 2 * lru {
                break;
            }
            self.reclaim.stat.allocstall += 1;
            let got: u64 = (0..n)
                .map(|i| (node + i) % n)
                .map(|nd| self.shrink_node(hw, nd, false))
                .sum();
            scanned_no_progress = if got > 0 {
                0
            } else {
                scanned_no_progress + n as u64 * self.cfg.tunables.swap_cluster_max
            };
            r = self.handle_mm_fault(mm, addr, write, node, work);
        }
        // A fault that mapped the address itself (a file fault's
        // fault-around) has its tables now, as the kernel's does.
        if r.is_ok() && self.page_tables() && self.mms[mm].entry(addr).is_some() {
            self.alloc_pgtables(hw, mm, addr);
        }
        r
    }
}
