//! The state of a task's replayed trace batch (`Op::Replay`) that
//! replay.rs advances: how far it is and the page it last translated.

use crate::kernel::uapi::Replay;

/// Progress of an `Op::Replay` batch.
#[derive(Clone, Debug)]
pub(crate) struct ReplayRun {
    pub(super) b: Replay,
    pub(super) done: usize,
    pub(super) page: u64,
    pub(super) pfn: u64,
    pub(super) gen: u64,
    pub(super) writable: bool,
}

impl ReplayRun {
    pub(crate) fn new(b: Replay) -> ReplayRun {
        ReplayRun {
            b,
            done: 0,
            page: u64::MAX,
            pfn: 0,
            gen: u64::MAX,
            writable: false,
        }
    }
}
