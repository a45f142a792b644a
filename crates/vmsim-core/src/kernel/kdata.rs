//! The kernel's own data in simulated memory (`kernel.spinlocks`): the
//! first `KDATA_FRAMES` frames (256 KiB) of the 2 MiB block of each node
//! below the memory map (kernel/vmemmap.rs), taken out of the free lists at
//! boot as memblock keeps boot-time allocations from the buddy allocator;
//! the rest of the block goes to the 4 KiB free lists. Structures are handed a line each, in the
//! order they are created: a node's `pg_data_t` (`alloc_node_data` places
//! it in the node's own memory) and slab objects such as a file's
//! `address_space`, from the node of the CPU that creates them.
//!
//! Invariant: no line is handed out twice; every line is homed on the node
//! it was asked for.

use super::page_alloc::{PageAlloc, HPAGE_PMD_NR, PAGE_SHIFT};

/// Frames of kernel data per node: 4096 lines, two per node's `pg_data_t`
/// locks and one per file.
pub const KDATA_FRAMES: u64 = 64;
const LINES: u64 = (KDATA_FRAMES << PAGE_SHIFT) / 64;

#[derive(Clone, Debug)]
pub struct KernelData {
    /// Per node: the next free line and the block's end.
    next: Vec<u64>,
    end: Vec<u64>,
}

impl KernelData {
    /// Reserves the block of every node just below the top `skip` blocks
    /// (the memory map's). Must run at boot, before any allocation.
    pub fn boot(alloc: &mut PageAlloc, skip: u64) -> KernelData {
        let first = alloc.reserve_frames_below_top(skip, KDATA_FRAMES);
        let next: Vec<u64> = first.iter().map(|&pfn| (pfn << PAGE_SHIFT) / 64).collect();
        let end = next.iter().map(|&l| l + LINES).collect();
        KernelData { next, end }
    }

    /// A fresh line of `node`'s kernel data.
    pub fn line(&mut self, node: usize) -> u64 {
        let l = self.next[node];
        assert!(l < self.end[node], "node {node}'s kernel data is full");
        self.next[node] += 1;
        l
    }

    /// Whether a node of `node_bytes` has memory left beside the block and
    /// the memory map's `map_blocks`.
    pub fn fits(node_bytes: u64, map_blocks: u64) -> bool {
        map_blocks + 1 < (node_bytes >> PAGE_SHIFT) / HPAGE_PMD_NR
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::vmemmap::Vmemmap;

    #[test]
    fn the_block_sits_below_the_memory_map_and_is_never_allocated() {
        let node_bytes = 64 << 20; // 32 blocks; the map takes the top one
        let mut a = PageAlloc::new(2, node_bytes);
        let free = a.nr_free.clone();
        let v = Vmemmap::boot(&mut a, node_bytes);
        let mut kd = KernelData::boot(&mut a, v.blocks_per_node);
        assert_eq!(a.nr_free, vec![free[0] - 256 - 64, free[1] - 256 - 64]);
        let l0 = kd.line(0);
        assert_eq!(l0, (30 * 512 * 4096) / 64);
        assert_eq!(kd.line(0), l0 + 1);
        let l1 = kd.line(1);
        assert_eq!((l1 * 64) / node_bytes, 1, "homed on node 1");
        let reserved = |pfn: u64| {
            let f = pfn % 16384;
            (31 * 512..31 * 512 + 256).contains(&f) || (30 * 512..30 * 512 + 64).contains(&f)
        };
        let mut frames = 0;
        while let Some(pfn) = a.alloc(0, 0) {
            if pfn % 16384 >= 30 * 512 {
                assert!(!reserved(pfn), "{pfn}");
                frames += 1;
            }
        }
        // The rest of the block, and of the map's, is allocatable.
        assert_eq!(frames, 512 - 64 + 256);
    }
}
