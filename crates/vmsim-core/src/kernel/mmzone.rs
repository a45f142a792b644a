//! Per-node memory state (include/linux/mmzone.h `pglist_data`): the zone
//! watermarks and the wait queue `kswapd` sleeps on, and the allocator's
//! wake-up of it (mm/page_alloc.c `__alloc_pages` → `wake_all_kswapds`).
//! The free lists themselves are in page_alloc.rs. The model has one zone
//! (ZONE_NORMAL) per node.
//!
//! Invariant: `min <= low <= high`.

use super::sched::wait::{WaitQueueId, WaitQueues};
use super::Kernel;

/// `watermark_scale_factor` default (sysctl vm.watermark_scale_factor, in 1/10000 of the zone).
pub const WATERMARK_SCALE_FACTOR: u64 = 10;

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
pub fn zone_watermarks(managed: u64, total: u64) -> (u64, u64, u64) {
    let min_pages = min_free_kbytes(total) / 4;
    let min = (min_pages as u128 * managed as u128 / total.max(1) as u128) as u64;
    let gap = (min / 4).max(managed * WATERMARK_SCALE_FACTOR / 10_000);
    (min, min + gap, min + 2 * gap)
}

impl PgData {
    pub fn new(managed: u64, total: u64, waitq: &mut WaitQueues) -> PgData {
        let (wmark_min, wmark_low, wmark_high) = zone_watermarks(managed, total);
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

    /// `wakeup_kswapd()`: wakes the node's kswapd if it sleeps.
    pub fn wakeup_kswapd(&mut self, node: usize) {
        let q = self.pgdat[node].kswapd_wait;
        if self.waitq.active(q) {
            self.pgdat[node].nr_kswapd_wakeups += 1;
            self.waitq.wake_up(q, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn watermarks_follow_the_kernel_formula() {
        // 16 GiB in one zone: min_free_kbytes = sqrt(16 Mi KiB * 16) = 16384 KiB = 4096 pages;
        // the scale-factor gap (4 Mi pages * 10 / 10000 = 4194) exceeds min / 4.
        let pages = 4 << 20;
        assert_eq!(min_free_kbytes(pages), 16384);
        assert_eq!(
            zone_watermarks(pages, pages),
            (4096, 4096 + 4194, 4096 + 2 * 4194)
        );
        // Two equal nodes share min_free_kbytes.
        let (min, _, _) = zone_watermarks(pages / 2, pages);
        assert_eq!(min, 2048);
        assert_eq!(min_free_kbytes(16), 128);
    }
}
