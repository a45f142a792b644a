//! Huge-page processing orders: `process_huge_page()` (MECHANISMS.md §1.2),
//! the one implementation of the target-last order that clearing and copying
//! share through their `process_subpage` callbacks.

use crate::policy::HugePageOrder;

/// Walks the sub-pages of a huge page in `order`: ascending (the kernels
/// before target-last) or `process_huge_page()`. The one place both orders
/// live; `clear_huge_page()` and `copy_user_huge_page()` differ only in the
/// callback (`clear_subpage()` / `copy_subpage()`).
pub fn process_huge_page_in_order(order: HugePageOrder, addr_hint: u64, nr_pages: u64, mut process_subpage: impl FnMut(u64) -> i32) -> i32 {
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
pub fn process_huge_page(addr_hint: u64, nr_pages: u64, process_subpage: impl FnMut(u64) -> i32) -> i32 {
    let addr = addr_hint & !((nr_pages << 12) - 1);
    let n = (addr_hint - addr) >> 12;
    process_huge_page_idx(n, nr_pages, process_subpage)
}

/// The walk of `process_huge_page()` given the target index `n < nr_pages`.
/// Everything outside a window centred on the target goes first, in one sweep
/// from the far end; then left and right alternate, converging on the target.
pub fn process_huge_page_idx(n: u64, nr_pages: u64, mut process_subpage: impl FnMut(u64) -> i32) -> i32 {
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
        assert_eq!(process_huge_page_order(4, 8), vec![0, 7, 1, 6, 2, 5, 3, 4], "n = N/2 takes the first-half branch");
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
            if i == 5 { -133 } else { 0 }
        });
        assert_eq!(r, -133);
        assert_eq!(seen, 4); // 7, 6, 0, 5
    }
}
