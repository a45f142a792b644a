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

use super::{Cache, Shape, DIRTY, STATE};

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
    const fn after(self, age: u8) -> u8 {
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

    const fn name(self) -> &'static str {
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

impl Cache {
    /// The QLRU policy of a cache whose policy is a QLRU one: a constant
    /// when the shape fixes the policy.
    #[inline(always)]
    pub(super) fn qlru_of<S: Shape>(&self) -> QlruPolicy {
        match S::POLICY {
            Some(p) => match p.qlru() {
                Some(q) => q,
                None => self.qlru,
            },
            None => self.qlru,
        }
    }

    /// Replacement update on a hit of `way`.
    #[inline(always)]
    pub(super) fn qlru_hit<S: Shape>(&mut self, set: usize, way: usize) {
        let q = self.qlru_of::<S>().base;
        let m = &mut self.meta_mut::<S>(set)[way];
        let (old, new) = (*m & STATE, q.hit.after(*m & STATE));
        *m = (*m & DIRTY) | new;
        if !q.update_on_miss_only {
            self.qlru_after_access::<S>(set, q.update, way, old, new);
        }
    }

    /// The update after an access of `way` that changed its age from `old`
    /// to `new`. Under `U0` and `U1` some way has age 3 before every access
    /// (their update leaves one; an empty cache has all), so the update can
    /// do something only when the access took `way` off age 3 (`U0`) or
    /// found it there (`U1`, which needs a way of age 3 among the others):
    /// otherwise a way of age 3 is left where it must be, and the set is not
    /// even scanned. `U2` and `U3` leave no such way, and always look.
    #[inline(always)]
    fn qlru_after_access<S: Shape>(
        &mut self,
        set: usize,
        u: QlruUpdate,
        way: usize,
        old: u8,
        new: u8,
    ) {
        let may_act = match u {
            QlruUpdate::U0 => old == AGE_MAX && new != AGE_MAX,
            QlruUpdate::U1 => old == AGE_MAX,
            QlruUpdate::U2 | QlruUpdate::U3 => true,
        };
        if may_act {
            self.qlru_update::<S>(set, u, Some(way));
        }
    }

    /// Replacement update on a fill of `way`, right after
    /// [`Cache::qlru_victim`] chose it.
    #[inline(always)]
    pub(super) fn qlru_fill<S: Shape>(&mut self, set: usize, way: usize) {
        let q = self.qlru_of::<S>();
        let age = match q.duel {
            None => q.base.insert,
            Some(layout) => self.qlru_duel_insert(set, layout, q.base.insert),
        };
        let m = &mut self.meta_mut::<S>(set)[way];
        *m = (*m & DIRTY) | age;
        if q.base.update_on_miss_only {
            return;
        }
        // The other ways of age 3: known from the victim's scan when the
        // set was full, else looked up.
        let others = match self.qlru_others_at_max {
            NOT_SCANNED => self.state_mask::<S>(set, AGE_MAX) & !(1u64 << way),
            m => m,
        };
        // Whether the update acts: no way (U0, U2, U3) or no other way (U1)
        // is left at age 3.
        let acts = others == 0 && (age != AGE_MAX || q.base.update == QlruUpdate::U1);
        if acts {
            self.qlru_update::<S>(set, q.base.update, Some(way));
        }
    }

    /// The adaptive policy on a fill of `set`: train the selector in a
    /// leader set, then the age to insert with.
    #[inline(always)]
    fn qlru_duel_insert(&mut self, set: usize, layout: DuelLayout, base: u8) -> u8 {
        let bimodal = match layout.role(set) {
            Role::BaseLeader => {
                self.psel = (self.psel + 1).min(QPSEL_MAX);
                false
            }
            Role::BimodalLeader => {
                self.psel = self.psel.saturating_sub(1);
                true
            }
            Role::Follower => self.psel >= QPSEL_MID,
        };
        if bimodal && !self.next_random().is_multiple_of(BIMODAL_BASE_ONE_IN) {
            AGE_MAX
        } else {
            base
        }
    }

    /// The way a miss in `set` fills (running the update first under `_UMO`).
    #[inline(always)]
    pub(super) fn qlru_victim<S: Shape>(&mut self, set: usize) -> usize {
        let q = self.qlru_of::<S>().base;
        if q.update_on_miss_only {
            self.qlru_update::<S>(set, q.update, None);
        }
        // A full cache has no empty way in any set: skip the scan.
        if self.valid != self.lines {
            let empty = self.match_mask::<S>(set, super::INVALID_TAG);
            if empty != 0 {
                self.qlru_others_at_max = NOT_SCANNED;
                return if q.repl == QlruRepl::R2 {
                    63 - empty.leading_zeros() as usize
                } else {
                    empty.trailing_zeros() as usize
                };
            }
        }
        // R0 and R2 always find a way of age 3 (their updates leave one, but
        // for U1 in a one-way set, which has no other way and only way 0 to
        // replace); R1 falls back to way 0.
        let at_max = self.state_mask::<S>(set, AGE_MAX);
        debug_assert!(at_max != 0 || q.repl == QlruRepl::R1 || self.ways_of::<S>() == 1);
        let way = super::first_way(at_max);
        self.qlru_others_at_max = at_max & !(1u64 << way);
        way
    }

    /// The update function `u`, after an access of `accessed` (none under
    /// `_UMO`).
    #[inline(always)]
    fn qlru_update<S: Shape>(&mut self, set: usize, u: QlruUpdate, accessed: Option<usize>) {
        let skip = accessed.unwrap_or(usize::MAX);
        // Nonzero when a way of age 3 is left (another way, for U1).
        let at_max = self.state_mask::<S>(set, AGE_MAX);
        let left = if u == QlruUpdate::U1 && skip != usize::MAX {
            at_max & !(1u64 << skip)
        } else {
            at_max
        };
        match u {
            QlruUpdate::U0 | QlruUpdate::U1 => {
                if left != 0 {
                    return;
                }
                let skip = if u == QlruUpdate::U1 {
                    skip
                } else {
                    usize::MAX
                };
                let m = self.meta_mut::<S>(set);
                let max = m
                    .iter()
                    .enumerate()
                    .filter(|&(w, _)| w != skip)
                    .fold(0, |a, (_, &v)| a.max(v & STATE));
                let add = AGE_MAX - max;
                for (w, v) in m.iter_mut().enumerate() {
                    *v += add * (w != skip) as u8;
                }
            }
            QlruUpdate::U2 | QlruUpdate::U3 => {
                if left != 0 {
                    return;
                }
                let skip = if u == QlruUpdate::U3 {
                    skip
                } else {
                    usize::MAX
                };
                for (w, v) in self.meta_mut::<S>(set).iter_mut().enumerate() {
                    *v += (w != skip) as u8;
                }
            }
        }
    }
}

#[cfg(test)]
impl Cache {
    /// A cache under any QLRU policy, named or not (for tests: it reports
    /// `qlru_h11_m1_r0_u0` as its policy, and must be used through
    /// [`super::AnyShape`]).
    pub(super) fn new_qlru(geom: super::CacheGeometry, policy: QlruPolicy, seed: u64) -> Cache {
        assert!(policy.base.is_defined(), "{}", policy.base.name());
        let mut c = Cache::new(geom, super::Replacement::QlruH11M1R0U0, seed).unwrap();
        c.qlru = policy;
        c.clear();
        c
    }
}
