//! A physical core's resources that its SMT threads share: the L1 line fill
//! buffers, the L2 superqueue (miss-address buffers on AMD) and the issue
//! (allocation) bandwidth. Intel documents the fill buffers as competitively
//! shared between Hyper-Threads (Linux `Documentation/arch/x86/mds.rst`) and
//! the front end and allocation as alternating between active threads; a lone
//! thread on a core gets all of them.
//!
//! Issue bandwidth is a calendar of `ISSUE_EPOCH`-cycle epochs, each able to
//! issue for `ISSUE_EPOCH` cycles in total. A thread asking for `c` cycles of
//! issue at `t` takes what the epoch has left; when its sibling has used part
//! of an epoch, the thread's share of it is stretched over the rest of the
//! epoch. Requests arrive in nearly time order (the scheduler advances the
//! lowest clock for a bounded quantum), as at the DRAM calendar.
//!
//! Lines reach the core over two fill paths of limited bandwidth, shared by
//! the threads too: from the L2 into the L1, and from the LLC (or beyond)
//! into the L2 (`FillPort`s, absent when the preset sets no limit). A line's
//! data is there once the lines ahead of it have crossed each path it takes:
//! a lone line is not delayed (its own transfer is in the level's latency), a
//! stream is spread at the path's bandwidth.
//!
//! A thread's string instructions are ordered among themselves: where the
//! preset says so (`string.drain_at_boundary`, after Intel SDM Vol. 3A
//! §8.2.4.1: "all the stores from an earlier string operation will complete
//! before any store from a later string operation"), a string instruction's
//! first store issues, and its start-up begins, only once every line store
//! of the thread's previous string instruction is granted: the time its fill
//! buffer frees (an ownership grant, a fill, or a posted write's acceptance).
//! Per thread, as the rule is per logical processor.
//!
//! A thread's `sfence` waits, where the preset measured it, for its unread
//! lines (non-temporal, `clzero`, bypassing string stores): each thread
//! keeps when the last of them it issued leaves its buffer.
//!
//! The core's prefetchers (machine/prefetch.rs) are trained by both threads'
//! requests, as the L2 they watch is the core's, and their requests take the
//! same fill buffers and superqueue entries as demand misses.
//!
//! Invariants: no epoch issues for more than `ISSUE_EPOCH` cycles; a lone
//! thread (no sibling reservations) is never delayed: `reserve(t, c) == t + c`.
//! A thread's string grant time only grows while its string instruction runs
//! and is consumed (reset) when its next string instruction begins; without
//! the drain, beginning a string instruction never moves its start.

use super::cache::INVALID;
use super::hierarchy::Served;
use super::memory::FillPort;
use super::prefetch::{NextLine, PrefetchParams, Streamer};

/// Length of one issue epoch in cycles.
pub const ISSUE_EPOCH: u64 = 64;
/// Epochs remembered; siblings further apart in time than this do not meet.
const RING: usize = 1024;

/// When each of a set of entries (fill buffers, superqueue entries) frees,
/// with the entry that frees first kept up to date: a tournament tree over
/// the entries, each node the lesser of its children by (time, index), so
/// the root is the first entry of least time, as a linear scan finds it.
/// Reads go through `Deref` to the plain times.
#[derive(Clone, Debug)]
pub struct MinSlots {
    vals: Vec<u64>,
    /// Nodes 1.. of the tree, each `time << 6 | index` so one comparison
    /// orders by time then index; leaves at `leaves + i` (padding leaves
    /// hold `u64::MAX`, above every real key).
    tree: Box<[u64]>,
    leaves: usize,
    /// A time too large for a key (never in practice: 2^58 cycles), more
    /// than 64 entries or none: the tree is abandoned for a linear scan.
    wide: bool,
}

/// Times below this fit a tree key.
const KEY_LIMIT: u64 = 1 << (64 - KEY_INDEX_BITS);
const KEY_INDEX_BITS: u32 = 6;

impl MinSlots {
    pub fn new(n: usize, v: u64) -> MinSlots {
        let leaves = n.max(1).next_power_of_two();
        // No entries at all are left to the scan too (it finds none).
        let wide = n == 0 || n > 1 << KEY_INDEX_BITS || v >= KEY_LIMIT;
        let mut tree = vec![u64::MAX; 2 * leaves].into_boxed_slice();
        if !wide {
            for (i, l) in tree[leaves..leaves + n].iter_mut().enumerate() {
                *l = v << KEY_INDEX_BITS | i as u64;
            }
            for i in (1..leaves).rev() {
                tree[i] = tree[2 * i].min(tree[2 * i + 1]);
            }
        }
        MinSlots {
            vals: vec![v; n],
            tree,
            leaves,
            wide,
        }
    }

