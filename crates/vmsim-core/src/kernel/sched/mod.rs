//! The kernel's scheduler state: run queues and time slices (rq.rs), wait
//! queues (wait.rs) and NUMA balancing's scanner and per-task accounting
//! (numa.rs, kernel/sched/fair.c's share of it). The run loop that asks
//! them what runs next is the engine's (sim/).

pub mod numa;
pub mod rq;
pub mod wait;
