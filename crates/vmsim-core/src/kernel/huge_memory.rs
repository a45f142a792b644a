//! Huge-page processing orders: `process_huge_page()` (docs/mechanisms.md#the-target-last-order),
//! the one implementation of the target-last order that clearing and copying
//! share through their `process_subpage` callbacks.

use crate::policy::HugePageOrder;

/// Walks the sub-pages of a huge page in `order`: ascending (the kernels
/// before target-last) or `process_huge_page()`. The one place both orders
/// live; `clear_huge_page()` and `copy_user_huge_page()` differ only in the
/// callback (`clear_subpage()` / `copy_subpage()`).
pub fn process_huge_page_in_order(
    order: HugePageOrder,
    addr_hint: u64,
    nr_pages: u64,
    mut process_subpage: impl FnMut(u64) -> i32,
) -> i32 {
    match order {
        HugePageOrder::Sequential => {
            for i in 0..nr_pages {
                let r = process_subpage(i);
                if r != 0 {
                    return r;
                }
            }
            0
        }
        HugePageOrder::TargetLast => process_huge_page(addr_hint, nr_pages, process_subpage),
    }
}

/// mm/memory.c `process_huge_page()`: `addr_hint` lies in a naturally aligned
/// huge page of `nr_pages` sub-pages; the sub-page holding it is processed last.
/// A non-zero callback return aborts the walk and is returned (as copy's -EHWPOISON).
pub fn process_huge_page(
    addr_hint: u64,
    nr_pages: u64,
    process_subpage: impl FnMut(u64) -> i32,
) -> i32 {
    let addr = addr_hint & !((nr_pages << 12) - 1);
    let n = (addr_hint - addr) >> 12;
    process_huge_page_idx(n, nr_pages, process_subpage)
}

/// The walk of `process_huge_page()` given the target index `n < nr_pages`.
/// Everything outside a window centred on the target goes first, in one sweep
/// from the far end; then left and right alternate, converging on the target.
pub fn process_huge_page_idx(
    n: u64,
    nr_pages: u64,
    mut process_subpage: impl FnMut(u64) -> i32,
) -> i32 {
    debug_assert!(n < nr_pages);
    let (base, l);
    if 2 * n <= nr_pages {
        // Target in the first half (ties here): the tail, descending.
        base = 0;
        l = n;
        let mut i = nr_pages;
        while i > 2 * n {
            i -= 1;
            let r = process_subpage(i);
            if r != 0 {
                return r;
            }
        }
    } else {
        // Target in the second half: the head, ascending.
        base = nr_pages - 2 * (nr_pages - n);
        l = nr_pages - n;
        for i in 0..base {
            let r = process_subpage(i);
            if r != 0 {
                return r;
            }
        }
    }
    for i in 0..l {
        let left = base + i;
        let right = base + 2 * l - 1 - i;
        let r = process_subpage(left);
        if r != 0 {
            return r;
        }
        let r = process_subpage(right);
        if r != 0 {
            return r;
        }
    }
    0
}

/// The order as a list.
pub fn process_huge_page_order(n: u64, nr_pages: u64) -> Vec<u64> {
    let mut v = Vec::with_capacity(nr_pages as usize);
    process_huge_page_idx(n, nr_pages, |i| {
        v.push(i);
        0
    });
    v
}

/// x86-64 `MAX_ORDER_NR_PAGES` (4 MiB of 4 KiB pages): folios above it are gigantic.
pub const MAX_ORDER_NR_PAGES: u64 = 1024;
/// `PROCESS_PAGES_NON_PREEMPT_BATCH` with an arch `clear_pages()`: 32 MiB of
/// 4 KiB pages between `cond_resched()` points (docs/mechanisms.md#page-clearing-primitives).
pub const PROCESS_PAGES_NON_PREEMPT_BATCH: u64 = 8192;
/// `FOLIO_ZERO_LOCALITY_RADIUS` (7.0), and the 2023 series' `width`.
pub const FOLIO_ZERO_LOCALITY_RADIUS: u64 = 2;

/// The 2023 x86 `clear_huge_page()` override (docs/mechanisms.md#the-2023-multi-page-clearing-proposal): regions as
/// `(start, len)` in clearing order — left `[0, n-3]`, right `[n+3, N-1]`, then
/// the neighbourhood `[n-2, n+2]` clamped; empty regions are left out. A
/// gigantic folio (N > MAX_ORDER_NR_PAGES) is one straight clear.
pub fn clear_regions_2023(n: u64, nr_pages: u64) -> Vec<(u64, u64)> {
    debug_assert!(n < nr_pages);
    if nr_pages > MAX_ORDER_NR_PAGES {
        return vec![(0, nr_pages)];
    }
    let width = FOLIO_ZERO_LOCALITY_RADIUS;
    let s2 = n.saturating_sub(width);
    let e2 = (n + width).min(nr_pages - 1);
    let mut v = Vec::with_capacity(3);
    if s2 > 0 {
        v.push((0, s2));
    }
    if e2 + 1 < nr_pages {
        v.push((e2 + 1, nr_pages - 1 - e2));
    }
    v.push((s2, e2 - s2 + 1));
    v
}

