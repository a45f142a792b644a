//! Copy-on-write of a PMD-mapped anonymous huge page (`do_huge_pmd_wp_page()`):
//! the decision — reuse the page, copy it whole, or split the PMD and copy
//! only the faulting 4 KiB page — and, for a whole copy, the order of the
//! sub-page copies (`copy_user_huge_page()`). The kernel (kernel/memory.rs)
//! carries both out.
//!
//! Invariants: a page still mapped by another process is never reused (the
//! kernel refuses the decision and stops the run); a copy plan copies every
//! sub-page exactly once (`check_copy`).

use super::clear::ClearCtx;
use crate::kernel::huge_memory::process_huge_page_in_order;
use crate::policy::{HugePageOrder, ThpCow};

/// What a copy plan is decided from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CopyCtx {
    /// Sub-pages of the huge page (512 for 2 MiB).
    pub nr_pages: u64,
    /// The sub-page holding the faulting address.
    pub target: u64,
}

/// A huge-page copy policy: the order in which the sub-pages are copied.
/// Depends on `ctx` alone.
pub trait CopyPlan: Send + Sync {
    /// Appends the sub-page indices, in copy order, to `out`.
    fn plan(&self, ctx: &CopyCtx, out: &mut Vec<u64>) -> Result<(), String>;
}

/// One of the per-page orders of `process_huge_page()`'s family.
pub struct PerPageCopy(pub HugePageOrder);
impl CopyPlan for PerPageCopy {
    fn plan(&self, ctx: &CopyCtx, out: &mut Vec<u64>) -> Result<(), String> {
        process_huge_page_in_order(self.0, ctx.target << 12, ctx.nr_pages, |i| {
            out.push(i);
            0
        });
        Ok(())
    }
}

/// Whether `order` copies every sub-page of `ctx`'s huge page exactly once.
pub fn check_copy(ctx: &CopyCtx, order: &[u64]) -> Result<(), String> {
    let mut seen = vec![false; ctx.nr_pages as usize];
    for (k, &i) in order.iter().enumerate() {
        if i >= ctx.nr_pages {
            return Err(format!(
                "step {k} (sub-page {i}) is outside the huge page's {} sub-pages",
                ctx.nr_pages
            ));
        }
        if std::mem::replace(&mut seen[i as usize], true) {
            return Err(format!("step {k} copies sub-page {i} a second time"));
        }
    }
    match seen.iter().position(|&s| !s) {
        Some(i) => Err(format!("sub-page {i} is never copied")),
        None => Ok(()),
    }
}

/// What a write fault on a read-only huge PMD does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CowAction {
    /// Make the PMD writable and keep the page: only when no other process maps it.
    Reuse,
    /// Allocate a new huge page, copy all sub-pages, map it with one PMD
    /// (falls back to `Split` when no huge page can be allocated).
    Copy,
    /// Split the PMD into PTEs and copy only the faulting 4 KiB page.
    Split,
}

/// What the THP copy-on-write decision is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CowCtx {
    /// Sub-pages of the huge page.
    pub nr_pages: u64,
    /// No other process maps the page (`folio_mapcount() == 1`).
    pub exclusive: bool,
}

/// A THP copy-on-write policy (`do_huge_pmd_wp_page()`). Depends on `ctx` alone.
pub trait ThpCowPolicy: Send + Sync {
    fn decide(&self, ctx: &CowCtx) -> Result<CowAction, String>;
}

/// 4.18 .. 5.7 (`copy`) and 5.8 onwards (`split`): an exclusive page is reused.
pub struct BuiltinCow(pub ThpCow);
impl ThpCowPolicy for BuiltinCow {
    fn decide(&self, ctx: &CowCtx) -> Result<CowAction, String> {
        Ok(match (ctx.exclusive, self.0) {
            (true, _) => CowAction::Reuse,
            (false, ThpCow::Copy) => CowAction::Copy,
            (false, ThpCow::Split) => CowAction::Split,
        })
    }
}

/// A copy context from the clear context of the same fault (same folio, same target).
impl From<&ClearCtx> for CopyCtx {
    fn from(c: &ClearCtx) -> CopyCtx {
        CopyCtx {
            nr_pages: c.nr_pages,
            target: c.target,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::CopyHugePage;

    #[test]
    fn builtin_orders_copy_each_subpage_once_and_target_last_ends_on_the_target() {
        for &n in CopyHugePage::NAMES {
            let plan = crate::kernel::policy::registry::builtin()
                .copy
                .get(n)
                .unwrap();
            for target in [0, 1, 100, 255, 256, 511] {
                let ctx = CopyCtx {
                    nr_pages: 512,
                    target,
                };
                let mut order = Vec::new();
                plan.plan(&ctx, &mut order).unwrap();
                check_copy(&ctx, &order).unwrap();
                if n == "target-last" {
                    assert_eq!(order.last(), Some(&target));
                }
            }
        }
        let ctx = CopyCtx {
            nr_pages: 4,
            target: 0,
        };
        assert_eq!(
            check_copy(&ctx, &[0, 1, 2]).unwrap_err(),
            "sub-page 3 is never copied"
        );
        assert!(check_copy(&ctx, &[0, 1, 1, 2])
            .unwrap_err()
            .starts_with("step 2 "));
        assert!(check_copy(&ctx, &[4]).unwrap_err().contains("outside"));
    }

    #[test]
    fn builtin_cow_reuses_only_an_exclusive_page() {
        for (p, shared) in [
            (ThpCow::Copy, CowAction::Copy),
            (ThpCow::Split, CowAction::Split),
        ] {
            let d = BuiltinCow(p);
            let ctx = |exclusive| CowCtx {
                nr_pages: 512,
                exclusive,
            };
            assert_eq!(d.decide(&ctx(true)), Ok(CowAction::Reuse));
            assert_eq!(d.decide(&ctx(false)), Ok(shared));
        }
    }
}
