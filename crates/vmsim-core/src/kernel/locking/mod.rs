//! The kernel's locks as the model keeps them: their state, who waits, and
//! per-class statistics in the shape of `/proc/lock_stat` (`lock_stat`) and
//! `perf lock`: acquisitions, contentions, wait and hold times.
//!
//! A lock's word is a line of simulated memory (a `struct page`'s flags for
//! the page lock, kernel/vmemmap.rs): taking and releasing it are atomic
//! read-modify-writes through the caches (`Hw::atomic`), so CPUs that share
//! it move the line between them. A sleeping lock's waiters sleep on a wait
//! queue and are woken one at a time (kernel/sched/wait.rs); each wake-up
//! costs the waker `try_to_wake_up` and the woken CPU its exit from idle.
//!
//! One sleeping lock is modelled, the page lock (`PG_locked`,
//! page_lock.rs), and, with `kernel.spinlocks`, the spinning locks of the
//! allocator, the LRU lists and the page cache (spinlock.rs; their lines
//! are kernel/kdata.rs's), and, with `kernel.rwsems`, the reader-writer
//! semaphores `mmap_lock`, `i_mmap_rwsem` and the `anon_vma` lock (rwsem.rs).

pub mod page_lock;
pub mod rwsem;
pub mod sections;
pub mod spinlock;

pub mod lock_stat;
pub mod semaphores;
pub mod spinlocks;

pub use lock_stat::{LockClass, LockStat, LockStats};

/// The kernel's locks: the page locks, the spinning locks and semaphores
/// when the configuration models them, and the statistics of all.
#[derive(Default)]
pub struct Locks {
    /// Page locks held and waited for (page_lock.rs).
    pub page: page_lock::PageLocks,
    /// Lock statistics by class (`lock_stat`).
    pub stats: LockStats,
    /// The spinning locks and their lines (`kernel.spinlocks`; spinlocks.rs).
    pub spin: Option<spinlocks::Spinlocks>,
    /// The reader-writer semaphores (`kernel.rwsems`; rwsem.rs).
    pub rwsem: Option<rwsem::Rwsems>,
}

/// The locks' unit tests' machine: the E5-2699 v3 preset with 64 MiB a
/// node, every CPU in kernel mode, and a `Hw` lent for one CPU at a time.
#[cfg(test)]
pub(crate) mod test_hw {
    use crate::config::{embedded_machines, Preset};
    use crate::kernel::hw::{Hw, KfnCycles};
    use crate::kernel::tlbflush::TlbState;
    use crate::machine::{Machine, Mode};

    /// The built-in E5-2699 v3 preset, parsed.
    pub fn e5_preset() -> Preset {
        let (name, text) = embedded_machines()
            .iter()
            .find(|(n, _)| *n == "xeon-e5-2699v3-2s")
            .unwrap();
        Preset::parse(text, name).unwrap()
    }

    pub fn machine() -> Machine {
        let p = e5_preset();
        let mut m = Machine::new(&p.machine_params().unwrap(), 64 << 20, 0).unwrap();
        for c in &mut m.cpus {
            c.mode = Mode::Kernel;
        }
        m
    }

    /// Runs `f` with a `Hw` of `cpu`.
    pub fn on<R>(m: &mut Machine, cpu: usize, f: impl FnOnce(&mut Hw) -> R) -> R {
        let n = m.cpus.len();
        let mut ts = vec![TlbState::default(); n];
        let mut settled = Default::default();
        let (mut kfn, mut mem): (KfnCycles, KfnCycles) = Default::default();
        let mut hw = Hw::new(cpu, m, &mut ts, &mut settled, &mut kfn, &mut mem);
        f(&mut hw)
    }
}
