//! Per-node memory state (include/linux/mmzone.h `pglist_data`): the zone
//! watermarks and the wait queue `kswapd` sleeps on, and the allocator's
//! wake-up of it (mm/page_alloc.c `__alloc_pages` → `wake_all_kswapds`).
//! The free lists themselves are in page_alloc.rs. The model has one zone
//! (ZONE_NORMAL) per node.
//!
//! With `kernel.wakeups` the allocating path pays for the wake-up
//! (`try_to_wake_up`) where the allocation stands in it: a planning path
//! queues it as work, a path on the hardware makes it at once.
//!
//! Invariants: `min <= low <= high`; no wake-up is left pending once the
//! path that allocated has returned.

use super::hw::Hw;
use super::sched::wait::{WaitQueueId, WaitQueues};
use super::{KFn, Kernel, Work};
use std::collections::VecDeque;

/// A node's watermarks (in 4 KiB pages) and kswapd's wait queue.
#[derive(Clone, Debug)]
pub struct PgData {
    pub wmark_min: u64,
    pub wmark_low: u64,
    pub wmark_high: u64,
    pub kswapd_wait: WaitQueueId,
    /// Times an allocation left the node below its low watermark (`wakeup_kswapd` calls).
    pub nr_kswapd_wakeups: u64,
}

/// `calculate_min_free_kbytes()`: `int_sqrt(lowmem_kbytes * 16)`, clamped to [128, 262144].
pub fn min_free_kbytes(total_pages: u64) -> u64 {
    ((total_pages * 4 * 16) as f64)
        .sqrt()
        .floor()
        .clamp(128.0, 262_144.0) as u64
}

/// `__setup_per_zone_wmarks()` for one zone of `managed` pages out of `total` managed pages.
pub fn zone_watermarks(managed: u64, total: u64, scale_factor: u64) -> (u64, u64, u64) {
    let min_pages = min_free_kbytes(total) / 4;
    let min = (min_pages as u128 * managed as u128 / total.max(1) as u128) as u64;
    let gap = (min / 4).max(managed * scale_factor / 10_000);
    (min, min + gap, min + 2 * gap)
}

impl PgData {
    pub fn new(managed: u64, total: u64, scale_factor: u64, waitq: &mut WaitQueues) -> PgData {
        let (wmark_min, wmark_low, wmark_high) = zone_watermarks(managed, total, scale_factor);
        PgData {
            wmark_min,
            wmark_low,
            wmark_high,
            kswapd_wait: waitq.add_queue(),
            nr_kswapd_wakeups: 0,
        }
    }
}

impl Kernel {
    /// `__alloc_pages(order)` on `node` with no fallback: a folio from the
    /// node's free lists; an allocation that leaves the node below its low
    /// watermark wakes its kswapd (`wakeup_kswapd`).
    pub fn alloc_pages_node(&mut self, node: usize, order: u32) -> Option<u64> {
        let pfn = self.alloc.alloc(node, order);
        if self.alloc.nr_free[node] < self.pgdat[node].wmark_low {
            self.wakeup_kswapd(node);
        }
        pfn
    }

    /// `wakeup_kswapd()`: wakes the node's kswapd if it sleeps. With
    /// `kernel.wakeups` the wake-up waits in `pending_wakes` until the
    /// allocating path queues it ([`Kernel::queue_pending_wakes`]) or, if
    /// it runs on the hardware, makes it ([`Kernel::wake_pending`]).
    pub fn wakeup_kswapd(&mut self, node: usize) {
        let q = self.pgdat[node].kswapd_wait;
        if !self.waitq.active(q) {
            return;
        }
        if self.cfg.wakeups {
            if !self.pending_wakes.contains(&node) {
                self.pending_wakes.push(node);
            }
        } else {
            self.pgdat[node].nr_kswapd_wakeups += 1;
            self.waitq.wake_up(q, false);
        }
    }

    /// The wake-ups pending from an allocation, queued on the path's `work`
    /// at the allocation's place, their cost booked to `what`.
    pub(crate) fn queue_pending_wakes(&mut self, work: &mut VecDeque<Work>, what: KFn) {
        for node in self.pending_wakes.drain(..) {
            work.push_back(Work::WakeupKswapd { node, what });
        }
    }

