//! `folio_zero_user(folio, addr_hint)` (mm/memory.c) for a folio of any size,
//! with the order and chunking of the configured `clear_huge_page` policy:
//!
//! - `sequential`: sub-pages ascending, one `clear_page` each (before 4.14);
//! - `target-last`: `process_huge_page()` (4.14 .. 6.19), or for a gigantic
//!   folio `clear_gigantic_page()`, ascending per 4 KiB (docs/mechanisms.md#gigantic-pages);
//! - `multipage-2023`: three regions, each one `clear_pages()` string op (docs/mechanisms.md#the-2023-multi-page-clearing-proposal);
//! - `contiguous-7.0`: three regions through `clear_contig_highpages()` (docs/mechanisms.md#contiguous-range-clearing);
//! - `nontemporal-far`: the 7.0 regions, the two far ones by `movnti` stores (docs/mechanisms.md#non-temporal-far-regions).
//!
//! Kernel state (content tags) changes at once; the clears are queued as
//! `Work` for the faulting CPU. A region is one `Work::Clear`, which the CPU
//! executes as one string instruction (one start-up, then line stores).

use super::huge_memory::{
    clear_contig_highpages_chunks, clear_regions_2023, clear_regions_7_0,
    process_huge_page_in_order, MAX_ORDER_NR_PAGES,
};
use super::memory::clear_user_highpage;
use super::page_alloc::TAG_ZERO;
use super::{instr, KFn, Kernel, StoreHow, Work};
use crate::policy::{ClearHugePage, ClearPage, HugePageOrder};
use std::collections::VecDeque;

impl Kernel {
    /// `folio_zero_user()` for the folio of `nr_pages` 4 KiB pages at `pfn`,
    /// mapped at the naturally aligned address containing `addr_hint`.
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
        let n = (addr_hint - base) >> 12;
        let gigantic = nr_pages > MAX_ORDER_NR_PAGES;
        let variant = self.cfg.clear_page;
        let string = match variant {
            ClearPage::Erms => StoreHow::String,
            ClearPage::Orig => StoreHow::MovLoop,
        };
        let preemptible = self.cfg.preempt.preemptible();
        match self.cfg.clear_huge_page {
            ClearHugePage::TargetLast if gigantic => {
                // clear_gigantic_page() (docs/mechanisms.md#gigantic-pages): ascending, no target-last order.
                self.clear_subpages_in_order(
                    HugePageOrder::Sequential,
                    pfn,
                    nr_pages,
                    addr_hint,
                    skip,
                    work,
                );
            }
            ClearHugePage::Sequential | ClearHugePage::TargetLast => {
                // One clear_page() per sub-page, in the order shared with copy_user_huge_page().
                let order = self
                    .cfg
                    .clear_huge_page
                    .per_page_order()
                    .expect("per-page policy");
                self.clear_subpages_in_order(order, pfn, nr_pages, addr_hint, skip, work);
            }
            ClearHugePage::Multipage2023 => {
                // clear_contig_region() per region: one clear_pages() call, no cond_resched().
                for (s, l) in clear_regions_2023(n, nr_pages) {
                    self.clear_pages(pfn, s, l, string, skip, work);
                }
            }
            ClearHugePage::Contiguous70 => {
                for (s, l) in clear_regions_7_0(n, nr_pages) {
                    self.clear_contig_highpages(pfn, s, l, string, preemptible, skip, work);
                }
            }
            ClearHugePage::NontemporalFar => {
                let regions = clear_regions_7_0(n, nr_pages);
                let last = regions.len() - 1;
                for (j, &(s, l)) in regions.iter().enumerate() {
                    let how = if j == last {
                        string
                    } else {
                        StoreHow::NonTemporal
                    };
                    if j == last && last > 0 {
                        // sfence: order the non-temporal stores before the cached ones.
                        work.push_back(Work::Cycles {
                            cycles: 0,
                            instructions: 1,
                            what: KFn::ClearPage,
                        });
                    }
                    self.clear_contig_highpages(pfn, s, l, how, preemptible, skip, work);
                }
            }
        }
    }

    fn clear_subpages_in_order(
        &mut self,
        order: HugePageOrder,
        pfn: u64,
        nr_pages: u64,
        addr_hint: u64,
        skip: Option<u64>,
        work: &mut VecDeque<Work>,
    ) {
        let (alloc, vmstat, variant) = (&mut self.alloc, &mut self.vmstat, self.cfg.clear_page);
        // clear_subpage()
        process_huge_page_in_order(order, addr_hint, nr_pages, |i| {
            if Some(i) != skip {
                clear_user_highpage(alloc, vmstat, variant, pfn + i, work);
            } // else: injected defect, the sub-page keeps its stale contents
            0
        });
    }

    /// `clear_contig_highpages(folio_page(folio, start), addr, len)`: chunks of
    /// the region, each preceded by `cond_resched()`, each one `clear_pages()`.
    #[allow(clippy::too_many_arguments)]
    fn clear_contig_highpages(
        &mut self,
        pfn: u64,
        start: u64,
        len: u64,
        how: StoreHow,
        preemptible: bool,
        skip: Option<u64>,
        work: &mut VecDeque<Work>,
    ) {
        for (off, count) in clear_contig_highpages_chunks(len, preemptible) {
            self.clear_pages(pfn, start + off, count, how, skip, work);
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
            StoreHow::MovLoop | StoreHow::NonTemporal => 4, // entry, length shift, ret; the loop is counted per line
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
                self.alloc.tags[p as usize] = TAG_ZERO;
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
