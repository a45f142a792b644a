//! The kernel's scheduler state: run queues and time slices (rq.rs), wait
//! queues (wait.rs) and NUMA balancing's scanner and per-task accounting
//! (numa.rs, kernel/sched/fair.c's share of it), and the wake-up of a wait
//! queue by kernel code on a CPU, which pays for it. The run loop that asks
//! them what runs next is the engine's (sim/).

pub mod numa;
pub mod rq;
pub mod state;
pub mod wait;

use super::hw::Hw;
use super::tlbflush::{enter_lazy_tlb, switch_mm_irqs_off};
use super::{KFn, Kernel};
use crate::machine::Mode;
use wait::{WaitQueueId, Woken};

/// The engine's entry to the wait queues: a kernel thread that sleeps, a
/// timer that wakes a queue, and the tasks woken since the engine last
/// handed them to the scheduler.
impl Kernel {
    /// Task `pid` sleeps on `q` (a kernel thread's `KthreadStep::Wait`).
    pub fn wait_on(&mut self, q: WaitQueueId, pid: usize) {
        self.sched.waitq.wait(q, pid);
    }

    /// A timer's `wake_up(q)`: untimed, nobody pays. Returns the tasks woken.
    pub fn wake_queue(&mut self, q: WaitQueueId) -> usize {
        self.sched.waitq.wake_up(q, false)
    }

    /// Whether tasks were woken since [`Kernel::take_woken`].
    #[inline]
    pub fn has_woken(&self) -> bool {
        self.sched.waitq.has_woken()
    }

    /// The tasks woken since the last call, in order.
    pub fn take_woken(&mut self) -> Vec<Woken> {
        self.sched.waitq.take_woken()
    }

    /// `wake_up` calls that found waiters (a counter of the run's).
    pub fn nr_queue_wakeups(&self) -> u64 {
        self.sched.waitq.nr_wakeups
    }
}

impl Kernel {
    /// `context_switch()` on `hw.cpu` to a task of `mm` (None: a kernel
    /// thread): `context_switch_cycles` in kernel mode, then
    /// `switch_mm_irqs_off` and user mode for a user task, lazy TLB for a
    /// kernel thread.
    pub fn context_switch(&mut self, hw: &mut Hw, mm: Option<usize>) {
        hw.set_mode(Mode::Kernel);
        let c = self.costs.context_switch_cycles;
        hw.charge(c);
        let cpu = hw.cpu;
        match mm {
            Some(mm) => {
                switch_mm_irqs_off(hw.machine, &mut hw.tlbstate[cpu], &mut self.mms[mm], cpu);
                hw.set_mode(Mode::User);
            }
            None => enter_lazy_tlb(&mut hw.tlbstate[cpu]),
        }
    }

    /// One scheduler tick on `hw.cpu`: the timer interrupt's entry and exit
    /// and the tick handler (`scheduler_tick`), charged to the tick.
    pub fn tick(&self, hw: &mut Hw) {
        let c = self.costs.exception_entry_exit_cycles + self.costs.tick_handler_cycles;
        hw.interrupt(c, KFn::Tick);
    }

    /// What the waker on `hw.cpu` pays for one `try_to_wake_up()` with
    /// `kernel.wakeups`: `try_to_wake_up_cycles` in kernel mode, returning
    /// to the mode it was in. Returns the waker's clock after it.
    pub fn try_to_wake_up_cost(&self, hw: &mut Hw) -> u64 {
        let mode = hw.mode();
        hw.set_mode(Mode::Kernel);
        hw.charge(self.costs.try_to_wake_up_cycles);
        hw.set_mode(mode);
        hw.now()
    }

    /// `wake_up` of every waiter on `q` by `hw.cpu`. With `kernel.wakeups`
    /// each `try_to_wake_up` costs the waker `try_to_wake_up_cycles` in turn
    /// and its task runs no earlier than the waker's clock after it (and its
    /// CPU's exit from idle: sim/, `Sim::wake_woken`); without, the waiters
    /// are runnable for nothing at the end of the waker's quantum.
    pub(crate) fn wake_up_charged(&mut self, hw: &mut Hw, q: WaitQueueId, iowait: bool) -> usize {
        if !self.cfg.wakeups {
            return self.sched.waitq.wake_up(q, iowait);
        }
        let c = self.costs.try_to_wake_up_cycles;
        self.sched.waitq.wake_up_each(q, iowait, || {
            hw.charge(c);
            hw.now()
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::kernel::locking::test_hw;

    #[test]
    fn a_charged_wake_up_pays_each_waiter_in_turn_and_is_free_without_wakeups() {
        for wakeups in [true, false] {
            let mut k = crate::kernel::filemap::tests::kernel();
            k.cfg.wakeups = wakeups;
            // Two tasks wait for a migration of the page at frame 40.
            let q = k.folio_waitqueue(40);
            k.sched.waitq.wait(q, 4);
            k.sched.waitq.wait(q, 9);
            let mut m = test_hw::machine();
            m.cpus[1].clock = 1000;
            let c = k.costs.try_to_wake_up_cycles;
            assert_eq!(
                test_hw::on(&mut m, 1, |hw| k.wake_up_charged(hw, q, true)),
                2
            );
            let (end, at) = if wakeups {
                (1000 + 2 * c, [Some(1000 + c), Some(1000 + 2 * c)])
            } else {
                (1000, [None, None])
            };
            assert_eq!(m.cpus[1].clock, end, "wakeups {wakeups}");
            let woken: Vec<(usize, Option<u64>, bool)> = k
                .sched
                .waitq
                .take_woken()
                .iter()
                .map(|w| (w.pid, w.at, w.iowait))
                .collect();
            assert_eq!(woken, vec![(4, at[0], true), (9, at[1], true)]);
        }
    }
}
