//! Set-associative cache: one instance models one cache (an L1d, an L2 or a
//! socket's LLC) at cache-line granularity.
//!
//! # What it owns
//!
//! Each set is stored in one or two host cache lines (64-byte aligned blocks):
//!
//! * a `u32` tag per way: the line address (`byte address >> 6`) divided by
//!   the number of sets (the set index supplies the rest), or an invalid
//!   marker for an empty way. A cache therefore holds lines below
//!   `sets * (2^32 - 1)` ([`Cache::line_limit`]; the hierarchy checks its
//!   memory against it);
//! * a meta byte per way: the dirty bit (bit 7) and the per-way state of the
//!   [`Replacement`] policy in the low bits: the LRU rank (0 = most recently
//!   used), the 2-bit SRRIP RRPV or the 2-bit QLRU age ([`qlru`]);
//! * for tree-PLRU, the set's tree bits.
//!
//! An 8-way set is one host line, a 20-way set two. Beside them, in a flat
//! array indexed by `set * ways + way`, `sharers: Vec<u64>` holds an opaque
//! bitmask, which the cache only stores and reports back (the hierarchy uses
//! it as core-valid bits for an inclusive LLC; private caches have none).
//! Keeping a set within one or two host lines is what bounds the simulator's
//! speed on large caches: a lookup costs one or two host cache misses.
//!
//! It knows nothing of addresses beyond lines, of pages or of processes, and
//! has no notion of time: latency and bandwidth belong to the hierarchy.
//!
//! # Invariants
//!
//! * A line address is in at most one way of its set (the set is
//!   `line % sets`), and never in any other set.
//! * An invalid way has the invalid tag, dirty bit clear and sharers 0.
//! * LRU: the ranks of a set's ways (valid or not) are always a permutation
//!   of `0..ways`; a hit or fill moves the way to rank 0 and ages the ways
//!   that were more recent by one. This orders the valid lines exactly as
//!   per-access timestamps would, in one byte per way.
//! * `occupancy()` equals the number of valid ways, and never exceeds
//!   `lines()`.
//! * A victim is always an invalid way when the set has one (the lowest
//!   numbered invalid way, the highest under the `r2` QLRU variants); only a
//!   full set evicts a valid line, and then exactly one line is returned as
//!   [`Evicted`].
//! * Everything is deterministic: the `Random` policy draws from a small
//!   xorshift64* generator stored in the cache and seeded from the `seed`
//!   given to [`Cache::new`] (through splitmix64). It draws only when the set
//!   is full, so the sequence of victims depends only on the seed and on the
//!   sequence of operations. DRRIP's and the adaptive QLRU policies'
//!   bimodal insertions draw from the same generator, one draw a bimodal
//!   fill.
//! * QLRU: an invalid way keeps its age ([`qlru`]).
//!
//! # Performance
//!
//! Every simulated access does several lookups, so the hot methods
//! ([`Cache::access`], [`Cache::access_or_insert`], [`Cache::insert`],
//! [`Cache::contains`]) allocate nothing, scan one set's contiguous tag slice,
//! and compute the set index with a mask when `sets` is a power of two and
//! with a multiply-only remainder (Lemire, Kaser & Kurz, "Faster remainder by
//! direct computation", 2019) otherwise.
//!
//! # Tree-PLRU for associativities that are not a power of two
//!
//! Classic tree pseudo-LRU needs a power-of-two number of ways. For other
//! associativities (e.g. a 20-way LLC) the cache builds the tree over the
//! next power of two of leaves (32 for 20 ways) in which only leaves
//! `0..ways` exist. A hit or fill flips the bits on the leaf's path to point
//! away from it, as usual. The victim walk follows the bits from the root, but
//! when a bit points at a subtree that holds no existing leaf it takes the
//! other child (which always exists). For a power-of-two associativity this
//! is exactly the classic policy.

use std::fmt;
use std::str::FromStr;

pub mod qlru;
mod qlru_cache;
pub use qlru::{DuelLayout, Qlru, QlruPolicy};

/// Marker of an empty entry in arrays of line or page numbers (the TLB's).
/// Never a valid line address: line addresses are byte addresses shifted
/// right by 6, so they stay below 2^58.
pub const INVALID: u64 = u64::MAX;

/// Largest supported associativity (tree-PLRU bits of a set fit in a u64).
pub const MAX_WAYS: u32 = 64;

/// Replacement policy of a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Replacement {
    /// True LRU: a per-way recency rank within the set (equivalent to
    /// per-access timestamps; victim = least recently used valid way).
    Lru,
    /// Binary-tree pseudo-LRU (`ways - 1` bits per set), the policy that
    /// Abel & Reineke measured on the L1 data caches of Intel cores
    /// ("nanoBench: A Low-Overhead Tool for Running Microbenchmarks on x86
    /// Systems", ISPASS 2020, and their published per-microarchitecture
    /// replacement-policy results).
    TreePlru,
    /// Static re-reference interval prediction with 2-bit RRPVs, hit priority
    /// (Jaleel, Theobald, Steely & Emer, "High performance cache replacement
    /// using re-reference interval prediction (RRIP)", ISCA 2010): insert at
    /// RRPV 2 ("long"), hit sets 0, victim is the first way with RRPV 3 after
    /// ageing all ways until one has it.
    Srrip,
    /// Dynamic RRIP with set dueling (Jaleel et al., ISCA 2010, as above):
    /// 1/64 of the sets always insert as SRRIP (RRPV 2), 1/64 as bimodal
    /// RRIP (RRPV 3, and RRPV 2 once in 32 fills, from the seeded generator);
    /// a 10-bit counter counts the misses of the two leader groups and the
    /// other sets follow the group that misses less. Intel's L3 has inserted
    /// adaptively by set dueling since Ivy Bridge (Henry Wong, "Intel Ivy
    /// Bridge Cache Replacement Policy", blog.stuffedcow.net, 2013; uops.info
    /// cache measurements: QLRU variants with fixed leader sets).
    Drrip,
    /// Uniformly random victim from a seeded generator (invalid ways first).
    Random,
    /// QLRU `QLRU_H11_M1_R0_U0` (see [`qlru`] for the naming): hit ages
    /// 3 and 2 become 1, 1 becomes 0; fills at age 1; the first way of age
    /// 3 is replaced; after every access all ages grow until one is 3. The
    /// Coffee Lake L3 policy of Abel & Reineke's nanoBench cache simulator
    /// (`cacheSim.py`, `# CFL L3`), and the policy Vila, Ganty, Guarnieri &
    /// Köpf learned from a leader set of the Skylake (Core i5-6500) and
    /// Kaby Lake R (Core i7-8550U) L3s ("CacheQuery", PLDI 2020; the
    /// learned machines `models/skylake_l3-w4.dot` and
    /// `kabylake_l3-w4.dot` of github.com/cgvwzq/polca, 4 ways under CAT).
    #[serde(rename = "qlru_h11_m1_r0_u0")]
    QlruH11M1R0U0,
    /// QLRU `QLRU_H00_M1_R2_U1`: a hit sets age 0; fills at age 1, empty
    /// ways from the last; the first way of age 3 is replaced; after every
    /// access the other ways' ages grow until one is 3. nanoBench's Coffee
    /// Lake L2 policy (`cacheSim.py`, `# CFL L2`), and the policy learned
    /// from the Skylake (Core i5-6500) L2 (polca `models/skylake_l2.dot`).
    #[serde(rename = "qlru_h00_m1_r2_u1")]
    QlruH00M1R2U1,
    /// QLRU `QLRU_H00_M1_R0_U1`: as `qlru_h00_m1_r2_u1`, but empty ways
    /// fill from the first. nanoBench's Cannon Lake L2 policy
    /// (`cacheSim.py`, `# CNL L2`), and the Ice Lake (Core i5-1035G1) L2's
    /// on uops.info/cache.html.
    #[serde(rename = "qlru_h00_m1_r0_u1")]
    QlruH00M1R0U1,
    /// QLRU `QLRU_H11_M1_R1_U2`: hits as `qlru_h11_m1_r0_u0`; fills at age
    /// 1; the first way of age 3, else way 0, is replaced; after every
    /// access, if no way has age 3, every age grows by 1. nanoBench's Ivy
    /// Bridge L3 policy (`cacheSim.py`, `# IVB`).
    #[serde(rename = "qlru_h11_m1_r1_u2")]
    QlruH11M1R1U2,
    /// Adaptive QLRU with `qlru_h11_m1_r1_u2` as its base and the Ivy
    /// Bridge / Haswell leader sets ([`DuelLayout::Ivb`]; see [`qlru`]).
    #[serde(rename = "qlru-adaptive-ivb")]
    QlruAdaptiveIvb,
    /// Adaptive QLRU with `qlru_h11_m1_r0_u0` as its base and the Skylake
    /// leader sets ([`DuelLayout::Skl`]).
    #[serde(rename = "qlru-adaptive-skl")]
    QlruAdaptiveSkl,
    /// Adaptive QLRU with `qlru_h00_m1_r0_u1` as its base and the Skylake
    /// leader sets, whose base leaders are the ones uops.info/cache.html
    /// gives for the Ice Lake L3 ([`DuelLayout::Skl`]).
    #[serde(rename = "qlru-adaptive-icl")]
    QlruAdaptiveIcl,
}

