//! What a program's phases count (phase.rs marks and sums them): a task's
//! counters when it began a phase, and each phase's figures over the tasks
//! that ran it.

use super::access_run::LatencyHist;
use serde::Serialize;

/// A task's counters when it began a phase.
#[derive(Clone, Debug)]
pub(crate) struct PhaseMark {
    pub(super) id: u32,
    pub(super) clock: u64,
    pub(super) reads: u64,
    pub(super) writes: u64,
    pub(super) bytes: u64,
    pub(super) hist: Box<LatencyHist>,
}

/// One phase's figures, summed over the tasks that ran it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhaseStats {
    /// Times a task ended the phase.
    pub runs: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes: u64,
    /// Loop iterations the program counted in the phase.
    pub iterations: u64,
    /// Sum over runs of the cycles from begin to end.
    pub task_cycles: u64,
    /// The earliest begin and the latest end over its runs.
    pub first_begin: Option<u64>,
    pub last_end: u64,
    pub latency: LatencyHist,
}