/// Linux 7.0 `folio_zero_user()` (docs/mechanisms.md#contiguous-range-clearing): regions as `(start, len)`
/// in clearing order — right of the neighbourhood, left of it, then the
/// neighbourhood `[n-2, n+2]` clamped; empty regions left out. No special case
/// for gigantic folios.
pub fn clear_regions_7_0(fault_idx: u64, nr_pages: u64) -> Vec<(u64, u64)> {
    debug_assert!(fault_idx < nr_pages);
    let end = nr_pages - 1;
    let hot_start = fault_idx.saturating_sub(FOLIO_ZERO_LOCALITY_RADIUS);
    let hot_end = (fault_idx + FOLIO_ZERO_LOCALITY_RADIUS).min(end);
    let mut v = Vec::with_capacity(3);
    if hot_end < end {
        v.push((hot_end + 1, end - hot_end));
    }
    if hot_start > 0 {
        v.push((0, hot_start));
    }
    v.push((hot_start, hot_end - hot_start + 1));
    v
}

/// `clear_contig_highpages()`'s chunks of a region of `npages`, as `(offset, count)`:
/// one chunk when the kernel is preemptible, else at most
/// `PROCESS_PAGES_NON_PREEMPT_BATCH` pages each, with a `cond_resched()` before each.
pub fn clear_contig_highpages_chunks(npages: u64, preemptible: bool) -> Vec<(u64, u64)> {
    let unit = if preemptible {
        npages
    } else {
        PROCESS_PAGES_NON_PREEMPT_BATCH
    };
    let mut v = Vec::new();
    let mut i = 0;
    while i < npages {
        let count = unit.min(npages - i);
        v.push((i, count));
        i += count;
    }
    v
}

#[cfg(test)]
mod region_tests {
    use super::*;

    fn pages(r: &[(u64, u64)]) -> Vec<u64> {
        r.iter().flat_map(|&(s, l)| s..s + l).collect()
    }

    #[test]
    fn regions_7_0_worked_example_n8() {
        assert_eq!(clear_regions_7_0(0, 8), vec![(3, 5), (0, 3)]);
        assert_eq!(
            pages(&clear_regions_7_0(0, 8)),
            vec![3, 4, 5, 6, 7, 0, 1, 2]
        );
        assert_eq!(clear_regions_7_0(3, 8), vec![(6, 2), (0, 1), (1, 5)]);
        assert_eq!(
            pages(&clear_regions_7_0(3, 8)),
            vec![6, 7, 0, 1, 2, 3, 4, 5]
        );
        assert_eq!(clear_regions_7_0(7, 8), vec![(0, 5), (5, 3)]);
    }

    #[test]
    fn regions_2023_n8() {
        // Same regions as 7.0, with left before right.
        assert_eq!(clear_regions_2023(0, 8), vec![(3, 5), (0, 3)]);
        assert_eq!(clear_regions_2023(3, 8), vec![(0, 1), (6, 2), (1, 5)]);
        assert_eq!(clear_regions_2023(7, 8), vec![(0, 5), (5, 3)]);
    }

    #[test]
    fn regions_thp_512() {
        assert_eq!(
            clear_regions_7_0(100, 512),
            vec![(103, 409), (0, 98), (98, 5)]
        );
        assert_eq!(clear_regions_7_0(511, 512), vec![(0, 509), (509, 3)]);
        assert_eq!(clear_regions_7_0(0, 512), vec![(3, 509), (0, 3)]);
        assert_eq!(
            clear_regions_2023(100, 512),
            vec![(0, 98), (103, 409), (98, 5)]
        );
        assert_eq!(clear_regions_2023(511, 512), vec![(0, 509), (509, 3)]);
    }

    #[test]
    fn regions_small_and_gigantic() {
        assert_eq!(clear_regions_7_0(0, 1), vec![(0, 1)]);
        assert_eq!(clear_regions_2023(0, 1), vec![(0, 1)]);
        // N <= 5: the neighbourhood, plus possibly one side region.
        assert_eq!(clear_regions_7_0(2, 5), vec![(0, 5)]);
        assert_eq!(clear_regions_7_0(0, 5), vec![(3, 2), (0, 3)]);
        assert_eq!(clear_regions_7_0(4, 5), vec![(0, 2), (2, 3)]);
        for nr in 1..=5u64 {
            for n in 0..nr {
                assert!(clear_regions_7_0(n, nr).len() <= 2, "N={nr} n={n}");
            }
        }
        // 1 GiB: 2023 clears straight; 7.0 keeps the three regions.
        assert_eq!(clear_regions_2023(0, 262144), vec![(0, 262144)]);
        assert_eq!(clear_regions_7_0(0, 262144), vec![(3, 262141), (0, 3)]);
        assert_eq!(clear_regions_2023(0, 1024), vec![(3, 1021), (0, 3)]);
    }

