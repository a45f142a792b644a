//! The kernel's spinning locks (`kernel.spinlocks`): which lock each
//! object has and where its word lives (kernel/kdata.rs), and the per-CPU
//! batch counts that decide when a path takes one (the per-CPU page lists'
//! refill and drain, the LRU add pagevec). The sections run under them are
//! sections.rs's; one lock's behaviour is spinlock.rs's.

use super::lock_stat::LockClass;
use super::spinlock::{SpinImpl, SpinLock};
use crate::kernel::kdata::KernelData;
use crate::kernel::tunables::KernelTunables;
use std::collections::BTreeMap;

/// A lock a section takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpinRef {
    Zone(usize),
    Lru(usize),
    Tree(usize),
    /// The split lock of the page-table page in this frame (`kernel.pte_locks`).
    Ptl(u64),
}

/// The spinning locks and the per-CPU batches that decide when they are taken.
#[derive(Clone, Debug)]
pub struct Spinlocks {
    pub imp: SpinImpl,
    pub kdata: KernelData,
    zone: Vec<SpinLock>,
    lru: Vec<SpinLock>,
    tree: Vec<SpinLock>,
    /// Each page-table page's split lock, by the table's frame, made when
    /// first taken (`kernel.pte_locks`); a table's free drops it.
    ptl: BTreeMap<u64, SpinLock>,
    /// Per CPU x node: pages left in the per-CPU list since its last refill,
    /// and pages on it to free before a drain.
    pcp_left: Vec<u32>,
    pcp_freed: Vec<u32>,
    /// Per CPU: pages in its LRU-add pagevec.
    pagevec: Vec<u32>,
    nr_nodes: usize,
    /// `kernel.pcp_batch`, `kernel.pcp_high`, `kernel.pagevec_size`.
    pub(super) pcp_batch: u32,
    pcp_high: u32,
    pagevec_size: u32,
}

impl Spinlocks {
    pub fn new(
        imp: SpinImpl,
        mut kdata: KernelData,
        nr_nodes: usize,
        t: &KernelTunables,
    ) -> Spinlocks {
        let zone = (0..nr_nodes)
            .map(|n| SpinLock::new(kdata.line(n), LockClass::ZoneLock))
            .collect();
        let lru = (0..nr_nodes)
            .map(|n| SpinLock::new(kdata.line(n), LockClass::LruLock))
            .collect();
        Spinlocks {
            imp,
            kdata,
            zone,
            lru,
            tree: Vec::new(),
            ptl: BTreeMap::new(),
            pcp_left: Vec::new(),
            pcp_freed: Vec::new(),
            pagevec: Vec::new(),
            nr_nodes,
            // The config's bounds keep each far below u32::MAX.
            pcp_batch: t.pcp_batch as u32,
            pcp_high: t.pcp_high as u32,
            pagevec_size: t.pagevec_size as u32,
        }
    }

    /// A new file's `tree_lock`, on `node`; returns nothing (indexed by ino).
    pub fn add_file(&mut self, node: usize) {
        let line = self.kdata.line(node);
        self.tree.push(SpinLock::new(line, LockClass::TreeLock));
    }

    pub(crate) fn lock_of(&mut self, r: SpinRef) -> &mut SpinLock {
        match r {
            SpinRef::Zone(n) => &mut self.zone[n],
            SpinRef::Lru(n) => &mut self.lru[n],
            SpinRef::Tree(i) => &mut self.tree[i],
            SpinRef::Ptl(pfn) => self.ptl.get_mut(&pfn).expect("made by Spinlocks::ptl"),
        }
    }

    /// The split lock of the table in frame `pfn`, whose word is `line` (its
    /// `struct page`'s), made on first use.
    pub fn ptl(&mut self, pfn: u64, line: u64) -> SpinRef {
        self.ptl
            .entry(pfn)
            .or_insert_with(|| SpinLock::new(line, LockClass::PteLock));
        SpinRef::Ptl(pfn)
    }

    /// The table in frame `pfn` was freed: its lock goes with it.
    pub fn drop_ptl(&mut self, pfn: u64) {
        self.ptl.remove(&pfn);
    }

    /// The frames whose split lock exists (taken since their table was made).
    pub fn ptl_frames(&self) -> impl Iterator<Item = u64> + '_ {
        self.ptl.keys().copied()
    }

    fn slot(v: &mut Vec<u32>, i: usize, init: u32) -> &mut u32 {
        if v.len() <= i {
            v.resize(i + 1, init);
        }
        &mut v[i]
    }

    /// One page allocated from `cpu`'s list of `node`: true when the list
    /// was empty and is refilled (`rmqueue_bulk`, one `zone->lock` section).
    pub fn pcp_alloc(&mut self, cpu: usize, node: usize) -> bool {
        let left = Self::slot(&mut self.pcp_left, cpu * self.nr_nodes + node, 0);
        let refill = *left == 0;
        if refill {
            *left = self.pcp_batch;
        }
        *left -= 1;
        refill
    }

    /// One page freed to `cpu`'s list of `node`: true when the list reaches
    /// `high` and a batch goes back to the buddy lists (`free_pcppages_bulk`).
    pub fn pcp_free(&mut self, cpu: usize, node: usize) -> bool {
        let f = Self::slot(&mut self.pcp_freed, cpu * self.nr_nodes + node, 0);
        *f += 1;
        if *f >= self.pcp_high {
            *f -= self.pcp_batch;
            return true;
        }
        false
    }

    /// One page into `cpu`'s LRU-add pagevec: true when it is full and drains.
    pub fn lru_cache_add(&mut self, cpu: usize) -> bool {
        let p = Self::slot(&mut self.pagevec, cpu, 0);
        *p += 1;
        if *p == self.pagevec_size {
            *p = 0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_take_the_lock_once_per_batch() {
        let mut a = crate::kernel::page_alloc::PageAlloc::new(2, 64 << 20);
        let kd = KernelData::boot(&mut a, 0);
        let mut s = Spinlocks::new(SpinImpl::Queued, kd, 2, &Default::default());
        // Allocation: a refill on the first page, then every 31st.
        let refills: Vec<usize> = (0..100).filter(|_| s.pcp_alloc(3, 1)).collect();
        assert_eq!(refills.len(), 4); // pages 0, 31, 62, 93
        assert!(s.pcp_alloc(3, 0), "another node's list is its own");
        // Freeing: nothing until the list holds high (186), then a batch of 31.
        let drains: Vec<u32> = (1..=300).filter(|_| s.pcp_free(0, 0)).collect();
        assert_eq!(drains.len(), 1 + (300 - 186) / 31);
        // The pagevec drains every 14th page.
        let d = (0..42).filter(|_| s.lru_cache_add(5)).count();
        assert_eq!(d, 3);
        // Each lock has a line of its own, in its node's data.
        let lines: std::collections::BTreeSet<u64> =
            s.zone.iter().chain(&s.lru).map(|l| l.line).collect();
        assert_eq!(lines.len(), 4);
    }
}
