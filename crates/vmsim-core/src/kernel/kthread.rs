//! Kernel threads (kernel/kthread.c): tasks with no user address space that
//! run kernel code only. A kernel thread's body is a state machine: each
//! `step` may queue hardware work on its CPU (executed, in kernel mode,
//! before the next step) and says what the thread does next — run on, wait
//! on a wait queue, sleep until a time, or exit. Switching to a kernel
//! thread leaves the previous mm loaded (lazy TLB, kernel/tlbflush.rs).

use super::sched::wait::WaitQueueId;
use super::{Kernel, Work};
use std::collections::VecDeque;

/// What a kernel thread does after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KthreadStep {
    /// Step again once the work it queued is done; a step that continues must queue work.
    Continue,
    /// Sleep on the queue until it is woken (`wait_event`).
    Wait(WaitQueueId),
    /// Sleep until simulated time `until` (`schedule_hrtimeout`).
    SleepUntil(u64),
    /// `kthread_exit`.
    Exit,
}

/// The body of a kernel thread (the `threadfn` of `kthread_create`).
pub trait KthreadFn: Send {
    /// The thread's name (`comm`), e.g. `kswapd0`.
    fn name(&self) -> String;
    /// Runs the thread from its last stopping point on `cpu` at simulated time `now`.
    fn step(
        &mut self,
        k: &mut Kernel,
        cpu: usize,
        now: u64,
        work: &mut VecDeque<Work>,
    ) -> KthreadStep;
}