impl Replacement {
    /// Every policy, in the order of their names in [`Replacement::NAMES`].
    pub const ALL: [Replacement; 12] = [
        Replacement::Lru,
        Replacement::TreePlru,
        Replacement::Srrip,
        Replacement::Drrip,
        Replacement::Random,
        Replacement::QlruH11M1R0U0,
        Replacement::QlruH00M1R2U1,
        Replacement::QlruH00M1R0U1,
        Replacement::QlruH11M1R1U2,
        Replacement::QlruAdaptiveIvb,
        Replacement::QlruAdaptiveSkl,
        Replacement::QlruAdaptiveIcl,
    ];
    /// Accepted names, as parsed by `FromStr` and written by serde.
    pub const NAMES: [&'static str; 12] = [
        "lru",
        "tree-plru",
        "srrip",
        "drrip",
        "random",
        "qlru_h11_m1_r0_u0",
        "qlru_h00_m1_r2_u1",
        "qlru_h00_m1_r0_u1",
        "qlru_h11_m1_r1_u2",
        "qlru-adaptive-ivb",
        "qlru-adaptive-skl",
        "qlru-adaptive-icl",
    ];

    /// The policy's name as accepted by `FromStr`.
    pub fn name(self) -> &'static str {
        match self {
            Replacement::Lru => "lru",
            Replacement::TreePlru => "tree-plru",
            Replacement::Srrip => "srrip",
            Replacement::Drrip => "drrip",
            Replacement::Random => "random",
            Replacement::QlruH11M1R0U0 => "qlru_h11_m1_r0_u0",
            Replacement::QlruH00M1R2U1 => "qlru_h00_m1_r2_u1",
            Replacement::QlruH00M1R0U1 => "qlru_h00_m1_r0_u1",
            Replacement::QlruH11M1R1U2 => "qlru_h11_m1_r1_u2",
            Replacement::QlruAdaptiveIvb => "qlru-adaptive-ivb",
            Replacement::QlruAdaptiveSkl => "qlru-adaptive-skl",
            Replacement::QlruAdaptiveIcl => "qlru-adaptive-icl",
        }
    }

    /// The QLRU policy this is, if it is one.
    pub const fn qlru(self) -> Option<QlruPolicy> {
        use qlru::{QlruHit::*, QlruRepl::*, QlruUpdate::*};
        const fn fixed(base: Qlru) -> QlruPolicy {
            QlruPolicy { base, duel: None }
        }
        const fn duel(base: Qlru, layout: DuelLayout) -> QlruPolicy {
            QlruPolicy {
                base,
                duel: Some(layout),
            }
        }
        const H11_M1_R0_U0: Qlru = Qlru::new(H11, 1, R0, U0, false);
        const H00_M1_R2_U1: Qlru = Qlru::new(H00, 1, R2, U1, false);
        const H00_M1_R0_U1: Qlru = Qlru::new(H00, 1, R0, U1, false);
        const H11_M1_R1_U2: Qlru = Qlru::new(H11, 1, R1, U2, false);
        match self {
            Replacement::Lru
            | Replacement::TreePlru
            | Replacement::Srrip
            | Replacement::Drrip
            | Replacement::Random => None,
            Replacement::QlruH11M1R0U0 => Some(fixed(H11_M1_R0_U0)),
            Replacement::QlruH00M1R2U1 => Some(fixed(H00_M1_R2_U1)),
            Replacement::QlruH00M1R0U1 => Some(fixed(H00_M1_R0_U1)),
            Replacement::QlruH11M1R1U2 => Some(fixed(H11_M1_R1_U2)),
            Replacement::QlruAdaptiveIvb => Some(duel(H11_M1_R1_U2, DuelLayout::Ivb)),
            Replacement::QlruAdaptiveSkl => Some(duel(H11_M1_R0_U0, DuelLayout::Skl)),
            Replacement::QlruAdaptiveIcl => Some(duel(H00_M1_R0_U1, DuelLayout::Skl)),
        }
    }

    /// Whether this is a QLRU policy (fixed or adaptive).
    pub const fn is_qlru(self) -> bool {
        self.qlru().is_some()
    }
}

impl fmt::Display for Replacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Replacement {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Replacement::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown replacement policy {s:?}; accepted: {}",
                    Replacement::NAMES.join(", ")
                )
            })
    }
}

/// Shape of a cache. `sets` need not be a power of two.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CacheGeometry {
    pub sets: u32,
    pub ways: u32,
}

impl CacheGeometry {
    /// Geometry of a cache of `capacity_bytes` with `line_bytes` lines and
    /// `ways` ways; the capacity must be a whole number of sets.
    pub fn from_capacity(capacity_bytes: u64, line_bytes: u64, ways: u32) -> Result<Self, String> {
        if line_bytes == 0 || ways == 0 {
            return Err("line size and ways must be non-zero".into());
        }
        let set_bytes = line_bytes * ways as u64;
        if capacity_bytes == 0 || !capacity_bytes.is_multiple_of(set_bytes) {
            return Err(format!(
                "capacity {capacity_bytes} B is not a positive multiple of {ways} ways x {line_bytes} B"
            ));
        }
        let sets = capacity_bytes / set_bytes;
        let sets = u32::try_from(sets).map_err(|_| format!("{sets} sets is too many"))?;
        Ok(CacheGeometry { sets, ways })
    }

    /// Capacity in lines.
    pub fn lines(&self) -> u64 {
        self.sets as u64 * self.ways as u64
    }
}

/// A valid line pushed out of the cache by [`Cache::insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub line: u64,
    pub dirty: bool,
    pub sharers: u64,
}

/// `line -> set` mapping: a mask for power-of-two set counts, otherwise a
/// multiply-only exact remainder.
#[derive(Clone, Copy, Debug)]
struct SetIndex {
    sets: u64,
    mask: u64,
    /// ceil(2^128 / sets); unused for powers of two.
    magic: u128,
    pow2: bool,
    /// log2(sets) for powers of two.
    shift: u32,
}

impl SetIndex {
    fn new(sets: u32) -> SetIndex {
        debug_assert!(sets > 0);
        let pow2 = sets.is_power_of_two();
        SetIndex {
            sets: sets as u64,
            mask: sets as u64 - 1,
            magic: if pow2 {
                0
            } else {
                u128::MAX / sets as u128 + 1
            },
            pow2,
            shift: sets.trailing_zeros(),
        }
    }

    /// `line % sets`. For a divisor d < 2^32 and a 64-bit numerator, the
    /// 128-bit fraction c = ceil(2^128/d) satisfies c*d - 2^128 < d <= 2^64,
    /// which is the exactness condition of Lemire et al.
    #[inline(always)]
    fn of(&self, line: u64) -> usize {
        if self.pow2 {
            (line & self.mask) as usize
        } else {
            let low = self.magic.wrapping_mul(line as u128);
            let d = self.sets as u128;
            // (low * d) >> 128 without 256-bit arithmetic.
            let hi = (low >> 64) * d;
            let lo = ((low as u64 as u128) * d) >> 64;
            ((hi + lo) >> 64) as usize
        }
    }

