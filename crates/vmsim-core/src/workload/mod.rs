//! Workloads: programs of simulated tasks. A program yields system calls and
//! access runs of the kernel's ABI (kernel/uapi.rs); it never sees frames or
//! caches.

pub mod base;
pub mod lrufile;
pub mod pftest;
pub mod pmbench;
pub mod program;
pub mod randread;
pub mod trace;
pub mod usemem;

pub use crate::kernel::uapi::{store_value, Access, Expect, Op, Pattern, Program};

pub use base::{with_headroom, Workload, MIB};

use serde::Serialize;

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