    #[test]
    fn regions_cover_each_page_once_with_target_in_the_last() {
        for nr in 1..=129u64 {
            for n in 0..nr {
                for r in [clear_regions_2023(n, nr), clear_regions_7_0(n, nr)] {
                    let mut p = pages(&r);
                    p.sort();
                    assert_eq!(p, (0..nr).collect::<Vec<_>>(), "N={nr} n={n} {r:?}");
                    assert!(r.len() <= 3 && r.iter().all(|&(_, l)| l > 0));
                    let (s, l) = *r.last().unwrap();
                    assert!(s <= n && n < s + l && l <= 5, "N={nr} n={n} {r:?}");
                }
            }
        }
    }

    #[test]
    fn chunks() {
        assert_eq!(
            clear_contig_highpages_chunks(262141, true),
            vec![(0, 262141)]
        );
        let c = clear_contig_highpages_chunks(262141, false);
        assert_eq!(c.len(), 32);
        assert_eq!(c[0], (0, 8192));
        assert_eq!(c[31], (31 * 8192, 262141 - 31 * 8192));
        assert_eq!(clear_contig_highpages_chunks(509, false), vec![(0, 509)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_with_target_last_for_all_small_sizes() {
        for nr in 1..=129u64 {
            for n in 0..nr {
                let o = process_huge_page_order(n, nr);
                let mut s = o.clone();
                s.sort();
                assert_eq!(s, (0..nr).collect::<Vec<_>>(), "N={nr} n={n}");
                assert_eq!(*o.last().unwrap(), n, "N={nr} n={n}");
                if n >= 1 {
                    assert_eq!(o[o.len() - 2], n - 1, "element before last, N={nr} n={n}");
                } else if nr >= 2 {
                    assert_eq!(&o[o.len() - 2..], &[1, 0]);
                }
            }
        }
    }

    #[test]
    fn worked_examples_n8() {
        assert_eq!(process_huge_page_order(0, 8), vec![7, 6, 5, 4, 3, 2, 1, 0]);
        assert_eq!(process_huge_page_order(3, 8), vec![7, 6, 0, 5, 1, 4, 2, 3]);
        assert_eq!(process_huge_page_order(7, 8), vec![0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(
            process_huge_page_order(4, 8),
            vec![0, 7, 1, 6, 2, 5, 3, 4],
            "n = N/2 takes the first-half branch"
        );
    }

    #[test]
    fn worked_examples_n7() {
        let want: [&[u64]; 7] = [
            &[6, 5, 4, 3, 2, 1, 0],
            &[6, 5, 4, 3, 2, 0, 1],
            &[6, 5, 4, 0, 3, 1, 2],
            &[6, 0, 5, 1, 4, 2, 3],
            &[0, 1, 6, 2, 5, 3, 4],
            &[0, 1, 2, 3, 6, 4, 5],
            &[0, 1, 2, 3, 4, 5, 6],
        ];
        for (n, w) in want.iter().enumerate() {
            assert_eq!(process_huge_page_order(n as u64, 7), w.to_vec(), "n={n}");
        }
    }

    #[test]
    fn thp_512_target_100() {
        let o = process_huge_page_order(100, 512);
        assert_eq!(&o[..3], &[511, 510, 509]);
        assert_eq!(o[311], 200);
        assert_eq!(&o[312..316], &[0, 199, 1, 198]);
        assert_eq!(&o[506..], &[97, 102, 98, 101, 99, 100]);
    }

    #[test]
    fn small_sizes_and_unaligned_hint() {
        assert_eq!(process_huge_page_order(0, 1), vec![0]);
        assert_eq!(process_huge_page_order(0, 2), vec![1, 0]);
        assert_eq!(process_huge_page_order(1, 2), vec![0, 1]);
        // An unaligned hint selects the sub-page containing it.
        let base = 7u64 << 21;
        let mut v = Vec::new();
        process_huge_page(base + 3 * 4096 + 123, 512, |i| {
            v.push(i);
            0
        });
        assert_eq!(*v.last().unwrap(), 3);
    }

    #[test]
    fn nonzero_return_aborts() {
        let mut seen = 0;
        let r = process_huge_page_idx(3, 8, |i| {
            seen += 1;
            if i == 5 {
                -133
            } else {
                0
            }
        });
        assert_eq!(r, -133);
        assert_eq!(seen, 4); // 7, 6, 0, 5
    }
}