    /// `(index, time)` of the first entry of least time (`(0, u64::MAX)` if none).
    #[inline]
    pub fn argmin(&self) -> (usize, u64) {
        if self.wide {
            return argmin_scan(&self.vals);
        }
        let k = self.tree[1];
        (
            (k & ((1 << KEY_INDEX_BITS) - 1)) as usize,
            k >> KEY_INDEX_BITS,
        )
    }

    #[inline]
    pub fn set(&mut self, i: usize, v: u64) {
        self.vals[i] = v;
        if self.wide || v >= KEY_LIMIT {
            self.wide = true;
            return;
        }
        let node = self.leaves + i;
        let t = &mut self.tree[..];
        assert!(node < t.len());
        let k = v << KEY_INDEX_BITS | i as u64;
        t[node] = k;
        // The usual sizes (up to 16 or 32 entries) unrolled: no test per level.
        match self.leaves {
            16 => Self::up::<4>(t, node, k),
            32 => Self::up::<5>(t, node, k),
            _ => {
                let (mut node, mut k) = (node, k);
                while node > 1 {
                    (node, k) = Self::up::<1>(t, node, k);
                }
                (node, k)
            }
        };
    }

    /// `LEVELS` steps up the tree from `node`, whose key is now `k`: each
    /// parent takes the lesser of its children. Returns the last node
    /// written and its key.
    #[inline(always)]
    fn up<const LEVELS: u32>(t: &mut [u64], mut node: usize, mut k: u64) -> (usize, u64) {
        for _ in 0..LEVELS {
            debug_assert!(node > 1 && node < t.len());
            // SAFETY: node < t.len() (asserted by the caller, and it only
            // shrinks), and node ^ 1 < t.len() as t.len() is even; the
            // caller steps at most up to the root (node 1).
            let sib = unsafe { *t.get_unchecked(node ^ 1) };
            k = k.min(sib);
            node >>= 1;
            // SAFETY: as above.
            unsafe { *t.get_unchecked_mut(node) = k };
        }
        (node, k)
    }
}

/// The first entry of least time, by a scan.
#[inline]
pub fn argmin_scan(v: &[u64]) -> (usize, u64) {
    let mut bi = 0;
    let mut bv = u64::MAX;
    for (i, &x) in v.iter().enumerate() {
        if x < bv {
            bv = x;
            bi = i;
        }
    }
    (bi, bv)
}

impl std::ops::Deref for MinSlots {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        &self.vals
    }
}

pub struct CoreResources {
    /// When each line fill buffer frees.
    pub lfb: MinSlots,
    /// When each superqueue entry frees.
    pub sq: MinSlots,
    /// The line a prefetch holding that fill buffer / superqueue entry brings
    /// (`INVALID` for a demand miss): a demand for it waits for its data.
    pub lfb_line: Vec<u64>,
    pub sq_line: Vec<u64>,
    /// No prefetch of this core is in flight at or after this time.
    pub pf_until: u64,
    pub issue: IssueSlots,
    pub next_line: NextLine,
    pub streamer: Streamer,
    /// The L2-to-L1 and LLC-to-L2 fill paths (None: no limit).
    l1_fill: Option<FillPort>,
    l2_fill: Option<FillPort>,
    /// Whether dirty L1 / L2 victims take their share of those paths.
    l1_victims_on_path: bool,
    l2_victims_on_path: bool,
    /// Per SMT thread: when the last line store of its current (or latest)
    /// string instruction is granted, and whether one is executing.
    string_granted: Vec<u64>,
    in_string: Vec<bool>,
    /// Per SMT thread: whether it is in a `clzero` loop.
    in_clzero: Vec<bool>,
    /// Per SMT thread: when the last of its unread lines (non-temporal,
    /// `clzero`, bypassing string stores) left its buffer, as far as they
    /// have issued; what an `sfence` waits on.
    unread_left: Vec<u64>,
}

