//! The unmap TLB-flush hook, one seam for reclaim and migration, shaped
//! like x86's `arch_tlbbatch_should_defer()` / `arch_tlbbatch_add_pending()`
//! / `arch_tlbbatch_flush()`: a policy decides whether the flush of an entry
//! just cleared is deferred into the task's batch (or done at once with
//! `flush_tlb_page()`), whether a flush takes each page or the whole TLB
//! (the `tlb_single_page_flush_ceiling` rule of `flush_tlb_mm_range()`,
//! which the built-ins keep), and how a batch flushed whole is flushed; the
//! kernel adds the entry to the batch (`set_tlb_ubc_flush_pending`,
//! kernel/vmscan.rs) and carries the flush out (`try_to_unmap_flush`). The
//! context is what the kernel has when it decides (`FlushCtx`).
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

/// What a flush decision is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlushKind {
    /// The flush of the entry just cleared, `flush_tlb_page()`, unless it
    /// is deferred into the batch.
    Page,
    /// The flush of the task's batch of deferred entries,
    /// `try_to_unmap_flush()` → `arch_tlbbatch_flush()`.
    Batch,
}

impl FlushKind {
    /// The name Python policies see (`vmsim.policy.FLUSH_KINDS`).
    pub fn name(self) -> &'static str {
        match self {
            FlushKind::Page => "page",
            FlushKind::Batch => "batch",
        }
    }
}

/// When a context's CPU mask was sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MaskSampled {
    /// The mm's `mm_cpumask` as the entry is cleared: the CPUs that have the
    /// mm loaded, running it or lazily. A CPU leaves it only when a flush
    /// finds it lazy (or a CR3 switch drops the mm), so it is not the
    /// number of CPUs the process has run on.
    Unmap,
    /// The batch's mask at its flush: the union of the mm masks sampled at
    /// each deferred unmap (`arch_tlbbatch_add_pending()`).
    Batch,
}

impl MaskSampled {
    /// The name Python policies see (`vmsim.policy.MASK_SAMPLES`).
    pub fn name(self) -> &'static str {
        match self {
            MaskSampled::Unmap => "unmap",
            MaskSampled::Batch => "batch",
        }
    }
}

/// What the kernel has when it decides a flush: whether to defer the
/// flush of an entry just cleared (`should_defer`), and whether a flush
/// takes each page or the whole TLB (`full_flush`). Addresses are left
/// out, so a memo of answers per context stays small.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlushCtx {
    /// A CPU other than this one may hold the entry: the mask has a CPU
    /// besides this one (`cpumask_any_but(mask, cpu) < nr_cpu_ids`).
    pub others: bool,
    /// CPUs in the mask as sampled (`sampled`), this one included if it is there.
    pub nr_cpus: u32,
    /// Entries deferred into the task's batch and not flushed yet: those
    /// before this entry for `Page`, all of the batch for `Batch`.
    pub pending: u32,
    /// Pages the flush covers: 1 for `Page`, `pending` for `Batch`.
    pub nr_pages: u64,
    /// What is being decided.
    pub kind: FlushKind,
    /// When `nr_cpus` and `others` were sampled.
    pub sampled: MaskSampled,
    /// `kernel.tlb_single_page_flush_ceiling`.
    pub ceiling: u64,
}

/// The kernel's own answer to `full_flush`: a batch is flushed whole
/// (`arch_tlbbatch_flush()` keeps no addresses: `flush_tlb_multi()` of
/// `TLB_FLUSH_ALL`); a flush of more than `tlb_single_page_flush_ceiling`
/// pages is a full flush (`flush_tlb_mm_range()`).
pub fn kernel_full_flush(ctx: &FlushCtx) -> bool {
    ctx.kind == FlushKind::Batch || ctx.nr_pages > ctx.ceiling
}

/// An unmap TLB-flush policy: decides, does nothing itself. Depends on
/// its arguments alone.
pub trait UnmapFlush: Send + Sync {
    /// `should_defer_flush()`: defer the flush of an entry just cleared into
    /// the batch (true), or flush it at once with `flush_tlb_page()`.
    /// Asked with `kind == Page` and the mask sampled at the unmap.
    fn should_defer(&self, ctx: &FlushCtx) -> Result<bool, String>;
    /// The ceiling: flush the whole TLB (true) or each page of the flush
    /// (false). Asked for every flush of the hook: an entry flushed at once
    /// (`Page`) and a batch (`Batch`, the pages being the deferred
    /// entries). The kernel's rule, `kernel_full_flush`, unless overridden.
    fn full_flush(&self, ctx: &FlushCtx) -> Result<bool, String> {
        Ok(kernel_full_flush(ctx))
    }
    /// `arch_tlbbatch_flush()`: how a batch flushed whole is flushed.
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
        let ctx = |others| FlushCtx {
            others,
            nr_cpus: 2,
            pending: 0,
            nr_pages: 1,
            kind: FlushKind::Page,
            sampled: MaskSampled::Unmap,
            ceiling: 33,
        };
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

    #[test]
    fn the_kernels_ceiling_flushes_a_batch_whole_and_a_range_above_the_ceiling_whole() {
        let ctx = |kind, nr_pages, ceiling| FlushCtx {
            others: true,
            nr_cpus: 4,
            pending: nr_pages as u32,
            nr_pages,
            kind,
            sampled: MaskSampled::Batch,
            ceiling,
        };
        for p in [&PerPage as &dyn UnmapFlush, &Batched, &Broadcast] {
            assert!(!p.full_flush(&ctx(FlushKind::Page, 1, 33)).unwrap());
            assert!(!p.full_flush(&ctx(FlushKind::Page, 33, 33)).unwrap());
            assert!(p.full_flush(&ctx(FlushKind::Page, 34, 33)).unwrap());
            // A ceiling of 0 makes even one page a full flush.
            assert!(p.full_flush(&ctx(FlushKind::Page, 1, 0)).unwrap());
            assert!(p.full_flush(&ctx(FlushKind::Batch, 1, 33)).unwrap());
        }
    }
}
