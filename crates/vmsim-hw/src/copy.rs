//! Huge-page copy strategies (`copy_user_large_folio()` and variants) over real memory.

use crate::order::{for_each_process_huge_page, regions_7_0};
use crate::prim::{mov_copy, nt_copy, rep_movsb, sfence};
use crate::sys::SUBPAGE;
use crate::user::UserPlans;
use std::cell::RefCell;
use std::sync::Arc;
use vmsim_core::kernel::policy::cow::{check_copy, CopyCtx, CopyPlan};

pub use crate::clear::RADIUS;

/// The user copy plans registered in this process.
static USER: UserPlans<dyn CopyPlan> = UserPlans::new();

/// A user order by the (plan, sub-pages, target) it was made for.
type Ordered = ((u16, usize, usize), Vec<u64>);

thread_local! {
    /// The last user order made: the timed loops copy the same shape over and over.
    static ORDER: RefCell<Option<Ordered>> = const { RefCell::new(None) };
}

/// Registers a user's copy plan under `name` (replacing one of the same
/// name) and returns its strategy.
pub fn register_user(name: &str, plan: Arc<dyn CopyPlan>) -> CopyStrategy {
    CopyStrategy::User(USER.register(name, plan))
}

fn user_order(i: u16, nr: usize, n: usize) -> Result<Vec<u64>, String> {
    let plan = USER.get(i);
    let ctx = CopyCtx {
        nr_pages: nr as u64,
        target: n as u64,
    };
    let mut order = Vec::new();
    plan.plan(&ctx, &mut order)?;
    check_copy(&ctx, &order).map_err(|e| format!("{e} (target sub-page {n} of {nr})"))?;
    Ok(order)
}

/// Whether a user strategy's orders copy every sub-page exactly once for
/// each of `targets`; built-in strategies need no check.
pub fn check_user(s: CopyStrategy, nr: usize, targets: &[usize]) -> Result<(), String> {
    let CopyStrategy::User(i) = s else {
        return Ok(());
    };
    let mut seen = std::collections::BTreeSet::new();
    for &n in targets.iter().filter(|&&n| seen.insert(n)) {
        user_order(i, nr, n)?;
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyStrategy {
    /// 8-byte mov loop per sub-page, ascending (linear copy, 4.14).
    SeqMov,
    /// `rep movsb` per sub-page, ascending (gigantic-page copy).
    SeqMovsb,
    /// process_huge_page order, `rep movsb` per sub-page (4.18 .. today).
    TargetLast,
    /// right, left, neighbourhood, one `rep movsb` each (the 7.0 clear split applied to copy).
    Multipage,
    /// as `Multipage`, far regions with non-temporal stores.
    NontemporalFar,
    /// A registered user copy plan (`register_user`): its order, `rep movsb` per sub-page.
    User(u16),
}

impl CopyStrategy {
    pub const ALL: [CopyStrategy; 5] = [
        Self::SeqMov,
        Self::SeqMovsb,
        Self::TargetLast,
        Self::Multipage,
        Self::NontemporalFar,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::User(i) => USER.name(i),
            Self::SeqMov => "seq-mov",
            Self::SeqMovsb => "seq-movsb",
            Self::TargetLast => "target-last",
            Self::Multipage => "multipage",
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
}

/// Copies `src` into `dst` (equal length, whole 4 KiB sub-pages) as strategy
/// `s` would for a fault on sub-page `n`.
///
/// # Panics
/// On unequal lengths, a length that is not a multiple of 4096, buffers not
/// 8-byte aligned, or `n` outside the page (programming errors).
pub fn copy_huge(s: CopyStrategy, dst: &mut [u8], src: &[u8], n: usize) {
    assert_eq!(dst.len(), src.len(), "src and dst differ in length");
    assert!(
        dst.len().is_multiple_of(SUBPAGE),
        "length must be a multiple of 4 KiB"
    );
    assert!(
        (dst.as_ptr() as usize).is_multiple_of(8) && (src.as_ptr() as usize).is_multiple_of(8),
        "buffers must be 8-byte aligned"
    );
    let nr = dst.len() / SUBPAGE;
    if nr == 0 {
        return;
    }
    assert!(n < nr, "target {n} outside {nr} sub-pages");
    let (d, sp) = (dst.as_mut_ptr(), src.as_ptr());
    let at = |i: usize| unsafe { (d.add(i * SUBPAGE), sp.add(i * SUBPAGE)) };
    // SAFETY: all sub-page/region indices are < nr, so every range is inside both slices,
    // and &mut dst / &src cannot overlap.
    unsafe {
        match s {
            CopyStrategy::User(u) => ORDER.with(|cell| {
                let mut cached = cell.borrow_mut();
                if cached.as_ref().map(|(k, _)| *k) != Some((u, nr, n)) {
                    let order = user_order(u, nr, n)
                        .expect("a user plan is checked for the run's shapes before it runs");
                    *cached = Some(((u, nr, n), order));
                }
                for &i in &cached.as_ref().expect("just made").1 {
                    let (d, s) = at(i as usize);
                    rep_movsb(d, s, SUBPAGE)
                }
            }),
            CopyStrategy::SeqMov => (0..nr).for_each(|i| {
                let (d, s) = at(i);
                mov_copy(d, s, SUBPAGE)
            }),
            CopyStrategy::SeqMovsb => (0..nr).for_each(|i| {
                let (d, s) = at(i);
                rep_movsb(d, s, SUBPAGE)
            }),
            CopyStrategy::TargetLast => for_each_process_huge_page(n, nr, |i| {
                let (d, s) = at(i);
                rep_movsb(d, s, SUBPAGE)
            }),
            CopyStrategy::Multipage => {
                for r in regions_7_0(n, nr) {
                    let (d, s) = at(r.start);
                    rep_movsb(d, s, r.len() * SUBPAGE);
                }
            }
            CopyStrategy::NontemporalFar => {
                let regions = regions_7_0(n, nr);
                let (hot, far) = regions.split_last().expect("neighbourhood is never empty");
                for r in far {
                    let (d, s) = at(r.start);
                    nt_copy(d, s, r.len() * SUBPAGE);
                }
                sfence();
                let (d, s) = at(hot.start);
                rep_movsb(d, s, hot.len() * SUBPAGE);
            }
        }
    }
}