/// Bytes per cycle of a core's two fill paths (0: no limit), and whether
/// the dirty victims leaving by each path share its bandwidth.
#[derive(Clone, Copy, Debug, Default)]
pub struct FillBandwidth {
    pub from_l2: f64,
    pub from_llc: f64,
    pub l1_writebacks_share: bool,
    pub l2_writebacks_share: bool,
}

impl CoreResources {
    pub fn new(
        fill_buffers: usize,
        superqueue: usize,
        threads: usize,
        pf: &PrefetchParams,
        fill: FillBandwidth,
    ) -> CoreResources {
        let port = |b: f64| (b > 0.0).then(|| FillPort::new(b));
        CoreResources {
            l1_fill: port(fill.from_l2),
            l2_fill: port(fill.from_llc),
            l1_victims_on_path: fill.l1_writebacks_share,
            l2_victims_on_path: fill.l2_writebacks_share,
            lfb: MinSlots::new(fill_buffers, 0),
            sq: MinSlots::new(superqueue, 0),
            lfb_line: vec![INVALID; fill_buffers],
            sq_line: vec![INVALID; superqueue],
            pf_until: 0,
            issue: IssueSlots::new(threads),
            next_line: NextLine::default(),
            streamer: Streamer::new(pf),
            string_granted: vec![0; threads.max(1)],
            in_string: vec![false; threads.max(1)],
            in_clzero: vec![false; threads.max(1)],
            unread_left: vec![0; threads.max(1)],
        }
    }

    /// Thread `thread` begins a string instruction at `now`; returns when
    /// its start-up may begin. With `drain`, that is once every line store
    /// of the thread's previous string instruction is granted; without it,
    /// `now`. From here the thread's string stores are counted
    /// ([`CoreResources::string_store`]) until [`CoreResources::string_end`].
    pub fn string_begin(&mut self, thread: usize, now: u64, drain: bool) -> u64 {
        let t = if drain {
            now.max(self.string_granted[thread])
        } else {
            now
        };
        // Every store of the new instruction is granted after `t`.
        self.string_granted[thread] = t;
        self.in_string[thread] = true;
        t
    }

    /// A line store of thread `thread` is granted at `t` (its fill buffer
    /// frees then); counted if it belongs to a string instruction.
    #[inline(always)]
    pub fn string_store(&mut self, thread: usize, t: u64) {
        if self.in_string[thread] {
            let g = &mut self.string_granted[thread];
            *g = (*g).max(t);
        }
    }

    /// Whether thread `thread` is inside a string instruction.
    #[inline(always)]
    pub fn in_string(&self, thread: usize) -> bool {
        self.in_string[thread]
    }

    /// Thread `thread`'s string instruction has issued its last store; its
    /// grant time stays for the next [`CoreResources::string_begin`].
    pub fn string_end(&mut self, thread: usize) {
        self.in_string[thread] = false;
    }

    /// Thread `thread` enters (true) or leaves a `clzero` loop, whose lines
    /// hold their miss buffers for `string.clzero_hold_ns`.
    pub fn set_clzero(&mut self, thread: usize, on: bool) {
        self.in_clzero[thread] = on;
    }

    /// Whether thread `thread` is in a `clzero` loop.
    #[inline(always)]
    pub fn in_clzero(&self, thread: usize) -> bool {
        self.in_clzero[thread]
    }

    /// An unread line of thread `thread` leaves its buffer at `t`.
    #[inline(always)]
    pub fn unread_store(&mut self, thread: usize, t: u64) {
        let u = &mut self.unread_left[thread];
        *u = (*u).max(t);
    }

    /// When the last unread line thread `thread` has issued leaves its buffer.
    pub fn unread_left(&self, thread: usize) -> u64 {
        self.unread_left[thread]
    }

    /// When every line store of thread `thread`'s latest string instruction
    /// is granted (as far as they have issued).
    pub fn string_granted(&self, thread: usize) -> u64 {
        self.string_granted[thread]
    }

    /// When a line served from `served` whose data is ready at its source at
    /// `t` has crossed the fill paths into the L2 and, if `into_l1`, into the
    /// L1. Lines that carry no data (ownership grants, non-temporal writes)
    /// and L1 hits take no path.
    #[inline]
    pub fn fill(&mut self, served: Served, t: u64, into_l1: bool) -> u64 {
        let beyond_l2 = match served {
            Served::L1 | Served::NoFill { .. } | Served::NtWrite { .. } => return t,
            Served::L2 => false,
            Served::Llc | Served::RemoteCache { .. } | Served::Dram { .. } => true,
        };
        let mut t = t;
        if beyond_l2 {
            if let Some(p) = &mut self.l2_fill {
                t = p.reserve_queued(t, 64);
            }
        }
        if into_l1 {
            if let Some(p) = &mut self.l1_fill {
                t = p.reserve_queued(t, 64);
            }
        }
        t
    }

