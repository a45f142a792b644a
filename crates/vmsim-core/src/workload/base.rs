//! What every workload is: the `Workload` trait the engine drives (how a
//! workload sizes memory, starts its tasks, names its scale and adds to
//! the report), and the sizing rule the workloads share.

use crate::error::Error;
use crate::machine::topology::Topology;
use crate::sim::Sim;
use serde_json::Value;

pub const MIB: u64 = 1 << 20;

/// A workload a run config can name: how it sizes memory, which tasks it
/// starts, how it describes its scale and what it adds to the report.
/// Adding a workload means its module, its config and a line in `registry`.
pub trait Workload {
    /// Simulated memory per NUMA node when the config leaves it to the workload.
    fn node_bytes(&self, topo: &Topology, nr_cpus: usize) -> u64;
    /// Creates the workload's tasks (and any set-up, such as hugetlb pools).
    fn spawn(&self, sim: &mut Sim, seed: u64) -> Result<(), Error>;
    /// One line saying what runs, at what size.
    fn scale_text(&self) -> String;
    /// The workload's own figures, added to the run's report.
    fn report(&self, _sim: &Sim, _r: &mut Value) {}
}

/// What the tasks on each node map, with headroom (a quarter more, plus 64 MiB), in 2 MiB units.
pub fn with_headroom(per_node: &[u64]) -> u64 {
    let need = per_node.iter().copied().max().unwrap_or(0);
    (need + need / 4 + 64 * MIB).div_ceil(2 * MIB) * 2 * MIB
}
