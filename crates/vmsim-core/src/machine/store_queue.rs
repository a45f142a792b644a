//! One logical CPU's store queue (Intel's store buffer): every ordinary
//! store instruction takes an entry when it issues and keeps it until it
//! commits to the L1, which x86's total store order makes happen in program
//! order, each store once its line is owned. A store that misses therefore
//! holds its own entry and every later store's until its line arrives, and
//! a thread whose entries are all taken stalls at its next store. How many
//! entries a line's stores take is the width of the instructions that write
//! it: eight for the kernel's `clear_page_orig` loop of 8 B `mov`s and for
//! a user write loop's line of eight words, two for 32 B vector stores, one
//! for an access that stands for one store.
//!
//! Only ordinary (read-for-ownership) stores are kept here: a non-temporal
//! store leaves its entry for a write-combining buffer, which the fill
//! buffers model, and a fast string's line stores are ordered by the
//! string-boundary drain (machine/core.rs).
//!
//! Invariants: the free times, read from the oldest entry to the newest, do
//! not decrease (commits are in order); an entry never frees before the
//! store ahead of it.

/// The entries' free times in allocation order around a ring.
#[derive(Clone, Debug)]
pub struct StoreQueue {
    free: Box<[u64]>,
    /// The oldest entry.
    head: usize,
    /// When the newest store commits.
    last: u64,
    /// Entries one line access takes (its store instructions), at most the
    /// queue's size.
    per_line: usize,
}

impl StoreQueue {
    /// A queue of `entries` (at least one), all free.
    pub fn new(entries: u64) -> StoreQueue {
        StoreQueue {
            free: vec![0; entries.max(1) as usize].into_boxed_slice(),
            head: 0,
            last: 0,
            per_line: 1,
        }
    }

    /// Each later line access is written by `stores` instructions (at
    /// least one; a line of more than the queue holds takes all of it).
    pub fn set_line_stores(&mut self, stores: u64) {
        self.per_line = (stores.max(1) as usize).min(self.free.len());
    }

    /// When a line's stores can all have entries: the latest free time of
    /// the oldest `per_line` entries.
    #[inline]
    pub fn ready(&self) -> u64 {
        let i = self.head + self.per_line - 1;
        let n = self.free.len();
        self.free[if i >= n { i - n } else { i }]
    }

    /// The line's stores take their entries and commit when the line is
    /// owned (`owned`), but not before the stores ahead of them; returns the
    /// commit time.
    #[inline]
    pub fn commit(&mut self, owned: u64) -> u64 {
        let t = owned.max(self.last);
        self.last = t;
        let n = self.free.len();
        for _ in 0..self.per_line {
            self.free[self.head] = t;
            self.head += 1;
            if self.head == n {
                self.head = 0;
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A naive queue: the list of every entry ever taken, with its free time.
    struct Naive {
        cap: usize,
        taken: Vec<u64>,
    }

    impl Naive {
        fn ready(&self, k: usize) -> u64 {
            // The k oldest of the `cap` most recent must be free: the newest
            // entry that is still ahead of the k we need.
            let k = k.min(self.cap);
            let n = self.taken.len();
            if n + k <= self.cap {
                0
            } else {
                self.taken[n + k - self.cap - 1]
            }
        }
        fn commit(&mut self, k: usize, owned: u64) -> u64 {
            let t = owned.max(self.taken.last().copied().unwrap_or(0));
            for _ in 0..k.min(self.cap) {
                self.taken.push(t);
            }
            t
        }
    }

    #[test]
    fn a_full_queue_waits_for_the_oldest_lines_stores() {
        // 16 entries, 8 a line: two lines in flight. The third line waits
        // for the first to commit, the fourth for the second.
        let mut q = StoreQueue::new(16);
        q.set_line_stores(8);
        assert_eq!(q.ready(), 0);
        assert_eq!(q.commit(300), 300);
        assert_eq!(q.ready(), 0);
        // Owned sooner, but behind the first: commits at 300.
        assert_eq!(q.commit(200), 300);
        assert_eq!(q.ready(), 300);
        assert_eq!(q.commit(700), 700);
        assert_eq!(q.ready(), 300);
        assert_eq!(q.commit(400), 700);
        assert_eq!(q.ready(), 700);
        // One store a line needs only the oldest entry, the third line's.
        q.set_line_stores(1);
        assert_eq!(q.ready(), 700);
        // With half the queue free, a line of one store does not wait.
        let mut q = StoreQueue::new(16);
        q.set_line_stores(8);
        q.commit(300);
        q.set_line_stores(1);
        assert_eq!(q.ready(), 0);
        q.set_line_stores(9);
        assert_eq!(q.ready(), 300);
    }

    #[test]
    fn a_line_of_more_stores_than_entries_takes_the_whole_queue() {
        let mut q = StoreQueue::new(4);
        q.set_line_stores(8);
        q.commit(50);
        assert_eq!(q.ready(), 50);
        q.commit(10);
        assert_eq!(q.ready(), 50);
    }

    proptest! {
        #[test]
        fn matches_the_naive_queue(
            cap in 1usize..40,
            ops in prop::collection::vec((1u64..12, 0u64..1000), 1..200),
        ) {
            let mut q = StoreQueue::new(cap as u64);
            let mut n = Naive { cap, taken: Vec::new() };
            for (k, owned) in ops {
                q.set_line_stores(k);
                prop_assert_eq!(q.ready(), n.ready(k as usize));
                prop_assert_eq!(q.commit(owned), n.commit(k as usize, owned));
            }
        }
    }
}
