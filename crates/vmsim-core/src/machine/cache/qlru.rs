//! QLRU ("quad-age LRU") replacement, the family of policies that Abel and
//! Reineke measured on the L2 and L3 caches of Intel cores, and the
//! adaptive (set-dueling) form of it that Intel's L3s use.
//!
//! # The family
//!
//! Every way of a set has a 2-bit age, 0 (keep) to 3 (evict first); an
//! empty cache starts with every age at 3. A variant is named as in
//! Abel & Reineke's nanoBench (cache simulator `cacheSim.py` of
//! github.com/andreas-abel/nanoBench, tools/CacheAnalyzer, and
//! uops.info/cache.html), `QLRU_Hxy_Mz_Rr_Uu[_UMO]`:
//!
//! * `H` (hit): the age a hit leaves, by the age before it, for ages
//!   3, 2, 1, 0: `H21` 2 1 0 0, `H20` 2 0 0 0, `H11` 1 1 0 0, `H10` 1 0 0 0,
//!   `H00` 0 0 0 0.
//! * `M` (miss): the age a filled line starts with, 0 to 3.
//! * `R` (replace): which way a miss fills. `R0`: the first empty way, else
//!   the first way of age 3. `R1`: the first empty way, else the first way
//!   of age 3, else way 0. `R2`: the *last* empty way, else the first way of
//!   age 3.
//! * `U` (update), after every access, excluding nothing or the accessed
//!   way: `U0`: add to every age what brings the largest to 3. `U1`: the
//!   same over the other ways only (the accessed way keeps its age). `U2`:
//!   if no way has age 3, add 1 to every age. `U3`: if no way has age 3,
//!   add 1 to every other way's age.
//! * `_UMO` ("update on miss only"): the update runs on a miss only, before
//!   the way to fill is chosen, and excludes no way; a hit runs none.
//!
//! `R0` and `R2` are defined only with `U0` and `U1`, which leave a way of
//! age 3 after every access (nanoBench omits the other combinations), but
//! for `U1` in a one-way cache, which has no other way to age (nanoBench's
//! `U1` is undefined there): its one way is replaced. The
//! ages of empty ways take part in the update like any other: a line's
//! invalidation leaves its way's age as it was, as in nanoBench's model
//! (`flush` empties the way only).
//!
//! # The adaptive policy
//!
//! Intel's L3s since Ivy Bridge duel two insertion policies (set dueling:
//! Qureshi, Jaleel, Patt, Steely & Emer, "Adaptive insertion policies for
//! high performance caching", ISCA 2007). A few fixed *leader* sets always
//! use the base QLRU variant, a few always a *bimodal* variant of it, and
//! the others (*followers*) use whichever of the two misses less, as a
//! saturating selector counts: a miss in a base leader counts up, a miss in
//! a bimodal leader down, and followers insert bimodally when the counter
//! is at or above its midpoint. The bimodal variant differs from the base
//! in the insertion age alone: age 3, except once in 16 fills (a draw from
//! the cache's seeded generator) the base's age. Which sets lead is a
//! [`DuelLayout`]. What of this was measured, and what is a judgement, is
//! set out in docs/notes/2026-replacement-sources.md.
//!
//! # Cost
//!
//! The ages are the low bits of the meta bytes that hold SRRIP's RRPVs, and
//! are scanned with the same branch-free compare (`state_mask`). A miss
//! scans them once: the fill's update reuses the victim's scan. Under `U0`
//! and `U1` a hit scans nothing unless it takes a way off age 3 (see
//! `qlru_after_access`); under `U2` and `U3` it scans once.

/// Largest age.
pub(super) const AGE_MAX: u8 = 3;
/// [`Cache::qlru_victim`] chose an empty way without scanning the ages.
pub(super) const NOT_SCANNED: u64 = u64::MAX;
/// Saturating 10-bit selector of the adaptive policies, as DIP's and
/// DRRIP's (Qureshi et al. 2007; Jaleel et al. 2010): no measurement of
/// Intel's counter was found.
pub(super) const QPSEL_MAX: u16 = 1023;
pub(super) const QPSEL_MID: u16 = 512;
/// The bimodal variant inserts at the base's age once in this many fills
/// (the form of nanoBench's randomised insertions, `MRxy`: `y` once in 16,
/// else `x`).
pub(super) const BIMODAL_BASE_ONE_IN: u64 = 16;

/// Hit function (`H` in the variant's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QlruHit {
    H21,
    H20,
    H11,
    H10,
    H00,
}

impl QlruHit {
    pub const ALL: [QlruHit; 5] = [
        QlruHit::H21,
        QlruHit::H20,
        QlruHit::H11,
        QlruHit::H10,
        QlruHit::H00,
    ];

