//! Huge-page clearing strategies, each a faithful replay of one kernel
//! generation's `clear_huge_page()`/`folio_zero_user()` over real memory:
//! the steps are the simulator's own clear plan (vmsim-core's
//! `kernel::policy::clear`), so the host runs exactly what the model
//! simulates, with the kernel's default (voluntary) preemption model.

use crate::prim::{clzero_clear, has_clzero, mov_clear, nt_clear, rep_stosb, sfence};
use crate::sys::SUBPAGE;
use crate::user::UserPlans;
use std::cell::RefCell;
use std::sync::Arc;
use vmsim_core::kernel::policy::clear::{check, ClearCtx, ClearPlan, ClearStep};
use vmsim_core::kernel::StoreHow;
use vmsim_core::policy::ClearHugePage;

/// Width of the neighbourhood the multi-page clears hold back for last
/// (the 2023 `width` and 7.0 `FOLIO_ZERO_LOCALITY_RADIUS`): the simulator's.
pub const RADIUS: usize = vmsim_core::kernel::huge_memory::FOLIO_ZERO_LOCALITY_RADIUS as usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClearStrategy {
    /// clear_page_orig per sub-page, ascending (linear, pre-4.14).
    SeqMov,
    /// clear_page_erms per sub-page, ascending (gigantic pages before 7.0).
    SeqStosb,
    /// process_huge_page order, clear_page_erms per sub-page (4.14 .. 6.x).
    TargetLast,
    /// 2023 proposal: left, right, neighbourhood, one `rep stosb` each.
    Multipage2023,
    /// 7.0 folio_zero_user: right, left, neighbourhood, one `rep stosb` each.
    Contiguous70,
    /// 7.0 regions, far ones with non-temporal stores (the 2022 RFC's uncached idea).
    NontemporalFar,
    /// A plan registered for this process (`register_user`): a user's own
    /// policy, by its index in the registry.
    User(u16),
}

/// The user clear plans registered in this process.
static USER: UserPlans<dyn ClearPlan> = UserPlans::new();

/// Registers a user's clear plan under `name` (replacing one of the same
/// name) and returns its strategy.
pub fn register_user(name: &str, plan: Arc<dyn ClearPlan>) -> ClearStrategy {
    ClearStrategy::User(USER.register(name, plan))
}

/// Whether a user strategy's plans clear every sub-page of an `nr`-page
/// folio exactly once for each of `targets` (the error names the target
/// and the step); built-in strategies are proved by vmsim-core's tests.
pub fn check_user(s: ClearStrategy, nr: usize, targets: &[usize]) -> Result<(), String> {
    let ClearStrategy::User(i) = s else {
        return Ok(());
    };
    let plan = USER.get(i);
    let mut seen = std::collections::BTreeSet::new();
    for &n in targets.iter().filter(|&&n| seen.insert(n)) {
        let ctx = ClearCtx {
            nr_pages: nr as u64,
            target: n as u64,
            preemptible: false,
            string: StoreHow::String,
        };
        let mut steps = Vec::new();
        plan.plan(&ctx, &mut steps)?;
        check(&ctx, &steps).map_err(|e| format!("{e} (target sub-page {n} of {nr})"))?;
        let clzero = |s: &ClearStep| {
            matches!(
                s,
                ClearStep::Region {
                    how: StoreHow::Clzero,
                    ..
                }
            )
        };
        if let Some(k) = steps.iter().position(clzero).filter(|_| !has_clzero()) {
            return Err(format!(
                "step {k} ({:?}) stores with clzero, which this host's CPU lacks (CPUID Fn8000_0008 EBX bit 0)",
                steps[k]
            ));
        }
    }
    Ok(())
}

