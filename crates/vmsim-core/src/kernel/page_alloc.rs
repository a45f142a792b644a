//! Physical memory: per-node free lists of 4 KiB frames and 2 MiB blocks,
//! folio metadata, and the content tag of every 4 KiB frame.
//!
//! A content tag stands for the bytes of a frame: `TAG_ZERO` after a clear,
//! a copy carries the source's tag, and each simulated store folds its
//! position and value into the tag. Freed frames keep their stale tags, so
//! a page handed out without being cleared is caught by the workload's check.
//!
//! Folio counts: `mapcount` is the number of page-table entries (PMDs or
//! PTEs) that map any part of the folio, and `refcount` equals it while the
//! folio is mapped, plus one for a page-cache folio (the cache's reference,
//! kernel/filemap.rs; no other references are taken: no GUP pins, no swap
//! cache). A 4 KiB frame inside a 2 MiB folio that a split PMD maps by PTEs
//! finds its folio through `page_folio()`.
//!
//! Invariants: a frame is free or owned by exactly one folio; a 2 MiB block
//! is free only as a whole; free lists hand out the most recently freed
//! frames first (as the per-CPU lists do), lowest addresses first initially
//! unless the free lists were shuffled at boot (`shuffle_free_memory`).
//!
//! Free-page shuffling (CONFIG_SHUFFLE_PAGE_ALLOC, mm/shuffle.c, boot
//! parameter `page_alloc.shuffle`): at boot the kernel randomises the order
//! of the free lists in units of `SHUFFLE_ORDER` pages (order 10 = 4 MiB:
//! `MAX_ORDER - 1` in 5.2 .. 6.3, `MAX_PAGE_ORDER` since). The model
//! permutes its 4 MiB units (pairs of 2 MiB blocks) with a generator seeded
//! by the run's seed, so the seed decides physical placement, as boot-time
//! randomness does on a real machine. Not modeled: the random head/tail
//! placement of freed high-order pages (`shuffle_pick_tail`).

pub const PAGE_SHIFT: u32 = 12;
pub const HPAGE_PMD_ORDER: u32 = 9;
pub const HPAGE_PMD_NR: u64 = 512;
pub const TAG_ZERO: u64 = 0;
/// A 1 GiB gigantic folio: order 18, 262144 frames, 512 blocks of 2 MiB.
pub const HPAGE_PUD_ORDER: u32 = 18;
pub const HPAGE_PUD_NR: u64 = 1 << HPAGE_PUD_ORDER;
/// `SHUFFLE_ORDER` of mm/shuffle.h: free lists are shuffled in 4 MiB units.
pub const SHUFFLE_ORDER: u32 = 10;

