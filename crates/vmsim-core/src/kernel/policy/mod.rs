//! The decision seam: where the kernel model asks a policy what to do and
//! then does it. A policy is a small program with a pure "decide" half — it
//! sees the situation and returns a plan — and the kernel's "do" half
//! carries the plan out (state changes, queued hardware work, the data
//! checks), as Linux's hooks separate the decision from the mechanism
//! (`arch_tlbbatch_should_defer` / `add_pending` / `flush`, `migrate_pages()`
//! taking its allocation policy as callbacks, BPF `struct_ops`).
//!
//! Hooks: the huge-page clear plan (clear.rs), the THP copy-on-write
//! decision and copy plan (cow.rs), the unmap TLB flush of reclaim and
//! migration (tlb.rs) and the NUMA hinting-fault order (numa.rs). Each is a
//! trait; registry.rs names the built-in implementations and those a user
//! registers, and configuration resolves `kernel.*` keys through it.
//!
//! A policy cannot switch off what the kernel guarantees: the content tags
//! and the data checks stay the kernel's. The built-in plans are proved by
//! the tests to clear (copy) every sub-page exactly once and a debug build
//! re-checks them; a user's plan is checked every time it is carried out,
//! and a plan that fails the check, or a policy that fails, stops the run
//! with `Error::Policy` naming the policy.

pub mod agreement;
pub mod clear;
pub mod cow;
pub mod numa;
pub mod registry;
pub mod tlb;

pub use registry::{Hook, Policies, Resolver};
