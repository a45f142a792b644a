//! The huge-page clear plan (`folio_zero_user()` / `clear_huge_page()`):
//! given a folio's size, the target sub-page and the context, the ordered
//! steps that zero it — single sub-pages (`clear_page()`), regions in one
//! `clear_pages()` call and how their lines are stored, and fences. The
//! built-in plans are the kernel generations and proposals, registered by
//! name in registry.rs; kernel/folio_zero.rs carries a plan out.
//!
//! Invariant: a plan the kernel carries out clears every sub-page of the
//! folio exactly once (`check`); the target sub-page's position in it is the
//! plan's choice.

use crate::kernel::huge_memory::{
    clear_contig_highpages_chunks, clear_regions_2023, clear_regions_7_0,
    process_huge_page_in_order, MAX_ORDER_NR_PAGES,
};
use crate::kernel::StoreHow;
use crate::policy::HugePageOrder;

/// One step of a clear plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClearStep {
    /// `clear_user_highpage()` of one sub-page, with the arch's `clear_page`.
    Subpage(u64),
    /// One `clear_pages()` call over sub-pages `[start, start + len)`, its
    /// lines stored `how`.
    Region { start: u64, len: u64, how: StoreHow },
    /// `sfence`: the non-temporal stores before it are ordered before what follows.
    Fence,
}

/// What a clear plan is decided from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClearCtx {
    /// Sub-pages of the folio (512 for a 2 MiB folio, 262 144 for 1 GiB).
    pub nr_pages: u64,
    /// The sub-page holding the faulting address.
    pub target: u64,
    /// The kernel is preemptible (`preempt = full`): no `cond_resched()` chunks.
    pub preemptible: bool,
    /// How the arch's `clear_pages()` stores (`rep stosb` with ERMS, else a `mov` loop).
    pub string: StoreHow,
}

impl ClearCtx {
    /// A folio above `MAX_ORDER_NR_PAGES` (clear_gigantic_page's territory).
    pub fn gigantic(&self) -> bool {
        self.nr_pages > MAX_ORDER_NR_PAGES
    }
}

/// A huge-page clearing policy: decides the plan, does nothing itself. A
/// plan depends on `ctx` alone (no hidden state, no randomness): the kernel
/// may ask once and reuse the answer for the same context.
pub trait ClearPlan: Send + Sync {
    /// Appends the plan for `ctx` to `out`; an error is the policy's own
    /// failure (a user policy's exception), and stops the run.
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String>;
}

/// Each sub-page with `clear_page()`, in one of the per-page orders.
fn per_page(order: HugePageOrder, ctx: &ClearCtx, out: &mut Vec<ClearStep>) {
    // The order's walk takes an address hint: the target's sub-page.
    process_huge_page_in_order(order, ctx.target << 12, ctx.nr_pages, |i| {
        out.push(ClearStep::Subpage(i));
        0
    });
}

/// Kernels before 4.14: sub-pages ascending.
pub struct Sequential;
impl ClearPlan for Sequential {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        per_page(HugePageOrder::Sequential, ctx, out);
        Ok(())
    }
}

/// `process_huge_page()` (4.14 .. 6.19), target sub-page last; a gigantic
/// folio through `clear_gigantic_page()`, ascending.
pub struct TargetLast;
impl ClearPlan for TargetLast {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        let order = if ctx.gigantic() {
            HugePageOrder::Sequential
        } else {
            HugePageOrder::TargetLast
        };
        per_page(order, ctx, out);
        Ok(())
    }
}

/// The 2023 x86 override: left, right, then the target's neighbourhood,
/// each one `clear_pages()` call with no `cond_resched()`.
pub struct Multipage2023;
impl ClearPlan for Multipage2023 {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        for (start, len) in clear_regions_2023(ctx.target, ctx.nr_pages) {
            out.push(ClearStep::Region {
                start,
                len,
                how: ctx.string,
            });
        }
        Ok(())
    }
}

/// `clear_contig_highpages()` of `[start, start + len)`: its chunks, each
/// one `clear_pages()` call.
fn contig(ctx: &ClearCtx, start: u64, len: u64, how: StoreHow, out: &mut Vec<ClearStep>) {
    for (off, count) in clear_contig_highpages_chunks(len, ctx.preemptible) {
        out.push(ClearStep::Region {
            start: start + off,
            len: count,
            how,
        });
    }
}

/// Linux 7.0 `folio_zero_user()`: right, left, neighbourhood, each through
/// `clear_contig_highpages()`.
pub struct Contiguous70;
impl ClearPlan for Contiguous70 {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        for (start, len) in clear_regions_7_0(ctx.target, ctx.nr_pages) {
            contig(ctx, start, len, ctx.string, out);
        }
        Ok(())
    }
}

