//! `folio_zero_user(folio, addr_hint)` (mm/memory.c) for a folio of any size:
//! the "do" half of the huge-page clear. The configured `clear_huge_page`
//! policy decides the plan (kernel/policy/clear.rs); this carries it out:
//!
//! - `sequential`: sub-pages ascending, one `clear_page` each (before 4.14);
//! - `target-last`: `process_huge_page()` (4.14 .. 6.19), or for a gigantic
//!   folio `clear_gigantic_page()`, ascending per 4 KiB (docs/mechanisms.md#gigantic-pages);
//! - `multipage-2023`: three regions, each one `clear_pages()` string op (docs/mechanisms.md#the-2023-multi-page-clearing-proposal);
//! - `contiguous-7.0`: three regions through `clear_contig_highpages()` (docs/mechanisms.md#contiguous-range-clearing);
//! - `nontemporal-far`: the 7.0 regions, the two far ones by `movnti` stores (docs/mechanisms.md#non-temporal-far-regions).
//!
//! A step is one sub-page's `clear_page()`, one `clear_pages()` region or
//! a fence. Kernel state (content tags) changes at once; the clears are queued as
//! `Work` for the faulting CPU. A region is one `Work::Clear`, which the CPU
//! executes as one string instruction (one start-up, then line stores).

use super::memory::clear_user_highpage;
use super::page_alloc::TAG_ZERO;
use super::policy::clear::{check, ClearCtx, ClearStep};
use super::{instr, KFn, Kernel, StoreHow, Work};
use crate::policy::ClearPage;
use std::collections::VecDeque;

impl Kernel {
    /// `folio_zero_user()` for the folio of `nr_pages` 4 KiB pages at `pfn`,
    /// mapped at the naturally aligned address containing `addr_hint`: the
    /// configured clear plan (kernel/policy/clear.rs), carried out.
    pub fn folio_zero_user(
        &mut self,
        pfn: u64,
        nr_pages: u64,
        addr_hint: u64,
        work: &mut VecDeque<Work>,
    ) {
        self.vmstat.huge_page_clears += 1;
        // Fault injection: this sub-page index of the first folio cleared is left stale.
        let skip = self.skip_clear_subpage.take();
        let base = addr_hint & !((nr_pages << 12) - 1);
        let variant = self.cfg.clear_page;
        let ctx = ClearCtx {
            nr_pages,
            target: (addr_hint - base) >> 12,
            preemptible: self.cfg.preempt.preemptible(),
            string: match variant {
                ClearPage::Erms => StoreHow::String,
                ClearPage::Orig => StoreHow::MovLoop,
            },
        };
        let plan = &self.cfg.clear_huge_page;
        let mut steps = Vec::new();
        let checked = plan.checked(plan.plan(&ctx, &mut steps), || {
            check(&ctx, &steps).map_err(|e| {
                format!(
                    "{e} (a folio of {} sub-pages, target sub-page {})",
                    ctx.nr_pages, ctx.target
                )
            })
        });
        let clzero = self.cpus.clzero;
        let checked = checked.and_then(|()| match steps.iter().position(|s| {
            !clzero && matches!(s, ClearStep::Region { how: StoreHow::Clzero, .. })
        }) {
            Some(k) => Err(format!(
                "step {k} ({:?}) stores with clzero, which this machine's CPUs lack (string.clzero = false)",
                steps[k]
            )),
            None => Ok(()),
        });
        if let Err(e) = checked {
            let name = plan.name().to_string();
            self.policy_failed("clear_huge_page", &name, e);
            return;
        }
        for step in steps {
            match step {
                ClearStep::Subpage(i) => {
                    // clear_subpage()
                    if Some(i) != skip {
                        clear_user_highpage(
                            &mut self.mem.alloc,
                            &mut self.vmstat,
                            variant,
                            pfn + i,
                            work,
                        );
                    } // else: injected defect, the sub-page keeps its stale contents
                }
                ClearStep::Region { start, len, how } => {
                    self.clear_pages(pfn, start, len, how, skip, work)
                }
                ClearStep::Fence => work.push_back(Work::Sfence {
                    what: KFn::ClearPage,
                }),
            }
        }
    }

    /// `clear_user_highpages()` → `clear_pages(addr, npages)` on the direct map:
    /// sub-pages `[start, start+len)` of the folio at `pfn` in one store run.
    /// With fault injection, the skipped sub-page splits the run in two.
    fn clear_pages(
        &mut self,
        pfn: u64,
        start: u64,
        len: u64,
        how: StoreHow,
        skip: Option<u64>,
        work: &mut VecDeque<Work>,
    ) {
        let mut runs = [(start, len), (0, 0)];
        if let Some(k) = skip.filter(|&k| k >= start && k < start + len) {
            runs = [(start, k - start), (k + 1, start + len - k - 1)];
        }
        let call = match how {
            StoreHow::String => instr::CLEAR_PAGES_ERMS,
            StoreHow::MovLoop | StoreHow::NonTemporal | StoreHow::Clzero => 4, // entry, length shift, ret; the loop is counted per line
        };
        work.push_back(Work::Cycles {
            cycles: 0,
            instructions: instr::REGION_STEP + call,
            what: KFn::ClearPage,
        });
        for (s, l) in runs {
            if l == 0 {
                continue;
            }
            for p in pfn + s..pfn + s + l {
                self.mem.alloc.tags[p as usize] = TAG_ZERO;
            }
            self.vmstat.subpage_clears += l;
            work.push_back(Work::Clear {
                line: (pfn + s) << 6,
                nlines: l << 6,
                how,
            });
        }
    }
}
