//! Unit and property tests of the cache: each replacement policy and the
//! fast set searches against naive reference models.

use super::*;

#[test]
fn a_cache_without_sharers_reads_zero_and_ignores_stores() {
    let mut c = Cache::new(CacheGeometry { sets: 2, ways: 2 }, Replacement::Lru, 1)
        .unwrap()
        .without_sharers();
    assert!(c.insert(4, true, 0b101).is_none());
    assert_eq!(c.sharers(4), Some(0));
    assert!(c.or_sharers(4, 1) && c.set_sharers(4, 7));
    assert_eq!(c.sharers(4), Some(0));
    c.insert(6, false, 3);
    let ev = c.insert(8, false, 9).expect("set 0 is full");
    assert_eq!((ev.line, ev.dirty, ev.sharers), (4, true, 0));
    assert_eq!(c.invalidate(6), Some((false, 0)));
}
use proptest::prelude::*;
use std::collections::VecDeque;

fn cache(sets: u32, ways: u32, p: Replacement) -> Cache {
    Cache::new(CacheGeometry { sets, ways }, p, 1).unwrap()
}

/// Access; on a miss insert clean with no sharers. Returns (hit, evicted line).
fn touch(c: &mut Cache, line: u64) -> (bool, Option<u64>) {
    if c.access(line, false) {
        (true, None)
    } else {
        (false, c.insert(line, false, 0).map(|e| e.line))
    }
}

// ---------------------------------------------------------------- parsing

#[test]
fn replacement_parse_and_names() {
    for p in Replacement::ALL {
        assert_eq!(p.name().parse::<Replacement>().unwrap(), p);
        assert_eq!(p.to_string(), p.name());
    }
    let err = "plru".parse::<Replacement>().unwrap_err();
    for n in Replacement::NAMES {
        assert!(err.contains(n), "{err}");
    }
    assert!(err.contains("\"plru\""));
}

#[test]
fn geometry_from_capacity() {
    let g = CacheGeometry::from_capacity(45 << 20, 64, 20).unwrap();
    assert_eq!(
        g,
        CacheGeometry {
            sets: 36864,
            ways: 20
        }
    );
    assert_eq!(g.lines(), 737_280);
    assert!(CacheGeometry::from_capacity(1000, 64, 3).is_err());
    assert!(CacheGeometry::from_capacity(4096, 64, 0).is_err());
}

#[test]
fn new_rejects_bad_geometry() {
    assert!(Cache::new(CacheGeometry { sets: 0, ways: 4 }, Replacement::Lru, 0).is_err());
    assert!(Cache::new(CacheGeometry { sets: 4, ways: 0 }, Replacement::Lru, 0).is_err());
    assert!(Cache::new(CacheGeometry { sets: 4, ways: 65 }, Replacement::Lru, 0).is_err());
    assert!(Cache::new(
        CacheGeometry { sets: 4, ways: 64 },
        Replacement::TreePlru,
        0
    )
    .is_ok());
}

// --------------------------------------------------------------- indexing

#[test]
fn set_index_matches_modulo() {
    for sets in [
        1u32,
        2,
        3,
        5,
        7,
        12,
        36864,
        36863,
        1 << 20,
        (1 << 31) + 11,
        u32::MAX,
    ] {
        let ix = SetIndex::new(sets);
        let samples = [
            0u64,
            1,
            sets as u64 - 1,
            sets as u64,
            sets as u64 + 1,
            12345678901234,
            u64::MAX - 1,
            u64::MAX,
            1 << 57,
            (1 << 58) - 1,
        ];
        for x in samples {
            assert_eq!(ix.of(x) as u64, x % sets as u64, "{x} % {sets}");
        }
    }
}

proptest! {
    /// The block compares (SSE2 on x86_64) against one word or byte at a
    /// time; words drawn from a few values so that matches are common.
    #[test]
    fn block_masks_match_a_scalar_compare(
        words in prop::array::uniform16(0u32..4),
        tag in 0u32..4,
        bytes in prop::array::uniform16(any::<u8>()),
        state in 0u8..4,
    ) {
        let words = words.map(|w| if w == 3 { INVALID_TAG } else { w });
        let tag = if tag == 3 { INVALID_TAG } else { tag };
        prop_assert_eq!(eq_mask(&words, tag), eq_mask_scalar(&words, tag));
        let bytes = bytes.map(|b| b & (DIRTY | 3));
        prop_assert_eq!(state_eq_mask(&bytes, state), state_eq_mask_scalar(&bytes, state));
    }

    #[test]
    fn div_rem_matches_division(sets in 1u32.., x in any::<u64>()) {
        let idx = SetIndex::new(sets);
        prop_assert_eq!(idx.div_rem(x), ((x % sets as u64) as usize, x / sets as u64));
    }

    #[test]
    fn set_index_matches_modulo_random(sets in 1u32.., x in any::<u64>()) {
        prop_assert_eq!(SetIndex::new(sets).of(x) as u64, x % sets as u64);
    }
}

#[test]
fn non_power_of_two_sets() {
    // 3 sets x 2 ways: lines 0, 3, 6 share set 0; 1 and 4 share set 1.
    let mut c = cache(3, 2, Replacement::Lru);
    assert_eq!(c.set_of(6), 0);
    assert_eq!(c.set_of(7), 1);
    assert_eq!(c.insert(0, false, 0), None);
    assert_eq!(c.insert(3, false, 0), None);
    assert_eq!(c.insert(1, false, 0), None);
    assert_eq!(c.insert(4, false, 0), None);
    assert_eq!(c.insert(2, false, 0), None);
    assert_eq!(c.occupancy(), 5);
    // Set 0 is full: 6 evicts the LRU line 0; set 1 and set 2 untouched.
    assert_eq!(c.insert(6, false, 0).map(|e| e.line), Some(0));
    assert!(c.contains(1) && c.contains(4) && c.contains(2) && c.contains(3));
    // 36864-set LLC: the same line index mod 36864 only.
    let llc = Cache::new(
        CacheGeometry {
            sets: 36864,
            ways: 20,
        },
        Replacement::Lru,
        0,
    )
    .unwrap();
    assert_eq!(llc.set_of(36864 * 7 + 5), 5);
    assert_eq!(llc.lines(), 737_280);
}

// ------------------------------------------------------------------- LRU

#[test]
fn lru_exact_sequence() {
    // 2 sets x 4 ways; even lines go to set 0.
    let mut c = cache(2, 4, Replacement::Lru);
    for l in [0, 2, 4, 6] {
        assert_eq!(touch(&mut c, l), (false, None));
    }
    assert_eq!(touch(&mut c, 0), (true, None)); // order (LRU first): 2 4 6 0
    assert_eq!(touch(&mut c, 8), (false, Some(2))); // 4 6 0 8
    assert_eq!(touch(&mut c, 4), (true, None)); // 6 0 8 4
    assert_eq!(touch(&mut c, 10), (false, Some(6))); // 0 8 4 10
    assert_eq!(touch(&mut c, 12), (false, Some(0))); // 8 4 10 12
    assert_eq!(touch(&mut c, 1), (false, None)); // set 1 independent
    assert_eq!(touch(&mut c, 2), (false, Some(8)));
    assert!(!c.contains(8) && c.contains(4) && c.contains(1));
    assert_eq!(c.occupancy(), 5);
}

#[test]
fn contains_does_not_promote() {
    let mut c = cache(1, 2, Replacement::Lru);
    touch(&mut c, 0);
    touch(&mut c, 1);
    assert!(c.contains(0)); // no promotion: 0 stays LRU
    assert_eq!(touch(&mut c, 2), (false, Some(0)));
}

#[test]
fn dirty_eviction_reported() {
    let mut c = cache(1, 2, Replacement::Lru);
    assert_eq!(c.insert(10, false, 0), None);
    assert_eq!(c.insert(11, false, 0b10), None);
    assert!(c.access(10, true)); // write hit dirties 10, now MRU
    assert_eq!(c.is_dirty(10), Some(true));
    assert!(c.access(10, false)); // a read keeps it dirty
    assert_eq!(c.is_dirty(10), Some(true));
    assert_eq!(
        c.insert(12, false, 0),
        Some(Evicted {
            line: 11,
            dirty: false,
            sharers: 0b10
        })
    );
    assert_eq!(
        c.insert(13, true, 0),
        Some(Evicted {
            line: 10,
            dirty: true,
            sharers: 0
        })
    );
    assert_eq!(
        c.insert(14, false, 0),
        Some(Evicted {
            line: 12,
            dirty: false,
            sharers: 0
        })
    );
    assert_eq!(
        c.insert(15, false, 0),
        Some(Evicted {
            line: 13,
            dirty: true,
            sharers: 0
        })
    );
}

