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

use super::reclaim::{PG_ACTIVE, PG_LRU, PG_REFERENCED};
use super::Kernel;

impl Kernel {
    /// `folio_add_lru`: a new folio goes to the head of its node's inactive
    /// file list, or of the active one when refault detection says so.
    pub fn folio_add_lru(&mut self, pfn: u64, active: bool) {
        let node = self.mem.alloc.node_of_pfn(pfn);
        debug_assert!(
            !self.reclaim.lru.test(pfn, PG_LRU),
            "folio {pfn} already on an LRU"
        );
        if active {
            self.reclaim.lru.flags[pfn as usize] = PG_LRU | PG_ACTIVE;
            self.reclaim.lru.nodes[node].active_file.push_front(pfn);
        } else {
            self.reclaim.lru.flags[pfn as usize] = PG_LRU;
            self.reclaim.lru.nodes[node].inactive_file.push_front(pfn);
        }
    }

    /// `folio_mark_accessed`: a first access sets `PG_referenced`, a second
    /// one on an inactive folio activates it (`folio_activate`, `pgactivate`).
    pub fn folio_mark_accessed(&mut self, pfn: u64) {
        if !self.reclaim.lru.test(pfn, PG_REFERENCED) {
            self.reclaim.lru.set(pfn, PG_REFERENCED);
        } else if !self.reclaim.lru.test(pfn, PG_ACTIVE) {
            if self.reclaim.lru.test(pfn, PG_LRU) {
                let node = self.mem.alloc.node_of_pfn(pfn);
                let l = &mut self.reclaim.lru.nodes[node];
                if let Some(i) = l.inactive_file.iter().position(|&p| p == pfn) {
                    l.inactive_file.remove(i);
                }
                l.active_file.push_front(pfn);
            }
            self.reclaim.lru.set(pfn, PG_ACTIVE);
            self.reclaim.lru.clear(pfn, PG_REFERENCED);
            self.reclaim.stat.pgactivate += 1;
        }
    }
}