    /// `(line % sets, line / sets)`. The quotient is floor(line * c / 2^128)
    /// with the same c, exact under the same condition (Lemire et al.); the
    /// remainder follows from it.
    #[cfg(test)]
    fn div_rem(&self, line: u64) -> (usize, u64) {
        self.div_rem_as(line, None)
    }

    /// [`SetIndex::div_rem`], with the power-of-two test decided by the
    /// caller's shape where it knows it.
    #[inline(always)]
    fn div_rem_as(&self, line: u64, pow2: Option<bool>) -> (usize, u64) {
        if pow2.unwrap_or(self.pow2) {
            ((line & self.mask) as usize, line >> self.shift)
        } else {
            let x = line as u128;
            let hi = x * (self.magic >> 64);
            let lo = (x * (self.magic as u64 as u128)) >> 64;
            let q = ((hi + lo) >> 64) as u64;
            ((line - q * self.sets) as usize, q)
        }
    }
}

/// One host cache line of a set's storage. Sets start on these boundaries,
/// so a set of up to 12 ways (tags, metadata and PLRU bits) is one host
/// cache line and a 20-way set is two.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u32; 16]);

const WORDS_PER_BLOCK: usize = 16;
/// Stored tag of an invalid way (a quotient never stored: see [`Cache::tag_of`]).
const INVALID_TAG: u32 = u32::MAX;

/// A set-associative cache. See the module documentation.
#[derive(Clone)]
pub struct Cache {
    geom: CacheGeometry,
    policy: Replacement,
    ways: usize,
    index: SetIndex,
    /// Per set, `blocks_per_set` blocks: `ways` u32 tags (`line / sets`, or
    /// [`INVALID_TAG`]), then `ways` meta bytes, then (tree-PLRU) the set's
    /// tree bits as two u32 words. Meta: [`DIRTY`] bit, and in the low bits
    /// the policy's state: the LRU rank (0 = most recently used; the ranks of
    /// a set's ways, valid or not, are a permutation of `0..ways`), the
    /// SRRIP RRPV (0..=3) or the QLRU age (0..=3).
    store: Vec<Block>,
    blocks_per_set: usize,
    /// Blocks that hold a set's tags: `ways.div_ceil(16)`.
    tag_blocks: usize,
    /// Bits `0..ways`.
    way_bits: u64,
    /// Word offset of the PLRU bits within a set.
    plru_word: usize,
    /// Opaque sharer bitmask per way, indexed `set * ways + way`.
    sharers: Vec<u64>,
    /// Per way: the (and, or) masks that point its path in the tree away
    /// from it.
    plru_touch: Vec<(u64, u64)>,
    /// Leaves of the PLRU tree: `ways` rounded up to a power of two.
    plru_leaves: usize,
    /// For trees of at most 8 leaves: the victim for each value of the
    /// tree's bits 0..8 (nodes 1..7), as [`Cache::plru_walk`] finds it.
    plru_victims: Vec<u8>,
    /// xorshift64* state (Random, and DRRIP's bimodal insertion).
    rng: u64,
    /// Policy selector of DRRIP (SRRIP-leader misses count up, BRRIP-leader
    /// misses down; followers insert as BRRIP when it is at or above the
    /// midpoint) and of the adaptive QLRU policies (base-leader misses up,
    /// bimodal-leader misses down; followers insert bimodally at or above
    /// the midpoint).
    psel: u16,
    /// The QLRU policy, for a QLRU `policy` (unused otherwise).
    qlru: QlruPolicy,
    /// QLRU: the ways of age 3 but the victim that the last victim choice
    /// found, for the fill that follows it ([`qlru::NOT_SCANNED`] when it
    /// took an empty way without looking at the ages).
    qlru_others_at_max: u64,
    /// Valid lines.
    valid: u64,
    /// Capacity in lines (`geom.lines()`, kept to compare `valid` with).
    lines: u64,
    /// Opaque per-way word the owner stores with a fill (empty: none kept),
    /// indexed like `sharers`; [`Cache::evicted_aux`] hands back the word of
    /// the line the last fill evicted.
    aux: Vec<u32>,
    evicted_aux: u32,
}

/// Bit `i` set where `block[i] == tag`.
#[inline(always)]
fn eq_mask(block: &[u32; WORDS_PER_BLOCK], tag: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; the four unaligned
        // loads read the 16 words of `block`.
        unsafe {
            let t = _mm_set1_epi32(tag as i32);
            let p = block.as_ptr().cast::<__m128i>();
            let e0 = _mm_cmpeq_epi32(_mm_loadu_si128(p), t);
            let e1 = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(1)), t);
            let e2 = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(2)), t);
            let e3 = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(3)), t);
            // 0 / -1 per word, narrowed to one byte per word in order.
            let b = _mm_packs_epi16(_mm_packs_epi32(e0, e1), _mm_packs_epi32(e2, e3));
            _mm_movemask_epi8(b) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    eq_mask_scalar(block, tag)
}

/// [`eq_mask`] one word at a time: the build off x86_64, and the reference
/// the SSE2 build is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn eq_mask_scalar(block: &[u32; WORDS_PER_BLOCK], tag: u32) -> u32 {
    let mut b = 0u32;
    for (i, &t) in block.iter().enumerate() {
        b |= ((t == tag) as u32) << i;
    }
    b
}

/// Bit `i` set where `bytes[i] & STATE == state`.
#[inline(always)]
fn state_eq_mask(bytes: &[u8; 16], state: u8) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; the unaligned load
        // reads the 16 bytes of `bytes`.
        unsafe {
            let v = _mm_loadu_si128(bytes.as_ptr().cast::<__m128i>());
            let v = _mm_and_si128(v, _mm_set1_epi8(STATE as i8));
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(state as i8))) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    state_eq_mask_scalar(bytes, state)
}

/// [`state_eq_mask`] one byte at a time (as [`eq_mask_scalar`]).
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn state_eq_mask_scalar(bytes: &[u8; 16], state: u8) -> u32 {
    let mut b = 0u32;
    for (i, &v) in bytes.iter().enumerate() {
        b |= ((v & STATE == state) as u32) << i;
    }
    b
}

/// The lowest way in `mask`, or way 0 if it is empty.
#[inline(always)]
fn first_way(mask: u64) -> usize {
    if mask == 0 {
        0
    } else {
        mask.trailing_zeros() as usize
    }
}

/// What the code calling a cache knows of it when it is compiled. The
/// hierarchy's per-request path is built once for each shape of the presets
/// it is specialised for (`hierarchy::spec`), so that there the replacement
/// policy, the associativity, whether the set count is a power of two and
/// which side arrays exist are constants rather than fields read and tested
/// on every look-up. A `None` (or `WAYS == 0`) leaves the property to the
/// cache's fields, as [`AnyShape`] does for all of them; a cache is only
/// ever used through a shape that [`Cache::fits`].
pub trait Shape {
    const POLICY: Option<Replacement> = None;
    /// The associativity, or 0 if not known.
    const WAYS: usize = 0;
    const POW2: Option<bool> = None;
    /// Whether the cache keeps sharers ([`Cache::without_sharers`] drops them).
    const SHARERS: Option<bool> = None;
    /// Whether the cache keeps an auxiliary word per line ([`Cache::with_aux`]).
    const AUX: Option<bool> = None;
}

/// A shape that knows nothing: every property is read from the cache.
pub struct AnyShape;
impl Shape for AnyShape {}

/// Word offset of the PLRU bits within a set, and the set's blocks, for
/// `ways` ways under `policy` (the layout [`Cache::new`] builds).
#[inline(always)]
const fn layout(ways: usize, policy: Replacement) -> (usize, usize) {
    let plru_word = ways + ways.div_ceil(4);
    let words = plru_word
        + if matches!(policy, Replacement::TreePlru) {
            2
        } else {
            0
        };
    // Whole 16-byte chunks of meta bytes are compared at once
    // (`state_mask`): the set's storage extends that far past the tags.
    let min = ways + 4 * ways.div_ceil(WORDS_PER_BLOCK);
    let words = if words > min { words } else { min };
    (plru_word, words.div_ceil(WORDS_PER_BLOCK))
}