#[test]
fn drrip_keeps_part_of_a_thrashing_loop_where_srrip_and_lru_keep_none() {
    // A loop over 1.5x the capacity: LRU and SRRIP evict every line before its reuse;
    // DRRIP's BRRIP leaders miss less, the selector turns the followers bimodal, and
    // those keep a fraction of the loop.
    let hits = |p: Replacement| {
        let mut c = cache(256, 4, p);
        let mut h = 0u64;
        for round in 0..40 {
            for l in 0..1536u64 {
                let (hit, _) = c.access_or_insert(l, false, 0);
                h += (hit && round >= 20) as u64;
            }
        }
        (h, c.psel)
    };
    let (lru, _) = hits(Replacement::Lru);
    let (srrip, _) = hits(Replacement::Srrip);
    let (drrip, psel) = hits(Replacement::Drrip);
    assert_eq!(lru, 0);
    assert!(srrip < 20 * 1536 / 100, "srrip {srrip}");
    assert!(psel >= PSEL_MID, "followers insert bimodally: psel {psel}");
    assert!(
        drrip > 20 * 1536 / 5,
        "drrip keeps >20% of the loop: {drrip} of {}",
        20 * 1536
    );
}

#[test]
fn invalidate_and_refill_uses_the_hole() {
    for p in Replacement::ALL {
        let mut c = cache(1, 4, p);
        for l in 0..4 {
            c.insert(l, l == 2, 1 << l);
        }
        assert_eq!(c.invalidate(2), Some((true, 0b100)), "{p}");
        assert_eq!(c.invalidate(2), None);
        assert_eq!(c.occupancy(), 3);
        assert!(!c.contains(2));
        // The freed way is refilled before any valid line is evicted.
        assert_eq!(c.insert(9, false, 0), None, "{p}");
        assert_eq!(c.occupancy(), 4);
        for l in [0, 1, 3, 9] {
            assert!(c.contains(l), "{p}: {l}");
        }
    }
}

#[test]
fn sharers_and_dirty_round_trip() {
    let mut c = cache(2, 2, Replacement::Srrip);
    assert_eq!(c.sharers(5), None);
    assert!(!c.set_sharers(5, 1));
    assert!(!c.or_sharers(5, 1));
    assert!(!c.set_dirty(5, true));
    assert_eq!(c.is_dirty(5), None);
    c.insert(5, false, 0b0101);
    assert_eq!(c.sharers(5), Some(0b0101));
    assert!(c.or_sharers(5, 0b1000));
    assert_eq!(c.sharers(5), Some(0b1101));
    assert!(c.set_sharers(5, u64::MAX));
    assert_eq!(c.sharers(5), Some(u64::MAX));
    assert!(c.set_dirty(5, true));
    assert_eq!(c.is_dirty(5), Some(true));
    assert!(c.set_dirty(5, false));
    assert_eq!(c.is_dirty(5), Some(false));
    // access_or_insert ORs sharers on a hit and sets them on a miss.
    assert_eq!(c.access_or_insert(5, true, 0), (true, None));
    assert_eq!(c.is_dirty(5), Some(true));
    assert_eq!(c.access_or_insert(7, false, 0b10), (false, None));
    assert_eq!(c.access_or_insert(7, false, 0b01), (true, None));
    assert_eq!(c.sharers(7), Some(0b11));
    assert_eq!(c.invalidate(5), Some((true, u64::MAX)));
}

#[test]
fn insert_of_present_line_does_not_duplicate() {
    let mut c = cache(1, 2, Replacement::Lru);
    c.insert(1, false, 1);
    c.insert(2, false, 0);
    assert_eq!(c.insert(1, true, 4), None);
    assert_eq!(c.occupancy(), 2);
    assert_eq!(c.sharers(1), Some(4));
    assert_eq!(c.is_dirty(1), Some(true));
    // 1 was promoted: 2 is the victim.
    assert_eq!(c.insert(3, false, 0).map(|e| e.line), Some(2));
}

#[test]
fn clear_empties_everything() {
    for p in Replacement::ALL {
        let mut c = cache(3, 3, p);
        for l in 0..20 {
            c.access_or_insert(l, true, 1);
        }
        c.clear();
        assert_eq!(c.occupancy(), 0);
        assert_eq!(c.valid_lines().count(), 0);
        assert!((0..20).all(|l| !c.contains(l)));
        for l in 0..9 {
            assert_eq!(c.insert(l, false, 0), None);
        }
        assert_eq!(c.occupancy(), 9);
    }
}

// ------------------------------------------------------------- tree-PLRU

// Notation for 4 ways: root bit r (0 = victim on the left, ways 0-1;
// 1 = right, ways 2-3), left node bit a (0 = way 0, 1 = way 1), right
// node bit b (0 = way 2, 1 = way 3). Touching a way points its path away.

#[test]
fn tree_plru_exact_sequence_4_ways() {
    let mut c = cache(2, 4, Replacement::TreePlru);
    for l in [0, 2, 4, 6] {
        assert_eq!(touch(&mut c, l), (false, None)); // ways 0..3
    }
    // r=0 a=0 b=0
    assert_eq!(touch(&mut c, 8), (false, Some(0))); // way 0; r=1 a=1
    assert_eq!(touch(&mut c, 10), (false, Some(4))); // way 2; r=0 b=1
    assert_eq!(touch(&mut c, 12), (false, Some(2))); // way 1; r=1 a=0
    assert_eq!(touch(&mut c, 10), (true, None)); // way 2; r=0 b=1
    assert_eq!(touch(&mut c, 14), (false, Some(8))); // way 0; r=1 a=1
    assert_eq!(touch(&mut c, 16), (false, Some(6))); // way 3; r=0 b=0
    assert_eq!(touch(&mut c, 18), (false, Some(12))); // way 1
}

#[test]
fn tree_plru_differs_from_lru() {
    let mut p = cache(1, 4, Replacement::TreePlru);
    let mut l = cache(1, 4, Replacement::Lru);
    for x in [0, 1, 2, 3, 0, 2, 1] {
        touch(&mut p, x);
        touch(&mut l, x);
    }
    // LRU order (oldest first) 3 0 2 1. PLRU r=1 a=0 b=1 -> way 3.
    assert_eq!(touch(&mut l, 9), (false, Some(3)));
    assert_eq!(touch(&mut p, 9), (false, Some(3)));
    // LRU 0 2 1 9. PLRU r=0 a=0 b=0 -> way 0.
    assert_eq!(touch(&mut l, 10), (false, Some(0)));
    assert_eq!(touch(&mut p, 10), (false, Some(0)));
    // Ways now 10 1 2 9. After these hits LRU order is 2 10 1 9, while
    // PLRU has r=0 a=0 b=0 and picks way 0, line 10 (touched 3rd last).
    for x in [9, 1, 2, 10, 1, 9] {
        assert!(touch(&mut l, x).0);
        assert!(touch(&mut p, x).0);
    }
    assert_eq!(touch(&mut l, 11), (false, Some(2)));
    assert_eq!(touch(&mut p, 11), (false, Some(10)));
}

#[test]
fn tree_plru_non_power_of_two_ways() {
    // 3 ways: tree over 4 leaves, leaf 3 missing; the right subtree of
    // the root holds only way 2.
    let mut c = cache(1, 3, Replacement::TreePlru);
    for l in [0, 1, 2] {
        assert_eq!(touch(&mut c, l), (false, None));
    }
    // Last touch way 2 (right) -> root left; left node after way 1 -> way 0.
    assert_eq!(touch(&mut c, 3), (false, Some(0)));
    // Touch way 0 -> root right; right node points at missing leaf 3 ->
    // take the existing leaf 2.
    assert_eq!(touch(&mut c, 4), (false, Some(2)));
    // Way 2 touched -> root left; left node: way 0 touched last -> way 1.
    assert_eq!(touch(&mut c, 5), (false, Some(1)));
    // 20 ways never choose a way >= 20 and cycle through all of them.
    let mut c = cache(1, 20, Replacement::TreePlru);
    let mut evicted = std::collections::BTreeSet::new();
    for l in 0..20 {
        assert_eq!(touch(&mut c, l), (false, None));
    }
    for l in 20..60 {
        let (hit, ev) = touch(&mut c, l);
        assert!(!hit);
        evicted.insert(ev.unwrap());
        assert_eq!(c.occupancy(), 20);
    }
    assert!(evicted.len() >= 20);
}