impl ClearStrategy {
    pub const ALL: [ClearStrategy; 6] = [
        Self::SeqMov,
        Self::SeqStosb,
        Self::TargetLast,
        Self::Multipage2023,
        Self::Contiguous70,
        Self::NontemporalFar,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::User(i) => USER.name(i),
            Self::SeqMov => "seq-mov",
            Self::SeqStosb => "seq-stosb",
            Self::TargetLast => "target-last",
            Self::Multipage2023 => "multipage-2023",
            Self::Contiguous70 => "contiguous-7.0",
            Self::NontemporalFar => "nontemporal-far",
        }
    }

    /// A built-in strategy or a registered user plan of this name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .or_else(|| USER.find(s).map(Self::User))
    }

    /// The names `from_name` takes: the built-ins, then the registered user plans.
    pub fn all_names() -> Vec<&'static str> {
        let mut v: Vec<&'static str> = Self::ALL.iter().map(|s| s.name()).collect();
        v.extend(USER.names());
        v
    }

    /// How the arch's `clear_page`/`clear_pages` stores for this strategy
    /// (no allocation: the timed loop asks it on every call).
    pub fn string(self) -> StoreHow {
        match self {
            Self::SeqMov => StoreHow::MovLoop,
            _ => StoreHow::String,
        }
    }

    /// The simulator's clear plan this strategy replays, and how the
    /// arch's `clear_page`/`clear_pages` stores (a user plan: `rep stosb`,
    /// as the kernel's `clear_page_erms` on hosts with ERMS).
    pub fn plan(self) -> (Arc<dyn ClearPlan>, StoreHow) {
        let (p, how) = match self {
            Self::User(i) => {
                let plan = USER.get(i);
                return (plan, StoreHow::String);
            }
            Self::SeqMov => (ClearHugePage::Sequential, StoreHow::MovLoop),
            Self::SeqStosb => (ClearHugePage::Sequential, StoreHow::String),
            Self::TargetLast => (ClearHugePage::TargetLast, StoreHow::String),
            Self::Multipage2023 => (ClearHugePage::Multipage2023, StoreHow::String),
            Self::Contiguous70 => (ClearHugePage::Contiguous70, StoreHow::String),
            Self::NontemporalFar => (ClearHugePage::NontemporalFar, StoreHow::String),
        };
        let plan = vmsim_core::kernel::policy::registry::builtin()
            .clear
            .get(p.name())
            .expect("every built-in clear policy is registered")
            .shared();
        (plan, how)
    }
}

/// A plan by the (strategy, sub-pages, target) it was made for.
type Planned = ((ClearStrategy, usize, usize), Vec<ClearStep>);

thread_local! {
    /// The last plan made, by (strategy, sub-pages, target): the timed loops
    /// clear the same shape over and over, and allocate nothing after the first.
    static PLAN: RefCell<Option<Planned>> =
        const { RefCell::new(None) };
}

/// The steps of strategy `s` for `nr` sub-pages and target `n`.
pub fn plan_steps(s: ClearStrategy, nr: usize, n: usize) -> Vec<ClearStep> {
    let (policy, string) = s.plan();
    let ctx = ClearCtx {
        nr_pages: nr as u64,
        target: n as u64,
        preemptible: false,
        string,
    };
    let mut steps = Vec::new();
    // A user plan was checked for the run's shapes when it was chosen (check_user).
    policy
        .plan(&ctx, &mut steps)
        .expect("a built-in plan, or a user plan checked before the run, does not fail");
    steps
}

/// Stores zeros over `len` bytes at `p`, as `how` says.
///
/// # Safety
/// `p..p+len` must be writable memory, 8-byte aligned.
unsafe fn store(how: StoreHow, p: *mut u8, len: usize) {
    match how {
        StoreHow::String => rep_stosb(p, len),
        StoreHow::MovLoop => mov_clear(p, len),
        StoreHow::NonTemporal => nt_clear(p, len),
        // check_user refused a plan with clzero on a CPU without it.
        StoreHow::Clzero => clzero_clear(p, len),
    }
}

