//! The unmap TLB-flush hook, one seam for reclaim and migration, shaped
//! like x86's `arch_tlbbatch_should_defer()` / `arch_tlbbatch_add_pending()`
//! / `arch_tlbbatch_flush()`: a policy decides whether the flush of an entry
//! just cleared is deferred into the task's batch (or done at once with
//! `flush_tlb_page()`), and how a batch is flushed; the kernel adds the
//! entry to the batch (`set_tlb_ubc_flush_pending`, kernel/vmscan.rs) and
//! carries the flush out (`try_to_unmap_flush`).
//!
//! Invariant: whatever the policy decides, no folio is freed while a TLB
//! may hold it: a deferred entry is in the batch, and the batch is flushed
//! before the folios go (the TLB truth check stops a run otherwise).

/// How `arch_tlbbatch_flush()` empties the TLBs of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchFlush {
    /// One IPI per CPU of the batch that is not lazy, each flushing its whole TLB.
    Ipis,
    /// One INVLPGB of every non-global translation and a TLBSYNC, no IPI,
    /// where the CPU has it (else as `Ipis`).
    Broadcast,
}

/// What the decision to defer a flush is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlushCtx {
    /// A CPU other than this one may hold the entry (the mm has run elsewhere:
    /// `cpumask_any_but(mm_cpumask(mm), cpu) < nr_cpu_ids`).
    pub others: bool,
    /// CPUs in the mm's cpumask, this one included if it is there.
    pub nr_cpus: u32,
}

/// An unmap TLB-flush policy: decides, does nothing itself. Depends on
/// its arguments alone.
pub trait UnmapFlush: Send + Sync {
    /// `should_defer_flush()`: defer the flush of an entry just cleared into
    /// the batch (true), or flush it at once with `flush_tlb_page()`.
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String>;
    /// `arch_tlbbatch_flush()`: how a batch is flushed.
    fn batch_flush(&self) -> BatchFlush;
}

/// Before 4.3 (reclaim) and 6.3 (migration): every entry at once, `flush_tlb_page()`.
pub struct PerPage;
impl UnmapFlush for PerPage {
    fn should_defer(&self, _ctx: &FlushCtx) -> Result<bool, String> {
        Ok(false)
    }
    fn batch_flush(&self) -> BatchFlush {
        BatchFlush::Ipis
    }
}

/// 4.3 onwards (reclaim), 6.3 onwards (migration): deferred when another
/// CPU may hold the entry; the batch is flushed by one IPI per CPU.
pub struct Batched;
impl UnmapFlush for Batched {
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String> {
        Ok(ctx.others)
    }
    fn batch_flush(&self) -> BatchFlush {
        BatchFlush::Ipis
    }
}

/// 6.15 onwards on CPUs with INVLPGB: deferred as `Batched`, the batch
/// flushed by one broadcast invalidation.
pub struct Broadcast;
impl UnmapFlush for Broadcast {
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String> {
        Ok(ctx.others)
    }
    fn batch_flush(&self) -> BatchFlush {
        BatchFlush::Broadcast
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::policy::registry::builtin;
    use crate::policy::{MigrateTlbFlush, TlbFlushOnUnmap};

    #[test]
    fn builtins_defer_only_when_shared_and_broadcast_flushes_by_invlpgb() {
        let ctx = |others| FlushCtx { others, nr_cpus: 2 };
        for &n in TlbFlushOnUnmap::NAMES {
            let p = builtin().reclaim_flush.get(n).unwrap();
            assert!(
                !p.should_defer(&ctx(false)).unwrap(),
                "{n}: nothing to defer for"
            );
            assert_eq!(p.should_defer(&ctx(true)).unwrap(), n != "per-page", "{n}");
        }
        for &n in MigrateTlbFlush::NAMES {
            let p = builtin().migrate_flush.get(n).unwrap();
            assert_eq!(p.should_defer(&ctx(true)).unwrap(), n != "per-page", "{n}");
        }
        assert_eq!(Broadcast.batch_flush(), BatchFlush::Broadcast);
        assert_eq!(Batched.batch_flush(), BatchFlush::Ipis);
    }
}
