//! Spinning locks (`spinlock_t`, `kernel.spinlocks`): the lock word is a
//! line of simulated memory, taking it is a locked read-modify-write
//! through the caches, and a CPU that finds it held spins until the holder
//! releases it and the line comes over to it.
//!
//! Two implementations, as x86 Linux has had them:
//! - `ticket` (until 4.1): `arch_spin_lock` takes a ticket with a `lock
//!   xadd` and spins reading `head` until it equals its ticket. Every
//!   waiter spins on the lock's own line, so each release's store
//!   invalidates all their copies and they all read it again; the next
//!   owner's read is served among theirs. Boyd-Wickizer, Kaashoek, Morris
//!   and Zeldovich ("Non-scalable locks are dangerous", Linux Symposium
//!   2012, §3) model the hand-over as the line served to the waiters one
//!   after another, the next owner on average after half of them: the
//!   model charges the new owner its own read of the line (from the
//!   releaser's cache) plus that read's latency for every second other
//!   waiter spinning at the hand-over.
//! - `queued` (qspinlock, x86 default since 4.2): the first waiter spins on
//!   the lock word, the others each on their own MCS node, so a hand-over
//!   costs the next owner one read of the line and one locked write,
//!   whatever the queue's length.
//!
//! Time. The engine runs the CPU with the lowest clock one quantum at a
//! time, but a kernel path runs whole once started: a CPU may take and
//! release a lock at a time later than the clocks of CPUs that run after
//! it. So a lock keeps the intervals it was held (`busy`), and an
//! acquisition at time t waits only if t falls inside one (then to its end,
//! and on through any interval that starts there, as a queue would). A CPU
//! that arrives before an interval recorded earlier takes the lock at once;
//! if its hold then overlaps that interval, the overlap stands (the other
//! holder's time is already spent). Waiters that arrive inside the same
//! hold are served in the order the engine runs them, which is the order of
//! their clocks within a quantum. Spinning is system time and no
//! instructions (the `pause` loop's own instructions are not counted).
//!
//! Invariants: `busy` is sorted by start and holds at most `MAX_INTERVALS`
//! entries (the oldest by end dropped first); a lock is held by at most one
//! CPU between `lock` and `unlock` of one kernel path.

use super::lock_stat::{LockClass, LockStats};
use crate::kernel::hw::Hw;

/// Which spinlock implementation the kernel has (`kernel.spinlocks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum SpinImpl {
    Ticket,
    Queued,
}

/// Hold intervals a lock remembers; far more than CPUs can be in flight
/// within one kernel path's length.
const MAX_INTERVALS: usize = 256;

#[derive(Clone, Debug)]
pub struct SpinLock {
    /// The lock word's line.
    pub line: u64,
    pub class: LockClass,
    /// Hold intervals (start, end, holder's CPU), sorted by start.
    busy: Vec<(u64, u64, usize)>,
    /// Waits recorded: (arrival, acquisition), for counting the spinners at
    /// a hand-over; as many as `busy`.
    waits: Vec<(u64, u64)>,
    /// The holder's CPU, when the lock became its (the previous release,
    /// if it waited), and when it had it.
    held: Option<(usize, u64, u64)>,
}

impl SpinLock {
    pub fn new(line: u64, class: LockClass) -> SpinLock {
        SpinLock {
            line,
            class,
            busy: Vec::new(),
            waits: Vec::new(),
            held: None,
        }
    }

    /// `spin_lock`: returns the cycles this CPU spun.
    pub fn lock(&mut self, hw: &mut Hw, imp: SpinImpl, stats: &mut LockStats) -> u64 {
        assert!(self.held.is_none(), "{} taken twice", self.class.name());
        // The first attempt: `lock xadd` of a ticket, or qspinlock's
        // `lock cmpxchg` of the locked byte (and, if that fails, its
        // pending bit or the MCS tail: the same line, already owned).
        hw.atomic(self.line);
        let t = hw.now();
        let mut got = t;
        let mut from = hw.cpu;
        for &(s, e, c) in &self.busy {
            if s > got {
                break;
            }
            if got < e {
                got = e;
                from = c;
            }
        }
        let s = stats.class(self.class);
        s.acquisitions += 1;
        let mut spun = 0;
        if got > t {
            s.contentions += 1;
            let spinners = self
                .waits
                .iter()
                .filter(|&&(a, g)| a <= got && got < g)
                .count() as u64;
            hw.spin(got - t);
            // The hand-over: the release's store took the line back to the
            // releaser's core; the next owner reads it from there. (The
            // caches are in the order the engine ran the CPUs, in which the
            // release came first: the read is timed from the two cores'
            // places, not looked up.)
            let read = hw.transfer_latency(from);
            match imp {
                SpinImpl::Ticket => hw.spin(read + read * spinners / 2),
                // Queue head: the read, then `clear_pending_set_locked` /
                // the locked byte's store.
                SpinImpl::Queued => {
                    hw.spin(read);
                    hw.atomic(self.line);
                }
            }
            spun = hw.now() - t;
            let s = stats.class(self.class);
            s.wait_cycles += spun;
            s.wait_max_cycles = s.wait_max_cycles.max(spun);
            self.waits.push((t, got));
            keep_recent(&mut self.waits, |w| w.1);
        }
        self.held = Some((hw.cpu, got, hw.now()));
        spun
    }