/// No auxiliary word (see [`Cache::insert_absent_at`]).
pub const NO_AUX: u32 = u32::MAX;

/// Where a line maps in one cache: its set and stored tag, a pure function
/// of the line, so it stays valid across any change to the cache.
#[derive(Clone, Copy, Debug)]
pub struct Split {
    set: usize,
    tag: Option<u32>,
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("geometry", &self.geom)
            .field("policy", &self.policy)
            .field("occupancy", &self.valid)
            .finish_non_exhaustive()
    }
}

/// Dirty bit in a way's meta byte.
const DIRTY: u8 = 0x80;
/// Policy state in a way's meta byte.
const STATE: u8 = 0x7f;
const RRPV_MAX: u8 = 3;
const RRPV_INSERT: u8 = 2;
/// DRRIP (Jaleel et al. 2010): one SRRIP and one BRRIP leader set per group of
/// 64 sets, a 10-bit selector, and bimodal insertion at "long" once in 32 fills.
const DUEL_GROUP: usize = 64;
const SRRIP_LEADER: usize = 0;
const BRRIP_LEADER: usize = 33;
const PSEL_MAX: u16 = 1023;
const PSEL_MID: u16 = 512;
const BRRIP_LONG_ONE_IN: u64 = 32;
/// The `qlru` field of a cache whose policy is not a QLRU one.
const NOT_QLRU: QlruPolicy = QlruPolicy {
    base: Qlru::new(
        qlru::QlruHit::H00,
        0,
        qlru::QlruRepl::R0,
        qlru::QlruUpdate::U0,
        false,
    ),
    duel: None,
};
/// Slots handed out by [`Cache::slot_of`] are `set << SLOT_SHIFT | way` (ways <= 64).
const SLOT_SHIFT: u32 = 6;

impl Cache {
    /// Build an empty cache. Fails when `sets` or `ways` is 0, `ways` exceeds
    /// [`MAX_WAYS`], or the capacity does not fit in memory indices.
    pub fn new(geom: CacheGeometry, policy: Replacement, seed: u64) -> Result<Cache, String> {
        if geom.sets == 0 || geom.ways == 0 {
            return Err(format!(
                "cache geometry needs at least one set and one way (got {} sets x {} ways)",
                geom.sets, geom.ways
            ));
        }
        if geom.ways > MAX_WAYS {
            return Err(format!(
                "at most {MAX_WAYS} ways are supported (got {})",
                geom.ways
            ));
        }
        let n = usize::try_from(geom.lines()).map_err(|_| "cache too large".to_string())?;
        let ways = geom.ways as usize;
        let leaves = ways.next_power_of_two();
        let plru_touch = (0..ways)
            .map(|way| {
                let (mut and, mut or) = (u64::MAX, 0u64);
                let mut node = leaves + way;
                while node > 1 {
                    let parent = node >> 1;
                    and &= !(1u64 << parent);
                    // Came from the left: the victim search goes right.
                    if node & 1 == 0 {
                        or |= 1u64 << parent;
                    }
                    node = parent;
                }
                (and, or)
            })
            .collect();
        let mut rng = crate::rng::splitmix64(seed);
        if rng == 0 {
            rng = 0x2545_F491_4F6C_DD1D;
        }
        let (plru_word, blocks_per_set) = layout(ways, policy);
        let blocks = (geom.sets as usize)
            .checked_mul(blocks_per_set)
            .ok_or_else(|| "cache too large".to_string())?;
        let mut c = Cache {
            geom,
            policy,
            ways,
            index: SetIndex::new(geom.sets),
            store: vec![Block([0; WORDS_PER_BLOCK]); blocks],
            blocks_per_set,
            tag_blocks: ways.div_ceil(WORDS_PER_BLOCK),
            way_bits: u64::MAX >> (64 - ways),
            plru_word,
            sharers: vec![0; n],
            plru_touch,
            plru_leaves: leaves,
            plru_victims: Vec::new(),
            rng,
            psel: PSEL_MID,
            qlru: policy.qlru().unwrap_or(NOT_QLRU),
            qlru_others_at_max: qlru::NOT_SCANNED,
            valid: 0,
            lines: geom.lines(),
            aux: Vec::new(),
            evicted_aux: NO_AUX,
        };
        if policy == Replacement::TreePlru && leaves <= 8 {
            c.plru_victims = (0..256u64).map(|b| c.plru_walk(b) as u8).collect();
        }
        c.reset();
        Ok(c)
    }

    /// Bytes the cache holds.
    pub fn capacity_bytes(&self) -> u64 {
        self.geom.sets as u64 * self.geom.ways as u64 * 64
    }

    /// Whether this cache has every property `S` claims: only then may it be
    /// used through `S`.
    pub fn fits<S: Shape>(&self) -> bool {
        S::POLICY.is_none_or(|p| p == self.policy)
            && (S::WAYS == 0 || S::WAYS == self.ways)
            && S::POW2.is_none_or(|b| b == self.index.pow2)
            && S::SHARERS.is_none_or(|b| b != self.sharers.is_empty())
            && S::AUX.is_none_or(|b| b != self.aux.is_empty())
    }

    #[inline(always)]
    fn ways_of<S: Shape>(&self) -> usize {
        debug_assert!(self.fits::<S>());
        if S::WAYS != 0 {
            S::WAYS
        } else {
            self.ways
        }
    }

    #[inline(always)]
    fn policy_of<S: Shape>(&self) -> Replacement {
        match S::POLICY {
            Some(p) => p,
            None => self.policy,
        }
    }

    #[inline(always)]
    fn bps_of<S: Shape>(&self) -> usize {
        match S::POLICY {
            Some(p) if S::WAYS != 0 => layout(S::WAYS, p).1,
            _ => self.blocks_per_set,
        }
    }

    #[inline(always)]
    fn plru_word_of<S: Shape>(&self) -> usize {
        if S::WAYS != 0 {
            S::WAYS + S::WAYS.div_ceil(4)
        } else {
            self.plru_word
        }
    }

    #[inline(always)]
    fn tag_blocks_of<S: Shape>(&self) -> usize {
        if S::WAYS != 0 {
            S::WAYS.div_ceil(WORDS_PER_BLOCK)
        } else {
            self.tag_blocks
        }
    }

    #[inline(always)]
    fn way_bits_of<S: Shape>(&self) -> u64 {
        if S::WAYS != 0 {
            u64::MAX >> (64 - S::WAYS)
        } else {
            self.way_bits
        }
    }

    #[inline(always)]
    fn has_sharers<S: Shape>(&self) -> bool {
        match S::SHARERS {
            Some(b) => b,
            None => !self.sharers.is_empty(),
        }
    }

    #[inline(always)]
    fn has_aux<S: Shape>(&self) -> bool {
        match S::AUX {
            Some(b) => b,
            None => !self.aux.is_empty(),
        }
    }

    /// Empties every set and resets the replacement state.
    fn reset(&mut self) {
        let ways = self.ways;
        let policy = self.policy;
        for set in 0..self.geom.sets as usize {
            self.tags_mut::<AnyShape>(set).fill(INVALID_TAG);
            let m = self.meta_mut::<AnyShape>(set);
            match policy {
                Replacement::Lru => {
                    for (i, m) in m.iter_mut().enumerate() {
                        *m = (i % ways) as u8;
                    }
                }
                Replacement::Srrip | Replacement::Drrip => m.fill(RRPV_MAX),
                Replacement::TreePlru | Replacement::Random => m.fill(0),
                p if p.is_qlru() => m.fill(qlru::AGE_MAX),
                _ => unreachable!("every policy is listed"),
            }
            if policy == Replacement::TreePlru {
                self.set_plru::<AnyShape>(set, 0);
            }
        }
        self.psel = PSEL_MID;
    }

