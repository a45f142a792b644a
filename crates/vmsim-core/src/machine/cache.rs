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
//!   used) or the 2-bit SRRIP RRPV;
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
//!   numbered invalid way); only a full set evicts a valid line, and then
//!   exactly one line is returned as [`Evicted`].
//! * Everything is deterministic: the `Random` policy draws from a small
//!   xorshift64* generator stored in the cache and seeded from the `seed`
//!   given to [`Cache::new`] (through splitmix64). It draws only when the set
//!   is full, so the sequence of victims depends only on the seed and on the
//!   sequence of operations.
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
}

impl Replacement {
    /// Every policy, in the order of their names in [`Replacement::NAMES`].
    pub const ALL: [Replacement; 5] = [
        Replacement::Lru,
        Replacement::TreePlru,
        Replacement::Srrip,
        Replacement::Drrip,
        Replacement::Random,
    ];
    /// Accepted names, as parsed by `FromStr` and written by serde.
    pub const NAMES: [&'static str; 5] = ["lru", "tree-plru", "srrip", "drrip", "random"];

    /// The policy's name as accepted by `FromStr`.
    pub fn name(self) -> &'static str {
        match self {
            Replacement::Lru => "lru",
            Replacement::TreePlru => "tree-plru",
            Replacement::Srrip => "srrip",
            Replacement::Drrip => "drrip",
            Replacement::Random => "random",
        }
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
    #[inline(always)]
    fn div_rem(&self, line: u64) -> (usize, u64) {
        if self.pow2 {
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
    /// a set's ways, valid or not, are a permutation of `0..ways`) or the
    /// SRRIP RRPV (0..=3).
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
    /// DRRIP policy selector: SRRIP-leader misses count up, BRRIP-leader misses down;
    /// followers insert as BRRIP when it is at or above the midpoint.
    psel: u16,
    /// Valid lines.
    valid: u64,
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
        let plru_word = ways + ways.div_ceil(4);
        let words = plru_word
            + if policy == Replacement::TreePlru {
                2
            } else {
                0
            };
        // Whole 16-byte chunks of meta bytes are compared at once
        // (`state_mask`): the set's storage extends that far past the tags.
        let words = words.max(ways + 4 * ways.div_ceil(WORDS_PER_BLOCK));
        let blocks_per_set = words.div_ceil(WORDS_PER_BLOCK);
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
            valid: 0,
            aux: Vec::new(),
            evicted_aux: NO_AUX,
        };
        if policy == Replacement::TreePlru && leaves <= 8 {
            c.plru_victims = (0..256u64).map(|b| c.plru_walk(b) as u8).collect();
        }
        c.reset();
        Ok(c)
    }

    /// Empties every set and resets the replacement state.
    fn reset(&mut self) {
        let ways = self.ways;
        let policy = self.policy;
        for set in 0..self.geom.sets as usize {
            self.tags_mut(set).fill(INVALID_TAG);
            let m = self.meta_mut(set);
            match policy {
                Replacement::Lru => {
                    for (i, m) in m.iter_mut().enumerate() {
                        *m = (i % ways) as u8;
                    }
                }
                Replacement::Srrip | Replacement::Drrip => m.fill(RRPV_MAX),
                Replacement::TreePlru | Replacement::Random => m.fill(0),
            }
            if policy == Replacement::TreePlru {
                self.set_plru(set, 0);
            }
        }
        self.psel = PSEL_MID;
    }

    /// The words of `set`'s blocks.
    #[inline(always)]
    fn words(&self, set: usize) -> &[u32] {
        let bps = self.blocks_per_set;
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
    fn words_mut(&mut self, set: usize) -> &mut [u32] {
        let bps = self.blocks_per_set;
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
    fn tags(&self, set: usize) -> &[u32] {
        &self.words(set)[..self.ways]
    }

    #[inline(always)]
    fn tags_mut(&mut self, set: usize) -> &mut [u32] {
        let ways = self.ways;
        &mut self.words_mut(set)[..ways]
    }

    /// The meta bytes of `set`, one per way.
    #[inline(always)]
    fn meta(&self, set: usize) -> &[u8] {
        let (ways, w) = (self.ways, self.words(set));
        // SAFETY: a u32 slice viewed as its bytes (u8 has no alignment or validity needs).
        let bytes = unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), w.len() * 4) };
        &bytes[ways * 4..ways * 5]
    }