// ----------------------------------------------------------------- SRRIP

#[test]
fn srrip_exact_sequence() {
    let mut c = cache(2, 4, Replacement::Srrip);
    // Fill: RRPVs 2 2 2 2 (lines 0 2 4 6 in ways 0..3).
    for l in [0, 2, 4, 6] {
        assert_eq!(touch(&mut c, l), (false, None));
    }
    assert_eq!(touch(&mut c, 2), (true, None)); // 2 0 2 2
                                                // Miss: no 3 -> age by 1: 3 1 3 3 -> first 3 is way 0 (line 0).
    assert_eq!(touch(&mut c, 8), (false, Some(0))); // 2 1 3 3
                                                    // Miss: way 2 (line 4) has 3.
    assert_eq!(touch(&mut c, 10), (false, Some(4))); // 2 1 2 3
    assert_eq!(touch(&mut c, 12), (false, Some(6))); // 2 1 2 2
                                                     // Miss: age by 1: 3 2 3 3 -> way 0 (line 8).
    assert_eq!(touch(&mut c, 14), (false, Some(8))); // 2 2 3 3
    assert_eq!(touch(&mut c, 16), (false, Some(10))); // 2 2 2 3
    assert_eq!(touch(&mut c, 10), (false, Some(12))); // 2 2 2 2 (10 back in way 3)
    assert_eq!(touch(&mut c, 10), (true, None)); // 2 2 2 0
                                                 // Scan resistance: a stream of new lines never evicts 10 until aged out.
    assert_eq!(touch(&mut c, 18), (false, Some(14))); // age 1: 3 3 3 1 -> way 0; 2 3 3 1
    assert_eq!(touch(&mut c, 20), (false, Some(2))); // way 1: 2 2 3 1
    assert_eq!(touch(&mut c, 22), (false, Some(16))); // way 2: 2 2 2 1
    assert!(c.contains(10));
    assert_eq!(touch(&mut c, 24), (false, Some(18))); // age 1: 3 3 3 2 -> way 0
    assert!(c.contains(10));
}

// ---------------------------------------------------------------- Random

