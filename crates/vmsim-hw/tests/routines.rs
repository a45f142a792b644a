//! Every clear strategy leaves the page zero and every copy strategy leaves
//! dst == src, for odd sizes and every target, without touching neighbours.

use vmsim_hw::clear::{clear_huge, ClearStrategy};
use vmsim_hw::copy::{copy_huge, CopyStrategy};
use vmsim_hw::sys::{Backing, Mapping, SUBPAGE};

const GUARD: u8 = 0x5A;

fn targets(nr: usize) -> Vec<usize> {
    if nr <= 129 {
        (0..nr).collect()
    } else {
        vec![
            0,
            1,
            2,
            3,
            100,
            nr / 2 - 1,
            nr / 2,
            nr / 2 + 1,
            nr - 4,
            nr - 3,
            nr - 2,
            nr - 1,
        ]
    }
}

/// A mapping with one guard sub-page either side of the `nr` sub-pages under test.
fn guarded(nr: usize) -> Mapping {
    let mut m = Mapping::anon((nr + 2) * SUBPAGE, Backing::Small).unwrap();
    m.as_mut_slice().fill(GUARD);
    m
}

fn guards_intact(m: &Mapping, nr: usize) -> bool {
    let s = m.as_slice();
    s[..SUBPAGE].iter().all(|&b| b == GUARD) && s[(nr + 1) * SUBPAGE..].iter().all(|&b| b == GUARD)
}

#[test]
fn clear_strategies_zero_exactly_the_page() {
    for nr in [1, 2, 3, 5, 7, 129, 512] {
        let mut m = guarded(nr);
        for s in ClearStrategy::ALL {
            for n in targets(nr) {
                let page = &mut m.as_mut_slice()[SUBPAGE..(nr + 1) * SUBPAGE];
                page.fill(0xA5);
                clear_huge(s, page, n);
                assert!(
                    page.iter().all(|&b| b == 0),
                    "{} nr {nr} n {n}: not all zero",
                    s.name()
                );
                assert!(
                    guards_intact(&m, nr),
                    "{} nr {nr} n {n}: wrote outside",
                    s.name()
                );
            }
        }
    }
}

#[test]
fn copy_strategies_copy_exactly_the_page() {
    for nr in [1, 2, 3, 5, 7, 129, 512] {
        let mut src = Mapping::anon(nr * SUBPAGE, Backing::Small).unwrap();
        for (i, w) in src.as_mut_slice().chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&((i as u64) * 0x9E37_79B9_7F4A_7C15 + 1).to_le_bytes());
        }
        let mut m = guarded(nr);
        for s in CopyStrategy::ALL {
            for n in targets(nr) {
                let dst = &mut m.as_mut_slice()[SUBPAGE..(nr + 1) * SUBPAGE];
                dst.fill(0xA5);
                copy_huge(s, dst, src.as_slice(), n);
                assert!(
                    dst == src.as_slice(),
                    "{} nr {nr} n {n}: dst != src",
                    s.name()
                );
                assert!(
                    guards_intact(&m, nr),
                    "{} nr {nr} n {n}: wrote outside",
                    s.name()
                );
            }
        }
    }
}

#[test]
fn strategy_names_round_trip() {
    for s in ClearStrategy::ALL {
        assert_eq!(ClearStrategy::from_name(s.name()), Some(s));
    }
    for s in CopyStrategy::ALL {
        assert_eq!(CopyStrategy::from_name(s.name()), Some(s));
    }
    assert_eq!(ClearStrategy::from_name("nope"), None);
}
