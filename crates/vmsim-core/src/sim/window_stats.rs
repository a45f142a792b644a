//! What the windowed loop (window.rs) reports and the reasons it stops a
//! CPU's first phase, and when it uses its helper threads.

use serde::Serialize;

/// When a windowed run on several host threads uses its helpers (tests
/// force them, to check the result does not depend on it).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelpOverride {
    /// When it pays (`HELP_MIN_QUANTA`, `HELP_MAX_SERIAL_PERMILLE`).
    Auto,
    Always,
    /// Every other time the choice is made.
    Alternate,
}

/// Why a CPU stopped in phase 1 (indexes `WindowStats::parked`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Park {
    /// An interrupt is pending, or a tick is due (or restarts).
    Interrupt = 0,
    /// Kernel work other than fixed costs and local bulk lines.
    KernelWork,
    /// No current task, a kernel thread, a tick to look at, or a user
    /// operation to start (system calls, exits, faults' entries).
    Schedule,
    /// A page fault: no page-table entry allows the access.
    Fault,
    /// The address space has run on another socket's CPUs.
    SharedMm,
    /// A line homed on another socket, or held in another socket's caches.
    RemoteLine,
    /// A read that starts on a page of a file mapping (its check reads the page cache).
    FilePage,
}

/// What the windowed loop did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WindowStats {
    pub window_cycles: u64,
    pub windows: u64,
    /// Quanta run in phase 1 (to the end or up to a park) and in phase 2.
    pub quanta_partitioned: u64,
    pub quanta_serial: u64,
    /// Demand line accesses made in each phase.
    pub accesses_partitioned: u64,
    pub accesses_serial: u64,
    /// Parks by reason, indexed by `Park` (reported by name).
    #[serde(serialize_with = "parked_by_name")]
    pub parked: [u64; 7],
}

/// The names of `Park`'s reasons in the report, in its order.
const PARK_NAMES: [&str; 7] = [
    "interrupt",
    "kernel_work",
    "schedule",
    "fault",
    "shared_mm",
    "remote_line",
    "file_page",
];

fn parked_by_name<S: serde::Serializer>(parked: &[u64; 7], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(parked.len()))?;
    for (name, n) in PARK_NAMES.iter().zip(parked) {
        m.serialize_entry(name, n)?;
    }
    m.end()
}
