//! A user access's translation: the page walk of the task's address space
//! and the TLB lookup that goes with it, shared by usemem's write loop
//! (user.rs), the access engine (access.rs) and the trace replay
//! (replay.rs).
//!
//! Invariant (the TLB truth check): a TLB hit must translate to the frame
//! the page tables map; a stale entry (a missing flush) stops the run with
//! an internal error.

use super::Sim;
use crate::error::Error;
use crate::kernel::mm::Level;
use crate::kernel::mm::Translation;
use crate::machine::tlb::PageSize;

/// What the translation of one access found.
pub(crate) enum Xlate {
    /// Mapped for the access; a TLB miss was walked and filled.
    Mapped(Translation),
    /// Not mapped, or not writable for a write: the task faults.
    Fault,
    /// A TLB hit on a frame the page tables no longer map; the run's error is set.
    Stale,
}

impl Sim {
    /// Translates task `t`'s access at `va` (a `write` or not) in address
    /// space `mm` (`asid`) on `cpu`: the walk sets the entry's accessed and
    /// dirty bits; the TLB is looked up, and filled on a miss, with the
    /// page's base frame.
    #[inline]
    pub(crate) fn translate(
        &mut self,
        cpu: usize,
        t: usize,
        mm: usize,
        asid: u16,
        va: u64,
        write: bool,
    ) -> Xlate {
        match self.kernel.mms[mm].walk(va, write) {
            Some(tr) if tr.writable || !write => {
                let size = tr.page_size();
                let base = tr.pfn - ((va & (size.bytes() - 1)) >> 12);
                let pt = &self.kernel.mms[mm].pt;
                let in_memory = self.kernel.cfg.page_tables;
                // The entry at the level mapping pages of `level`'s size.
                let entry_line = |level: PageSize| {
                    if !in_memory {
                        return None;
                    }
                    let l = match level {
                        PageSize::Size4K => Level::Pte,
                        PageSize::Size2M => Level::Pmd,
                        PageSize::Size1G => Level::Pud,
                    };
                    pt.line(va, l)
                };
                if let Some(cached) = self
                    .machine
                    .tlb_translate(cpu, asid, va, size, base, entry_line)
                {
                    if cached != base {
                        self.error = Some(Error::Internal(format!(
                            "task {t}: stale TLB entry on CPU {cpu}: {va:#x} hit frame {cached:#x}, the page table maps {base:#x} (a missing TLB flush)"
                        )));
                        return Xlate::Stale;
                    }
                }
                Xlate::Mapped(tr)
            }
            _ => Xlate::Fault,
        }
    }
}