#[inline]
pub fn garbage_tag(pfn: u64) -> u64 {
    0xA5A5_0000_0000_0000 ^ pfn.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Folds one store of `value` at line `line_in_page` into a frame's tag.
#[inline]
pub fn tag_store(tag: u64, line_in_page: u64, value: u64) -> u64 {
    let mut x = tag ^ value.wrapping_add(line_in_page.wrapping_mul(0xD6E8_FEB8_6659_FD93));
    x ^= x >> 32;
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 29)
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Folio {
    pub order: u32,
    pub refcount: u32,
    pub mapcount: u32,
}

pub struct PageAlloc {
    pub nr_nodes: usize,
    pub node_frames: u64,
    free_blocks: Vec<Vec<u64>>,
    free_frames: Vec<Vec<u64>>,
    pub tags: Vec<u64>,
    /// Folio metadata, valid at head frames.
    pub folios: Vec<Folio>,
    pub nr_free: Vec<u64>,
    /// While set (a partition's stand-in in a windowed run), stores to
    /// lines are recorded here, (pfn, line, value), instead of changing
    /// `tags`; the run replays them in order.
    pub line_log: Option<Vec<(u64, u64, u64)>>,
}

impl PageAlloc {
    pub fn new(nr_nodes: usize, node_bytes: u64) -> PageAlloc {
        let node_frames = node_bytes >> PAGE_SHIFT;
        let total = node_frames * nr_nodes as u64;
        let blocks_per_node = node_frames / HPAGE_PMD_NR;
        let free_blocks = (0..nr_nodes as u64)
            .map(|n| {
                (0..blocks_per_node)
                    .rev()
                    .map(|b| n * node_frames + b * HPAGE_PMD_NR)
                    .collect()
            })
            .collect();
        PageAlloc {
            nr_nodes,
            node_frames,
            free_blocks,
            free_frames: vec![Vec::new(); nr_nodes],
            tags: (0..total).map(garbage_tag).collect(),
            folios: vec![Folio::default(); total as usize],
            nr_free: vec![blocks_per_node * HPAGE_PMD_NR; nr_nodes],
            line_log: None,
        }
    }

    pub fn node_of_pfn(&self, pfn: u64) -> usize {
        (pfn / self.node_frames) as usize
    }

    /// `shuffle_free_memory()`: permutes each node's free 2 MiB blocks in
    /// units of `SHUFFLE_ORDER` (aligned pairs of blocks, kept in address
    /// order within a unit), Fisher-Yates with a generator seeded by `seed`.
    /// Called once, at boot, before anything is allocated.
    pub fn shuffle_free_memory(&mut self, seed: u64) {
        let per_unit = 1u64 << (SHUFFLE_ORDER - HPAGE_PMD_ORDER);
        for (node, blocks) in self.free_blocks.iter_mut().enumerate() {
            let mut state = seed ^ (node as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F);
            let mut next = || crate::rng::next(&mut state);
            // Units in address order; a trailing half unit stays a unit of its own.
            let mut sorted = blocks.clone();
            sorted.sort_unstable();
            let mut units: Vec<Vec<u64>> = Vec::new();
            for b in sorted {
                let unit = b / (HPAGE_PMD_NR * per_unit);
                match units.last_mut() {
                    Some(u) if u[0] / (HPAGE_PMD_NR * per_unit) == unit => u.push(b),
                    _ => units.push(vec![b]),
                }
            }
            for i in (1..units.len()).rev() {
                let j = (next() % (i as u64 + 1)) as usize;
                units.swap(i, j);
            }
            // The list pops from its end: the first unit is handed out first, low block first.
            *blocks = units
                .into_iter()
                .rev()
                .flat_map(|u| u.into_iter().rev())
                .collect();
        }
    }

    /// Takes the `n` highest whole 2 MiB blocks of every node out of the free
    /// lists for good (boot-time memory such as the memory map,
    /// kernel/vmemmap.rs); returns each node's first reserved frame. Must run
    /// before anything is allocated.
    pub fn reserve_top_blocks(&mut self, n: u64) -> Vec<u64> {
        self.reserve_blocks_below_top(0, n)
    }

    /// As `reserve_top_blocks`, the `n` blocks just below the top `skip`
    /// ones (which an earlier reservation took).
    pub fn reserve_blocks_below_top(&mut self, skip: u64, n: u64) -> Vec<u64> {
        let per_node = self.node_frames / HPAGE_PMD_NR;
        assert!(skip + n < per_node, "a node's reserve must leave it memory");
        (0..self.nr_nodes)
            .map(|node| {
                let base = node as u64 * self.node_frames;
                let first = base + (per_node - skip - n) * HPAGE_PMD_NR;
                let end = base + (per_node - skip) * HPAGE_PMD_NR;
                self.free_blocks[node].retain(|&b| b < first || b >= end);
                self.nr_free[node] -= n * HPAGE_PMD_NR;
                first
            })
            .collect()
    }

    /// Gives frames `first .. end` of `node` (reserved at boot) back to the
    /// 4 KiB free lists, lowest handed out first.
    pub fn release_frames(&mut self, node: usize, first: u64, end: u64) {
        self.free_frames[node].extend((first..end).rev());
        self.nr_free[node] += end - first;
    }

    /// Takes the first `keep` frames of the block just below the top `skip`
    /// blocks of every node for good and gives the rest of the block to the
    /// 4 KiB free lists (memblock's boot allocations are page-granular);
    /// returns each node's first kept frame. Must run at boot.
    pub fn reserve_frames_below_top(&mut self, skip: u64, keep: u64) -> Vec<u64> {
        assert!(keep <= HPAGE_PMD_NR);
        let first = self.reserve_blocks_below_top(skip, 1);
        for (node, &b) in first.iter().enumerate() {
            self.free_frames[node].extend((keep..HPAGE_PMD_NR).rev().map(|i| b + i));
            self.nr_free[node] += HPAGE_PMD_NR - keep;
        }
        first
    }

    /// A free 2 MiB block of `node`, allocated (a test's shorthand for `alloc(node, 9)`).
    #[cfg(test)]
    pub fn alloc_block(&mut self, node: usize) -> Option<u64> {
        self.alloc(node, HPAGE_PMD_ORDER)
    }

    /// Allocates a folio of `order` (0 or 9) on `node`; None if the node has none.
    pub fn alloc(&mut self, node: usize, order: u32) -> Option<u64> {
        let pfn = if order == HPAGE_PMD_ORDER {
            self.free_blocks[node].pop()?
        } else {
            debug_assert_eq!(order, 0);
            if self.free_frames[node].is_empty() {
                let b = self.free_blocks[node].pop()?;
                self.free_frames[node].extend((0..HPAGE_PMD_NR).rev().map(|i| b + i));
            }
            self.free_frames[node].pop()?
        };
        self.nr_free[node] -= 1 << order;
        self.folios[pfn as usize] = Folio {
            order,
            refcount: 1,
            mapcount: 0,
        };
        Some(pfn)
    }

    /// A gigantic (1 GiB, naturally aligned) folio on `node`, made of 512 free
    /// 2 MiB blocks, as `alloc_contig_pages()` finds one for the hugetlb pool at
    /// boot; the highest such range of the node is taken, so ordinary
    /// allocations keep the low addresses. None if no aligned range is free.
    pub fn alloc_gigantic(&mut self, node: usize) -> Option<u64> {
        let free: std::collections::BTreeSet<u64> =
            self.free_blocks[node].iter().copied().collect();
        let lo = node as u64 * self.node_frames;
        let hi = lo + self.node_frames;
        for k in (lo.div_ceil(HPAGE_PUD_NR)..hi / HPAGE_PUD_NR).rev() {
            let base = k * HPAGE_PUD_NR;
            if (0..HPAGE_PMD_NR).all(|i| free.contains(&(base + i * HPAGE_PMD_NR))) {
                self.free_blocks[node].retain(|&b| b < base || b >= base + HPAGE_PUD_NR);
                self.nr_free[node] -= HPAGE_PUD_NR;
                self.folios[base as usize] = Folio {
                    order: HPAGE_PUD_ORDER,
                    refcount: 1,
                    mapcount: 0,
                };
                return Some(base);
            }
        }
        None
    }

    pub fn free(&mut self, pfn: u64) {
        let f = self.folios[pfn as usize];
        let node = self.node_of_pfn(pfn);
        self.nr_free[node] += 1 << f.order;
        self.folios[pfn as usize] = Folio::default();
        if f.order == HPAGE_PUD_ORDER {
            self.free_blocks[node].extend((0..HPAGE_PMD_NR).rev().map(|i| pfn + i * HPAGE_PMD_NR));
        } else if f.order == HPAGE_PMD_ORDER {
            self.free_blocks[node].push(pfn);
        } else {
            self.free_frames[node].push(pfn);
        }
    }

    /// A store of `value` to line `line` of frame `pfn`: its content tag
    /// changes (or the store is logged, see `line_log`).
    #[inline]
    pub fn store_line(&mut self, pfn: u64, line: u64, value: u64) {
        match &mut self.line_log {
            Some(log) => log.push((pfn, line, value)),
            None => {
                let t = &mut self.tags[pfn as usize];
                *t = tag_store(*t, line, value);
            }
        }
    }

    #[inline]
    pub fn tag(&self, pfn: u64) -> u64 {
        self.tags[pfn as usize]
    }

    /// `page_folio()`: the head pfn of the allocated folio that holds `pfn`.
    #[inline]
    pub fn page_folio(&self, pfn: u64) -> u64 {
        if self.folios[pfn as usize].refcount > 0 {
            return pfn;
        }
        let head = pfn & !(HPAGE_PMD_NR - 1);
        debug_assert!(
            self.folios[head as usize].order == HPAGE_PMD_ORDER
                && self.folios[head as usize].refcount > 0,
            "pfn {pfn} belongs to no allocated folio"
        );
        head
    }

    /// A new mapping of the folio holding `pfn` (`folio_add_*_rmap` + `folio_get`);
    /// `first` is the mapping that takes over the allocation's reference.
    pub fn map_folio(&mut self, pfn: u64, nr: u32, first: bool) {
        let head = self.page_folio(pfn);
        let f = &mut self.folios[head as usize];
        f.mapcount += nr;
        if !first {
            f.refcount += nr;
        }
        debug_assert!(f.mapcount <= f.refcount);
    }

    /// Folio mapcount of the folio holding `pfn`.
    #[inline]
    pub fn folio_mapcount(&self, pfn: u64) -> u32 {
        self.folios[self.page_folio(pfn) as usize].mapcount
    }

    /// Drops one mapping of the folio holding `pfn` (`folio_remove_rmap_*` +
    /// `folio_put`). Returns the number of 4 KiB frames freed (0 while other
    /// mappings remain).
    pub fn put_folio(&mut self, pfn: u64) -> u64 {
        let head = self.page_folio(pfn);
        let f = &mut self.folios[head as usize];
        debug_assert!(
            f.mapcount > 0 && f.refcount > 0,
            "put of an unmapped folio at pfn {pfn}"
        );
        f.mapcount -= 1;
        f.refcount -= 1;
        if f.refcount > 0 {
            return 0;
        }
        let pages = 1u64 << f.order;
        self.free(head);
        pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn order9(a: &mut PageAlloc, node: usize) -> Vec<u64> {
        std::iter::from_fn(|| a.alloc(node, 9)).collect()
    }
    #[test]
    fn shuffle_permutes_4mib_units_by_seed() {
        let fresh = || PageAlloc::new(2, 64 << 20);
        let plain = order9(&mut fresh(), 1);
        let mut a = fresh();
        a.shuffle_free_memory(7);
        let s7 = order9(&mut a, 1);
        let mut b = fresh();
        b.shuffle_free_memory(7);
        assert_eq!(order9(&mut b, 1), s7, "same seed, same placement");
        let mut c = fresh();
        c.shuffle_free_memory(8);
        assert_ne!(order9(&mut c, 1), s7, "another seed, another placement");
        assert_ne!(s7, plain);
        let mut sorted = s7.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, plain, "a permutation of the same free blocks");
        // Handed out in whole SHUFFLE_ORDER units: aligned pairs, low block first.
        for pair in s7.chunks(2) {
            assert_eq!(pair[0] % (2 * HPAGE_PMD_NR), 0);
            assert_eq!(pair[1], pair[0] + HPAGE_PMD_NR);
        }
    }
    #[test]
    fn alloc_free_roundtrip() {
        let mut a = PageAlloc::new(2, 8 << 20);
        let h = a.alloc(1, 9).unwrap();
        assert_eq!(h, 4 * 512);
        assert_eq!(a.node_of_pfn(h), 1);
        let s = a.alloc(1, 0).unwrap();
        assert_eq!(s % 512, 0);
        assert_eq!(a.nr_free[1], 4 * 512 - 512 - 1);
        a.free(s);
        assert_eq!(a.alloc(1, 0), Some(s), "most recently freed first");
        for _ in 0..2 {
            assert!(a.alloc(1, 9).is_some());
        }
        assert!(a.alloc(1, 9).is_none());
    }
    #[test]
    fn gigantic_blocks_are_aligned_and_contiguous() {
        // Two nodes of 1.5 GiB: node 0 holds one aligned 1 GiB range, node 1 (starting at 1.5 GiB) one too.
        let mut a = PageAlloc::new(2, 3 << 29);
        let g0 = a.alloc_gigantic(0).unwrap();
        assert_eq!(g0, 0);
        assert!(a.alloc_gigantic(0).is_none());
        let g1 = a.alloc_gigantic(1).unwrap();
        assert_eq!((g1 % HPAGE_PUD_NR, a.node_of_pfn(g1)), (0, 1));
        assert_eq!(a.nr_free[1], (3 << 17) - HPAGE_PUD_NR);
        // Ordinary allocations avoid the reserved range.
        for _ in 0..256 {
            let b = a.alloc(0, 9).unwrap();
            assert!(b >= HPAGE_PUD_NR);
        }
        assert!(a.alloc(0, 9).is_none());
        a.free(g0);
        assert_eq!(a.alloc_gigantic(0), Some(0));
    }

    #[test]
    fn folio_counts_and_sub_page_lookup() {
        let mut a = PageAlloc::new(1, 8 << 20);
        let h = a.alloc(0, 9).unwrap();
        a.map_folio(h, 1, true);
        a.map_folio(h, 1, false); // fork
        assert_eq!(a.folio_mapcount(h + 7), 2);
        // Split of one PMD mapping into 512 PTEs.
        a.map_folio(h, 511, false);
        assert_eq!(a.page_folio(h + 300), h);
        let free0 = a.nr_free[0];
        for i in 0..512 {
            assert_eq!(a.put_folio(h + i), 0);
        }
        assert_eq!(a.folio_mapcount(h), 1);
        assert_eq!(a.put_folio(h), 512, "freed once, by the last mapping");
        assert_eq!(a.nr_free[0], free0 + 512);
        let s = a.alloc(0, 0).unwrap();
        a.map_folio(s, 1, true);
        assert_eq!(a.page_folio(s), s);
        assert_eq!(a.put_folio(s), 1);
    }
    #[test]
    fn stale_tags_survive_free() {
        let mut a = PageAlloc::new(1, 4 << 20);
        let p = a.alloc(0, 0).unwrap();
        assert_ne!(a.tag(p), TAG_ZERO);
        a.tags[p as usize] = tag_store(TAG_ZERO, 3, 7);
        a.free(p);
        let q = a.alloc(0, 0).unwrap();
        assert_eq!(p, q);
        assert_eq!(a.tag(q), tag_store(TAG_ZERO, 3, 7));
    }
}
