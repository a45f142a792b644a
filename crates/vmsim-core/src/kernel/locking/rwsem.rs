//! Reader-writer semaphores (`struct rw_semaphore`, `kernel.rwsems`): the
//! count word is a line of simulated memory. `down_read` and `up_read` are
//! each one `lock xadd` on it (kernel/locking/rwsem.c's fast paths), so
//! readers on different cores move the line between them even when nobody
//! waits; `down_write` is a `lock cmpxchg` that succeeds only with no
//! holder, and `up_write` a `lock xadd`.
//!
//! Waiting. A reader that arrives while a writer holds the semaphore, or a
//! writer that arrives while readers or a writer hold it, sleeps on the
//! semaphore's wait list (`rwsem_down_read_slowpath`,
//! `rwsem_down_write_slowpath`) until the last holder's release wakes it
//! (`rwsem_wake`). The model charges the waiter the wait to that release
//! and, since in these runs its CPU has nothing else to run, the exit from
//! the idle state the wait would have put it in (the menu governor's choice
//! for a wait of that length, as kernel/sched's idle exit does); the
//! waker's `try_to_wake_up` and optimistic spinning on a running writer
//! (`rwsem_optimistic_spin`) are not modelled.
//!
//! Time, as for the spinlocks (spinlock.rs): a semaphore keeps the
//! intervals writers held it and the latest end of a reader's hold seen so
//! far; a CPU whose clock is earlier than a recorded hold is not held back
//! by it unless it arrives inside it. Readers never wait for readers.
//!
//! Invariants: at most one writer between `down_write` and `up_write`;
//! `readers` counts the read holds not yet released.

use super::lock_stat::{LockClass, LockStats};
use crate::kernel::hw::Hw;

const MAX_INTERVALS: usize = 256;

#[derive(Clone, Debug)]
pub struct RwSem {
    /// The count word's line.
    pub line: u64,
    pub class: LockClass,
    /// Write holds (start, end), sorted by start.
    writers: Vec<(u64, u64)>,
    /// The latest end of a read hold.
    reader_end: u64,
    /// Read holds not yet released.
    readers: u32,
    /// The writer's acquisition, while one holds it.
    write_held: Option<u64>,
}

impl RwSem {
    pub fn new(line: u64, class: LockClass) -> RwSem {
        RwSem {
            line,
            class,
            writers: Vec::new(),
            reader_end: 0,
            readers: 0,
            write_held: None,
        }
    }

    /// The end of the write hold `t` falls in (and of any that starts at
    /// its end), or `t`.
    fn after_writers(&self, t: u64) -> u64 {
        let mut got = t;
        for &(s, e) in &self.writers {
            if s > got {
                break;
            }
            got = got.max(e);
        }
        got
    }

    /// Sleeps `hw`'s CPU from `t` to `until` and wakes it: the wait, then
    /// the exit from the idle state a wait that long would have chosen.
    fn sleep_until(&self, hw: &mut Hw, t: u64, until: u64, stats: &mut LockStats) -> u64 {
        let wait = until - t;
        let exit = hw.idle_exit_cycles(wait);
        hw.spin(wait + exit);
        let s = stats.class(self.class);
        s.contentions += 1;
        s.sleeps += 1;
        s.wakeups += 1;
        s.wait_cycles += wait + exit;
        s.wait_max_cycles = s.wait_max_cycles.max(wait + exit);
        wait + exit
    }

    /// `down_read`: returns the cycles this CPU waited.
    pub fn down_read(&mut self, hw: &mut Hw, stats: &mut LockStats) -> u64 {
        hw.atomic(self.line);
        let t = hw.now();
        stats.class(self.class).acquisitions += 1;
        self.readers += 1;
        let got = self.after_writers(t);
        if got > t {
            return self.sleep_until(hw, t, got, stats);
        }
        0
    }

    /// `up_read`.
    pub fn up_read(&mut self, hw: &mut Hw) {
        debug_assert!(self.readers > 0, "up_read without down_read");
        self.readers = self.readers.saturating_sub(1);
        hw.atomic(self.line);
        self.reader_end = self.reader_end.max(hw.now());
    }

    /// `down_write`: returns the cycles this CPU waited.
    pub fn down_write(&mut self, hw: &mut Hw, stats: &mut LockStats) -> u64 {
        assert!(
            self.write_held.is_none(),
            "{} write-held twice",
            self.class.name()
        );
        hw.atomic(self.line);
        let t = hw.now();
        stats.class(self.class).acquisitions += 1;
        let readers_out = if t < self.reader_end {
            self.reader_end
        } else {
            t
        };
        let got = self.after_writers(readers_out);
        let waited = if got > t {
            self.sleep_until(hw, t, got, stats)
        } else {
            0
        };
        self.write_held = Some(hw.now());
        waited
    }

