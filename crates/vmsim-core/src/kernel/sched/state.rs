//! The scheduler's state that the kernel's paths share: every wait queue
//! (wait.rs), the hashed folio wait table (`folio_waitqueue`), and the task
//! a path runs for (`current`, `smp_processor_id()`).

use super::wait::{WaitQueueId, WaitQueues};

/// `PAGE_WAIT_TABLE_BITS`: folios wait on 256 hashed queues.
pub const PAGE_WAIT_TABLE_SIZE: usize = 256;

pub struct SchedState {
    /// Every wait queue of the kernel (kernel objects hold their ids).
    pub waitq: WaitQueues,
    /// The hashed folio wait queues (`folio_waitqueue`).
    pub page_wait_table: Vec<WaitQueueId>,
    /// The CPU a fault is being handled on and its task, set by the
    /// fault's entry (kernel/fault.rs).
    pub current: Current,
}

/// `smp_processor_id()` and `current` of the path being planned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Current {
    pub cpu: usize,
    pub pid: usize,
}
