//! The per-request path built once per kind of machine (docs/notes/2026-speed-steps.md,
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

/// Haswell-EP's LLC: 20 ways, the adaptive QLRU of Ivy Bridge and
/// Haswell, with core-valid bits. The set count is left to the cache (a
/// stand-in's one set is a power of two).
pub struct LlcQlruIvb20;
impl Shape for LlcQlruIvb20 {
    const POLICY: Option<Replacement> = Some(Replacement::QlruAdaptiveIvb);
    const WAYS: usize = 20;
    const SHARERS: Option<bool> = Some(true);
    const AUX: Option<bool> = Some(false);
}

/// Cascade Lake-SP's L2: 16 ways, Skylake's QLRU (`qlru_h00_m1_r2_u1`).
pub struct L2Qlru16;
impl Shape for L2Qlru16 {
    const POLICY: Option<Replacement> = Some(Replacement::QlruH00M1R2U1);
    const WAYS: usize = 16;
    const POW2: Option<bool> = Some(true);
    const SHARERS: Option<bool> = Some(false);
    const AUX: Option<bool> = Some(false);
}

/// Cascade Lake-SP's LLC: 11 ways, Skylake's adaptive QLRU.
pub struct LlcQlruSkl11;
impl Shape for LlcQlruSkl11 {
    const POLICY: Option<Replacement> = Some(Replacement::QlruAdaptiveSkl);
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
    type Llc = LlcQlruIvb20;
    const INCLUSIVE: Option<bool> = Some(true);
    const PERF_AT_L2: Option<bool> = Some(false);
    const NO_RFO: Option<bool> = Some(true);
}

/// Cascade Lake-SP (xeon-6238m-clx): non-inclusive LLC, perf counting at
/// the LLC, no-RFO string stores.
pub struct CascadeLake;
impl Spec for CascadeLake {
    type L1 = L1Plru8;
    type L2 = L2Qlru16;
    type Llc = LlcQlruSkl11;
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

#[cfg(test)]
mod tests {
    use super::SpecId;
    use crate::config::{embedded_machines, Preset};
    use crate::machine::hierarchy::AccessKind;
    use crate::machine::Machine;

    fn machine(name: &str) -> Machine {
        let (name, text) = embedded_machines()
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap();
        let p = Preset::parse(text, name).unwrap();
        Machine::new(&p.machine_params().unwrap(), 64 << 20, 7).unwrap()
    }

    /// The presets the specs are written for run on them, and so do their
    /// windowed runs' stand-ins; the others on the path that fixes nothing.
    #[test]
    fn each_preset_runs_the_path_built_for_it() {
        for (name, _) in embedded_machines() {
            let m = machine(name);
            let want = match *name {
                "xeon-e5-2699v3-2s" | "xeon-e5-1650v3-1s" | "xeon-e5-4655v3-4s" => SpecId::Haswell,
                "xeon-6238m-clx" => SpecId::CascadeLake,
                _ => SpecId::Any,
            };
            assert_eq!(m.hier.spec(), want, "{name}");
            assert_eq!(m.shell().hier.spec(), want, "{name}'s stand-in");
        }
    }

    /// A specialised path computes exactly what the path that reads every
    /// property from the caches and flags computes: the same accesses
    /// (loads, stores, string and non-temporal stores, locked operations,
    /// bulk runs, from cores of both sockets, to shared and private lines)
    /// leave the same statistics and clocks.
    #[test]
    fn a_specialised_path_computes_what_the_general_one_does() {
        for name in ["xeon-e5-2699v3-2s", "xeon-6238m-clx"] {
            let mut fast = machine(name);
            let mut plain = machine(name);
            plain.hier.spec = SpecId::Any;
            assert_ne!(fast.hier.spec(), SpecId::Any);
            let cpus = fast.cpus.len();
            let lines = fast.mem_lines;
            let mut x = 0x9e37_79b9_7f4a_7c15u64;
            for step in 0..60_000u64 {
                x = crate::rng::splitmix64(x);
                let cpu = (x % cpus as u64) as usize;
                // A small shared region, and streams through private ones.
                let line = if x >> 60 < 6 {
                    (x >> 20) % 512
                } else {
                    (cpu as u64 * 8192 + step / 4 + (x >> 40) % 3) % lines
                };
                let kind = match (x >> 8) % 16 {
                    0..=6 => AccessKind::Load,
                    7..=11 => AccessKind::Store,
                    12 | 13 => AccessKind::StringStore,
                    _ => AccessKind::NtStore,
                };
                for m in [&mut fast, &mut plain] {
                    match (x >> 12) % 64 {
                        0 => {
                            m.atomic(cpu, line, 20);
                        }
                        1 => {
                            let end = m.cpus[cpu].clock + 2000;
                            let dst = (line + 4096) % (lines - 64);
                            m.bulk_run(cpu, dst, Some(line % (lines - 64)), 0, 64, kind, 4, 1, end);
                        }
                        _ => {
                            m.access(cpu, line, kind, (x >> 16) & 1 == 0, 1);
                        }
                    }
                }
            }
            for (a, b) in fast.cpus.iter().zip(&plain.cpus) {
                assert_eq!(a.clock, b.clock, "{name}");
                assert_eq!(
                    serde_json::to_string(&a.stats).unwrap(),
                    serde_json::to_string(&b.stats).unwrap(),
                    "{name}"
                );
            }
        }
    }
}
