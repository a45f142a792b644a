//! vmsim-core: a deterministic simulator of Linux memory-management fast
//! paths (huge-page clearing and copying, TLB flushing, NUMA balancing) on a
//! model of a multi-socket machine. Pure Rust; the Python binding lives in
//! the `vmsim-py` crate.
//!
//! Layers: `machine` (hardware: caches, TLBs, memory, IPIs) knows nothing of
//! pages or processes; `kernel` (Linux mm) drives it only through line
//! accesses, TLB operations, IPIs and fixed costs; `workload` programs speak
//! to the kernel through system-call-like operations and access runs.

pub mod api;
pub mod config;
pub mod error;
pub mod experiment;
pub mod kernel;
pub mod machine;
pub mod metrics;
pub mod parallel;
pub mod policy;
pub mod rng;
pub mod stats;
pub mod validate;
pub mod workload;
