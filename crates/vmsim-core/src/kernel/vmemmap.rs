//! The memory map in simulated memory (`kernel.struct_pages`): one 64-byte
//! `struct page` per 4 KiB frame, so that kernel paths can touch a page's
//! flags, reference count and map counts through the caches.
//!
//! With `CONFIG_SPARSEMEM_VMEMMAP` (x86-64) the kernel maps the array at
//! `vmemmap` and allocates each node's part of it from that node's own
//! memory at boot (`vmemmap_populate` → `vmemmap_alloc_block_buf` on the
//! section's node), so a frame's `struct page` is homed where the frame is.
//! The model does the same: node n's map sits at the start of the top 2 MiB
//! blocks of node n, taken out of the free lists at boot (as memblock keeps
//! them from the buddy allocator), frame i of the node's map at byte 64·i.
//! x86-64 maps the array with 2 MiB pages (`vmemmap_populate_hugepages`),
//! one per 128 MiB section, which the section's map fills exactly; a scaled
//! node smaller than that gives the frames of the block its map does not
//! need back to the 4 KiB free lists, so it too loses 1/64 of its memory.
//! `struct page` is 64 bytes on x86-64 (`sizeof(struct page)` with the usual
//! configuration), so each is one cache line of its own.
//!
//! Which words live in which line, as 4.18 lays them out: a head page's
//! `flags` (with `PG_locked`), `_mapcount` and `_refcount` share its line;
//! a huge page's `compound_mapcount` is in its first tail page.

use super::page_alloc::{PageAlloc, HPAGE_PMD_NR, PAGE_SHIFT};

/// `sizeof(struct page)` on x86-64.
pub const STRUCT_PAGE_BYTES: u64 = 64;

/// Where each node's part of the memory map is.
#[derive(Clone, Debug)]
pub struct Vmemmap {
    node_frames: u64,
    /// Per node, the line address of its frame 0's `struct page`.
    base_line: Vec<u64>,
    /// 2 MiB blocks each node gives to its map.
    pub blocks_per_node: u64,
}

impl Vmemmap {
    /// 2 MiB blocks of a node of `node_bytes` its part of the map takes.
    pub fn blocks_for(node_bytes: u64) -> u64 {
        ((node_bytes >> PAGE_SHIFT) * STRUCT_PAGE_BYTES).div_ceil(HPAGE_PMD_NR << PAGE_SHIFT)
    }

    /// Whether a node of `node_bytes` has memory left beside its map.
    pub fn fits(node_bytes: u64) -> bool {
        Vmemmap::blocks_for(node_bytes) < (node_bytes >> PAGE_SHIFT) / HPAGE_PMD_NR
    }

    /// Lays out the map for `nr_nodes` nodes of `node_bytes` and takes its
    /// blocks out of `alloc`'s free lists. Must run at boot, before any
    /// allocation (and before the free lists are shuffled).
    pub fn boot(alloc: &mut PageAlloc, node_bytes: u64) -> Vmemmap {
        let node_frames = node_bytes >> PAGE_SHIFT;
        let blocks = Vmemmap::blocks_for(node_bytes);
        let first = alloc.reserve_top_blocks(blocks);
        // x86-64 maps the array with 2 MiB pages, one per 128 MiB section,
        // which it fills exactly: the map is 1/64 of the node. A scaled
        // node's map fills only part of a block; the rest goes back (as
        // 4 KiB pages), so that the node loses the same 1/64.
        let used = (node_frames * STRUCT_PAGE_BYTES).div_ceil(1 << PAGE_SHIFT);
        for (node, &f) in first.iter().enumerate() {
            alloc.release_frames(node, f + used, f + blocks * HPAGE_PMD_NR);
        }
        let base_line = first.iter().map(|&pfn| (pfn << PAGE_SHIFT) / 64).collect();
        Vmemmap {
            node_frames,
            base_line,
            blocks_per_node: blocks,
        }
    }

    /// The line of frame `pfn`'s `struct page` (`pfn_to_page`).
    #[inline]
    pub fn page_line(&self, pfn: u64) -> u64 {
        let node = (pfn / self.node_frames) as usize;
        self.base_line[node] + (pfn % self.node_frames) * (STRUCT_PAGE_BYTES / 64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_frame_has_its_own_line_in_its_own_node_and_the_map_is_not_handed_out() {
        let node_bytes = 64 << 20; // 16384 frames: 1 MiB of map, one 2 MiB block
        let mut a = PageAlloc::new(2, node_bytes);
        let free = a.nr_free.clone();
        let v = Vmemmap::boot(&mut a, node_bytes);
        assert_eq!(v.blocks_per_node, 1);
        // The map needs 256 frames (1 MiB); the block's other 256 stay free.
        assert_eq!(a.nr_free, vec![free[0] - 256, free[1] - 256]);
        // Node 0's map is its last block; node 1's the last of node 1.
        assert_eq!(v.page_line(0), (31 * 512 * 4096) / 64);
        assert_eq!(v.page_line(1), v.page_line(0) + 1);
        assert_eq!(v.page_line(16384), ((16384 + 31 * 512) * 4096) / 64);
        let home = |line: u64| (line * 64) / node_bytes;
        assert_eq!(home(v.page_line(16383)), 0);
        assert_eq!(home(v.page_line(16384)), 1);
        // No frame of the map is ever allocated.
        let map = |pfn: u64| (31 * 512..31 * 512 + 256).contains(&(pfn % 16384));
        while let Some(pfn) = a.alloc_block(0) {
            assert!(!map(pfn), "{pfn}");
        }
        let mut rest = 0;
        while let Some(pfn) = a.alloc(1, 0) {
            assert!(!map(pfn), "{pfn}");
            rest += 1;
        }
        assert_eq!(rest, 31 * 512 + 256);
    }
}
