//! Whether a user's unmap-flush policy decided as a built-in would have,
//! over a run (kernel/policy/tlb.rs is the hook; registry.rs the built-ins):
//! the run's `policy_notes` name a built-in that agreed in every decision.

use super::registry::{builtin, Hook};
use super::tlb::{BatchFlush, FlushCtx, FlushKind, UnmapFlush};

/// Whether a user's flush policy answered as each built-in of its hook
/// would have, over a run's decisions (`should_defer` and `full_flush`,
/// and `batch_flush` wherever a batch was flushed whole): a policy that
/// agreed with a built-in everywhere gave that built-in's run, which the
/// run's `policy_notes` say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushAgreement {
    /// Decisions the user's policy took.
    pub decisions: u64,
    /// Bit i: the hook's i-th built-in answered differently at least once.
    pub differs: u32,
}

impl FlushAgreement {
    /// The built-ins of reclaim's hook, or migration's (`migration`).
    fn builtins(migration: bool) -> &'static [Hook<dyn UnmapFlush>] {
        let b = builtin();
        if migration {
            b.migrate_flush.hooks()
        } else {
            b.reclaim_flush.hooks()
        }
    }

    /// One decision of the user's policy: `answer` to `should_defer`
    /// (`defer`) or `full_flush` in `ctx`, with its `batch_flush`.
    pub fn record(
        &mut self,
        migration: bool,
        defer: bool,
        ctx: &FlushCtx,
        answer: bool,
        batch: BatchFlush,
    ) {
        self.decisions += 1;
        for (i, h) in Self::builtins(migration).iter().enumerate() {
            let theirs = if defer {
                h.should_defer(ctx)
            } else {
                h.full_flush(ctx)
            };
            let whole_batch = !defer && answer && ctx.kind == FlushKind::Batch;
            if theirs != Ok(answer) || (whole_batch && h.batch_flush() != batch) {
                self.differs |= 1 << i;
            }
        }
    }

    /// The built-ins that answered as the user's policy in every decision.
    pub fn agreeing(&self, migration: bool) -> Vec<&'static str> {
        Self::builtins(migration)
            .iter()
            .enumerate()
            .filter(|(i, _)| self.differs & (1 << i) == 0)
            .map(|(_, h)| h.name())
            .collect()
    }
}
