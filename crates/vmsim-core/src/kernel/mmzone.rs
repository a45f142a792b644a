//! Physical memory's state (include/linux/mmzone.h `pglist_data`,
//! include/linux/hugetlb.h `hstate`): the buddy allocator's free lists
//! (page_alloc.rs), each node's watermarks and the wait queue its kswapd
//! sleeps on, the hugetlb pools, and the memory map of `struct page`s
//! (vmemmap.rs). The model has one zone (ZONE_NORMAL) per node. The paths
//! that allocate are gfp.rs and hugetlb.rs.
//!
//! Invariants: `min <= low <= high`; a huge page in a pool's free list is
//! allocated from the buddy allocator and counted in `nr_huge_pages`.

use super::mm::{PMD_SHIFT, PUD_SHIFT};
use super::page_alloc::PageAlloc;
use super::sched::wait::{WaitQueueId, WaitQueues};
use super::vmemmap::Vmemmap;

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

/// The two x86-64 hstates.
pub const HSTATE_SHIFTS: [u32; 2] = [PMD_SHIFT, PUD_SHIFT];

/// The index of the hstate of pages of `1 << shift` bytes.
pub fn hstate(shift: u32) -> usize {
    match shift {
        PMD_SHIFT => 0,
        PUD_SHIFT => 1,
        _ => panic!("no hstate for page shift {shift}"),
    }
}

/// The free huge pages of each hstate, per node, and how many each holds in all.
pub struct HugetlbPool {
    /// Free huge pages per hstate and node (hugetlb.rs allocates and frees them).
    pub free: [Vec<Vec<u64>>; 2],
    /// `nr_hugepages` per hstate and node.
    pub nr_huge_pages: [Vec<u64>; 2],
}

impl HugetlbPool {
    pub fn new(nr_nodes: usize) -> HugetlbPool {
        HugetlbPool {
            free: [vec![Vec::new(); nr_nodes], vec![Vec::new(); nr_nodes]],
            nr_huge_pages: [vec![0; nr_nodes], vec![0; nr_nodes]],
        }
    }

    pub fn free_huge_pages(&self, shift: u32, node: usize) -> u64 {
        self.free[hstate(shift)][node].len() as u64
    }
}

/// Physical memory: the allocator, the nodes, the hugetlb pools and the
/// memory map.
pub struct Memory {
    pub alloc: PageAlloc,
    /// Per node: watermarks and kswapd's wait queue.
    pub pgdat: Vec<PgData>,
    /// The hugetlb pools (2 MiB and 1 GiB hstates), filled at start.
    pub hugetlb: HugetlbPool,
    /// The memory map in simulated memory (`kernel.struct_pages`; kernel/vmemmap.rs).
    pub vmemmap: Option<Vmemmap>,
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
            zone_watermarks(pages, pages, 10),
            (4096, 4096 + 4194, 4096 + 2 * 4194)
        );
        // Two equal nodes share min_free_kbytes.
        let (min, _, _) = zone_watermarks(pages / 2, pages, 10);
        assert_eq!(min, 2048);
        assert_eq!(min_free_kbytes(16), 128);
    }
}
