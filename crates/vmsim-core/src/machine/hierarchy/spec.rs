//! The per-request path built once per kind of machine (docs/speed.md,
//! step 15): a [`Spec`] gives, as constants, the shapes of the three cache
//! levels and the preset flags the path tests (an inclusive LLC, where perf
//! counts `cache-references`, no-RFO string stores). The hierarchy picks
//! the first spec that every one of its caches and flags fits
//! ([`SpecId`]); the machine's per-request entry points dispatch on it once
//! and run the path built for it. [`AnySpec`] fixes nothing and serves
//! every machine, so a preset without a spec of its own computes the same
//! results, only reading the fields.
//!
//! Invariant: a hierarchy's caches are used only through a spec they fit:
//! the choice is made at construction from the caches themselves, and a
//! windowed run's stand-in (`partition.rs`) exchanges caches only with a
//! hierarchy of the same preset, whose caches have the same shapes.

use super::super::cache::{Replacement, Shape};
use super::Hierarchy;

/// Preset properties a per-request path is built for.
pub trait Spec {
    type L1: Shape;
    type L2: Shape;
    type Llc: Shape;
    const INCLUSIVE: Option<bool> = None;
    const PERF_AT_L2: Option<bool> = None;
    const NO_RFO: Option<bool> = None;
}

/// Nothing fixed: any machine.
pub struct AnySpec;
impl Spec for AnySpec {
    type L1 = super::super::cache::AnyShape;
    type L2 = super::super::cache::AnyShape;
    type Llc = super::super::cache::AnyShape;
}

/// An L1d of 8 ways under tree-PLRU (every Intel preset's).
pub struct L1Plru8;
impl Shape for L1Plru8 {
    const POLICY: Option<Replacement> = Some(Replacement::TreePlru);
    const WAYS: usize = 8;
    const POW2: Option<bool> = Some(true);
    const SHARERS: Option<bool> = Some(false);
    const AUX: Option<bool> = Some(false);
}

/// Haswell-EP's L2: 8 ways, tree-PLRU, remembering each line's LLC slot
/// (under its inclusive LLC).
pub struct L2Plru8Aux;
impl Shape for L2Plru8Aux {
    const POLICY: Option<Replacement> = Some(Replacement::TreePlru);
    const WAYS: usize = 8;
    const POW2: Option<bool> = Some(true);
    const SHARERS: Option<bool> = Some(false);
    const AUX: Option<bool> = Some(true);
}

/// Haswell-EP's LLC: 20 ways, DRRIP, with core-valid bits. The set count
/// is left to the cache (a stand-in's one set is a power of two).
pub struct LlcDrrip20;
impl Shape for LlcDrrip20 {
    const POLICY: Option<Replacement> = Some(Replacement::Drrip);
    const WAYS: usize = 20;
    const SHARERS: Option<bool> = Some(true);
    const AUX: Option<bool> = Some(false);
}

/// Cascade Lake-SP's L2: 16 ways, SRRIP.
pub struct L2Srrip16;
impl Shape for L2Srrip16 {
    const POLICY: Option<Replacement> = Some(Replacement::Srrip);
    const WAYS: usize = 16;
    const POW2: Option<bool> = Some(true);
    const SHARERS: Option<bool> = Some(false);
    const AUX: Option<bool> = Some(false);
}

/// Cascade Lake-SP's LLC: 11 ways, DRRIP.
pub struct LlcDrrip11;
impl Shape for LlcDrrip11 {
    const POLICY: Option<Replacement> = Some(Replacement::Drrip);
    const WAYS: usize = 11;
    const SHARERS: Option<bool> = Some(true);
    const AUX: Option<bool> = Some(false);
}

/// The Haswell-EP presets (xeon-e5-*): inclusive LLC, perf counting at
/// the LLC, no-RFO string stores.
pub struct Haswell;
impl Spec for Haswell {
    type L1 = L1Plru8;
    type L2 = L2Plru8Aux;
    type Llc = LlcDrrip20;
    const INCLUSIVE: Option<bool> = Some(true);
    const PERF_AT_L2: Option<bool> = Some(false);
    const NO_RFO: Option<bool> = Some(true);
}

/// Cascade Lake-SP (xeon-6238m-clx): non-inclusive LLC, perf counting at
/// the LLC, no-RFO string stores.
pub struct CascadeLake;
impl Spec for CascadeLake {
    type L1 = L1Plru8;
    type L2 = L2Srrip16;
    type Llc = LlcDrrip11;
    const INCLUSIVE: Option<bool> = Some(false);
    const PERF_AT_L2: Option<bool> = Some(false);
    const NO_RFO: Option<bool> = Some(true);
}

/// Which spec a hierarchy's per-request path runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecId {
    Haswell,
    CascadeLake,
    Any,
}

impl Hierarchy {
    /// Whether every cache and flag of this hierarchy fits `S`.
    pub(super) fn fits<S: Spec>(&self) -> bool {
        self.l1.iter().all(|c| c.fits::<S::L1>())
            && self.l2.iter().all(|c| c.fits::<S::L2>())
            && self.llc.iter().all(|c| c.fits::<S::Llc>())
            && S::INCLUSIVE.is_none_or(|b| b == self.inclusive)
            && S::PERF_AT_L2.is_none_or(|b| b == self.perf_at_l2)
            && S::NO_RFO.is_none_or(|b| b == self.no_rfo)
    }

    /// The first spec this hierarchy fits.
    pub(super) fn pick_spec(&self) -> SpecId {
        if self.fits::<Haswell>() {
            SpecId::Haswell
        } else if self.fits::<CascadeLake>() {
            SpecId::CascadeLake
        } else {
            SpecId::Any
        }
    }

    /// The spec the machine's entry points dispatch on.
    #[inline(always)]
    pub fn spec(&self) -> SpecId {
        self.spec
    }

    #[inline(always)]
    pub(super) fn inclusive<S: Spec>(&self) -> bool {
        S::INCLUSIVE.unwrap_or(self.inclusive)
    }

    #[inline(always)]
    pub(super) fn perf_at_l2<S: Spec>(&self) -> bool {
        S::PERF_AT_L2.unwrap_or(self.perf_at_l2)
    }

    #[inline(always)]
    pub(super) fn no_rfo<S: Spec>(&self) -> bool {
        S::NO_RFO.unwrap_or(self.no_rfo)
    }
}