    /// Dirty victims leaving the core's caches once the fill that evicted
    /// them is in, at `t`: where the preset says they share a path
    /// (`writebacks_share_sustained`), an L1 victim takes its share of the
    /// path between the L1 and the L2, an L2 victim of the path between the
    /// L2 and the LLC, and lines filled after `t` queue behind them. True on
    /// Intel (a one-core `x += y` on a Haswell-EP runs at the sustained rates
    /// with its write-backs counted), false on Milan (docs/model.md, "Fill
    /// paths").
    #[inline(always)]
    pub fn writebacks(&mut self, l1: u32, l2: u32, t: u64) {
        if let Some(p) = self.l1_fill.as_mut().filter(|_| self.l1_victims_on_path) {
            for _ in 0..l1 {
                p.occupy(t, 64);
            }
        }
        if let Some(p) = self.l2_fill.as_mut().filter(|_| self.l2_victims_on_path) {
            for _ in 0..l2 {
                p.occupy(t, 64);
            }
        }
    }

    /// Cycles lines waited for the lines ahead of them on the L2-to-L1 and
    /// the LLC-to-L2 fill paths (0 where a path has no limit).
    pub fn fill_queue_cycles(&self) -> (u64, u64) {
        let q = |p: &Option<FillPort>| p.as_ref().map_or(0, |p| p.stats.queue_cycles);
        (q(&self.l1_fill), q(&self.l2_fill))
    }

    /// When a prefetch of `line` still in flight at `t` delivers it, if one is.
    #[inline]
    pub fn inflight(&self, line: u64, t: u64) -> Option<u64> {
        if t >= self.pf_until {
            return None;
        }
        let find = |lines: &[u64], free: &[u64]| {
            lines
                .iter()
                .zip(free)
                .filter(|&(&l, &f)| l == line && f > t)
                .map(|(_, &f)| f)
                .max()
        };
        find(&self.sq_line, &self.sq).max(find(&self.lfb_line, &self.lfb))
    }
}

/// A sibling that issued within this many cycles of a request counts as active.
const ACTIVE_WINDOW: u64 = 8192;
const NEVER: u64 = u64::MAX;

pub struct IssueSlots {
    threads: usize,
    epoch_id: Vec<u64>,
    /// Per epoch slot, cycles issued by each thread (`threads` entries per slot).
    used: Vec<u64>,
    /// Per thread, when its last issue ended (NEVER: it has not issued yet).
    last: Vec<u64>,
}

impl IssueSlots {
    pub fn new(threads: usize) -> IssueSlots {
        let threads = threads.max(1);
        IssueSlots {
            threads,
            epoch_id: vec![NEVER; RING],
            used: vec![0; RING * threads],
            last: vec![NEVER; threads],
        }
    }

    /// Cycles thread `j` issued in the latest full epoch before its last issue (or in the
    /// epoch of its last issue, if more): what it is expected to ask of an epoch it has not reached.
    fn recent_rate(&self, j: usize) -> u64 {
        let n = self.threads;
        let e = self.last[j] / ISSUE_EPOCH;
        let at = |e: u64| {
            let slot = (e as usize) & (RING - 1);
            if self.epoch_id[slot] == e {
                self.used[slot * n + j]
            } else {
                0
            }
        };
        at(e).max(e.checked_sub(1).map_or(0, at))
    }

    /// Thread `thread` issues `c` cycles' worth of instructions starting at `t`;
    /// returns when they are issued.
    ///
    /// What a sibling already took of an epoch is gone. A sibling that is active
    /// but has not yet reached the epoch (it runs behind in simulated time) is
    /// left what it issued per epoch lately, up to an equal share: threads running
    /// the same issue-bound code get the same rate, as with the hardware's
    /// alternating issue, and a sibling stalled on memory leaves the width to us.
    #[inline(always)]
    pub fn reserve(&mut self, thread: usize, t: u64, c: u64) -> u64 {
        if c == 0 {
            return t;
        }
        let (pos, left) = if self.threads == 2 {
            self.reserve_clear_epochs(thread, t, c)
        } else {
            (t, c)
        };
        if left == 0 {
            self.last[thread] = pos;
            return pos;
        }
        self.reserve_from(thread, pos, left)
    }

