//! The file LRU lists (mm/swap.c, include/linux/mm_inline.h): per node an
//! inactive and an active list of page-cache folios, newest at the head.
//! `folio_add_lru` puts a new folio at the head of the inactive list;
//! `folio_mark_accessed` is the two-step promotion of accesses the kernel
//! sees itself (referenced, then active); mapped accesses are seen only
//! through the PTE young bits that reclaim reads (kernel/vmscan.rs).
//!
//! The per-CPU folio batches that delay LRU adds are not modelled: a folio
//! is on its list at once.
//!
//! Invariants: a frame is on at most one list, and on one iff `PG_lru`;
//! `PG_active` iff that list is the active one.

use super::Kernel;
use std::collections::VecDeque;

pub const PG_LRU: u8 = 1;
pub const PG_ACTIVE: u8 = 2;
pub const PG_REFERENCED: u8 = 4;

/// One node's file LRU lists (`lruvec`), frames, head first.
#[derive(Clone, Debug, Default)]
pub struct Lruvec {
    pub inactive_file: VecDeque<u64>,
    pub active_file: VecDeque<u64>,
}

/// Every node's lists and the LRU flags of every frame.
pub struct Lru {
    pub nodes: Vec<Lruvec>,
    pub flags: Vec<u8>,
}

impl Lru {
    pub fn new(nr_nodes: usize, nr_frames: u64) -> Lru {
        Lru {
            nodes: vec![Lruvec::default(); nr_nodes],
            flags: vec![0; nr_frames as usize],
        }
    }
    #[inline]
    pub fn test(&self, pfn: u64, f: u8) -> bool {
        self.flags[pfn as usize] & f != 0
    }
    #[inline]
    pub fn set(&mut self, pfn: u64, f: u8) {
        self.flags[pfn as usize] |= f;
    }
    #[inline]
    pub fn clear(&mut self, pfn: u64, f: u8) {
        self.flags[pfn as usize] &= !f;
    }
}

impl Kernel {
    /// `folio_add_lru`: a new folio goes to the head of its node's inactive
    /// file list, or of the active one when refault detection says so.
    pub fn folio_add_lru(&mut self, pfn: u64, active: bool) {
        let node = self.alloc.node_of_pfn(pfn);
        debug_assert!(!self.lru.test(pfn, PG_LRU), "folio {pfn} already on an LRU");
        if active {
            self.lru.flags[pfn as usize] = PG_LRU | PG_ACTIVE;
            self.lru.nodes[node].active_file.push_front(pfn);
        } else {
            self.lru.flags[pfn as usize] = PG_LRU;
            self.lru.nodes[node].inactive_file.push_front(pfn);
        }
    }

    /// `folio_mark_accessed`: a first access sets `PG_referenced`, a second
    /// one on an inactive folio activates it (`folio_activate`, `pgactivate`).
    pub fn folio_mark_accessed(&mut self, pfn: u64) {
        if !self.lru.test(pfn, PG_REFERENCED) {
            self.lru.set(pfn, PG_REFERENCED);
        } else if !self.lru.test(pfn, PG_ACTIVE) {
            if self.lru.test(pfn, PG_LRU) {
                let node = self.alloc.node_of_pfn(pfn);
                let l = &mut self.lru.nodes[node];
                if let Some(i) = l.inactive_file.iter().position(|&p| p == pfn) {
                    l.inactive_file.remove(i);
                }
                l.active_file.push_front(pfn);
            }
            self.lru.set(pfn, PG_ACTIVE);
            self.lru.clear(pfn, PG_REFERENCED);
            self.reclaim.pgactivate += 1;
        }
    }
}
