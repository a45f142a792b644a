//! The decision seam: where the kernel model asks a policy what to do and
//! then does it. A policy is a small program with a pure "decide" half — it
//! sees the situation and returns a plan — and the kernel's "do" half
//! carries the plan out (state changes, queued hardware work, the data
//! checks), as Linux's hooks separate the decision from the mechanism
//! (`arch_tlbbatch_should_defer` / `add_pending` / `flush`, `migrate_pages()`
//! taking its allocation policy as callbacks, BPF `struct_ops`).
//!
//! Hooks so far: the huge-page clear plan (clear.rs) and the unmap TLB
//! flush of reclaim and migration (tlb.rs). A policy cannot switch off
//! what the kernel guarantees: the content tags and the data checks stay
//! the kernel's. The built-in policies are all there is so far; their clear
//! plans are proved by the tests to clear every sub-page exactly once
//! (`clear::check`), and a debug build checks each plan it carries out.

pub mod clear;
pub mod tlb;