#[test]
fn random_is_seeded_and_deterministic() {
    let run = |seed: u64| {
        let mut c = Cache::new(
            CacheGeometry { sets: 3, ways: 4 },
            Replacement::Random,
            seed,
        )
        .unwrap();
        (0..500u64)
            .map(|i| touch(&mut c, (i * 7919) % 61).1)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
    // Every way gets chosen eventually.
    let mut c = Cache::new(CacheGeometry { sets: 1, ways: 4 }, Replacement::Random, 7).unwrap();
    let mut seen = [false; 4];
    for l in 0..4 {
        c.insert(l, false, 0);
    }
    for l in 4..200 {
        assert!(c.insert(l, false, 0).is_some());
        let way = c.slot_of(l).unwrap() & ((1 << SLOT_SHIFT) - 1);
        seen[way] = true;
    }
    assert_eq!(seen, [true; 4]);
}

// ------------------------------------------------- differential proptests

/// The reference keeps every set as an explicit list of ways.
#[derive(Clone, Copy, Debug, PartialEq)]
struct RefLine {
    line: u64,
    dirty: bool,
    sharers: u64,
}

trait RefModel {
    /// Hit: promote + dirty |= write. Returns hit.
    fn access(&mut self, line: u64, write: bool) -> bool;
    /// Insert an absent line; returns evicted.
    fn insert(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<RefLine>;
    fn invalidate(&mut self, line: u64) -> Option<RefLine>;
    fn get_mut(&mut self, line: u64) -> Option<&mut RefLine>;
    fn count(&self) -> usize;
}

/// LRU: per set a deque, most recently used at the front.
struct RefLru {
    sets: Vec<VecDeque<RefLine>>,
    ways: usize,
}
impl RefLru {
    fn new(sets: usize, ways: usize) -> Self {
        RefLru {
            sets: vec![VecDeque::new(); sets],
            ways,
        }
    }
    fn set(&mut self, line: u64) -> &mut VecDeque<RefLine> {
        let n = self.sets.len() as u64;
        &mut self.sets[(line % n) as usize]
    }
}
impl RefModel for RefLru {
    fn access(&mut self, line: u64, write: bool) -> bool {
        let s = self.set(line);
        match s.iter().position(|e| e.line == line) {
            Some(i) => {
                let mut e = s.remove(i).unwrap();
                e.dirty |= write;
                s.push_front(e);
                true
            }
            None => false,
        }
    }
    fn insert(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<RefLine> {
        let ways = self.ways;
        let s = self.set(line);
        let ev = if s.len() == ways { s.pop_back() } else { None };
        s.push_front(RefLine {
            line,
            dirty,
            sharers,
        });
        ev
    }
    fn invalidate(&mut self, line: u64) -> Option<RefLine> {
        let s = self.set(line);
        let i = s.iter().position(|e| e.line == line)?;
        s.remove(i)
    }
    fn get_mut(&mut self, line: u64) -> Option<&mut RefLine> {
        self.set(line).iter_mut().find(|e| e.line == line)
    }
    fn count(&self) -> usize {
        self.sets.iter().map(|s| s.len()).sum()
    }
}

/// Way-array reference for policies where the physical way matters.
struct RefWays<P> {
    sets: Vec<(Vec<Option<RefLine>>, P)>,
}
trait WayPolicy: Clone {
    fn touch(&mut self, way: usize);
    fn fill(&mut self, way: usize);
    fn victim(&mut self) -> usize;
}
impl<P: WayPolicy> RefWays<P> {
    fn new(sets: usize, ways: usize, p: P) -> Self {
        RefWays {
            sets: vec![(vec![None; ways], p); sets],
        }
    }
    fn set(&mut self, line: u64) -> &mut (Vec<Option<RefLine>>, P) {
        let n = self.sets.len() as u64;
        &mut self.sets[(line % n) as usize]
    }
}
impl<P: WayPolicy> RefModel for RefWays<P> {
    fn access(&mut self, line: u64, write: bool) -> bool {
        let (ways, p) = self.set(line);
        for (w, e) in ways.iter_mut().enumerate() {
            if let Some(e) = e {
                if e.line == line {
                    e.dirty |= write;
                    p.touch(w);
                    return true;
                }
            }
        }
        false
    }
    fn insert(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<RefLine> {
        let (ways, p) = self.set(line);
        let w = match ways.iter().position(|e| e.is_none()) {
            Some(w) => w,
            None => p.victim(),
        };
        let old = ways[w].replace(RefLine {
            line,
            dirty,
            sharers,
        });
        p.fill(w);
        old
    }
    fn invalidate(&mut self, line: u64) -> Option<RefLine> {
        let (ways, _) = self.set(line);
        let e = ways
            .iter_mut()
            .find(|e| matches!(e, Some(x) if x.line == line))?;
        e.take()
    }
    fn get_mut(&mut self, line: u64) -> Option<&mut RefLine> {
        let (ways, _) = self.set(line);
        ways.iter_mut().flatten().find(|e| e.line == line)
    }
    fn count(&self) -> usize {
        self.sets
            .iter()
            .map(|(w, _)| w.iter().flatten().count())
            .sum()
    }
}

/// Tree-PLRU reference: an explicit recursive tree over the range
/// `0..ways`, where a node covering `[lo, lo+span)` splits at
/// `lo + span/2` (span a power of two) and a node whose right half is
/// empty is skipped. Node bits live in a map keyed by (lo, span).
#[derive(Clone)]
struct RefPlru {
    ways: usize,
    span: usize,
    right: std::collections::BTreeMap<(usize, usize), bool>,
}
impl RefPlru {
    fn new(ways: usize) -> Self {
        RefPlru {
            ways,
            span: ways.next_power_of_two(),
            right: Default::default(),
        }
    }
    fn walk_touch(&mut self, lo: usize, span: usize, way: usize) {
        if span == 1 {
            return;
        }
        let mid = lo + span / 2;
        let go_right = way >= mid;
        // Point away from the touched half.
        self.right.insert((lo, span), !go_right);
        if go_right {
            self.walk_touch(mid, span / 2, way)
        } else {
            self.walk_touch(lo, span / 2, way)
        }
    }
    fn walk_victim(&self, lo: usize, span: usize) -> usize {
        if span == 1 {
            return lo;
        }
        let mid = lo + span / 2;
        let right_exists = mid < self.ways;
        if right_exists && *self.right.get(&(lo, span)).unwrap_or(&false) {
            self.walk_victim(mid, span / 2)
        } else {
            self.walk_victim(lo, span / 2)
        }
    }
}
impl WayPolicy for RefPlru {
    fn touch(&mut self, way: usize) {
        self.walk_touch(0, self.span, way)
    }
    fn fill(&mut self, way: usize) {
        self.walk_touch(0, self.span, way)
    }
    fn victim(&mut self) -> usize {
        self.walk_victim(0, self.span)
    }
}

/// SRRIP reference: the paper's loop, literally.
#[derive(Clone)]
struct RefSrrip {
    rrpv: Vec<u32>,
}
impl WayPolicy for RefSrrip {
    fn touch(&mut self, way: usize) {
        self.rrpv[way] = 0;
    }
    fn fill(&mut self, way: usize) {
        self.rrpv[way] = 2;
    }
    fn victim(&mut self) -> usize {
        loop {
            for (w, &v) in self.rrpv.iter().enumerate() {
                if v == 3 {
                    return w;
                }
            }
            for v in self.rrpv.iter_mut() {
                *v += 1;
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// access; on a miss, insert (through `insert`).
    Access {
        line: u64,
        write: bool,
        sharers: u64,
    },
    /// the combined call.
    AccessOrInsert {
        line: u64,
        write: bool,
        sharers: u64,
    },
    Invalidate(u64),
    SetDirty(u64, bool),
    OrSharers(u64, u64),
    Contains(u64),
}

fn op_strategy(max_line: u64) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..max_line, any::<bool>(), 0u64..16).prop_map(|(line, write, sharers)| Op::Access { line, write, sharers }),
        4 => (0..max_line, any::<bool>(), 0u64..16).prop_map(|(line, write, sharers)| Op::AccessOrInsert { line, write, sharers }),
        1 => (0..max_line).prop_map(Op::Invalidate),
        1 => (0..max_line, any::<bool>()).prop_map(|(l, d)| Op::SetDirty(l, d)),
        1 => (0..max_line, 0u64..16).prop_map(|(l, b)| Op::OrSharers(l, b)),
        1 => (0..max_line).prop_map(Op::Contains),
    ]
}

fn scenario() -> impl Strategy<Value = (u32, u32, Vec<Op>)> {
    // Up to 8 ways, and wider sets whose tags or meta bytes span several
    // 16-word blocks (20: the Intel LLCs; 51: meta bytes running past
    // the tags' blocks; 64: the limit).
    let ways = prop_oneof![
        3 => 1u32..=8,
        1 => proptest::sample::select(vec![12u32, 16, 17, 20, 24, 32, 33, 51, 64]),
    ];
    (1u32..=4, ways).prop_flat_map(|(sets, ways)| {
        let max_line = (sets * ways * 3) as u64;
        (
            Just(sets),
            Just(ways),
            proptest::collection::vec(op_strategy(max_line), 1..300),
        )
    })
}

fn ev(e: Option<RefLine>) -> Option<Evicted> {
    e.map(|e| Evicted {
        line: e.line,
        dirty: e.dirty,
        sharers: e.sharers,
    })
}

fn differential(c: &mut Cache, r: &mut dyn RefModel, ops: &[Op]) -> Result<(), TestCaseError> {
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Access {
                line,
                write,
                sharers,
            } => {
                let hit = c.access(line, write);
                prop_assert_eq!(hit, r.access(line, write), "step {}: {:?}", i, op);
                if !hit {
                    let got = c.insert(line, write, sharers);
                    prop_assert_eq!(
                        got,
                        ev(r.insert(line, write, sharers)),
                        "step {}: {:?}",
                        i,
                        op
                    );
                }
            }
            Op::AccessOrInsert {
                line,
                write,
                sharers,
            } => {
                let got = c.access_or_insert(line, write, sharers);
                let hit = r.access(line, write);
                let want = if hit {
                    r.get_mut(line).unwrap().sharers |= sharers;
                    (true, None)
                } else {
                    (false, ev(r.insert(line, write, sharers)))
                };
                prop_assert_eq!(got, want, "step {}: {:?}", i, op);
            }
            Op::Invalidate(line) => {
                let want = r.invalidate(line).map(|e| (e.dirty, e.sharers));
                prop_assert_eq!(c.invalidate(line), want, "step {}: {:?}", i, op);
            }
            Op::SetDirty(line, d) => {
                let want = r.get_mut(line).map(|e| e.dirty = d).is_some();
                prop_assert_eq!(c.set_dirty(line, d), want, "step {}: {:?}", i, op);
            }
            Op::OrSharers(line, b) => {
                let want = r.get_mut(line).map(|e| e.sharers |= b).is_some();
                prop_assert_eq!(c.or_sharers(line, b), want, "step {}: {:?}", i, op);
            }
            Op::Contains(line) => {
                let want = r.get_mut(line).map(|e| (e.dirty, e.sharers));
                prop_assert_eq!(c.contains(line), want.is_some(), "step {}", i);
                prop_assert_eq!(c.is_dirty(line), want.map(|w| w.0), "step {}", i);
                prop_assert_eq!(c.sharers(line), want.map(|w| w.1), "step {}", i);
            }
        }
        prop_assert_eq!(c.occupancy() as usize, r.count(), "step {}", i);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The hierarchy's fast calls (a lookup that hands its split to the
    /// insert, a remembered slot for a later dirty update) leave the same
    /// state and results as the plain calls, stale hints included.
    #[test]
    fn split_insert_and_hinted_set_dirty_match_the_plain_calls(
        (sets, ways, ops) in scenario(),
        pol in proptest::sample::select(Replacement::ALL.to_vec()),
    ) {
        let mut a = cache(sets, ways, pol);
        let mut b = cache(sets, ways, pol).with_aux();
        // Slots handed out at insertion, never forgotten: they go stale.
        let mut hints = std::collections::BTreeMap::<u64, u32>::new();
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Access { line, write, sharers } | Op::AccessOrInsert { line, write, sharers } => {
                    let sa = a.slot_of(line);
                    let (sb, at) = b.slot_and_split(line);
                    prop_assert_eq!(sa, sb, "step {}", i);
                    match sa {
                        Some(slot) => {
                            a.slot_hit(slot, write);
                            b.slot_hit(slot, write);
                        }
                        None => {
                            let ea = a.insert_absent(line, write, sharers);
                            let (eb, slot) = b.insert_absent_at(line, at, write, sharers, line as u32);
                            if let Some(e) = &eb {
                                prop_assert_eq!(b.evicted_aux(), e.line as u32, "step {}", i);
                            }
                            prop_assert_eq!(ea, eb, "step {}", i);
                            prop_assert_eq!(b.slot_of(line), Some(slot));
                            hints.insert(line, slot as u32);
                        }
                    }
                }
                Op::Invalidate(line) => {
                    prop_assert_eq!(a.invalidate(line), b.invalidate(line), "step {}", i);
                }
                Op::SetDirty(line, d) => {
                    let h = hints.get(&line).copied().unwrap_or(NO_AUX);
                    prop_assert_eq!(a.set_dirty(line, d), b.set_dirty_hinted(line, h, d), "step {}", i);
                }
                Op::OrSharers(line, x) => {
                    // Another line's slot as the hint: it must be rejected.
                    let h = hints.get(&(line + 1 + x)).copied().unwrap_or(NO_AUX);
                    prop_assert_eq!(a.set_dirty(line, true), b.set_dirty_hinted(line, h, true), "step {}", i);
                }
                Op::Contains(line) => {
                    prop_assert_eq!(a.is_dirty(line), b.is_dirty(line), "step {}", i);
                }
            }
            let va: Vec<_> = a.valid_lines().collect();
            let vb: Vec<_> = b.valid_lines().collect();
            prop_assert_eq!(va, vb, "step {}", i);
        }
    }

    #[test]
    fn lru_matches_reference((sets, ways, ops) in scenario()) {
        let mut c = cache(sets, ways, Replacement::Lru);
        let mut r = RefLru::new(sets as usize, ways as usize);
        differential(&mut c, &mut r, &ops)?;
    }

    #[test]
    fn tree_plru_matches_reference((sets, ways, ops) in scenario()) {
        let mut c = cache(sets, ways, Replacement::TreePlru);
        let mut r = RefWays::new(sets as usize, ways as usize, RefPlru::new(ways as usize));
        differential(&mut c, &mut r, &ops)?;
    }

    #[test]
    fn srrip_matches_reference((sets, ways, ops) in scenario()) {
        let mut c = cache(sets, ways, Replacement::Srrip);
        let mut r = RefWays::new(sets as usize, ways as usize, RefSrrip { rrpv: vec![3; ways as usize] });
        differential(&mut c, &mut r, &ops)?;
    }

    #[test]
    fn random_keeps_invariants((sets, ways, ops) in scenario(), seed in any::<u64>()) {
        let run = |seed: u64| -> Result<Vec<(bool, Option<Evicted>)>, TestCaseError> {
            let mut c = Cache::new(CacheGeometry { sets, ways }, Replacement::Random, seed).unwrap();
            // The set of lines that must be present: inserted and neither
            // evicted nor invalidated since.
            let mut present = std::collections::BTreeMap::<u64, (bool, u64)>::new();
            let mut trace = Vec::new();
            for op in &ops {
                match *op {
                    Op::Access { line, write, sharers } | Op::AccessOrInsert { line, write, sharers } => {
                        let (hit, e) = c.access_or_insert(line, write, sharers);
                        prop_assert_eq!(hit, present.contains_key(&line));
                        if let Some(e) = e {
                            // Only a full set evicts.
                            let in_set = present.keys().filter(|&&l| c.set_of(l) == c.set_of(line)).count();
                            prop_assert_eq!(in_set, ways as usize);
                            let (d, s) = present.remove(&e.line).expect("evicted a line that was not present");
                            prop_assert_eq!((e.dirty, e.sharers), (d, s));
                            prop_assert_eq!(c.set_of(e.line), c.set_of(line));
                        }
                        let entry = present.entry(line).or_insert((false, 0));
                        entry.0 |= write;
                        entry.1 |= sharers;
                        trace.push((hit, e));
                    }
                    Op::Invalidate(line) => {
                        prop_assert_eq!(c.invalidate(line), present.remove(&line));
                    }
                    Op::SetDirty(line, d) => {
                        let want = present.get_mut(&line).map(|e| e.0 = d).is_some();
                        prop_assert_eq!(c.set_dirty(line, d), want);
                    }
                    Op::OrSharers(line, b) => {
                        let want = present.get_mut(&line).map(|e| e.1 |= b).is_some();
                        prop_assert_eq!(c.or_sharers(line, b), want);
                    }
                    Op::Contains(line) => prop_assert_eq!(c.contains(line), present.contains_key(&line)),
                }
                prop_assert_eq!(c.occupancy() as usize, present.len());
                prop_assert!(c.occupancy() <= c.lines());
                // No duplicates, every line in its own set.
                let mut lines: Vec<u64> = c.valid_lines().map(|(l, _, _)| l).collect();
                let n = lines.len();
                lines.sort_unstable();
                lines.dedup();
                prop_assert_eq!(lines.len(), n);
                for (line, _, _) in c.valid_lines() {
                    let set = c.slot_of(line).unwrap() >> SLOT_SHIFT;
                    prop_assert_eq!(c.set_of(line) as usize, set);
                }
            }
            Ok(trace)
        };
        prop_assert_eq!(run(seed)?, run(seed)?);
    }
}

// ------------------------------------------------------------------ QLRU

use super::qlru::{DuelLayout, Qlru, QlruHit, QlruPolicy, QlruRepl, QlruUpdate};

/// QLRU reference, written from the definitions in nanoBench's
/// `cacheSim.py` (tools/CacheAnalyzer of github.com/andreas-abel/nanoBench)
/// as plainly as they read: a set is a list of ways (a line or empty) and a
/// list of ages; every function is a loop over the list. The adaptive
/// policies' leader sets are the lists the sources give, spelled out.
struct RefQlru {
    sets: Vec<(Vec<Option<RefLine>>, Vec<u8>)>,
    p: QlruPolicy,
    psel: i32,
    rng: u64,
}

/// Leader sets of uops.info/cache.html's Ice Lake L3 (each 1024-set slice).
const ICL_BASE_LEADERS: [usize; 16] = [
    0, 33, 132, 165, 264, 297, 396, 429, 528, 561, 660, 693, 792, 825, 924, 957,
];
/// The other leader sets of CacheQuery's Skylake macro (config/i5-6500.h of
/// github.com/cgvwzq/cachequery, `IS_LEADER_SET`).
const SKL_BIMODAL_LEADERS: [usize; 16] = [
    2, 35, 134, 167, 266, 299, 398, 431, 530, 563, 662, 695, 794, 827, 926, 959,
];

impl RefQlru {
    fn new(sets: usize, ways: usize, p: QlruPolicy, seed: u64) -> Self {
        // The cache's generator: splitmix64 of the seed, then xorshift64*.
        let mut rng = crate::rng::splitmix64(seed);
        if rng == 0 {
            rng = 0x2545_F491_4F6C_DD1D;
        }
        RefQlru {
            sets: vec![(vec![None; ways], vec![3; ways]); sets],
            p,
            psel: 512,
            rng,
        }
    }
    fn draw(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn index(&self, line: u64) -> usize {
        (line % self.sets.len() as u64) as usize
    }
    /// The update function; `accessed` is `None` under `_UMO`.
    fn update(ages: &mut [u8], u: QlruUpdate, accessed: Option<usize>) {
        let others: Vec<usize> = (0..ages.len()).filter(|&w| Some(w) != accessed).collect();
        match u {
            QlruUpdate::U0 => {
                let d = 3 - *ages.iter().max().unwrap();
                for a in ages.iter_mut() {
                    *a += d;
                }
            }
            QlruUpdate::U1 => {
                if let Some(max) = others.iter().map(|&w| ages[w]).max() {
                    for &w in &others {
                        ages[w] += 3 - max;
                    }
                }
            }
            QlruUpdate::U2 => {
                if !ages.contains(&3) {
                    for a in ages.iter_mut() {
                        *a += 1;
                    }
                }
            }
            QlruUpdate::U3 => {
                if !ages.contains(&3) {
                    for &w in &others {
                        ages[w] += 1;
                    }
                }
            }
        }
    }
    /// The age a fill of `set` starts with, training the selector.
    fn insert_age(&mut self, set: usize) -> u8 {
        let Some(layout) = self.p.duel else {
            return self.p.base.insert;
        };
        let (base, bimodal) = match layout {
            DuelLayout::Ivb => ((512..576).contains(&set), (768..832).contains(&set)),
            DuelLayout::Skl => (
                ICL_BASE_LEADERS.contains(&(set % 1024)),
                SKL_BIMODAL_LEADERS.contains(&(set % 1024)),
            ),
        };
        let use_bimodal = if base {
            self.psel = (self.psel + 1).min(1023);
            false
        } else if bimodal {
            self.psel = (self.psel - 1).max(0);
            true
        } else {
            self.psel >= 512
        };
        if use_bimodal && !self.draw().is_multiple_of(16) {
            3
        } else {
            self.p.base.insert
        }
    }
}

impl RefModel for RefQlru {
    fn access(&mut self, line: u64, write: bool) -> bool {
        let q = self.p.base;
        let i = self.index(line);
        let (ways, ages) = &mut self.sets[i];
        let Some(w) = ways
            .iter()
            .position(|e| matches!(e, Some(x) if x.line == line))
        else {
            return false;
        };
        ways[w].as_mut().unwrap().dirty |= write;
        ages[w] = q.hit.table()[ages[w] as usize];
        if !q.update_on_miss_only {
            Self::update(ages, q.update, Some(w));
        }
        true
    }
    fn insert(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<RefLine> {
        let q = self.p.base;
        let i = self.index(line);
        let (ways, ages) = &mut self.sets[i];
        if q.update_on_miss_only {
            Self::update(ages, q.update, None);
        }
        let empty: Vec<usize> = (0..ways.len()).filter(|&w| ways[w].is_none()).collect();
        let w = if !empty.is_empty() {
            match q.repl {
                QlruRepl::R2 => *empty.last().unwrap(),
                _ => empty[0],
            }
        } else {
            match ages.iter().position(|&a| a == 3) {
                Some(w) => w,
                None if q.repl == QlruRepl::R1 || ways.len() == 1 => 0,
                None => panic!("{} left no way of age 3", q.name()),
            }
        };
        let age = self.insert_age(i);
        let (ways, ages) = &mut self.sets[i];
        let old = ways[w].replace(RefLine {
            line,
            dirty,
            sharers,
        });
        ages[w] = age;
        if !q.update_on_miss_only {
            Self::update(ages, q.update, Some(w));
        }
        old
    }
    fn invalidate(&mut self, line: u64) -> Option<RefLine> {
        let i = self.index(line);
        let (ways, _) = &mut self.sets[i];
        ways.iter_mut()
            .find(|e| matches!(e, Some(x) if x.line == line))?
            .take()
    }
    fn get_mut(&mut self, line: u64) -> Option<&mut RefLine> {
        let i = self.index(line);
        self.sets[i].0.iter_mut().flatten().find(|e| e.line == line)
    }
    fn count(&self) -> usize {
        self.sets
            .iter()
            .map(|(w, _)| w.iter().flatten().count())
            .sum()
    }
}

/// Every variant nanoBench defines (deterministic insertion), `_UMO` or not.
fn defined_qlru() -> impl Strategy<Value = Qlru> {
    (0..5usize, 0u8..=3, 0..3usize, 0..4usize, any::<bool>())
        .prop_map(|(h, m, r, u, umo)| {
            Qlru::new(
                QlruHit::ALL[h],
                m,
                [QlruRepl::R0, QlruRepl::R1, QlruRepl::R2][r],
                [
                    QlruUpdate::U0,
                    QlruUpdate::U1,
                    QlruUpdate::U2,
                    QlruUpdate::U3,
                ][u],
                umo,
            )
        })
        .prop_filter("defined by nanoBench", |q| q.is_defined())
}

const NAMED_FIXED_QLRU: [Replacement; 4] = [
    Replacement::QlruH11M1R0U0,
    Replacement::QlruH00M1R2U1,
    Replacement::QlruH00M1R0U1,
    Replacement::QlruH11M1R1U2,
];
const NAMED_ADAPTIVE_QLRU: [Replacement; 3] = [
    Replacement::QlruAdaptiveIvb,
    Replacement::QlruAdaptiveSkl,
    Replacement::QlruAdaptiveIcl,
];

/// 2048 sets (both layouts' leaders and followers), lines drawn from a few
/// sets of each part, so that sets fill and the selector moves.
fn duel_scenario() -> impl Strategy<Value = (u32, Vec<Op>)> {
    const SETS: [u64; 18] = [
        0, 2, 33, 35, 1, 3, 1024, 1026, 1057, 512, 540, 575, 768, 800, 831, 600, 1500, 2047,
    ];
    let ways = proptest::sample::select(vec![1u32, 2, 4, 8, 11, 12, 16, 20]);
    ways.prop_flat_map(|ways| {
        let line = (0..SETS.len(), 0..3 * ways as u64).prop_map(|(s, t)| SETS[s] + 2048 * t);
        let op = prop_oneof![
            6 => (line.clone(), any::<bool>()).prop_map(|(line, write)| Op::AccessOrInsert { line, write, sharers: 1 }),
            2 => (line.clone(), any::<bool>()).prop_map(|(line, write)| Op::Access { line, write, sharers: 0 }),
            1 => line.clone().prop_map(Op::Invalidate),
            1 => (line, any::<bool>()).prop_map(|(l, d)| Op::SetDirty(l, d)),
        ];
        (Just(ways), proptest::collection::vec(op, 1..1500))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The named fixed variants against the reference.
    #[test]
    fn named_qlru_matches_reference(
        (sets, ways, ops) in scenario(),
        pol in proptest::sample::select(NAMED_FIXED_QLRU.to_vec()),
    ) {
        let mut c = cache(sets, ways, pol);
        let mut r = RefQlru::new(sets as usize, ways as usize, pol.qlru().unwrap(), 1);
        differential(&mut c, &mut r, &ops)?;
    }

    /// Every variant of the family nanoBench defines against the reference
    /// (the implementation is one, parameterised by H, M, R, U and UMO).
    #[test]
    fn every_defined_qlru_variant_matches_reference(
        (sets, ways, ops) in scenario(),
        q in defined_qlru(),
    ) {
        let p = QlruPolicy { base: q, duel: None };
        let mut c = Cache::new_qlru(CacheGeometry { sets, ways }, p, 1);
        let mut r = RefQlru::new(sets as usize, ways as usize, p, 1);
        differential(&mut c, &mut r, &ops)?;
    }

    /// The named adaptive policies against the reference: leader sets,
    /// selector and the seeded bimodal draws.
    #[test]
    fn adaptive_qlru_matches_reference(
        (ways, ops) in duel_scenario(),
        pol in proptest::sample::select(NAMED_ADAPTIVE_QLRU.to_vec()),
        seed in any::<u64>(),
    ) {
        let mut c = Cache::new(CacheGeometry { sets: 2048, ways }, pol, seed).unwrap();
        let mut r = RefQlru::new(2048, ways as usize, pol.qlru().unwrap(), seed);
        differential(&mut c, &mut r, &ops)?;
        prop_assert_eq!(c.psel as i32, r.psel);
    }

    /// Either layout duelling any defined base variant.
    #[test]
    fn any_duel_matches_reference(
        (ways, ops) in duel_scenario(),
        q in defined_qlru(),
        layout in prop_oneof![Just(DuelLayout::Ivb), Just(DuelLayout::Skl)],
        seed in any::<u64>(),
    ) {
        let p = QlruPolicy { base: q, duel: Some(layout) };
        let mut c = Cache::new_qlru(CacheGeometry { sets: 2048, ways }, p, seed);
        let mut r = RefQlru::new(2048, ways as usize, p, seed);
        differential(&mut c, &mut r, &ops)?;
    }

    /// nanoBench defines SRRIP as `QLRU_H00_M2_R0_U0_UMO` (`cacheSim.py`,
    /// `'SRRIP': ...`); the model's `srrip` is that policy on any sequence
    /// without invalidations (an invalidated way's age, which the QLRU
    /// update keeps counting, is the one difference).
    #[test]
    fn srrip_is_nanobench_qlru_h00_m2_r0_u0_umo((sets, ways, ops) in scenario()) {
        let q = Qlru::new(QlruHit::H00, 2, QlruRepl::R0, QlruUpdate::U0, true);
        let mut a = Cache::new_qlru(CacheGeometry { sets, ways }, QlruPolicy { base: q, duel: None }, 1);
        let mut b = cache(sets, ways, Replacement::Srrip);
        for op in ops.iter().filter(|op| !matches!(op, Op::Invalidate(_))) {
            if let Op::Access { line, write, sharers } | Op::AccessOrInsert { line, write, sharers } = *op {
                prop_assert_eq!(a.access_or_insert(line, write, sharers), b.access_or_insert(line, write, sharers));
            }
        }
    }
}

#[test]
fn qlru_names_are_nanobench_names() {
    for p in NAMED_FIXED_QLRU {
        let q = p.qlru().unwrap();
        assert_eq!(q.duel, None);
        assert_eq!(q.base.name().to_lowercase(), p.name());
        assert!(q.base.is_defined());
    }
    for p in NAMED_ADAPTIVE_QLRU {
        assert!(p.qlru().unwrap().duel.is_some(), "{p}");
    }
    for p in [
        Replacement::Lru,
        Replacement::TreePlru,
        Replacement::Srrip,
        Replacement::Drrip,
        Replacement::Random,
    ] {
        assert!(!p.is_qlru());
    }
    assert_eq!(
        Qlru::new(QlruHit::H00, 2, QlruRepl::R0, QlruUpdate::U0, true).name(),
        "QLRU_H00_M2_R0_U0_UMO"
    );
    assert!(!Qlru::new(QlruHit::H11, 1, QlruRepl::R0, QlruUpdate::U2, false).is_defined());
    assert!(!Qlru::new(QlruHit::H11, 1, QlruRepl::R2, QlruUpdate::U3, false).is_defined());
}

#[test]
fn duel_layouts_are_the_published_leader_sets() {
    use super::qlru::Role;
    // Ice Lake (uops.info/cache.html): 16 base leaders in every 1024-set
    // slice; CacheQuery's Skylake macro adds 16 bimodal leaders.
    for group in [0usize, 1024, 7 * 1024] {
        let role = |r: Role| -> Vec<usize> {
            (0..1024)
                .filter(|&i| DuelLayout::Skl.role(group + i) == r)
                .collect()
        };
        assert_eq!(role(Role::BaseLeader), ICL_BASE_LEADERS);
        assert_eq!(role(Role::BimodalLeader), SKL_BIMODAL_LEADERS);
    }
    // Haswell (CacheQuery config/i7-4790.h: "512-575 & 768-831 in
    // slice0"): the first 2048 sets only.
    let base: Vec<usize> = (0..36864)
        .filter(|&s| DuelLayout::Ivb.role(s) == Role::BaseLeader)
        .collect();
    let bimodal: Vec<usize> = (0..36864)
        .filter(|&s| DuelLayout::Ivb.role(s) == Role::BimodalLeader)
        .collect();
    assert_eq!(base, (512..=575).collect::<Vec<_>>());
    assert_eq!(bimodal, (768..=831).collect::<Vec<_>>());
}

// Walks of the replacement automata that Vila, Ganty, Guarnieri & Köpf
// learned from the hardware ("CacheQuery: Learning Replacement Policies
// from Hardware Caches", PLDI 2020; the Mealy machines in `models/` of
// github.com/cgvwzq/polca). Each step is `(line, evicted)`: `None` for a
// hit, else the line the miss evicts, read off the machine's output (the
// position evicted) and the lines at each position. Lines 0.. are the
// prefix's blocks a, b, c, ... in their positions; new lines count on.

/// `skylake_l3-w4.dot`: an L3 leader set of a Core i5-6500, 4 ways (CAT),
/// after the prefix `a b c d`.
const SKL_L3_WALK: [(u64, Option<u64>); 40] = [
    (1, None),
    (4, Some(0)),
    (5, Some(2)),
    (6, Some(3)),
    (7, Some(4)),
    (7, None),
    (5, None),
    (7, None),
    (6, None),
    (8, Some(1)),
    (6, None),
    (6, None),
    (9, Some(8)),
    (6, None),
    (10, Some(5)),
    (9, None),
    (7, None),
    (6, None),
    (7, None),
    (11, Some(10)),
    (6, None),
    (6, None),
    (12, Some(9)),
    (13, Some(7)),
    (14, Some(11)),
    (13, None),
    (15, Some(12)),
    (6, None),
    (14, None),
    (16, Some(13)),
    (17, Some(15)),
    (17, None),
    (18, Some(14)),
    (16, None),
    (18, None),
    (16, None),
    (16, None),
    (16, None),
    (19, Some(6)),
    (20, Some(17)),
];
/// `skylake_l2.dot`: the 4-way L2 of a Core i5-6500 after the prefix
/// `d c b a a b c d`.
const SKL_L2_WALK: [(u64, Option<u64>); 40] = [
    (4, Some(0)),
    (5, Some(1)),
    (4, None),
    (4, None),
    (4, None),
    (2, None),
    (6, Some(5)),
    (6, None),
    (7, Some(4)),
    (8, Some(3)),
    (9, Some(7)),
    (10, Some(2)),
    (10, None),
    (10, None),
    (11, Some(6)),
    (11, None),
    (12, Some(9)),
    (12, None),
    (13, Some(8)),
    (14, Some(10)),
    (11, None),
    (13, None),
    (15, Some(12)),
    (13, None),
    (16, Some(14)),
    (17, Some(11)),
    (18, Some(15)),
    (19, Some(16)),
    (19, None),
    (20, Some(13)),
    (20, None),
    (21, Some(17)),
    (19, None),
    (18, None),
    (22, Some(21)),
    (18, None),
    (19, None),
    (20, None),
    (19, None),
    (20, None),
];
/// `haswell_l2.dot`: the 8-way L2 of a Core i7-4790 (Haswell) after the
/// prefix `a b c d e f g h`.
const HSW_L2_WALK: [(u64, Option<u64>); 40] = [
    (3, None),
    (8, Some(4)),
    (9, Some(0)),
    (2, None),
    (5, None),
    (10, Some(1)),
    (7, None),
    (11, Some(3)),
    (12, Some(8)),
    (10, None),
    (13, Some(6)),
    (9, None),
    (7, None),
    (12, None),
    (14, Some(2)),
    (11, None),
    (11, None),
    (7, None),
    (15, Some(10)),
    (16, Some(5)),
    (7, None),
    (13, None),
    (17, Some(14)),
    (17, None),
    (11, None),
    (18, Some(12)),
    (17, None),
    (19, Some(7)),
    (13, None),
    (9, None),
    (20, Some(16)),
    (15, None),
    (17, None),
    (21, Some(19)),
    (9, None),
    (18, None),
    (9, None),
    (18, None),
    (21, None),
    (22, Some(11)),
];

/// Replays `walk` after `prefix` on a one-set cache; the first step that
/// differs, if any.
fn replay(p: Replacement, ways: u32, prefix: &[u64], walk: &[(u64, Option<u64>)]) -> Option<usize> {
    let mut c = cache(1, ways, p);
    for &l in prefix {
        touch(&mut c, l);
    }
    walk.iter()
        .position(|&(line, ev)| touch(&mut c, line) != (ev.is_none(), ev))
}

#[test]
fn qlru_h11_m1_r0_u0_replays_the_skylake_l3_learned_from_hardware() {
    assert_eq!(
        replay(Replacement::QlruH11M1R0U0, 4, &[0, 1, 2, 3], &SKL_L3_WALK),
        None
    );
    // The nearest policy the model had before does not.
    assert!(replay(Replacement::Srrip, 4, &[0, 1, 2, 3], &SKL_L3_WALK).is_some());
}

#[test]
fn qlru_h00_m1_r2_u1_replays_the_skylake_l2_learned_from_hardware() {
    let prefix = [3, 2, 1, 0, 0, 1, 2, 3];
    assert_eq!(
        replay(Replacement::QlruH00M1R2U1, 4, &prefix, &SKL_L2_WALK),
        None
    );
    // R0 fills the empty ways in the other order, which the walk tells apart.
    assert!(replay(Replacement::QlruH00M1R0U1, 4, &prefix, &SKL_L2_WALK).is_some());
    assert!(replay(Replacement::Srrip, 4, &prefix, &SKL_L2_WALK).is_some());
}

#[test]
fn tree_plru_replays_the_haswell_l2_learned_from_hardware() {
    let prefix: Vec<u64> = (0..8).collect();
    assert_eq!(
        replay(Replacement::TreePlru, 8, &prefix, &HSW_L2_WALK),
        None
    );
    assert!(replay(Replacement::Lru, 8, &prefix, &HSW_L2_WALK).is_some());
}

/// From nanoBench's definitions (`cacheSim.py`, `QLRUReplIdxFuncs` and
/// `QLRUUpdFuncs`) of `R1` (the first way of age 3, else way 0) and `U2`
/// (if no age is 3, add 1 to all), against `R0` and `U0`: after hits that
/// bring every age below 3, the Ivy Bridge variant evicts way 0 (line 0,
/// hit long ago), the Coffee Lake one the way whose age the update brought
/// to 3 first (line 3, the most recently hit).
#[test]
fn qlru_ivb_and_cfl_l3_variants_differ_as_defined() {
    let run = |p: Replacement| {
        let mut c = cache(1, 4, p);
        for l in [0, 1, 2, 3] {
            assert_eq!(touch(&mut c, l), (false, None));
        }
        for l in [0, 0, 0, 1, 1, 2, 2, 3] {
            assert!(touch(&mut c, l).0);
        }
        (touch(&mut c, 4), touch(&mut c, 5))
    };
    // IVB: ages 2 2 2 2 after the fills; the hits leave 0 0 0 1, and U2
    // makes it 1 1 1 2: no age 3, so R1 takes way 0. Filling it (age 1)
    // leaves 1 1 1 2 -> 2 2 2 3, and the next miss takes way 3.
    assert_eq!(
        run(Replacement::QlruH11M1R1U2),
        ((false, Some(0)), (false, Some(3)))
    );
    // CFL L3: ages 3 3 3 3 after the fills; the hits leave 0 0 0 1, which
    // U0 makes 2 2 2 3: the miss takes way 3, then (2 2 2 1 -> 3 3 3 2) way 0.
    assert_eq!(
        run(Replacement::QlruH11M1R0U0),
        ((false, Some(3)), (false, Some(0)))
    );
}

/// A loop over 1.5x the capacity. The Ivy Bridge and Skylake base variants,
/// like LRU, keep none of it (`qlru_h00_m1_r0_u1`, whose update leaves a
/// filled line younger than the others, keeps a third); in each adaptive
/// policy the base leaders miss more than the bimodal ones, the followers
/// turn bimodal and keep about half of the loop.
#[test]
fn adaptive_qlru_keeps_part_of_a_thrashing_loop() {
    let hits = |p: Replacement| {
        let mut c = cache(2048, 4, p);
        let lines = 2048 * 4 * 3 / 2;
        let mut h = 0u64;
        for round in 0..30 {
            for l in 0..lines {
                let (hit, _) = c.access_or_insert(l, true, 0);
                h += (hit && round >= 15) as u64;
            }
        }
        (h, c.psel, 15 * lines)
    };
    // The base's hits as a fraction of the accesses (numerator, denominator).
    for (base, adaptive, kept) in [
        (
            Replacement::QlruH11M1R1U2,
            Replacement::QlruAdaptiveIvb,
            (0, 1),
        ),
        (
            Replacement::QlruH11M1R0U0,
            Replacement::QlruAdaptiveSkl,
            (0, 1),
        ),
        (
            Replacement::QlruH00M1R0U1,
            Replacement::QlruAdaptiveIcl,
            (1, 3),
        ),
    ] {
        let (b, _, n) = hits(base);
        let (a, psel, _) = hits(adaptive);
        assert_eq!(b, n * kept.0 / kept.1, "{base}");
        assert!(
            psel >= PSEL_MID,
            "{adaptive}: followers insert bimodally, psel {psel}"
        );
        assert!(
            a > b && a > 2 * n / 5,
            "{adaptive} keeps >40% of the loop: {a} of {n}"
        );
    }
}

/// Neither the Ivy Bridge L3 variant nor the Coffee Lake one is a stack
/// algorithm (one under which a cache with more ways always holds what the
/// smaller one holds, and so never hits less: Mattson, Gecsei, Slutz &
/// Traiger, IBM Systems Journal 1970): on these sequences in one set the
/// larger cache hits less.
#[test]
fn measured_l3_qlru_variants_are_not_stack_algorithms() {
    let hits = |p: Replacement, ways: u32, seq: &[u64]| {
        let mut c = cache(1, ways, p);
        seq.iter().filter(|&&l| touch(&mut c, l).0).count()
    };
    // 3 ways: 3 4 0 fill (ages 2 2 2), 3 hits, 2 replaces 4, 1 replaces 0,
    // 3 hits. 4 ways: 2 fills the fourth way, so 1 (no age 3: R1's way 0)
    // replaces 3, which misses.
    let seq = [3, 4, 0, 3, 2, 1, 3];
    assert_eq!(hits(Replacement::QlruH11M1R1U2, 3, &seq), 2);
    assert_eq!(hits(Replacement::QlruH11M1R1U2, 4, &seq), 1);
    let seq = [0, 1, 1, 0, 2, 4, 2];
    assert_eq!(hits(Replacement::QlruH11M1R0U0, 2, &seq), 3);
    assert_eq!(hits(Replacement::QlruH11M1R0U0, 3, &seq), 2);
}

/// Hits of `p` on a sequential write stream, five passes: a region of `w`
/// lines written over and over; or, with `hot` lines, `w` lines written
/// once each (never again) with `hot / 64` lines of a hot region rewritten,
/// in turn, before every 64 of them.
fn write_stream_hits(p: Replacement, g: CacheGeometry, w: u64, hot: u64, seed: u64) -> u64 {
    let mut c = Cache::new(g, p, seed).unwrap();
    let (mut h, mut fresh) = (0u64, 1u64 << 40);
    for _ in 0..5 {
        for l in 0..w {
            if hot == 0 {
                h += c.access_or_insert(l, true, 0).0 as u64;
                continue;
            }
            c.access_or_insert(fresh, true, 0);
            fresh += 1;
            if l % 64 == 0 {
                let k = hot / 64;
                for x in 0..k {
                    h += c.access_or_insert((l / 64 * k + x) % hot, true, 0).0 as u64;
                }
            }
        }
    }
    h
}

/// A region written over and over: a larger cache, by sets (as doubling
/// the Haswell-EP LLC from 45 to 90 MiB at 20 ways does) or by ways, never
/// has fewer hits under the Haswell-family policy (the Ivy Bridge leader
/// sets and variant, adaptive or fixed), at any region size tried.
#[test]
fn a_larger_cache_never_has_fewer_hits_on_a_rewritten_region() {
    let g = |sets, ways| CacheGeometry { sets, ways };
    for p in [Replacement::QlruAdaptiveIvb, Replacement::QlruH11M1R1U2] {
        for (small, large) in [(g(1024, 20), g(2048, 20)), (g(1024, 16), g(1024, 20))] {
            let cap = small.lines();
            for f in [0.5, 0.99, 1.01, 1.1, 1.5, 1.99, 2.01, 3.0] {
                let w = (cap as f64 * f) as u64;
                for seed in [1, 2] {
                    let a = write_stream_hits(p, small, w, 0, seed);
                    let b = write_stream_hits(p, large, w, 0, seed);
                    assert!(b >= a, "{p} {small:?} -> {large:?}, {f} x: {a} -> {b} hits");
                }
            }
        }
    }
}

/// A write stream that never returns, with a hot region (a quarter of the
/// smaller cache) rewritten between its chunks: here the larger cache, by
/// ways or by sets, has fewer hits under the Haswell-family policy, fixed
/// (1.0% and 0.8% fewer) and adaptive (0.08% fewer with more ways), where
/// LRU, a stack algorithm, and the model's `drrip` have more.
#[test]
fn a_larger_cache_can_have_fewer_hits_on_a_write_stream_with_a_hot_region() {
    let g = |sets, ways| CacheGeometry { sets, ways };
    let (w, hot) = (16384 * 101 / 100, 4096);
    let hits = |p, geom| write_stream_hits(p, geom, w, hot, 1);
    let more_ways = (g(1024, 16), g(1024, 20));
    let more_sets = (g(1024, 20), g(2048, 20));
    let w20 = (20480 * 101 / 100, 5120);
    assert_eq!(
        (
            hits(Replacement::QlruH11M1R1U2, more_ways.0),
            hits(Replacement::QlruH11M1R1U2, more_ways.1)
        ),
        (78784, 77965)
    );
    assert_eq!(
        (
            write_stream_hits(Replacement::QlruH11M1R1U2, more_sets.0, w20.0, w20.1, 1),
            write_stream_hits(Replacement::QlruH11M1R1U2, more_sets.1, w20.0, w20.1, 1)
        ),
        (124480, 123456)
    );
    assert_eq!(
        (
            hits(Replacement::QlruAdaptiveIvb, more_ways.0),
            hits(Replacement::QlruAdaptiveIvb, more_ways.1)
        ),
        (78784, 78721)
    );
    for p in [Replacement::Lru, Replacement::Drrip] {
        assert!(hits(p, more_ways.1) >= hits(p, more_ways.0), "{p}");
    }
}

// ------------------------------------------------------- micro-benchmark

/// `cargo test -p vmsim-core --release -- --ignored --nocapture bench`
#[test]
#[ignore]
fn bench_llc_streaming() {
    let geom = CacheGeometry::from_capacity(45 << 20, 64, 20).unwrap();
    let n: u64 = 20_000_000;
    for p in Replacement::ALL {
        let mut c = Cache::new(geom, p, 1).unwrap();
        // Stream over 2x the capacity, so that once the cache is warm
        // (almost) every access misses and evicts; every 4th line is
        // written.
        let span = 2 * c.lines();
        let (mut hits, mut dirty, mut off) = (0u64, 0u64, 0u64);
        let start = std::time::Instant::now();
        for i in 0..n {
            let (hit, ev) = c.access_or_insert(0x10_0000 + off, i & 3 == 0, 1);
            hits += hit as u64;
            dirty += ev.map_or(0, |e| e.dirty as u64);
            off += 1;
            if off == span {
                off = 0;
            }
        }
        let s = start.elapsed().as_secs_f64();
        println!(
            "LLC 45 MiB 20-way {:>9}: streaming miss+insert {:6.1} M accesses/s (hits {hits}, dirty evictions {dirty})",
            p.name(),
            n as f64 / s / 1e6
        );
        // Re-read a resident working set (half the capacity): all hits.
        let ws = c.lines() / 2;
        c.clear();
        for i in 0..ws {
            c.access_or_insert(0x4000_0000 + i, false, 0);
        }
        let (mut hits, mut off) = (0u64, 0u64);
        let start = std::time::Instant::now();
        for _ in 0..n {
            hits += c.access(0x4000_0000 + off, false) as u64;
            off += 1;
            if off == ws {
                off = 0;
            }
        }
        let s = start.elapsed().as_secs_f64();
        assert_eq!(hits, n);
        println!(
            "LLC 45 MiB 20-way {:>9}: streaming hits        {:6.1} M accesses/s",
            p.name(),
            n as f64 / s / 1e6
        );
    }
}