    /// The age a hit leaves, indexed by the age before it (0..=3).
    pub const fn table(self) -> [u8; 4] {
        match self {
            QlruHit::H21 => [0, 0, 1, 2],
            QlruHit::H20 => [0, 0, 0, 2],
            QlruHit::H11 => [0, 0, 1, 1],
            QlruHit::H10 => [0, 0, 0, 1],
            QlruHit::H00 => [0, 0, 0, 0],
        }
    }

    /// The age a hit leaves, from the age before it (0..=3).
    #[inline(always)]
    pub(super) const fn after(self, age: u8) -> u8 {
        // The tables packed two bits an age, one byte a function.
        const PACKED: [u8; 5] = {
            let mut p = [0u8; 5];
            let mut i = 0;
            while i < 5 {
                let t = QlruHit::ALL[i].table();
                p[i] = t[0] | t[1] << 2 | t[2] << 4 | t[3] << 6;
                i += 1;
            }
            p
        };
        (PACKED[self as usize] >> (2 * age)) & AGE_MAX
    }

    pub(super) const fn name(self) -> &'static str {
        match self {
            QlruHit::H21 => "H21",
            QlruHit::H20 => "H20",
            QlruHit::H11 => "H11",
            QlruHit::H10 => "H10",
            QlruHit::H00 => "H00",
        }
    }
}

/// Replacement function (`R` in the variant's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QlruRepl {
    R0,
    R1,
    R2,
}

/// Update function (`U` in the variant's name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QlruUpdate {
    U0,
    U1,
    U2,
    U3,
}

/// One deterministic QLRU variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Qlru {
    pub hit: QlruHit,
    /// Age of a filled line (`M`), 0..=3.
    pub insert: u8,
    pub repl: QlruRepl,
    pub update: QlruUpdate,
    /// `_UMO`: update on a miss only, before the choice of the way.
    pub update_on_miss_only: bool,
}

impl Qlru {
    pub const fn new(
        hit: QlruHit,
        insert: u8,
        repl: QlruRepl,
        update: QlruUpdate,
        update_on_miss_only: bool,
    ) -> Qlru {
        Qlru {
            hit,
            insert,
            repl,
            update,
            update_on_miss_only,
        }
    }

    /// Whether nanoBench defines the variant: an age of at most 3, and `R0`
    /// and `R2` only with `U0` or `U1`.
    pub const fn is_defined(&self) -> bool {
        self.insert <= AGE_MAX
            && !(matches!(self.repl, QlruRepl::R0 | QlruRepl::R2)
                && matches!(self.update, QlruUpdate::U2 | QlruUpdate::U3))
    }

    /// The variant's name as nanoBench writes it, e.g. `QLRU_H11_M1_R0_U0`.
    pub fn name(&self) -> String {
        format!(
            "QLRU_{}_M{}_R{}_U{}{}",
            self.hit.name(),
            self.insert,
            self.repl as u8,
            self.update as u8,
            if self.update_on_miss_only { "_UMO" } else { "" }
        )
    }
}

/// Which sets lead an adaptive policy's duel; every other set follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DuelLayout {
    /// Ivy Bridge / Haswell client L3s: in the first 2048 sets (the
    /// 2048-set first slice), sets 512..=575 lead with the base variant and
    /// sets 768..=831 with the bimodal one.
    Ivb,
    /// Skylake-family client L3s: in every group of 1024 sets (a slice),
    /// with `i` the set's index in its group, `a = i >> 5` and
    /// `b = i & 31`, the sets with `a == b` and bit 1 of `b` clear (0, 33,
    /// 132, 165, ..., 957) lead with the base variant, and those with
    /// `a ^ b == 2` and bit 1 of `b` set (2, 35, 134, 167, ..., 959) with
    /// the bimodal one.
    Skl,
}

/// A set's part in the duel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    BaseLeader,
    BimodalLeader,
    Follower,
}

impl DuelLayout {
    #[inline(always)]
    pub(super) fn role(self, set: usize) -> Role {
        match self {
            DuelLayout::Ivb => match set >> 6 {
                8 => Role::BaseLeader,
                12 => Role::BimodalLeader,
                _ => Role::Follower,
            },
            DuelLayout::Skl => {
                let i = set & 1023;
                let (a, b) = (i >> 5, i & 31);
                if b & 2 == 0 && a == b {
                    Role::BaseLeader
                } else if b & 2 != 0 && a ^ b == 2 {
                    Role::BimodalLeader
                } else {
                    Role::Follower
                }
            }
        }
    }
}

/// A QLRU replacement policy: a variant, duelling with its bimodal form
/// when `duel` is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QlruPolicy {
    pub base: Qlru,
    pub duel: Option<DuelLayout>,
}