    /// The passes of [`IssueSlots::reserve_from`]'s loop, for two threads,
    /// over epochs where what is left of the epoch is ours to take (the
    /// usual case). Stops at the first other epoch, as the loop leaves it
    /// before its pass there (reset if that pass would reset it), and returns
    /// where the loop is to go on: the position and the cycles left.
    #[inline(always)]
    fn reserve_clear_epochs(&mut self, thread: usize, t: u64, c: u64) -> (u64, u64) {
        let (mut pos, mut left) = (t, c);
        while left > 0 {
            let e = pos / ISSUE_EPOCH;
            let end = (e + 1) * ISSUE_EPOCH;
            let slot = (e as usize) & (RING - 1);
            let base = slot * 2;
            let id = self.epoch_id[slot];
            if id != e {
                if id != NEVER && id > e {
                    break;
                }
                // The loop's pass would reset the slot just so.
                self.epoch_id[slot] = e;
                self.used[base] = 0;
                self.used[base + 1] = 0;
            }
            let claimed = self.claim(thread ^ 1, base, pos, end);
            let mine = self.used[base + thread];
            let rem = end - pos;
            if ISSUE_EPOCH.saturating_sub(claimed + mine) < rem {
                break;
            }
            // The loop's pass with `avail >= rem`.
            let take = left.min(rem);
            self.used[base + thread] = mine + take;
            left -= take;
            pos += take;
        }
        (pos, left)
    }

    /// [`IssueSlots::reserve`] of `left` (> 0) cycles from `pos`: any number
    /// of threads, any state.
    #[inline(never)]
    fn reserve_from(&mut self, thread: usize, t: u64, c: u64) -> u64 {
        let n = self.threads;
        let mut pos = t;
        let mut left = c;
        loop {
            let e = pos / ISSUE_EPOCH;
            let end = (e + 1) * ISSUE_EPOCH;
            let slot = (e as usize) & (RING - 1);
            let base = slot * n;
            let id = self.epoch_id[slot];
            if id != e {
                if id != NEVER && id > e {
                    // The slot holds an epoch a whole ring ahead: a sibling that far
                    // ahead in time shares nothing with us; issue unhindered, unrecorded.
                    let take = left.min(end - pos);
                    pos += take;
                    left -= take;
                    if left == 0 {
                        break;
                    }
                    continue;
                }
                self.epoch_id[slot] = e;
                self.used[base..base + n].fill(0);
            }
            let claimed = if n == 2 {
                self.claim(thread ^ 1, base, pos, end)
            } else {
                (0..n)
                    .filter(|&j| j != thread)
                    .map(|j| self.claim(j, base, pos, end))
                    .sum()
            };
            let mine = self.used[base + thread];
            let avail = ISSUE_EPOCH.saturating_sub(claimed + mine);
            let rem = end - pos;
            if avail == 0 {
                pos = end;
                continue;
            }
            let take = left.min(avail).min(rem);
            self.used[base + thread] = mine + take;
            left -= take;
            if avail >= rem {
                pos += take;
            } else {
                // Siblings hold part of what is left of the epoch: our share is spread over it.
                pos = (pos + (take * rem).div_ceil(avail)).min(end);
            }
            if left == 0 {
                break;
            }
        }
        self.last[thread] = pos;
        pos
    }