/// The 7.0 regions with the far ones stored non-temporally, then an
/// `sfence`, then the neighbourhood with the arch's clear.
pub struct NontemporalFar;
impl ClearPlan for NontemporalFar {
    fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
        let regions = clear_regions_7_0(ctx.target, ctx.nr_pages);
        let last = regions.len() - 1;
        for (j, &(start, len)) in regions.iter().enumerate() {
            let how = if j == last {
                ctx.string
            } else {
                StoreHow::NonTemporal
            };
            if j == last && last > 0 {
                out.push(ClearStep::Fence);
            }
            contig(ctx, start, len, how, out);
        }
        Ok(())
    }
}

/// Whether `steps` clear every sub-page of `ctx`'s folio exactly once; the
/// error names the step (by index) that breaks it.
pub fn check(ctx: &ClearCtx, steps: &[ClearStep]) -> Result<(), String> {
    let n = ctx.nr_pages;
    let mut seen = vec![false; n as usize];
    for (k, step) in steps.iter().enumerate() {
        let (start, len) = match *step {
            ClearStep::Subpage(i) => (i, 1),
            ClearStep::Region { start, len, .. } => (start, len),
            ClearStep::Fence => continue,
        };
        if len == 0 || start >= n || len > n - start {
            return Err(format!(
                "step {k} ({step:?}) is outside the folio's {n} sub-pages or empty"
            ));
        }
        for i in start..start + len {
            if std::mem::replace(&mut seen[i as usize], true) {
                return Err(format!(
                    "step {k} ({step:?}) clears sub-page {i} a second time"
                ));
            }
        }
    }
    match seen.iter().position(|&s| !s) {
        Some(i) => Err(format!("sub-page {i} is never cleared")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::ClearHugePage;

    fn ctx(nr_pages: u64, target: u64, preemptible: bool) -> ClearCtx {
        ClearCtx {
            nr_pages,
            target,
            preemptible,
            string: StoreHow::String,
        }
    }

    #[test]
    fn every_builtin_plan_clears_each_subpage_once() {
        for policy in ClearHugePage::NAMES
            .iter()
            .map(|n| ClearHugePage::parse(n).unwrap())
        {
            let plan = crate::kernel::policy::registry::builtin()
                .clear
                .get(policy.name())
                .unwrap();
            for nr in [1, 2, 7, 8, 64, 512, 2048] {
                for target in [0, nr / 3, nr / 2, nr - 1] {
                    for pre in [false, true] {
                        let c = ctx(nr, target, pre);
                        let mut steps = Vec::new();
                        plan.plan(&c, &mut steps).unwrap();
                        check(&c, &steps).unwrap_or_else(|e| panic!("{policy:?} {c:?}: {e}"));
                    }
                }
            }
        }
    }

    #[test]
    fn target_last_ends_on_the_target_and_a_gigantic_folio_goes_ascending() {
        let mut s = Vec::new();
        TargetLast.plan(&ctx(512, 100, false), &mut s).unwrap();
        assert_eq!(s.last(), Some(&ClearStep::Subpage(100)));
        s.clear();
        TargetLast.plan(&ctx(1 << 18, 100, false), &mut s).unwrap();
        assert_eq!(s[0], ClearStep::Subpage(0));
        assert_eq!(s.last(), Some(&ClearStep::Subpage((1 << 18) - 1)));
    }

    #[test]
    fn nontemporal_far_fences_before_its_cached_neighbourhood() {
        let mut s = Vec::new();
        NontemporalFar.plan(&ctx(512, 100, true), &mut s).unwrap();
        assert_eq!(
            s,
            vec![
                ClearStep::Region {
                    start: 103,
                    len: 409,
                    how: StoreHow::NonTemporal
                },
                ClearStep::Region {
                    start: 0,
                    len: 98,
                    how: StoreHow::NonTemporal
                },
                ClearStep::Fence,
                ClearStep::Region {
                    start: 98,
                    len: 5,
                    how: StoreHow::String
                },
            ]
        );
    }

    #[test]
    fn check_names_the_step_that_breaks_the_plan() {
        let c = ctx(8, 3, false);
        let twice = [
            ClearStep::Region {
                start: 0,
                len: 8,
                how: StoreHow::String,
            },
            ClearStep::Subpage(3),
        ];
        assert!(check(&c, &twice).unwrap_err().starts_with("step 1 "));
        let short = [ClearStep::Region {
            start: 0,
            len: 7,
            how: StoreHow::String,
        }];
        assert_eq!(
            check(&c, &short).unwrap_err(),
            "sub-page 7 is never cleared"
        );
        let outside = [ClearStep::Subpage(8)];
        assert!(check(&c, &outside).unwrap_err().contains("outside"));
    }
}