    /// The wake-ups pending from an allocation made on the hardware (a page
    /// table's), made now by `hw.cpu`; the caller books their cost.
    pub(crate) fn wake_pending(&mut self, hw: &mut Hw) {
        for node in std::mem::take(&mut self.pending_wakes) {
            self.wakeup_kswapd_now(hw, node);
        }
    }

    /// `wakeup_kswapd()` made by `hw.cpu`: a kswapd another path has woken
    /// since the allocation asked for it is left alone, for nothing.
    pub(crate) fn wakeup_kswapd_now(&mut self, hw: &mut Hw, node: usize) {
        let q = self.pgdat[node].kswapd_wait;
        if self.wake_up_charged(hw, q, false) > 0 {
            self.pgdat[node].nr_kswapd_wakeups += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::locking::test_hw;
    use crate::kernel::sched::wait::Woken;

    #[test]
    fn with_wakeups_the_allocating_path_pays_for_kswapds_wake_up_where_it_allocated() {
        let mut k = crate::kernel::filemap::tests::kernel();
        k.cfg.wakeups = true;
        let q = k.pgdat[0].kswapd_wait;
        k.waitq.wait(q, 7);
        let low = k.pgdat[0].wmark_low;
        while k.alloc.nr_free[0] >= low {
            k.alloc_pages_node(0, 0).unwrap();
        }
        // The allocation below low wakes nobody yet: the wake-up waits for
        // its path, and a second allocation does not ask for it again.
        assert_eq!(k.pending_wakes, vec![0]);
        k.alloc_pages_node(0, 0).unwrap();
        assert_eq!(k.pending_wakes, vec![0]);
        assert_eq!(k.pgdat[0].nr_kswapd_wakeups, 0);
        assert!(!k.waitq.has_woken());
        // The path queues it where it stands ...
        let mut work = VecDeque::new();
        k.queue_pending_wakes(&mut work, KFn::HandleMmFault);
        assert!(k.pending_wakes.is_empty());
        assert!(matches!(
            work.pop_front(),
            Some(Work::WakeupKswapd {
                node: 0,
                what: KFn::HandleMmFault
            })
        ));
        // ... and the CPU that gets there pays `try_to_wake_up`; kswapd runs
        // from the waker's clock after it.
        let mut m = test_hw::machine();
        m.cpus[3].clock = 5000;
        let c = k.costs.try_to_wake_up_cycles;
        assert!(c > 0);
        test_hw::on(&mut m, 3, |hw| k.wakeup_kswapd_now(hw, 0));
        assert_eq!(k.pgdat[0].nr_kswapd_wakeups, 1);
        assert_eq!(m.cpus[3].clock, 5000 + c);
        assert_eq!(
            k.waitq.take_woken(),
            vec![Woken {
                pid: 7,
                at: Some(5000 + c),
                iowait: false
            }]
        );
        // A second wake-up queued meanwhile finds kswapd awake: it costs
        // nothing and counts nothing.
        test_hw::on(&mut m, 3, |hw| k.wakeup_kswapd_now(hw, 0));
        assert_eq!(k.pgdat[0].nr_kswapd_wakeups, 1);
        assert_eq!(m.cpus[3].clock, 5000 + c);
    }

    #[test]
    fn watermarks_follow_the_kernel_formula() {
        // 16 GiB in one zone: min_free_kbytes = sqrt(16 Mi KiB * 16) = 16384 KiB = 4096 pages;
        // the scale-factor gap (4 Mi pages * 10 / 10000 = 4194) exceeds min / 4.
        let pages = 4 << 20;
        assert_eq!(min_free_kbytes(pages), 16384);
        assert_eq!(
            zone_watermarks(pages, pages, 10),
            (4096, 4096 + 4194, 4096 + 2 * 4194)
        );
        // Two equal nodes share min_free_kbytes.
        let (min, _, _) = zone_watermarks(pages / 2, pages, 10);
        assert_eq!(min, 2048);
        assert_eq!(min_free_kbytes(16), 128);
    }
}
