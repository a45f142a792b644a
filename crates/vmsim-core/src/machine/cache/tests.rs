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
        pol in prop_oneof![
            Just(Replacement::Lru),
            Just(Replacement::TreePlru),
            Just(Replacement::Srrip),
            Just(Replacement::Drrip),
            Just(Replacement::Random),
        ],
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
