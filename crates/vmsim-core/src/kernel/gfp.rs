//! The allocation path (include/linux/gfp.h `alloc_pages_node`,
//! mm/page_alloc.c `__alloc_pages` → `wake_all_kswapds`, mm/vmscan.c
//! `wakeup_kswapd`): a folio from a node's free lists, and the wake-up of
//! the node's kswapd when the allocation leaves it below its low watermark.
//!
//! With `kernel.wakeups` the allocating path pays for the wake-up
//! (`try_to_wake_up`) where the allocation stands in it: a planning path
//! queues it as work, a path on the hardware makes it at once.
//!
//! Invariants: no wake-up is left pending once the path that allocated has
//! returned.

use super::hw::Hw;
use super::{KFn, KStep, Kernel, Work};
use std::collections::VecDeque;

impl Kernel {
    /// `__alloc_pages(order)` on `node` with no fallback: a folio from the
    /// node's free lists; an allocation that leaves the node below its low
    /// watermark wakes its kswapd (`wakeup_kswapd`).
    pub fn alloc_pages_node(&mut self, node: usize, order: u32) -> Option<u64> {
        let pfn = self.mem.alloc.alloc(node, order);
        if self.mem.alloc.nr_free[node] < self.mem.pgdat[node].wmark_low {
            self.wakeup_kswapd(node);
        }
        pfn
    }

    /// `wakeup_kswapd()`: wakes the node's kswapd if it sleeps. With
    /// `kernel.wakeups` the wake-up waits in `pending_wakes` until the
    /// allocating path queues it ([`Kernel::queue_pending_wakes`]) or, if
    /// it runs on the hardware, makes it ([`Kernel::wake_pending`]).
    pub fn wakeup_kswapd(&mut self, node: usize) {
        let q = self.mem.pgdat[node].kswapd_wait;
        if !self.sched.waitq.active(q) {
            return;
        }
        if self.cfg.wakeups {
            if !self.reclaim.pending_wakes.contains(&node) {
                self.reclaim.pending_wakes.push(node);
            }
        } else {
            self.mem.pgdat[node].nr_kswapd_wakeups += 1;
            self.sched.waitq.wake_up(q, false);
        }
    }

    /// The wake-ups pending from an allocation, queued on the path's `work`
    /// at the allocation's place, their cost booked to `what`.
    pub(crate) fn queue_pending_wakes(&mut self, work: &mut VecDeque<Work>, what: KFn) {
        for node in self.reclaim.pending_wakes.drain(..) {
            work.push_back(Work::Kernel(KStep::WakeupKswapd { node, what }));
        }
    }

    /// The wake-ups pending from an allocation made on the hardware (a page
    /// table's), made now by `hw.cpu`; the caller books their cost.
    pub(crate) fn wake_pending(&mut self, hw: &mut Hw) {
        for node in std::mem::take(&mut self.reclaim.pending_wakes) {
            self.wakeup_kswapd_now(hw, node);
        }
    }

    /// Whether a path left kswapd wake-ups pending without queueing them
    /// (none should: the engine checks after each quantum).
    #[inline]
    pub fn has_stray_kswapd_wakes(&self) -> bool {
        !self.reclaim.pending_wakes.is_empty()
    }

    /// Makes the wake-ups a path left pending, for nothing (the engine's
    /// clean-up after a broken invariant); returns how many there were.
    #[cold]
    pub fn wake_stray_kswapds(&mut self) -> usize {
        let nodes = std::mem::take(&mut self.reclaim.pending_wakes);
        for &node in &nodes {
            let q = self.mem.pgdat[node].kswapd_wait;
            if self.sched.waitq.wake_up(q, false) > 0 {
                self.mem.pgdat[node].nr_kswapd_wakeups += 1;
            }
        }
        nodes.len()
    }

    /// `wakeup_kswapd()` made by `hw.cpu`: a kswapd another path has woken
    /// since the allocation asked for it is left alone, for nothing.
    pub(crate) fn wakeup_kswapd_now(&mut self, hw: &mut Hw, node: usize) {
        let q = self.mem.pgdat[node].kswapd_wait;
        if self.wake_up_charged(hw, q, false) > 0 {
            self.mem.pgdat[node].nr_kswapd_wakeups += 1;
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
        let q = k.mem.pgdat[0].kswapd_wait;
        k.sched.waitq.wait(q, 7);
        let low = k.mem.pgdat[0].wmark_low;
        while k.mem.alloc.nr_free[0] >= low {
            k.alloc_pages_node(0, 0).unwrap();
        }
        // The allocation below low wakes nobody yet: the wake-up waits for
        // its path, and a second allocation does not ask for it again.
        assert_eq!(k.reclaim.pending_wakes, vec![0]);
        k.alloc_pages_node(0, 0).unwrap();
        assert_eq!(k.reclaim.pending_wakes, vec![0]);
        assert_eq!(k.mem.pgdat[0].nr_kswapd_wakeups, 0);
        assert!(!k.sched.waitq.has_woken());
        // The path queues it where it stands ...
        let mut work = VecDeque::new();
        k.queue_pending_wakes(&mut work, KFn::HandleMmFault);
        assert!(k.reclaim.pending_wakes.is_empty());
        assert!(matches!(
            work.pop_front(),
            Some(Work::Kernel(KStep::WakeupKswapd {
                node: 0,
                what: KFn::HandleMmFault
            }))
        ));
        // ... and the CPU that gets there pays `try_to_wake_up`; kswapd runs
        // from the waker's clock after it.
        let mut m = test_hw::machine();
        m.cpus[3].clock = 5000;
        let c = k.costs.try_to_wake_up_cycles;
        assert!(c > 0);
        test_hw::on(&mut m, 3, |hw| k.wakeup_kswapd_now(hw, 0));
        assert_eq!(k.mem.pgdat[0].nr_kswapd_wakeups, 1);
        assert_eq!(m.cpus[3].clock, 5000 + c);
        assert_eq!(
            k.sched.waitq.take_woken(),
            vec![Woken {
                pid: 7,
                at: Some(5000 + c),
                iowait: false
            }]
        );
        // A second wake-up queued meanwhile finds kswapd awake: it costs
        // nothing and counts nothing.
        test_hw::on(&mut m, 3, |hw| k.wakeup_kswapd_now(hw, 0));
        assert_eq!(k.mem.pgdat[0].nr_kswapd_wakeups, 1);
        assert_eq!(m.cpus[3].clock, 5000 + c);
    }
}