    /// The words of `set`'s blocks.
    #[inline(always)]
    fn words<S: Shape>(&self, set: usize) -> &[u32] {
        let bps = self.bps_of::<S>();
        // Every set index reaching here is below `sets`: from the set index
        // (a remainder), from `0..sets`, or from a slot checked by `unslot`.
        debug_assert!((set + 1) * bps <= self.store.len());
        // SAFETY: `Block` is `repr(C)` over `[u32; 16]` with no padding, and the
        // `bps` blocks of set `set < sets` are contiguous within `store`
        // (`sets * bps` blocks), so they are `16 * bps` initialised u32s.
        unsafe {
            std::slice::from_raw_parts(
                self.store.as_ptr().add(set * bps).cast::<u32>(),
                bps * WORDS_PER_BLOCK,
            )
        }
    }

    #[inline(always)]
    fn words_mut<S: Shape>(&mut self, set: usize) -> &mut [u32] {
        let bps = self.bps_of::<S>();
        debug_assert!((set + 1) * bps <= self.store.len());
        // SAFETY: as in `words`; the borrow is exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.store.as_mut_ptr().add(set * bps).cast::<u32>(),
                bps * WORDS_PER_BLOCK,
            )
        }
    }

    #[inline(always)]
    fn tags<S: Shape>(&self, set: usize) -> &[u32] {
        &self.words::<S>(set)[..self.ways_of::<S>()]
    }

    #[inline(always)]
    fn tags_mut<S: Shape>(&mut self, set: usize) -> &mut [u32] {
        let ways = self.ways_of::<S>();
        &mut self.words_mut::<S>(set)[..ways]
    }

    /// The meta bytes of `set`, one per way.
    #[inline(always)]
    fn meta<S: Shape>(&self, set: usize) -> &[u8] {
        let (ways, w) = (self.ways_of::<S>(), self.words::<S>(set));
        // SAFETY: a u32 slice viewed as its bytes (u8 has no alignment or validity needs).
        let bytes = unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), w.len() * 4) };
        &bytes[ways * 4..ways * 5]
    }

    #[inline(always)]
    fn meta_mut<S: Shape>(&mut self, set: usize) -> &mut [u8] {
        let ways = self.ways_of::<S>();
        let w = self.words_mut::<S>(set);
        // SAFETY: as in `meta`; the borrow is exclusive.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast::<u8>(), w.len() * 4) };
        &mut bytes[ways * 4..ways * 5]
    }

    #[inline(always)]
    fn plru<S: Shape>(&self, set: usize) -> u64 {
        let w = &self.words::<S>(set)[self.plru_word_of::<S>()..self.plru_word_of::<S>() + 2];
        w[0] as u64 | (w[1] as u64) << 32
    }

    #[inline(always)]
    fn set_plru<S: Shape>(&mut self, set: usize, bits: u64) {
        let p = self.plru_word_of::<S>();
        let w = &mut self.words_mut::<S>(set)[p..p + 2];
        w[0] = bits as u32;
        w[1] = (bits >> 32) as u32;
    }

    /// Set and stored tag of `line`; the tag is `None` when the quotient does
    /// not fit a stored tag (such a line is never present).
    #[inline(always)]
    fn split<S: Shape>(&self, line: u64) -> (usize, Option<u32>) {
        let (set, q) = self.index.div_rem_as(line, S::POW2);
        (set, u32::try_from(q).ok().filter(|&t| t != INVALID_TAG))
    }

    /// The line held by way `way` of `set` with stored tag `tag`.
    #[inline(always)]
    fn line_of(&self, set: usize, tag: u32) -> u64 {
        tag as u64 * self.geom.sets as u64 + set as u64
    }

    /// Stored tag for a line about to be filled.
    #[inline(always)]
    fn tag_of(&self, line: u64, tag: Option<u32>) -> u32 {
        match tag {
            Some(t) => t,
            None => panic!(
                "line {line:#x} is beyond the {} sets x 2^32 lines a cache can hold",
                self.geom.sets
            ),
        }
    }

    /// Geometry given at construction.
    pub fn geometry(&self) -> CacheGeometry {
        self.geom
    }

    /// Replacement policy given at construction.
    pub fn policy(&self) -> Replacement {
        self.policy
    }

    /// Capacity in lines.
    pub fn lines(&self) -> u64 {
        self.geom.lines()
    }

    /// Largest line address (exclusive) the cache can hold.
    pub fn line_limit(&self) -> u64 {
        self.geom.sets as u64 * INVALID_TAG as u64
    }

    /// Set that `line` maps to (`line % sets`).
    #[inline]
    pub fn set_of(&self, line: u64) -> u32 {
        self.index.of(line) as u32
    }

    /// Bit `w` set for each way `w` of `set` whose stored tag is `tag`.
    /// Compares whole 16-word blocks without branching (the host compiler
    /// makes a few vector compares of each), then drops the bits past the
    /// tags: a scan that stops at the first match costs a compare and a
    /// branch per way, and most look-ups on the hot path miss.
    #[inline(always)]
    fn match_mask<S: Shape>(&self, set: usize, tag: u32) -> u64 {
        let w = self.words::<S>(set);
        let mut m = 0u64;
        // `words` holds at least `ways.div_ceil(16)` whole blocks (the tags
        // come first in a set's blocks).
        for (c, block) in w
            .chunks_exact(WORDS_PER_BLOCK)
            .take(self.tag_blocks_of::<S>())
            .enumerate()
        {
            let block: &[u32; WORDS_PER_BLOCK] = block.try_into().expect("whole block");
            m |= (eq_mask(block, tag) as u64) << (c * WORDS_PER_BLOCK);
        }
        m & self.way_bits_of::<S>()
    }

    /// Bit `w` set for each way `w` of `set` whose policy state is `state`
    /// (a branch-free scan, as in [`Cache::match_mask`]).
    #[inline(always)]
    fn state_mask<S: Shape>(&self, set: usize, state: u8) -> u64 {
        let w = self.words::<S>(set);
        // SAFETY: a u32 slice viewed as its bytes, as in `meta`.
        let bytes = unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), w.len() * 4) };
        // The meta bytes start after the tags; a set's blocks extend at least
        // `16 * tag_blocks` bytes past that (see `Cache::new`).
        let meta = &bytes[self.ways_of::<S>() * 4
            ..self.ways_of::<S>() * 4 + WORDS_PER_BLOCK * self.tag_blocks_of::<S>()];
        let mut m = 0u64;
        for (c, chunk) in meta.chunks_exact(16).enumerate() {
            let chunk: &[u8; 16] = chunk.try_into().expect("16 bytes");
            m |= (state_eq_mask(chunk, state) as u64) << (c * 16);
        }
        m & self.way_bits_of::<S>()
    }

    /// Way of `set` holding stored tag `tag`, if any.
    #[inline(always)]
    fn find<S: Shape>(&self, set: usize, tag: Option<u32>) -> Option<usize> {
        let m = self.match_mask::<S>(set, tag?);
        (m != 0).then(|| m.trailing_zeros() as usize)
    }

    /// `(set, way)` holding `line`, if any.
    #[inline(always)]
    fn lookup<S: Shape>(&self, line: u64) -> Option<(usize, usize)> {
        let (set, tag) = self.split::<S>(line);
        self.find::<S>(set, tag).map(|w| (set, w))
    }

    /// Make `way` the most recently used way of its set (LRU).
    #[inline(always)]
    fn lru_promote<S: Shape>(&mut self, set: usize, way: usize) {
        let m = self.meta_mut::<S>(set);
        let rank = m[way] & STATE;
        for m in m.iter_mut() {
            *m += ((*m & STATE) < rank) as u8;
        }
        m[way] &= DIRTY;
    }

    /// Replacement update on a hit.
    #[inline(always)]
    fn promote<S: Shape>(&mut self, set: usize, way: usize) {
        match self.policy_of::<S>() {
            Replacement::Lru => self.lru_promote::<S>(set, way),
            Replacement::TreePlru => self.plru_promote::<S>(set, way),
            Replacement::Srrip | Replacement::Drrip => self.meta_mut::<S>(set)[way] &= DIRTY,
            Replacement::Random => {}
            _ => self.qlru_hit::<S>(set, way),
        }
    }

    /// DRRIP on a fill (a miss in `set`): train the selector in leader sets, then
    /// the RRPV to insert with.
    #[inline(always)]
    fn drrip_insert(&mut self, set: usize) -> u8 {
        let bimodal = match set % DUEL_GROUP {
            SRRIP_LEADER => {
                self.psel = (self.psel + 1).min(PSEL_MAX);
                false
            }
            BRRIP_LEADER => {
                self.psel = self.psel.saturating_sub(1);
                true
            }
            _ => self.psel >= PSEL_MID,
        };
        if bimodal && !self.next_random().is_multiple_of(BRRIP_LONG_ONE_IN) {
            RRPV_MAX
        } else {
            RRPV_INSERT
        }
    }

    /// Replacement update on a fill.
    #[inline(always)]
    fn on_fill<S: Shape>(&mut self, set: usize, way: usize) {
        match self.policy_of::<S>() {
            Replacement::Lru => self.lru_promote::<S>(set, way),
            Replacement::TreePlru => self.plru_promote::<S>(set, way),
            Replacement::Srrip => {
                let m = &mut self.meta_mut::<S>(set)[way];
                *m = (*m & DIRTY) | RRPV_INSERT;
            }
            Replacement::Drrip => {
                let r = self.drrip_insert(set);
                let m = &mut self.meta_mut::<S>(set)[way];
                *m = (*m & DIRTY) | r;
            }
            Replacement::Random => {}
            _ => self.qlru_fill::<S>(set, way),
        }
    }

    /// Point every node on `way`'s path away from it.
    #[inline(always)]
    fn plru_promote<S: Shape>(&mut self, set: usize, way: usize) {
        let (and, or) = self.plru_touch[way];
        let bits = (self.plru::<S>(set) & and) | or;
        self.set_plru::<S>(set, bits);
    }

    /// Way chosen by the PLRU tree (skipping subtrees without existing ways).
    #[inline(always)]
    fn plru_victim<S: Shape>(&self, set: usize) -> usize {
        let bits = self.plru::<S>(set);
        if !self.plru_victims.is_empty() {
            return self.plru_victims[(bits & 0xff) as usize] as usize;
        }
        self.plru_walk(bits)
    }

    /// The way the PLRU tree with node bits `bits` points to.
    #[inline(always)]
    fn plru_walk(&self, bits: u64) -> usize {
        let (mut node, mut lo, mut span) = (1usize, 0usize, self.plru_leaves);
        while node < self.plru_leaves {
            span >>= 1;
            let right = ((bits >> node) & 1) as usize & (lo + span < self.ways) as usize;
            lo += span * right;
            node = 2 * node + right;
        }
        lo
    }

    #[inline(always)]
    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Way to fill in `set`: the lowest invalid way, else the policy's victim.
    #[inline(always)]
    fn victim<S: Shape>(&mut self, set: usize) -> usize {
        if self.policy_of::<S>().is_qlru() {
            return self.qlru_victim::<S>(set);
        }
        // A full cache has no invalid way in any set: skip the scan.
        if self.valid == self.lines {
            return self.victim_of_full::<S>(set);
        }
        match self.match_mask::<S>(set, INVALID_TAG) {
            0 => self.victim_of_full::<S>(set),
            m => m.trailing_zeros() as usize,
        }
    }

    /// Way to evict from the full `set`, by the policy.
    #[inline(always)]
    fn victim_of_full<S: Shape>(&mut self, set: usize) -> usize {
        match self.policy_of::<S>() {
            Replacement::Lru => first_way(self.state_mask::<S>(set, self.ways_of::<S>() as u8 - 1)),
            Replacement::TreePlru => self.plru_victim::<S>(set),
            Replacement::Srrip | Replacement::Drrip => {
                // A way already at the distant RRPV: the maximum is RRPV_MAX, so
                // nothing ages and the first such way is the victim.
                let at_max = self.state_mask::<S>(set, RRPV_MAX);
                if at_max != 0 {
                    return first_way(at_max);
                }
                let m = self.meta_mut::<S>(set);
                let max = m.iter().fold(0, |a, &v| a.max(v & STATE));
                if max >= RRPV_MAX {
                    return 0;
                }
                // Ageing every way by `age` brings exactly the ways at `max`
                // to RRPV_MAX: the first of them is the victim.
                let age = RRPV_MAX - max;
                m.iter_mut().for_each(|v| *v += age);
                first_way(self.state_mask::<S>(set, RRPV_MAX))
            }
            Replacement::Random => {
                let r = self.next_random();
                (((r >> 32) * self.ways_of::<S>() as u64) >> 32) as usize
            }
            _ => self.qlru_victim::<S>(set),
        }
    }

    /// Put `tag` into `way` of `set`, returning the valid line it replaces.
    #[inline(always)]
    fn fill<S: Shape>(
        &mut self,
        set: usize,
        way: usize,
        tag: u32,
        dirty: bool,
        sharers: u64,
        aux: u32,
    ) -> Option<Evicted> {
        let old = self.tags::<S>(set)[way];
        let s = set * self.ways_of::<S>() + way;
        if self.has_aux::<S>() {
            self.evicted_aux = std::mem::replace(&mut self.aux[s], aux);
        }
        let ev = if old != INVALID_TAG {
            Some(Evicted {
                line: self.line_of(set, old),
                dirty: self.meta::<S>(set)[way] & DIRTY != 0,
                sharers: self.sh::<S>(s),
            })
        } else {
            self.valid += 1;
            None
        };
        self.tags_mut::<S>(set)[way] = tag;
        let m = &mut self.meta_mut::<S>(set)[way];
        *m = (*m & STATE) | if dirty { DIRTY } else { 0 };
        self.set_sh::<S>(s, sharers);
        self.on_fill::<S>(set, way);
        ev
    }

    /// Look up `line` (a line address = byte address >> 6). On a hit, update
    /// the replacement state (promote), OR `write` into the line's dirty bit
    /// and return true. A miss changes nothing and returns false.
    #[inline]
    pub fn access(&mut self, line: u64, write: bool) -> bool {
        match self.lookup::<AnyShape>(line) {
            Some((set, way)) => {
                self.meta_mut::<AnyShape>(set)[way] |= if write { DIRTY } else { 0 };
                self.promote::<AnyShape>(set, way);
                true
            }
            None => false,
        }
    }

    /// Hit-or-fill in one call. On a hit: as [`Cache::access`], and also OR
    /// `sharers` into the line's sharers; returns `(true, None)`. On a miss:
    /// insert the line with dirty bit `write` and the given `sharers`;
    /// returns `(false, evicted)`.
    #[inline]
    pub fn access_or_insert(
        &mut self,
        line: u64,
        write: bool,
        sharers: u64,
    ) -> (bool, Option<Evicted>) {
        let (set, tag) = self.split::<AnyShape>(line);
        match self.find::<AnyShape>(set, tag) {
            Some(way) => {
                self.meta_mut::<AnyShape>(set)[way] |= if write { DIRTY } else { 0 };
                self.or_sh::<AnyShape>(set * self.ways + way, sharers);
                self.promote::<AnyShape>(set, way);
                (true, None)
            }
            None => {
                let tag = self.tag_of(line, tag);
                let way = self.victim::<AnyShape>(set);
                (
                    false,
                    self.fill::<AnyShape>(set, way, tag, write, sharers, NO_AUX),
                )
            }
        }
    }

    /// The same cache without storage for sharers (a private cache, whose
    /// lines are never tracked by core): every line's sharers read as 0 and
    /// storing them is ignored, which keeps a dead array out of the hot path.
    pub fn without_sharers(mut self) -> Cache {
        self.sharers = Vec::new();
        self
    }

    /// Asks the host to bring the side arrays of `set` (sharers, aux: apart
    /// from the set's block) into its caches, so that a fill of the set that
    /// follows, which reads the victim's entries, finds them there rather
    /// than stalling on a host cache miss after the tag look-up's. Changes
    /// nothing in the model.
    #[inline(always)]
    pub fn prefetch_side<S: Shape>(&self, set: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            fn range<T>(v: &[T], first: usize, n: usize) {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                if v.is_empty() {
                    return;
                }
                let p = v.as_ptr().wrapping_add(first).cast::<i8>();
                let bytes = n * std::mem::size_of::<T>();
                let mut off = 0;
                while off < bytes {
                    // SAFETY: a prefetch is a hint: it neither faults nor
                    // reads into the program, whatever the address.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off)) };
                    off += 64;
                }
                // SAFETY: as above; the range's last byte, whose line the
                // steps of 64 miss when the range does not start a line.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(bytes - 1)) };
            }
            let first = set * self.ways_of::<S>();
            if self.has_sharers::<S>() {
                range(&self.sharers, first, self.ways_of::<S>());
            }
            if self.has_aux::<S>() {
                range(&self.aux, first, self.ways_of::<S>());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = set;
    }

    /// [`Cache::prefetch_side`] of the set of `line`.
    #[inline(always)]
    pub fn prefetch_side_of_as<S: Shape>(&self, line: u64) {
        self.prefetch_side::<S>(self.split::<S>(line).0);
    }

    #[inline(always)]
    fn sh<S: Shape>(&self, i: usize) -> u64 {
        if !self.has_sharers::<S>() {
            0
        } else {
            self.sharers[i]
        }
    }

    #[inline(always)]
    fn set_sh<S: Shape>(&mut self, i: usize, v: u64) {
        if self.has_sharers::<S>() {
            self.sharers[i] = v;
        }
    }

    #[inline(always)]
    fn or_sh<S: Shape>(&mut self, i: usize, v: u64) {
        if self.has_sharers::<S>() {
            self.sharers[i] |= v;
        }
    }

    #[inline(always)]
    fn unslot<S: Shape>(&self, slot: usize) -> (usize, usize) {
        let (set, way) = (slot >> SLOT_SHIFT, slot & ((1 << SLOT_SHIFT) - 1));
        // Slots come from `slot_of`; a foreign one must not reach `words`.
        assert!(
            set < self.geom.sets as usize && way < self.ways_of::<S>(),
            "bad slot {slot}"
        );
        (set, way)
    }

    /// Slot-level access for callers that look a line up once and then act on
    /// it: `slot_of` finds the slot, the `slot_*` methods read or change it.
    /// A slot stays valid until the next insert or invalidate on this cache.
    #[inline]
    pub fn slot_of_as<S: Shape>(&self, line: u64) -> Option<usize> {
        self.lookup::<S>(line)
            .map(|(set, way)| set << SLOT_SHIFT | way)
    }

    /// Replacement promote of a hit slot, ORing `write` into its dirty bit.
    #[inline]
    pub fn slot_hit_as<S: Shape>(&mut self, slot: usize, write: bool) {
        let (set, way) = self.unslot::<S>(slot);
        self.meta_mut::<S>(set)[way] |= if write { DIRTY } else { 0 };
        self.promote::<S>(set, way);
    }

    #[inline]
    pub fn slot_dirty_as<S: Shape>(&self, slot: usize) -> bool {
        let (set, way) = self.unslot::<S>(slot);
        self.meta::<S>(set)[way] & DIRTY != 0
    }

    #[inline]
    pub fn slot_set_dirty_as<S: Shape>(&mut self, slot: usize, dirty: bool) {
        let (set, way) = self.unslot::<S>(slot);
        let m = &mut self.meta_mut::<S>(set)[way];
        if dirty {
            *m |= DIRTY;
        } else {
            *m &= !DIRTY;
        }
    }

    #[inline]
    pub fn slot_sharers_as<S: Shape>(&self, slot: usize) -> u64 {
        let (set, way) = self.unslot::<S>(slot);
        self.sh::<S>(set * self.ways_of::<S>() + way)
    }

    #[inline]
    pub fn slot_set_sharers_as<S: Shape>(&mut self, slot: usize, sharers: u64) {
        let (set, way) = self.unslot::<S>(slot);
        self.set_sh::<S>(set * self.ways_of::<S>() + way, sharers);
    }

    /// Insert a line the caller has just found absent (skips the lookup).
    #[inline]
    pub fn insert_absent_as<S: Shape>(
        &mut self,
        line: u64,
        dirty: bool,
        sharers: u64,
    ) -> Option<Evicted> {
        debug_assert!(self.lookup::<S>(line).is_none());
        let (set, tag) = self.split::<S>(line);
        let tag = self.tag_of(line, tag);
        let way = self.victim::<S>(set);
        self.fill::<S>(set, way, tag, dirty, sharers, NO_AUX)
    }

    /// The set and stored tag of `line` and the slot holding it, if any:
    /// [`Cache::slot_of`] that also hands back the split for a later
    /// [`Cache::insert_absent_at`].
    #[inline]
    pub fn slot_and_split_as<S: Shape>(&self, line: u64) -> (Option<usize>, Split) {
        let (set, tag) = self.split::<S>(line);
        // A miss inserts next and reads the victim's sharers there.
        self.prefetch_side::<S>(set);
        let slot = self.find::<S>(set, tag).map(|way| set << SLOT_SHIFT | way);
        (slot, Split { set, tag })
    }

    /// [`Cache::insert_absent`] with the split of `line` already computed,
    /// storing `aux` with the line (kept only by a cache made
    /// [`Cache::with_aux`]). Returns the evicted line and the new line's slot.
    #[inline]
    pub fn insert_absent_at_as<S: Shape>(
        &mut self,
        line: u64,
        at: Split,
        dirty: bool,
        sharers: u64,
        aux: u32,
    ) -> (Option<Evicted>, usize) {
        debug_assert!(self.lookup::<S>(line).is_none());
        debug_assert_eq!(self.split::<S>(line), (at.set, at.tag));
        let tag = self.tag_of(line, at.tag);
        let way = self.victim::<S>(at.set);
        let ev = self.fill::<S>(at.set, way, tag, dirty, sharers, aux);
        (ev, at.set << SLOT_SHIFT | way)
    }

    /// The split of `line` (see [`Split`]).
    #[inline]
    pub fn split_of_as<S: Shape>(&self, line: u64) -> Split {
        let (set, tag) = self.split::<S>(line);
        Split { set, tag }
    }

    /// The same cache keeping an auxiliary word per line (see [`Cache::insert_absent_at`]).
    pub fn with_aux(mut self) -> Cache {
        self.aux = vec![NO_AUX; self.geom.lines() as usize];
        self
    }

    /// The auxiliary word of the line the last fill evicted (meaningful only
    /// right after a fill that returned an evicted line).
    #[inline]
    pub fn evicted_aux(&self) -> u32 {
        self.evicted_aux
    }

    /// [`Cache::set_dirty`], trying first the slot `hint` (a slot this cache
    /// handed out earlier, or [`NO_AUX`]): if it still holds `line` it is the
    /// line's only way, so the set need not be searched. Same result and
    /// state as `set_dirty`.
    #[inline]
    pub fn set_dirty_hinted_as<S: Shape>(&mut self, line: u64, hint: u32, dirty: bool) -> bool {
        if hint != NO_AUX {
            let (set, way) = (
                hint as usize >> SLOT_SHIFT,
                hint as usize & ((1 << SLOT_SHIFT) - 1),
            );
            if set < self.geom.sets as usize && way < self.ways_of::<S>() {
                let t = self.tags::<S>(set)[way];
                if t != INVALID_TAG && self.line_of(set, t) == line {
                    let m = &mut self.meta_mut::<S>(set)[way];
                    *m = (*m & STATE) | if dirty { DIRTY } else { 0 };
                    return true;
                }
            }
        }
        self.set_dirty_as::<S>(line, dirty)
    }

    /// Probe without changing replacement state.
    #[inline]
    pub fn contains_as<S: Shape>(&self, line: u64) -> bool {
        self.lookup::<S>(line).is_some()
    }

    /// Insert a line known to be absent. The victim is the lowest invalid
    /// way of the set, else the policy's choice; the valid line it held, if
    /// any, is returned. The new line gets `dirty` and `sharers`.
    ///
    /// If `line` is in fact present, nothing is evicted: the call acts as a
    /// hit (replacement promote) that ORs `dirty` into the dirty bit and
    /// replaces the sharers, and returns `None`. The one-way-per-line
    /// invariant therefore holds whatever the caller does.
    #[inline]
    pub fn insert_as<S: Shape>(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<Evicted> {
        let (set, tag) = self.split::<S>(line);
        if let Some(way) = self.find::<S>(set, tag) {
            self.meta_mut::<S>(set)[way] |= if dirty { DIRTY } else { 0 };
            self.set_sh::<S>(set * self.ways_of::<S>() + way, sharers);
            self.promote::<S>(set, way);
            return None;
        }
        let tag = self.tag_of(line, tag);
        let way = self.victim::<S>(set);
        self.fill::<S>(set, way, tag, dirty, sharers, NO_AUX)
    }

    /// Remove `line` if present; returns its `(dirty, sharers)`.
    #[inline]
    pub fn invalidate_as<S: Shape>(&mut self, line: u64) -> Option<(bool, u64)> {
        let (set, way) = self.lookup::<S>(line)?;
        let s = set * self.ways_of::<S>() + way;
        let out = (self.meta::<S>(set)[way] & DIRTY != 0, self.sh::<S>(s));
        self.tags_mut::<S>(set)[way] = INVALID_TAG;
        self.meta_mut::<S>(set)[way] &= STATE;
        self.set_sh::<S>(s, 0);
        self.valid -= 1;
        Some(out)
    }

    /// Sharers of `line`, `None` if absent.
    #[inline]
    pub fn sharers_as<S: Shape>(&self, line: u64) -> Option<u64> {
        self.lookup::<S>(line)
            .map(|(set, way)| self.sh::<S>(set * self.ways_of::<S>() + way))
    }

    /// Replace the sharers of `line`; false if absent.
    #[inline]
    pub fn set_sharers_as<S: Shape>(&mut self, line: u64, sharers: u64) -> bool {
        match self.lookup::<S>(line) {
            Some((set, way)) => {
                self.set_sh::<S>(set * self.ways_of::<S>() + way, sharers);
                true
            }
            None => false,
        }
    }

    /// OR `bits` into the sharers of `line`; false if absent.
    #[inline]
    pub fn or_sharers(&mut self, line: u64, bits: u64) -> bool {
        match self.lookup::<AnyShape>(line) {
            Some((set, way)) => {
                self.or_sh::<AnyShape>(set * self.ways + way, bits);
                true
            }
            None => false,
        }
    }

    /// Set or clear the dirty bit of `line`; false if absent. Does not
    /// change replacement state.
    #[inline]
    pub fn set_dirty_as<S: Shape>(&mut self, line: u64, dirty: bool) -> bool {
        match self.lookup::<S>(line) {
            Some((set, way)) => {
                let m = &mut self.meta_mut::<S>(set)[way];
                *m = (*m & STATE) | if dirty { DIRTY } else { 0 };
                true
            }
            None => false,
        }
    }

    /// Dirty bit of `line`, `None` if absent.
    #[inline]
    pub fn is_dirty_as<S: Shape>(&self, line: u64) -> Option<bool> {
        self.lookup::<S>(line)
            .map(|(set, way)| self.meta::<S>(set)[way] & DIRTY != 0)
    }

    /// Invalidate everything (no writebacks are reported). Replacement state
    /// is reset; the random generator continues its sequence.
    pub fn clear(&mut self) {
        self.sharers.fill(0);
        self.reset();
        self.valid = 0;
    }

    /// Number of valid lines.
    #[inline]
    pub fn occupancy(&self) -> u64 {
        self.valid
    }

    /// Valid lines as `(line, dirty, sharers)`, in set then way order
    /// (deterministic), e.g. to write back everything at a flush.
    pub fn valid_lines(&self) -> impl Iterator<Item = (u64, bool, u64)> + '_ {
        (0..self.geom.sets as usize).flat_map(move |set| {
            (0..self.ways).filter_map(move |way| {
                let t = self.tags::<AnyShape>(set)[way];
                (t != INVALID_TAG).then(|| {
                    (
                        self.line_of(set, t),
                        self.meta::<AnyShape>(set)[way] & DIRTY != 0,
                        self.sh::<AnyShape>(set * self.ways + way),
                    )
                })
            })
        })
    }

    /// [`Cache::prefetch_side_of_as`] for any shape.
    #[inline]
    pub fn prefetch_side_of(&self, line: u64) {
        self.prefetch_side_of_as::<AnyShape>(line)
    }

    /// [`Cache::slot_of_as`] for any shape.
    #[inline]
    pub fn slot_of(&self, line: u64) -> Option<usize> {
        self.slot_of_as::<AnyShape>(line)
    }

    /// [`Cache::slot_hit_as`] for any shape.
    #[inline]
    pub fn slot_hit(&mut self, slot: usize, write: bool) {
        self.slot_hit_as::<AnyShape>(slot, write)
    }

    /// [`Cache::slot_dirty_as`] for any shape.
    #[inline]
    pub fn slot_dirty(&self, slot: usize) -> bool {
        self.slot_dirty_as::<AnyShape>(slot)
    }

    /// [`Cache::slot_set_dirty_as`] for any shape.
    #[inline]
    pub fn slot_set_dirty(&mut self, slot: usize, dirty: bool) {
        self.slot_set_dirty_as::<AnyShape>(slot, dirty)
    }

    /// [`Cache::slot_sharers_as`] for any shape.
    #[inline]
    pub fn slot_sharers(&self, slot: usize) -> u64 {
        self.slot_sharers_as::<AnyShape>(slot)
    }

    /// [`Cache::slot_set_sharers_as`] for any shape.
    #[inline]
    pub fn slot_set_sharers(&mut self, slot: usize, sharers: u64) {
        self.slot_set_sharers_as::<AnyShape>(slot, sharers)
    }

    /// [`Cache::insert_absent_as`] for any shape.
    #[inline]
    pub fn insert_absent(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<Evicted> {
        self.insert_absent_as::<AnyShape>(line, dirty, sharers)
    }

    /// [`Cache::slot_and_split_as`] for any shape.
    #[inline]
    pub fn slot_and_split(&self, line: u64) -> (Option<usize>, Split) {
        self.slot_and_split_as::<AnyShape>(line)
    }

    /// [`Cache::insert_absent_at_as`] for any shape.
    #[inline]
    pub fn insert_absent_at(
        &mut self,
        line: u64,
        at: Split,
        dirty: bool,
        sharers: u64,
        aux: u32,
    ) -> (Option<Evicted>, usize) {
        self.insert_absent_at_as::<AnyShape>(line, at, dirty, sharers, aux)
    }

    /// [`Cache::split_of_as`] for any shape.
    #[inline]
    pub fn split_of(&self, line: u64) -> Split {
        self.split_of_as::<AnyShape>(line)
    }

    /// [`Cache::set_dirty_hinted_as`] for any shape.
    #[inline]
    pub fn set_dirty_hinted(&mut self, line: u64, hint: u32, dirty: bool) -> bool {
        self.set_dirty_hinted_as::<AnyShape>(line, hint, dirty)
    }

    /// [`Cache::contains_as`] for any shape.
    #[inline]
    pub fn contains(&self, line: u64) -> bool {
        self.contains_as::<AnyShape>(line)
    }

    /// [`Cache::insert_as`] for any shape.
    #[inline]
    pub fn insert(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<Evicted> {
        self.insert_as::<AnyShape>(line, dirty, sharers)
    }

    /// [`Cache::invalidate_as`] for any shape.
    #[inline]
    pub fn invalidate(&mut self, line: u64) -> Option<(bool, u64)> {
        self.invalidate_as::<AnyShape>(line)
    }

    /// [`Cache::sharers_as`] for any shape.
    #[inline]
    pub fn sharers(&self, line: u64) -> Option<u64> {
        self.sharers_as::<AnyShape>(line)
    }

    /// [`Cache::set_sharers_as`] for any shape.
    #[inline]
    pub fn set_sharers(&mut self, line: u64, sharers: u64) -> bool {
        self.set_sharers_as::<AnyShape>(line, sharers)
    }

    /// [`Cache::set_dirty_as`] for any shape.
    #[inline]
    pub fn set_dirty(&mut self, line: u64, dirty: bool) -> bool {
        self.set_dirty_as::<AnyShape>(line, dirty)
    }

    /// [`Cache::is_dirty_as`] for any shape.
    #[inline]
    pub fn is_dirty(&self, line: u64) -> Option<bool> {
        self.is_dirty_as::<AnyShape>(line)
    }
}

#[cfg(test)]
mod tests;