    /// `spin_unlock`: the release's store (the line is the holder's, unless
    /// the path touched so much that it was evicted).
    pub fn unlock(&mut self, hw: &mut Hw, stats: &mut LockStats) {
        let (cpu, from, since) = self.held.take().expect("unlock of a lock not held");
        debug_assert_eq!(cpu, hw.cpu, "released by its holder");
        hw.store(self.line);
        let end = hw.now();
        // Busy from the hand-over on, so that later arrivals queue behind it.
        let at = self.busy.partition_point(|&(s, _, _)| s <= from);
        self.busy.insert(at, (from, end, cpu));
        keep_recent(&mut self.busy, |b| b.1);
        let s = stats.class(self.class);
        let h = end - since;
        s.hold_cycles += h;
        s.hold_max_cycles = s.hold_max_cycles.max(h);
    }
}

/// Drops the entry that ended first once `v` holds more than `MAX_INTERVALS`.
fn keep_recent<T>(v: &mut Vec<T>, end: impl Fn(&T) -> u64) {
    if v.len() > MAX_INTERVALS {
        let oldest = (0..v.len()).min_by_key(|&i| end(&v[i])).expect("not empty");
        v.remove(oldest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::hw::LOCKED_RMW_CYCLES;
    use crate::kernel::locking::test_hw::{machine, on};
    use crate::machine::Machine;

    const LINE: u64 = 1000;

    #[test]
    fn an_uncontended_lock_costs_its_atomic_and_waits_for_nothing() {
        let mut m = machine();
        let mut st = LockStats::default();
        let mut l = SpinLock::new(LINE, LockClass::LruLock);
        on(&mut m, 0, |hw| {
            let spun = l.lock(hw, SpinImpl::Queued, &mut st);
            assert_eq!(spun, 0);
            hw.charge(100);
            l.unlock(hw, &mut st);
        });
        let s = st.get(LockClass::LruLock);
        assert_eq!((s.acquisitions, s.contentions, s.wait_cycles), (1, 0, 0));
        // Held for the 100 cycles of work and the release's store (an L1 hit).
        assert!(s.hold_cycles >= 100 && s.hold_cycles < 100 + 20, "{s:?}");
        // Taken again at once by the same CPU: the line is still its own.
        on(&mut m, 0, |hw| {
            let t = hw.now();
            l.lock(hw, SpinImpl::Queued, &mut st);
            assert!(hw.now() - t < LOCKED_RMW_CYCLES + 10);
            l.unlock(hw, &mut st);
        });
    }

    #[test]
    fn two_cpus_serialise_and_the_line_moves_between_them() {
        for imp in [SpinImpl::Queued, SpinImpl::Ticket] {
            let mut m = machine();
            let mut st = LockStats::default();
            let mut l = SpinLock::new(LINE, LockClass::LruLock);
            // CPU 0 holds the lock over [~0, ~5000).
            let end0 = on(&mut m, 0, |hw| {
                l.lock(hw, imp, &mut st);
                hw.charge(5000);
                l.unlock(hw, &mut st);
                hw.now()
            });
            // CPU 1 (another core of the same socket) arrives at 1000, inside the hold.
            m.cpus[1].clock = 1000;
            let (spun, got, end1) = on(&mut m, 1, |hw| {
                let spun = l.lock(hw, imp, &mut st);
                let got = hw.now();
                hw.charge(10);
                l.unlock(hw, &mut st);
                (spun, got, hw.now())
            });
            // It spins until CPU 0's release, then pays for the line.
            assert!(got > end0, "{imp:?}: {got} {end0}");
            // It spun from just after its own first atomic to its acquisition.
            assert!(
                spun >= end0 - 1000 - LOCKED_RMW_CYCLES - 300 && spun <= got - 1000,
                "{imp:?}: {spun}"
            );
            let handover = got - end0;
            // The line comes from CPU 0's core through the LLC.
            let llc = m.hier.latency(crate::machine::hierarchy::Served::Llc);
            assert!(handover >= llc, "{imp:?}: {handover} < {llc}");
            let s = st.get(LockClass::LruLock);
            assert_eq!((s.acquisitions, s.contentions), (2, 1));
            assert_eq!(s.wait_cycles, spun);
            assert!(end1 > got);
            // A third CPU after both holds takes it without waiting.
            m.cpus[2].clock = end1 + 100;
            let spun = on(&mut m, 2, |hw| {
                let s = l.lock(hw, imp, &mut st);
                l.unlock(hw, &mut st);
                s
            });
            assert_eq!(spun, 0);
            assert_eq!(st.get(LockClass::LruLock).contentions, 1);
        }
    }

    /// CPU `c` arrives at `at`, holds for `hold` cycles; returns (spun, acquired, released).
    fn take(
        m: &mut Machine,
        l: &mut SpinLock,
        st: &mut LockStats,
        imp: SpinImpl,
        c: usize,
        at: u64,
        hold: u64,
    ) -> (u64, u64, u64) {
        m.cpus[c].clock = at;
        on(m, c, |hw| {
            let spun = l.lock(hw, imp, st);
            let got = hw.now();
            hw.charge(hold);
            l.unlock(hw, st);
            (spun, got, hw.now())
        })
    }

    #[test]
    fn waiters_inside_a_hold_queue_one_behind_another() {
        let mut m = machine();
        let mut st = LockStats::default();
        let mut l = SpinLock::new(LINE, LockClass::ZoneLock);
        let imp = SpinImpl::Queued;
        let (_, _, r0) = take(&mut m, &mut l, &mut st, imp, 0, 0, 10_000);
        let (s1, g1, r1) = take(&mut m, &mut l, &mut st, imp, 1, 2_000, 1_000);
        let (s2, g2, r2) = take(&mut m, &mut l, &mut st, imp, 2, 3_000, 1_000);
        assert!(g1 > r0 && g2 > r1, "{r0} {g1} {r1} {g2}");
        assert!(s2 > s1);
        // One arriving after them all does not wait.
        let (s3, _, _) = take(&mut m, &mut l, &mut st, imp, 3, r2 + 1, 10);
        assert_eq!(s3, 0);
        let s = st.get(LockClass::ZoneLock);
        assert_eq!((s.acquisitions, s.contentions), (4, 2));
        assert_eq!(s.wait_cycles, s1 + s2);
        assert_eq!(s.wait_max_cycles, s2);
    }

    #[test]
    fn a_hand_over_across_sockets_costs_more_and_ticket_waiters_slow_it() {
        let mut m = machine();
        let cores = m.topo.nr_cores();
        let other_socket = cores / 2; // the preset's 2 sockets, cores numbered by socket
        assert_ne!(m.topo.socket_of(0), m.topo.socket_of(other_socket));
        let hand = |imp, c: usize, extra: &[usize]| {
            let mut m = machine();
            let mut st = LockStats::default();
            let mut l = SpinLock::new(LINE, LockClass::LruLock);
            let (_, _, r0) = take(&mut m, &mut l, &mut st, imp, 0, 0, 10_000);
            let (_, g, _) = take(&mut m, &mut l, &mut st, imp, c, 1_000, 10);
            // Other waiters spinning when c's turn comes.
            for &e in extra {
                take(&mut m, &mut l, &mut st, imp, e, 1_100, 10);
            }
            g - r0
        };
        let near = hand(SpinImpl::Queued, 1, &[]);
        let far = hand(SpinImpl::Queued, other_socket, &[]);
        assert!(far > near, "{far} {near}");
        // A ticket hand-over with three more waiters spinning when the
        // fourth's turn comes: the last pays for half the other readers.
        let mut m2 = machine();
        let mut st = LockStats::default();
        let mut l = SpinLock::new(LINE, LockClass::LruLock);
        let imp = SpinImpl::Ticket;
        take(&mut m2, &mut l, &mut st, imp, 0, 0, 10_000);
        let mut last = (0, 0, 0);
        for c in 1..=4 {
            last = take(&mut m2, &mut l, &mut st, imp, c, 1_000, 10);
        }
        let (_, g4, _) = last;
        let _ = &mut m;
        let read = m.hier.latency(crate::machine::hierarchy::Served::Llc);
        // Each of the four hand-overs costs at least a read; the later ones more.
        assert!(g4 >= 10_000 + 4 * read, "{g4}");
        assert!(st.get(LockClass::LruLock).contentions == 4);
    }
}
