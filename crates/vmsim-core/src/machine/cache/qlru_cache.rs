//! The QLRU policies' steps on a cache's sets (qlru.rs defines the
//! policies): the hit promotion, the victim's choice with its ageing, the
//! insertion age, and the set-dueling selector of the adaptive ones.

use super::qlru::*;
use super::{Cache, Shape, DIRTY, STATE};

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
