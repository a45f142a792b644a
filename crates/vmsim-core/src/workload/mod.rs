//! Workloads: programs of simulated tasks. A program yields system calls and
//! access runs of the kernel's ABI (kernel/uapi.rs); it never sees frames or
//! caches.

pub mod lrufile;
pub mod pftest;
pub mod pmbench;
pub mod program;
pub mod randread;
pub mod trace;
pub mod usemem;

pub use crate::kernel::uapi::{store_value, Access, Expect, Op, Pattern, Program};

use crate::error::Error;
use crate::machine::topology::Topology;
use crate::sim::Sim;
use serde::Serialize;
use serde_json::Value;

pub const MIB: u64 = 1 << 20;

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WorkloadConfig {
    Usemem(usemem::UsememConfig),
    PfTest(pftest::PfTestConfig),
    LruFileMmapRead(lrufile::LruFileConfig),
    Pmbench(pmbench::PmbenchConfig),
    Program(program::ProgramConfig),
    Trace(trace::TraceConfig),
}

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

/// The workload a config names.
pub fn registry(cfg: &WorkloadConfig) -> Box<dyn Workload + '_> {
    match cfg {
        WorkloadConfig::Usemem(u) => Box::new(usemem::UsememWorkload(u)),
        WorkloadConfig::PfTest(p) => Box::new(pftest::PfTestWorkload(p)),
        WorkloadConfig::LruFileMmapRead(l) => Box::new(lrufile::LruFileWorkload(l)),
        WorkloadConfig::Pmbench(p) => Box::new(pmbench::PmbenchWorkload(p)),
        WorkloadConfig::Program(p) => Box::new(program::ProgramWorkload(p)),
        WorkloadConfig::Trace(t) => Box::new(trace::TraceWorkload(t)),
    }
}

/// What the tasks on each node map, with headroom (a quarter more, plus 64 MiB), in 2 MiB units.
pub fn with_headroom(per_node: &[u64]) -> u64 {
    let need = per_node.iter().copied().max().unwrap_or(0);
    (need + need / 4 + 64 * MIB).div_ceil(2 * MIB) * 2 * MIB
}
