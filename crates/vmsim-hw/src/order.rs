//! Sub-page orders and region splits of the kernel's huge-page clear/copy (docs/mechanisms.md#the-target-last-order,
//! docs/mechanisms.md#the-2023-multi-page-clearing-proposal, docs/mechanisms.md#contiguous-range-clearing).
//! Pure index arithmetic, shared by the clear and copy routines so that both walk memory exactly as the kernel does.

use std::ops::Range;

/// Calls `f` for every sub-page index in `process_huge_page()` order, using
/// the simulator's implementation of the walk so that the model and the real
/// routines cannot drift apart. Callback form: the timed paths allocate nothing.
pub fn for_each_process_huge_page(n: usize, nr: usize, mut f: impl FnMut(usize)) {
    if nr == 0 {
        return;
    }
    vmsim_core::kernel::huge_memory::process_huge_page_idx(n as u64, nr as u64, |i| {
        f(i as usize);
        0
    });
}

/// `process_huge_page()` order of `nr` sub-pages for target sub-page `n`.
pub fn process_huge_page_order(n: usize, nr: usize) -> Vec<usize> {
    let mut v = Vec::with_capacity(nr);
    for_each_process_huge_page(n, nr, |i| v.push(i));
    v
}

fn ranges(regions: Vec<(u64, u64)>) -> Vec<Range<usize>> {
    regions
        .into_iter()
        .map(|(start, len)| start as usize..(start + len) as usize)
        .collect()
}

/// The 2023 x86 `clear_huge_page()` split of `nr` sub-pages for target `n`:
/// left, right, neighbourhood (non-empty regions only, in clearing order),
/// and a gigantic folio in one straight clear: the simulator's
/// `clear_regions_2023`, so the model and the real routine cannot drift apart.
pub fn regions_2023(n: usize, nr: usize) -> Vec<Range<usize>> {
    if nr == 0 {
        return Vec::new();
    }
    ranges(vmsim_core::kernel::huge_memory::clear_regions_2023(
        n as u64, nr as u64,
    ))
}

/// The 7.0 `folio_zero_user()` split: right, left, neighbourhood (non-empty
/// regions only, in clearing order): the simulator's `clear_regions_7_0`.
pub fn regions_7_0(n: usize, nr: usize) -> Vec<Range<usize>> {
    if nr == 0 {
        return Vec::new();
    }
    ranges(vmsim_core::kernel::huge_memory::clear_regions_7_0(
        n as u64, nr as u64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_n8() {
        assert_eq!(process_huge_page_order(0, 8), [7, 6, 5, 4, 3, 2, 1, 0]);
        assert_eq!(process_huge_page_order(3, 8), [7, 6, 0, 5, 1, 4, 2, 3]);
        assert_eq!(process_huge_page_order(7, 8), [0, 1, 2, 3, 4, 5, 6, 7]);
    }

    #[test]
    fn worked_example_n7() {
        let want: [[usize; 7]; 7] = [
            [6, 5, 4, 3, 2, 1, 0],
            [6, 5, 4, 3, 2, 0, 1],
            [6, 5, 4, 0, 3, 1, 2],
            [6, 0, 5, 1, 4, 2, 3],
            [0, 1, 6, 2, 5, 3, 4],
            [0, 1, 2, 3, 6, 4, 5],
            [0, 1, 2, 3, 4, 5, 6],
        ];
        for (n, w) in want.iter().enumerate() {
            assert_eq!(process_huge_page_order(n, 7), w, "n = {n}");
        }
    }

    #[test]
    fn thp_n100() {
        let o = process_huge_page_order(100, 512);
        assert_eq!(&o[..3], [511, 510, 509]);
        assert_eq!(o[311], 200);
        assert_eq!(&o[312..316], [0, 199, 1, 198]);
        assert_eq!(&o[506..], [97, 102, 98, 101, 99, 100]);
    }

    #[test]
    fn edge_cases() {
        assert_eq!(process_huge_page_order(0, 1), [0]);
        assert_eq!(process_huge_page_order(0, 2), [1, 0]);
        assert_eq!(process_huge_page_order(1, 2), [0, 1]);
        // 2n == N goes to the first-half branch: pure alternation.
        assert_eq!(process_huge_page_order(2, 4), [0, 3, 1, 2]);
    }

    #[test]
    fn regions_7_0_worked_example() {
        assert_eq!(regions_7_0(0, 8), vec![3..8, 0..3]);
        assert_eq!(regions_7_0(3, 8), vec![6..8, 0..1, 1..6]);
        assert_eq!(regions_7_0(7, 8), vec![0..5, 5..8]);
        assert_eq!(regions_7_0(100, 512), vec![103..512, 0..98, 98..103]);
        assert_eq!(regions_7_0(511, 512), vec![0..509, 509..512]);
        assert_eq!(regions_7_0(0, 1), vec![0..1]);
    }

    #[test]
    fn regions_2023_order() {
        assert_eq!(regions_2023(3, 8), vec![0..1, 6..8, 1..6]);
        assert_eq!(regions_2023(100, 512), vec![0..98, 103..512, 98..103]);
        assert_eq!(regions_2023(0, 8), vec![3..8, 0..3]);
    }

    #[test]
    fn a_gigantic_folio_is_one_straight_clear_in_2023_and_split_in_7_0() {
        let nr = 1 << 18; // 1 GiB of 4 KiB sub-pages
        assert_eq!(regions_2023(1000, nr), vec![0..nr]);
        assert_eq!(regions_7_0(1000, nr), vec![1003..nr, 0..998, 998..1003]);
    }

    fn covers_once(nr: usize, regions: &[Range<usize>]) -> bool {
        let mut seen = vec![0u8; nr];
        for r in regions {
            for i in r.clone() {
                seen[i] += 1;
            }
        }
        seen.iter().all(|&c| c == 1)
    }

    #[test]
    fn property_all_n_up_to_129() {
        for nr in 1..=129 {
            for n in 0..nr {
                let o = process_huge_page_order(n, nr);
                assert_eq!(o.len(), nr);
                assert_eq!(*o.last().unwrap(), n, "nr {nr} n {n}");
                if n >= 1 {
                    assert_eq!(o[nr - 2], n - 1, "nr {nr} n {n}");
                }
                let mut s = o.clone();
                s.sort_unstable();
                assert!(s.iter().enumerate().all(|(i, &v)| i == v), "nr {nr} n {n}");
                let r70 = regions_7_0(n, nr);
                let r23 = regions_2023(n, nr);
                assert!(covers_once(nr, &r70), "7.0 nr {nr} n {n}");
                assert!(covers_once(nr, &r23), "2023 nr {nr} n {n}");
                assert!(r70.last().unwrap().contains(&n));
                assert!(r23.last().unwrap().contains(&n));
            }
        }
    }
}
