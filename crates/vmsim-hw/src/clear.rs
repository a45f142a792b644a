//! Huge-page clearing strategies, each a faithful replay of one kernel
//! generation's `clear_huge_page()`/`folio_zero_user()` over real memory.

use crate::order::{for_each_process_huge_page, regions_2023, regions_7_0};
use crate::prim::{mov_clear, nt_clear, rep_stosb, sfence};
use crate::sys::SUBPAGE;

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
            Self::SeqMov => "seq-mov",
            Self::SeqStosb => "seq-stosb",
            Self::TargetLast => "target-last",
            Self::Multipage2023 => "multipage-2023",
            Self::Contiguous70 => "contiguous-7.0",
            Self::NontemporalFar => "nontemporal-far",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.name() == s)
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
    let sub = |i: usize| unsafe { base.add(i * SUBPAGE) };
    // SAFETY: every range below lies within `page` (sub-page and region indices are < nr).
    unsafe {
        match s {
            ClearStrategy::SeqMov => (0..nr).for_each(|i| mov_clear(sub(i), SUBPAGE)),
            ClearStrategy::SeqStosb => (0..nr).for_each(|i| rep_stosb(sub(i), SUBPAGE)),
            ClearStrategy::TargetLast => {
                for_each_process_huge_page(n, nr, |i| rep_stosb(sub(i), SUBPAGE))
            }
            ClearStrategy::Multipage2023 => {
                for r in regions_2023(n, nr) {
                    rep_stosb(sub(r.start), r.len() * SUBPAGE);
                }
            }
            ClearStrategy::Contiguous70 => {
                for r in regions_7_0(n, nr) {
                    rep_stosb(sub(r.start), r.len() * SUBPAGE);
                }
            }
            ClearStrategy::NontemporalFar => {
                let regions = regions_7_0(n, nr);
                let (hot, far) = regions.split_last().expect("neighbourhood is never empty");
                for r in far {
                    nt_clear(sub(r.start), r.len() * SUBPAGE);
                }
                sfence();
                rep_stosb(sub(hot.start), hot.len() * SUBPAGE);
            }
        }
    }
}
