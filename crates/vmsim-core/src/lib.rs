//! vmsim-core: a deterministic simulator of Linux memory-management fast
//! paths (huge-page clearing and copying, TLB flushing, NUMA balancing) on a
//! model of a multi-socket machine. Pure Rust; the Python binding lives in
//! the `vmsim-py` crate.
//!
//! Layers, lowest first (tools/layers.py checks that every arrow points
//! down or sideways and that no files form a circle):
//!
//! - `machine` (hardware: caches, TLBs, memory, IPIs) knows nothing of
//!   pages or processes;
//! - `policy` names the kernel's switchable policies;
//! - `kernel` (Linux mm) drives the machine only through line accesses, TLB
//!   operations, IPIs and fixed costs, and queues its hardware work;
//! - `sim`, the engine: tasks, the run loop, the executor of queued work,
//!   the access engine;
//! - `workload` programs speak to the kernel through system-call-like
//!   operations and access runs;
//! - `config` (parses and composes the configs the layers below define),
//!   `metrics`, `validate`;
//! - `experiment` and `parallel` (plan and run simulations); `api`.

pub mod api;
pub mod config;
pub mod error;
pub mod experiment;
pub mod interrupt;
pub mod kernel;
pub mod machine;
pub mod metrics;
pub mod parallel;
pub mod policy;
pub mod rng;
pub mod sim;
pub mod stats;
pub mod validate;
pub mod workload;