    #[inline(always)]
    fn meta_mut(&mut self, set: usize) -> &mut [u8] {
        let ways = self.ways;
        let w = self.words_mut(set);
        // SAFETY: as in `meta`; the borrow is exclusive.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast::<u8>(), w.len() * 4) };
        &mut bytes[ways * 4..ways * 5]
    }

    #[inline(always)]
    fn plru(&self, set: usize) -> u64 {
        let w = &self.words(set)[self.plru_word..self.plru_word + 2];
        w[0] as u64 | (w[1] as u64) << 32
    }

    #[inline(always)]
    fn set_plru(&mut self, set: usize, bits: u64) {
        let p = self.plru_word;
        let w = &mut self.words_mut(set)[p..p + 2];
        w[0] = bits as u32;
        w[1] = (bits >> 32) as u32;
    }

    /// Set and stored tag of `line`; the tag is `None` when the quotient does
    /// not fit a stored tag (such a line is never present).
    #[inline(always)]
    fn split(&self, line: u64) -> (usize, Option<u32>) {
        let (set, q) = self.index.div_rem(line);
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
    fn match_mask(&self, set: usize, tag: u32) -> u64 {
        let w = self.words(set);
        let mut m = 0u64;
        // `words` holds at least `ways.div_ceil(16)` whole blocks (the tags
        // come first in a set's blocks).
        for (c, block) in w
            .chunks_exact(WORDS_PER_BLOCK)
            .take(self.tag_blocks)
            .enumerate()
        {
            let block: &[u32; WORDS_PER_BLOCK] = block.try_into().expect("whole block");
            m |= (eq_mask(block, tag) as u64) << (c * WORDS_PER_BLOCK);
        }
        m & self.way_bits
    }

    /// Bit `w` set for each way `w` of `set` whose policy state is `state`
    /// (a branch-free scan, as in [`Cache::match_mask`]).
    #[inline(always)]
    fn state_mask(&self, set: usize, state: u8) -> u64 {
        let w = self.words(set);
        // SAFETY: a u32 slice viewed as its bytes, as in `meta`.
        let bytes = unsafe { std::slice::from_raw_parts(w.as_ptr().cast::<u8>(), w.len() * 4) };
        // The meta bytes start after the tags; a set's blocks extend at least
        // `16 * tag_blocks` bytes past that (see `Cache::new`).
        let meta = &bytes[self.ways * 4..self.ways * 4 + WORDS_PER_BLOCK * self.tag_blocks];
        let mut m = 0u64;
        for (c, chunk) in meta.chunks_exact(16).enumerate() {
            let chunk: &[u8; 16] = chunk.try_into().expect("16 bytes");
            m |= (state_eq_mask(chunk, state) as u64) << (c * 16);
        }
        m & self.way_bits
    }

    /// Way of `set` holding stored tag `tag`, if any.
    #[inline(always)]
    fn find(&self, set: usize, tag: Option<u32>) -> Option<usize> {
        let m = self.match_mask(set, tag?);
        (m != 0).then(|| m.trailing_zeros() as usize)
    }

    /// `(set, way)` holding `line`, if any.
    #[inline(always)]
    fn lookup(&self, line: u64) -> Option<(usize, usize)> {
        let (set, tag) = self.split(line);
        self.find(set, tag).map(|w| (set, w))
    }

    /// Make `way` the most recently used way of its set (LRU).
    #[inline(always)]
    fn lru_promote(&mut self, set: usize, way: usize) {
        let m = self.meta_mut(set);
        let rank = m[way] & STATE;
        for m in m.iter_mut() {
            *m += ((*m & STATE) < rank) as u8;
        }
        m[way] &= DIRTY;
    }

    /// Replacement update on a hit.
    #[inline(always)]
    fn promote(&mut self, set: usize, way: usize) {
        match self.policy {
            Replacement::Lru => self.lru_promote(set, way),
            Replacement::TreePlru => self.plru_promote(set, way),
            Replacement::Srrip | Replacement::Drrip => self.meta_mut(set)[way] &= DIRTY,
            Replacement::Random => {}
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
    fn on_fill(&mut self, set: usize, way: usize) {
        match self.policy {
            Replacement::Lru => self.lru_promote(set, way),
            Replacement::TreePlru => self.plru_promote(set, way),
            Replacement::Srrip => {
                let m = &mut self.meta_mut(set)[way];
                *m = (*m & DIRTY) | RRPV_INSERT;
            }
            Replacement::Drrip => {
                let r = self.drrip_insert(set);
                let m = &mut self.meta_mut(set)[way];
                *m = (*m & DIRTY) | r;
            }
            Replacement::Random => {}
        }
    }

    /// Point every node on `way`'s path away from it.
    #[inline(always)]
    fn plru_promote(&mut self, set: usize, way: usize) {
        let (and, or) = self.plru_touch[way];
        let bits = (self.plru(set) & and) | or;
        self.set_plru(set, bits);
    }

    /// Way chosen by the PLRU tree (skipping subtrees without existing ways).
    #[inline(always)]
    fn plru_victim(&self, set: usize) -> usize {
        let bits = self.plru(set);
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
    fn victim(&mut self, set: usize) -> usize {
        // A full cache has no invalid way in any set: skip the scan.
        if self.valid == self.geom.lines() {
            return self.victim_of_full(set);
        }
        match self.match_mask(set, INVALID_TAG) {
            0 => self.victim_of_full(set),
            m => m.trailing_zeros() as usize,
        }
    }

    /// Way to evict from the full `set`, by the policy.
    #[inline(always)]
    fn victim_of_full(&mut self, set: usize) -> usize {
        match self.policy {
            Replacement::Lru => first_way(self.state_mask(set, self.ways as u8 - 1)),
            Replacement::TreePlru => self.plru_victim(set),
            Replacement::Srrip | Replacement::Drrip => {
                // A way already at the distant RRPV: the maximum is RRPV_MAX, so
                // nothing ages and the first such way is the victim.
                let at_max = self.state_mask(set, RRPV_MAX);
                if at_max != 0 {
                    return first_way(at_max);
                }
                let m = self.meta_mut(set);
                let max = m.iter().fold(0, |a, &v| a.max(v & STATE));
                if max >= RRPV_MAX {
                    return 0;
                }
                // Ageing every way by `age` brings exactly the ways at `max`
                // to RRPV_MAX: the first of them is the victim.
                let age = RRPV_MAX - max;
                m.iter_mut().for_each(|v| *v += age);
                first_way(self.state_mask(set, RRPV_MAX))
            }
            Replacement::Random => {
                let r = self.next_random();
                (((r >> 32) * self.ways as u64) >> 32) as usize
            }
        }
    }

    /// Put `tag` into `way` of `set`, returning the valid line it replaces.
    #[inline(always)]
    fn fill(
        &mut self,
        set: usize,
        way: usize,
        tag: u32,
        dirty: bool,
        sharers: u64,
        aux: u32,
    ) -> Option<Evicted> {
        let old = self.tags(set)[way];
        let s = set * self.ways + way;
        if !self.aux.is_empty() {
            self.evicted_aux = std::mem::replace(&mut self.aux[s], aux);
        }
        let ev = if old != INVALID_TAG {
            Some(Evicted {
                line: self.line_of(set, old),
                dirty: self.meta(set)[way] & DIRTY != 0,
                sharers: self.sh(s),
            })
        } else {
            self.valid += 1;
            None
        };
        self.tags_mut(set)[way] = tag;
        let m = &mut self.meta_mut(set)[way];
        *m = (*m & STATE) | if dirty { DIRTY } else { 0 };
        self.set_sh(s, sharers);
        self.on_fill(set, way);
        ev
    }

    /// Look up `line` (a line address = byte address >> 6). On a hit, update
    /// the replacement state (promote), OR `write` into the line's dirty bit
    /// and return true. A miss changes nothing and returns false.
    #[inline]
    pub fn access(&mut self, line: u64, write: bool) -> bool {
        match self.lookup(line) {
            Some((set, way)) => {
                self.meta_mut(set)[way] |= if write { DIRTY } else { 0 };
                self.promote(set, way);
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
        let (set, tag) = self.split(line);
        match self.find(set, tag) {
            Some(way) => {
                self.meta_mut(set)[way] |= if write { DIRTY } else { 0 };
                self.or_sh(set * self.ways + way, sharers);
                self.promote(set, way);
                (true, None)
            }
            None => {
                let tag = self.tag_of(line, tag);
                let way = self.victim(set);
                (false, self.fill(set, way, tag, write, sharers, NO_AUX))
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
    pub fn prefetch_side(&self, set: usize) {
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
            let first = set * self.ways;
            range(&self.sharers, first, self.ways);
            range(&self.aux, first, self.ways);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = set;
    }

    /// [`Cache::prefetch_side`] of the set of `line`.
    #[inline(always)]
    pub fn prefetch_side_of(&self, line: u64) {
        self.prefetch_side(self.split(line).0);
    }

    #[inline(always)]
    fn sh(&self, i: usize) -> u64 {
        if self.sharers.is_empty() {
            0
        } else {
            self.sharers[i]
        }
    }

    #[inline(always)]
    fn set_sh(&mut self, i: usize, v: u64) {
        if !self.sharers.is_empty() {
            self.sharers[i] = v;
        }
    }

    #[inline(always)]
    fn or_sh(&mut self, i: usize, v: u64) {
        if !self.sharers.is_empty() {
            self.sharers[i] |= v;
        }
    }

    #[inline(always)]
    fn unslot(&self, slot: usize) -> (usize, usize) {
        let (set, way) = (slot >> SLOT_SHIFT, slot & ((1 << SLOT_SHIFT) - 1));
        // Slots come from `slot_of`; a foreign one must not reach `words`.
        assert!(
            set < self.geom.sets as usize && way < self.ways,
            "bad slot {slot}"
        );
        (set, way)
    }

    /// Slot-level access for callers that look a line up once and then act on
    /// it: `slot_of` finds the slot, the `slot_*` methods read or change it.
    /// A slot stays valid until the next insert or invalidate on this cache.
    #[inline]
    pub fn slot_of(&self, line: u64) -> Option<usize> {
        self.lookup(line).map(|(set, way)| set << SLOT_SHIFT | way)
    }

    /// Replacement promote of a hit slot, ORing `write` into its dirty bit.
    #[inline]
    pub fn slot_hit(&mut self, slot: usize, write: bool) {
        let (set, way) = self.unslot(slot);
        self.meta_mut(set)[way] |= if write { DIRTY } else { 0 };
        self.promote(set, way);
    }

    #[inline]
    pub fn slot_dirty(&self, slot: usize) -> bool {
        let (set, way) = self.unslot(slot);
        self.meta(set)[way] & DIRTY != 0
    }

    #[inline]
    pub fn slot_set_dirty(&mut self, slot: usize, dirty: bool) {
        let (set, way) = self.unslot(slot);
        let m = &mut self.meta_mut(set)[way];
        if dirty {
            *m |= DIRTY;
        } else {
            *m &= !DIRTY;
        }
    }

    #[inline]
    pub fn slot_sharers(&self, slot: usize) -> u64 {
        let (set, way) = self.unslot(slot);
        self.sh(set * self.ways + way)
    }

    #[inline]
    pub fn slot_set_sharers(&mut self, slot: usize, sharers: u64) {
        let (set, way) = self.unslot(slot);
        self.set_sh(set * self.ways + way, sharers);
    }

    /// Insert a line the caller has just found absent (skips the lookup).
    #[inline]
    pub fn insert_absent(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<Evicted> {
        debug_assert!(self.lookup(line).is_none());
        let (set, tag) = self.split(line);
        let tag = self.tag_of(line, tag);
        let way = self.victim(set);
        self.fill(set, way, tag, dirty, sharers, NO_AUX)
    }

    /// The set and stored tag of `line` and the slot holding it, if any:
    /// [`Cache::slot_of`] that also hands back the split for a later
    /// [`Cache::insert_absent_at`].
    #[inline]
    pub fn slot_and_split(&self, line: u64) -> (Option<usize>, Split) {
        let (set, tag) = self.split(line);
        // A miss inserts next and reads the victim's sharers there.
        self.prefetch_side(set);
        let slot = self.find(set, tag).map(|way| set << SLOT_SHIFT | way);
        (slot, Split { set, tag })
    }

    /// [`Cache::insert_absent`] with the split of `line` already computed,
    /// storing `aux` with the line (kept only by a cache made
    /// [`Cache::with_aux`]). Returns the evicted line and the new line's slot.
    #[inline]
    pub fn insert_absent_at(
        &mut self,
        line: u64,
        at: Split,
        dirty: bool,
        sharers: u64,
        aux: u32,
    ) -> (Option<Evicted>, usize) {
        debug_assert!(self.lookup(line).is_none());
        debug_assert_eq!(self.split(line), (at.set, at.tag));
        let tag = self.tag_of(line, at.tag);
        let way = self.victim(at.set);
        let ev = self.fill(at.set, way, tag, dirty, sharers, aux);
        (ev, at.set << SLOT_SHIFT | way)
    }

    /// The split of `line` (see [`Split`]).
    #[inline]
    pub fn split_of(&self, line: u64) -> Split {
        let (set, tag) = self.split(line);
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
    pub fn set_dirty_hinted(&mut self, line: u64, hint: u32, dirty: bool) -> bool {
        if hint != NO_AUX {
            let (set, way) = (
                hint as usize >> SLOT_SHIFT,
                hint as usize & ((1 << SLOT_SHIFT) - 1),
            );
            if set < self.geom.sets as usize && way < self.ways {
                let t = self.tags(set)[way];
                if t != INVALID_TAG && self.line_of(set, t) == line {
                    let m = &mut self.meta_mut(set)[way];
                    *m = (*m & STATE) | if dirty { DIRTY } else { 0 };
                    return true;
                }
            }
        }
        self.set_dirty(line, dirty)
    }

    /// Probe without changing replacement state.
    #[inline]
    pub fn contains(&self, line: u64) -> bool {
        self.lookup(line).is_some()
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
    pub fn insert(&mut self, line: u64, dirty: bool, sharers: u64) -> Option<Evicted> {
        let (set, tag) = self.split(line);
        if let Some(way) = self.find(set, tag) {
            self.meta_mut(set)[way] |= if dirty { DIRTY } else { 0 };
            self.set_sh(set * self.ways + way, sharers);
            self.promote(set, way);
            return None;
        }
        let tag = self.tag_of(line, tag);
        let way = self.victim(set);
        self.fill(set, way, tag, dirty, sharers, NO_AUX)
    }

    /// Remove `line` if present; returns its `(dirty, sharers)`.
    #[inline]
    pub fn invalidate(&mut self, line: u64) -> Option<(bool, u64)> {
        let (set, way) = self.lookup(line)?;
        let s = set * self.ways + way;
        let out = (self.meta(set)[way] & DIRTY != 0, self.sh(s));
        self.tags_mut(set)[way] = INVALID_TAG;
        self.meta_mut(set)[way] &= STATE;
        self.set_sh(s, 0);
        self.valid -= 1;
        Some(out)
    }

    /// Sharers of `line`, `None` if absent.
    #[inline]
    pub fn sharers(&self, line: u64) -> Option<u64> {
        self.lookup(line)
            .map(|(set, way)| self.sh(set * self.ways + way))
    }

    /// Replace the sharers of `line`; false if absent.
    #[inline]
    pub fn set_sharers(&mut self, line: u64, sharers: u64) -> bool {
        match self.lookup(line) {
            Some((set, way)) => {
                self.set_sh(set * self.ways + way, sharers);
                true
            }
            None => false,
        }
    }

    /// OR `bits` into the sharers of `line`; false if absent.
    #[inline]
    pub fn or_sharers(&mut self, line: u64, bits: u64) -> bool {
        match self.lookup(line) {
            Some((set, way)) => {
                self.or_sh(set * self.ways + way, bits);
                true
            }
            None => false,
        }
    }

    /// Set or clear the dirty bit of `line`; false if absent. Does not
    /// change replacement state.
    #[inline]
    pub fn set_dirty(&mut self, line: u64, dirty: bool) -> bool {
        match self.lookup(line) {
            Some((set, way)) => {
                let m = &mut self.meta_mut(set)[way];
                *m = (*m & STATE) | if dirty { DIRTY } else { 0 };
                true
            }
            None => false,
        }
    }

    /// Dirty bit of `line`, `None` if absent.
    #[inline]
    pub fn is_dirty(&self, line: u64) -> Option<bool> {
        self.lookup(line)
            .map(|(set, way)| self.meta(set)[way] & DIRTY != 0)
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
                let t = self.tags(set)[way];
                (t != INVALID_TAG).then(|| {
                    (
                        self.line_of(set, t),
                        self.meta(set)[way] & DIRTY != 0,
                        self.sh(set * self.ways + way),
                    )
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
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
}