    /// What sibling `j` holds of the epoch at `base` (in `used`) for a request
    /// at `pos` in it, ending at `end`.
    #[inline(always)]
    fn claim(&self, j: usize, base: usize, pos: u64, end: u64) -> u64 {
        let u = self.used[base + j];
        let lj = self.last[j];
        let behind_and_active = lj != NEVER && lj < end && lj + ACTIVE_WINDOW >= pos;
        if behind_and_active {
            u.max(self.recent_rate(j).min(ISSUE_EPOCH / self.threads as u64))
        } else {
            u
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The calendar as it was written before `reserve` was tuned: the
    /// reference `reserve` is tested against.
    impl IssueSlots {
        pub fn reserve_reference(&mut self, thread: usize, t: u64, c: u64) -> u64 {
            let n = self.threads;
            let mut pos = t;
            let mut left = c;
            while left > 0 {
                let e = pos / ISSUE_EPOCH;
                let end = (e + 1) * ISSUE_EPOCH;
                let slot = (e as usize) & (RING - 1);
                let id = self.epoch_id[slot];
                if id != e {
                    if id != NEVER && id > e {
                        // The slot holds an epoch a whole ring ahead: a sibling that far
                        // ahead in time shares nothing with us; issue unhindered, unrecorded.
                        let take = left.min(end - pos);
                        pos += take;
                        left -= take;
                        continue;
                    }
                    self.epoch_id[slot] = e;
                    self.used[slot * n..(slot + 1) * n].fill(0);
                }
                let mut claimed = 0;
                for j in (0..n).filter(|&j| j != thread) {
                    let u = self.used[slot * n + j];
                    let lj = self.last[j];
                    let behind_and_active = lj != NEVER && lj < end && lj + ACTIVE_WINDOW >= pos;
                    claimed += if behind_and_active {
                        u.max(self.recent_rate(j).min(ISSUE_EPOCH / n as u64))
                    } else {
                        u
                    };
                }
                let mine = self.used[slot * n + thread];
                let avail = ISSUE_EPOCH.saturating_sub(claimed + mine);
                let rem = end - pos;
                if avail == 0 {
                    pos = end;
                    continue;
                }
                let take = left.min(avail).min(rem);
                self.used[slot * n + thread] = mine + take;
                left -= take;
                if avail >= rem {
                    pos += take;
                } else {
                    // Siblings hold part of what is left of the epoch: our share is spread over it.
                    pos = (pos + (take * rem).div_ceil(avail)).min(end);
                }
            }
            if c > 0 {
                self.last[thread] = pos;
            }
            pos
        }
    }

    proptest! {
        /// `reserve` gives the reference's times and leaves its state, for
        /// any number of threads, requests out of time order, zero-length
        /// requests, and jumps of more than a ring of epochs.
        #[test]
        fn reserve_matches_the_reference(
            threads in 1usize..4,
            reqs in proptest::collection::vec(
                (0usize..4, prop_oneof![4 => 0u64..300, 1 => 0u64..100_000, 1 => Just(0u64)], prop_oneof![6 => 0u64..80, 1 => 0u64..2000, 1 => Just(0u64)], any::<bool>()),
                1..400,
            ),
        ) {
            let mut a = IssueSlots::new(threads);
            let mut b = IssueSlots::new(threads);
            let mut clk = vec![0u64; threads];
            for (i, &(j, gap, c, back)) in reqs.iter().enumerate() {
                let j = j % threads;
                // Mostly forward in time per thread, sometimes back.
                let t = if back { clk[j].saturating_sub(gap) } else { clk[j] + gap };
                let x = a.reserve(j, t, c);
                let y = b.reserve_reference(j, t, c);
                prop_assert_eq!(x, y, "request {}", i);
                clk[j] = x;
                prop_assert_eq!(&a.epoch_id, &b.epoch_id);
                prop_assert_eq!(&a.used, &b.used);
                prop_assert_eq!(&a.last, &b.last);
            }
        }
    }

    proptest! {
        /// The tree's first-freeing entry is the scan's, ties and huge times included.
        #[test]
        fn min_slots_match_a_linear_scan(
            n in 0usize..70,
            init in prop_oneof![Just(0u64), any::<u64>()],
            sets in proptest::collection::vec(
                (any::<usize>(), prop_oneof![0u64..8, 0u64..1 << 40, any::<u64>()]),
                0..200,
            ),
        ) {
            let mut m = MinSlots::new(n, init);
            let mut plain = vec![init; n];
            prop_assert_eq!(m.argmin(), argmin_scan(&plain));
            for (i, v) in sets {
                if n == 0 {
                    break;
                }
                let i = i % n;
                m.set(i, v);
                plain[i] = v;
                prop_assert_eq!(m.argmin(), argmin_scan(&plain));
                prop_assert_eq!(&m[..], &plain[..]);
            }
        }
    }

    fn resources() -> CoreResources {
        let pf = PrefetchParams::off();
        CoreResources::new(10, 16, 2, &pf, FillBandwidth::default())
    }

    #[test]
    fn a_string_instruction_waits_for_the_previous_ones_grants() {
        let mut r = resources();
        // First instruction at 100: nothing outstanding, no wait.
        assert_eq!(r.string_begin(0, 100, true), 100);
        // Its line stores are granted at 350, 900 and 420 (out of order).
        for t in [350, 900, 420] {
            r.string_store(0, t);
        }
        r.string_end(0);
        assert_eq!(r.string_granted(0), 900);
        // Stores outside a string instruction do not count.
        r.string_store(0, 5000);
        // The next instruction, asked for at 400, starts at 900 exactly.
        assert_eq!(r.string_begin(0, 400, true), 900);
        // Its own grants (all before the previous ones') end at 950; asked
        // for later than that, the third starts when asked.
        r.string_store(0, 950);
        r.string_end(0);
        assert_eq!(r.string_begin(0, 1000, true), 1000);
    }

    #[test]
    fn the_drain_is_per_thread_and_off_without_the_preset_rule() {
        let mut r = resources();
        r.string_begin(1, 0, true);
        r.string_store(1, 700);
        r.string_end(1);
        // The sibling's grants do not hold thread 0 back.
        assert_eq!(r.string_begin(0, 10, true), 10);
        // Thread 1 waits for its own.
        assert_eq!(r.string_begin(1, 20, true), 700);
        // Without the drain a string instruction starts when asked.
        let mut r = resources();
        r.string_begin(0, 0, false);
        r.string_store(0, 700);
        r.string_end(0);
        assert_eq!(r.string_begin(0, 30, false), 30);
    }

    #[test]
    fn a_lone_thread_issues_at_full_width() {
        let mut s = IssueSlots::new(2);
        let mut t = 5;
        for c in [1u64, 48, 2, 63, 64, 200, 7] {
            assert_eq!(s.reserve(0, t, c), t + c);
            t += c + 13; // gaps (stalls) between accesses
        }
        assert_eq!(s.reserve(0, t, 0), t);
    }

    #[test]
    fn two_issue_bound_siblings_each_get_half() {
        // Two threads each issuing 48-cycle accesses back to back for 64 000 cycles
        // of work, interleaved by quanta of 2000 cycles as the scheduler does.
        let mut s = IssueSlots::new(2);
        let mut clk = [0u64; 2];
        let mut done = [0u64; 2];
        let per = 48u64;
        let n = 1000u64;
        while done.iter().any(|&d| d < n) {
            let cpu = if done[0] < n && (done[1] >= n || clk[0] <= clk[1]) {
                0
            } else {
                1
            };
            let stop = clk[cpu] + 2000;
            while clk[cpu] < stop && done[cpu] < n {
                clk[cpu] = s.reserve(cpu, clk[cpu], per);
                done[cpu] += 1;
            }
        }
        // Together they issue no faster than one thread alone could issue both streams.
        let total = 2 * n * per;
        let end = clk[0].max(clk[1]);
        assert!(end >= total, "{end} < {total}");
        assert!(
            end <= total + 2 * 2000 + 2 * ISSUE_EPOCH,
            "{end} vs {total}"
        );
        // And each got half: neither finished much before the other.
        assert!(clk[0].abs_diff(clk[1]) <= 2 * 2000 + 2 * per, "{clk:?}");
        // A thread alone on the core afterwards has the whole width again.
        let t = end + 2 * ACTIVE_WINDOW;
        assert_eq!(s.reserve(0, t, 640), t + 640);
    }

    #[test]
    fn a_thread_gets_what_its_sibling_leaves() {
        let mut s = IssueSlots::new(2);
        // The sibling (thread 1) ran ahead and used 16 of the 64 cycles of epoch 0, then
        // moved on (its last issue ends in epoch 2).
        assert_eq!(s.reserve(1, 0, 16), 16);
        assert_eq!(s.reserve(1, 130, 2), 132);
        // We ask for 48 at cycle 0: exactly what is left, spread over the whole epoch.
        assert_eq!(s.reserve(0, 0, 48), 64);
        // Nothing is left in epoch 0: a request there moves to epoch 1.
        assert_eq!(s.reserve(0, 10, 4), 68);
        // The sibling is active but behind us in epochs 3 and 4; lately it issued 2 cycles
        // per epoch, so it is left 2 of each and we get the remaining 62 at a rate of 62/64.
        assert_eq!(s.reserve(0, 192, 124), 192 + 128);
    }
}