/// Zeroes `page` (a whole number of 4 KiB sub-pages) as strategy `s` would
/// for a fault on sub-page `n`.
///
/// # Panics
/// If `page.len()` is not a multiple of 4096, `page` is not 8-byte aligned,
/// or `n` is not a sub-page of it (programming errors, not input errors).
pub fn clear_huge(s: ClearStrategy, page: &mut [u8], n: usize) {
    assert!(
        page.len().is_multiple_of(SUBPAGE),
        "length must be a multiple of 4 KiB"
    );
    assert!(
        (page.as_ptr() as usize).is_multiple_of(8),
        "buffer must be 8-byte aligned"
    );
    let nr = page.len() / SUBPAGE;
    if nr == 0 {
        return;
    }
    assert!(n < nr, "target {n} outside {nr} sub-pages");
    let base = page.as_mut_ptr();
    let string = s.string();
    PLAN.with(|cell| {
        let mut cached = cell.borrow_mut();
        if cached.as_ref().map(|(key, _)| *key) != Some((s, nr, n)) {
            *cached = Some(((s, nr, n), plan_steps(s, nr, n)));
        }
        let steps = &cached.as_ref().expect("just made").1;
        // SAFETY: the plan's sub-pages and regions lie within `page` (its
        // steps cover sub-pages 0..nr exactly once: vmsim-core's tests).
        unsafe {
            for &step in steps {
                match step {
                    ClearStep::Subpage(i) => store(string, base.add(i as usize * SUBPAGE), SUBPAGE),
                    ClearStep::Region { start, len, how } => store(
                        how,
                        base.add(start as usize * SUBPAGE),
                        len as usize * SUBPAGE,
                    ),
                    ClearStep::Fence => sfence(),
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_replays_the_models_plans() {
        let giga = 1 << 18; // 1 GiB of 4 KiB sub-pages
                            // clear_gigantic_page(): ascending, not the target-last order.
        let s = plan_steps(ClearStrategy::TargetLast, giga, 1000);
        assert_eq!(
            (s[0], s[giga - 1]),
            (ClearStep::Subpage(0), ClearStep::Subpage(giga as u64 - 1))
        );
        // The 2023 series clears a gigantic folio straight.
        assert_eq!(
            plan_steps(ClearStrategy::Multipage2023, giga, 1000),
            vec![ClearStep::Region {
                start: 0,
                len: giga as u64,
                how: StoreHow::String
            }]
        );
        // 7.0 with voluntary preemption: 32 MiB clear_pages() calls.
        let s = plan_steps(ClearStrategy::Contiguous70, giga, 1000);
        assert!(s
            .iter()
            .all(|st| matches!(st, ClearStep::Region { len, .. } if *len <= 8192)));
        // A 2 MiB page's 7.0 regions are whole.
        assert_eq!(plan_steps(ClearStrategy::Contiguous70, 512, 100).len(), 3);
    }

    #[test]
    fn every_strategy_zeroes_every_byte() {
        let nr = 16;
        let mut buf = vec![0xa5u64; nr * SUBPAGE / 8];
        for s in ClearStrategy::ALL {
            for n in [0, 7, nr - 1] {
                buf.iter_mut().for_each(|w| *w = 0xa5a5_a5a5_a5a5_a5a5);
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, nr * SUBPAGE)
                };
                clear_huge(s, bytes, n);
                assert!(buf.iter().all(|&w| w == 0), "{} n {n}", s.name());
            }
        }
    }

    struct Backwards;
    impl ClearPlan for Backwards {
        fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
            out.extend((0..ctx.nr_pages).rev().map(ClearStep::Subpage));
            Ok(())
        }
    }

    struct Short;
    impl ClearPlan for Short {
        fn plan(&self, ctx: &ClearCtx, out: &mut Vec<ClearStep>) -> Result<(), String> {
            out.extend((1..ctx.nr_pages).map(ClearStep::Subpage));
            Ok(())
        }
    }

    #[test]
    fn a_user_plan_runs_with_the_real_routines_once_checked() {
        let s = register_user("test-backwards", Arc::new(Backwards));
        assert_eq!(ClearStrategy::from_name("test-backwards"), Some(s));
        assert!(ClearStrategy::all_names().contains(&"test-backwards"));
        assert_eq!(check_user(s, 16, &[0, 5]), Ok(()));
        let nr = 16;
        let mut buf = vec![0xa5a5_a5a5_a5a5_a5a5u64; nr * SUBPAGE / 8];
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut u8, nr * SUBPAGE) };
        clear_huge(s, bytes, 3);
        assert!(buf.iter().all(|&w| w == 0));
        let bad = register_user("test-short", Arc::new(Short));
        let e = check_user(bad, 16, &[2]).unwrap_err();
        assert!(e.starts_with("sub-page 0 is never cleared"), "{e}");
    }
}