    /// `up_write`.
    pub fn up_write(&mut self, hw: &mut Hw, stats: &mut LockStats) {
        let from = self
            .write_held
            .take()
            .expect("up_write of a semaphore not write-held");
        hw.atomic(self.line);
        let end = hw.now();
        let at = self.writers.partition_point(|&(s, _)| s <= from);
        self.writers.insert(at, (from, end));
        if self.writers.len() > MAX_INTERVALS {
            let oldest = (0..self.writers.len())
                .min_by_key(|&i| self.writers[i].1)
                .expect("not empty");
            self.writers.remove(oldest);
        }
        let s = stats.class(self.class);
        s.hold_cycles += end - from;
        s.hold_max_cycles = s.hold_max_cycles.max(end - from);
    }
}

/// Which semaphore of the kernel's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SemRef {
    /// An mm's `mmap_lock` (`mmap_sem` before 5.8).
    Mmap(usize),
    /// A file's `mapping->i_mmap_rwsem`.
    IMmap(usize),
    /// The root `anon_vma`'s `rwsem` of an mm's anonymous memory (one
    /// `anon_vma` per mm: the model's processes map their anonymous
    /// memory before they fork or start threads).
    AnonVma(usize),
}

/// The semaphores of `kernel.rwsems`, each given its line on first use,
/// homed on the node of the CPU that first takes it (an `mm_struct` or an
/// `address_space` comes from the slab of the CPU that creates it, most
/// often the one that then uses it).
#[derive(Clone, Debug, Default)]
pub struct Rwsems {
    /// Kernel data of its own when `kernel.spinlocks` has none.
    pub kdata: Option<crate::kernel::kdata::KernelData>,
    pub(super) sems: std::collections::BTreeMap<(u8, usize), RwSem>,
}

impl Rwsems {
    pub fn new(kdata: Option<crate::kernel::kdata::KernelData>) -> Rwsems {
        Rwsems {
            kdata,
            sems: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::locking::test_hw::{machine, on};

    const LINE: u64 = 1000;

    #[test]
    fn readers_never_wait_for_readers_but_move_the_line_between_cores() {
        let mut m = machine();
        let mut st = LockStats::default();
        let mut s = RwSem::new(LINE, LockClass::MmapLock);
        on(&mut m, 0, |hw| {
            assert_eq!(s.down_read(hw, &mut st), 0);
        });
        // CPU 1 reads while CPU 0 still holds it: no wait, but its atomic
        // takes the line from CPU 0's core.
        m.cpus[1].clock = m.cpus[0].clock;
        let t = m.cpus[1].clock;
        let waited = on(&mut m, 1, |hw| s.down_read(hw, &mut st));
        assert_eq!(waited, 0);
        let llc = m.hier.latency(crate::machine::hierarchy::Served::Llc);
        assert!(m.cpus[1].clock - t >= llc, "{}", m.cpus[1].clock - t);
        on(&mut m, 0, |hw| s.up_read(hw));
        on(&mut m, 1, |hw| s.up_read(hw));
        let c = st.get(LockClass::MmapLock);
        assert_eq!((c.acquisitions, c.contentions, c.sleeps), (2, 0, 0));
    }

    #[test]
    fn a_reader_inside_a_write_hold_sleeps_to_its_end_and_pays_the_idle_exit() {
        let mut m = machine();
        let mut st = LockStats::default();
        let mut s = RwSem::new(LINE, LockClass::MmapLock);
        let end = on(&mut m, 0, |hw| {
            assert_eq!(s.down_write(hw, &mut st), 0);
            hw.charge(200_000);
            s.up_write(hw, &mut st);
            hw.now()
        });
        m.cpus[1].clock = 1000;
        let (waited, t) = on(&mut m, 1, |hw| {
            let t = hw.now();
            (s.down_read(hw, &mut st), t)
        });
        // The wait runs from just after its own atomic to the writer's release.
        let c = *st.get(LockClass::MmapLock);
        assert_eq!(
            (c.acquisitions, c.contentions, c.sleeps, c.wakeups),
            (2, 1, 1, 1)
        );
        assert_eq!(c.wait_cycles, waited);
        let after_atomic = m.cpus[1].clock - waited;
        let idle = end - after_atomic;
        let exit = on(&mut m, 1, |hw| hw.idle_exit_cycles(idle));
        assert!(exit > 0, "a 200k-cycle sleep reaches an idle state");
        assert_eq!(waited, idle + exit);
        assert!(after_atomic > t);
        // A writer after readers waits for the last reader's release.
        let mut s = RwSem::new(LINE + 64, LockClass::MmapLock);
        m.cpus[2].clock = 0;
        let rel = on(&mut m, 2, |hw| {
            s.down_read(hw, &mut st);
            hw.charge(50_000);
            s.up_read(hw);
            hw.now()
        });
        m.cpus[3].clock = 10_000;
        let (w, got) = on(&mut m, 3, |hw| {
            let w = s.down_write(hw, &mut st);
            (w, hw.now())
        });
        assert!(w > 0 && got >= rel, "{w} {got} {rel}");
        on(&mut m, 3, |hw| s.up_write(hw, &mut st));
    }
}
