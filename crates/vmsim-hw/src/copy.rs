//! Huge-page copy strategies (`copy_user_large_folio()` and variants) over real memory.

use crate::order::{for_each_process_huge_page, regions_7_0};
use crate::prim::{mov_copy, nt_copy, rep_movsb, sfence};
use crate::sys::SUBPAGE;

pub use crate::clear::RADIUS;

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
            Self::SeqMov => "seq-mov",
            Self::SeqMovsb => "seq-movsb",
            Self::TargetLast => "target-last",
            Self::Multipage => "multipage",
            Self::NontemporalFar => "nontemporal-far",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.name() == s)
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
