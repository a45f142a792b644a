//! Reclaim's state (include/linux/mmzone.h `lruvec`, `pglist_data`'s
//! kswapd fields): the file LRU lists and every frame's LRU flags, each
//! node's kswapd failure count and refault clock, the kswapd wake-ups an
//! allocation left pending, the reclaim counters and reclaim's system
//! cycles by path and reclaimer. The paths are
//! swap.rs (LRU adds and promotion), vmscan.rs (reclaim), workingset.rs
//! (refault detection) and gfp.rs (waking kswapd).
//!
//! Invariants: a frame is on at most one list, and on one iff `PG_lru`;
//! `PG_active` iff that list is the active one.

use super::hw::KfnCycles;
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

crate::counters! {
/// Reclaim and LRU counters with their /proc/vmstat names.
pub struct ReclaimStat {
    /// Folios moved to an active list (`folio_activate`, or by reclaim for referenced mapped folios).
    pub pgactivate: u64,
    /// Folios moved from the active to the inactive list by `shrink_active_list`.
    pub pgdeactivate: u64,
    /// Folios `shrink_active_list` scanned.
    pub pgrefill: u64,
    pub pgscan_kswapd: u64,
    pub pgsteal_kswapd: u64,
    pub pgscan_direct: u64,
    pub pgsteal_direct: u64,
    /// Times an allocating task entered direct reclaim (`allocstall`).
    pub allocstall: u64,
    /// Page-cache folios read again after eviction, and those started active.
    pub workingset_refault_file: u64,
    pub workingset_activate_file: u64,
    /// Batched flushes sent (`try_to_unmap_flush` with IPIs) and their IPIs.
    pub tlb_ubc_flushes: u64,
    pub tlb_ubc_ipis: u64,
    /// Batched flushes done by one INVLPGB broadcast (`broadcast`).
    pub tlb_ubc_invlpgb: u64,
}
}

/// Reclaim's state, per node where the kernel keeps it per node.
pub struct Reclaim {
    /// The file LRU lists and every frame's LRU flags.
    pub lru: Lru,
    pub stat: ReclaimStat,
    /// Per node: kswapd runs in a row that reclaimed nothing (`kswapd_failures`).
    pub kswapd_failures: Vec<u32>,
    /// Per node: folios kswapd scanned since it last made progress.
    pub kswapd_noprogress_scan: Vec<u64>,
    /// Per node: `nonresident_age` of refault detection (kernel/workingset.rs).
    pub nonresident_age: Vec<u64>,
    /// Nodes whose kswapd an allocation on a path without the hardware
    /// found asleep, with `kernel.wakeups` on: the path queues their
    /// `KStep::WakeupKswapd` where it stands (kernel/gfp.rs), so that the
    /// waker pays `try_to_wake_up` when its CPU gets there.
    pub pending_wakes: Vec<usize>,
    /// System cycles of `shrink_node` rounds by kernel path (`KFn` order),
    /// direct reclaim's (`[0]`) and kswapd's (`[1]`): the IPIs' handlers
    /// on other CPUs are theirs, not the reclaimer's.
    pub cycles_by_fn: [KfnCycles; 2],
}

impl Reclaim {
    pub fn new(nr_nodes: usize, nr_frames: u64) -> Reclaim {
        Reclaim {
            lru: Lru::new(nr_nodes, nr_frames),
            stat: ReclaimStat::default(),
            kswapd_failures: vec![0; nr_nodes],
            kswapd_noprogress_scan: vec![0; nr_nodes],
            nonresident_age: vec![0; nr_nodes],
            pending_wakes: Vec::new(),
            cycles_by_fn: Default::default(),
        }
    }
}
