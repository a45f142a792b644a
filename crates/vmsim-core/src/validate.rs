//! `vmsim validate`: independent microbenchmarks run on the hardware model of
//! each preset, beside published measurements of the chip (or of a stated
//! stand-in part). These are the model's calibration targets; the seed
//! experiments are predictions and are never compared here.
//!
//! Each benchmark drives `machine::Machine` directly (no kernel, no TLB), the
//! way the published tool drives the chip: pointer chasing for latency
//! (dependent loads to random lines), likwid-bench style `load`, `copy` and
//! `update` kernels over a working set of the stated size, memset-like fills
//! with ordinary, fast-string or non-temporal stores, and all-core read
//! streams. Many cores run interleaved by quanta of the simulator's default
//! length, lowest clock first, as the simulator's scheduler runs them.
//!
//! Invariant: a published figure is never an input of the model; a row's
//! error is (model - published) / published.

use crate::config::{embedded_machines, Preset};
use crate::kernel::instr;
use crate::machine::hierarchy::AccessKind;
use crate::machine::Machine;
use serde::Serialize;

/// What a row measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bench {
    /// Dependent loads to random lines of local (or remote) memory, ns.
    IdleLatency { remote: bool },
    /// Dependent loads around one random cycle ([`chase_order`]) through the
    /// lines of a `kib` KiB buffer, after one untimed lap, ns per load.
    Chase { kib: u64 },
    /// One core, likwid `load` over `kib` KiB (sequential, warm when it fits a cache), GB/s.
    Load { kib: u64, threads: u64 },
    /// One core, likwid `copy` (ordinary stores), explicit streams counted, GB/s.
    /// This and the other one-core kernels below are warm, like `Load`, when
    /// `kib` fits the LLC; every published row is larger than its LLC.
    Copy { kib: u64 },
    /// One core, likwid `update` (read and write back the same lines), GB/s.
    Update { kib: u64 },
    /// One core, `x[i] += y[i]` over two arrays of `kib` KiB together (two
    /// load streams, one store stream to the first), GB/s with the three
    /// streams counted.
    AddAssign { kib: u64 },
    /// One core, memset-like fill of `kib` KiB with ordinary stores (RFO), GB/s of stores.
    Fill { kib: u64 },
    /// One core, one `rep stosb` over `kib` KiB per pass, GB/s.
    StringFill { kib: u64 },
    /// One core, non-temporal (`movnti`) fill of `kib` KiB, GB/s.
    NtFill { kib: u64 },
    /// One core clearing an extent far beyond the LLC with one `rep stosb`
    /// per `chunk_kib` (Arora's user-space chunk sweep), GB/s: the extent is
    /// 128 MiB, or one call for a larger chunk, timed after an untimed pass
    /// over four LLCs' worth of other lines has left the LLC full of dirty
    /// lines (where the node has room for them).
    StringChunks { chunk_kib: u64 },
    /// As [`Bench::StringChunks`], each call `movnti` stores (eight per
    /// line, issued as the kernel's loop issues them, as [`Bench::NtFill`])
    /// and an `sfence`.
    NtChunks { chunk_kib: u64 },
    /// As [`Bench::StringChunks`], each call one `clzero` per line (the
    /// kernel clear loop's instructions per line) and an `sfence`; only on a
    /// preset whose CPUs have `clzero`.
    ClzeroChunks { chunk_kib: u64 },
    /// One core clearing 128 MiB of physically contiguous 4 KiB pages one
    /// page per call, `descending`: last page first (the stores within each
    /// page ascend either way), with `kind`'s stores (`vmsim hw
    /// store-sweep`'s page-order rows), GB/s.
    PageOrder { kind: PageClear, descending: bool },
    /// As the chunk rows (`chunk_kib` calls of `kind`'s stores over 128 MiB,
    /// `descending` or not) with the 4 KiB pages of the extent and of the
    /// warm pass on frames in the order [`scatter_order`] faults them: the
    /// `4k-scattered` backing of `vmsim hw store-sweep`, whose virtually
    /// adjacent pages get frames far apart. A prefetcher that goes on into
    /// the physically next page finds nothing of the stream there.
    Scattered {
        kind: PageClear,
        chunk_kib: u64,
        descending: bool,
    },
    /// One core, copy with non-temporal stores (STREAM Copy as glibc builds it for large sizes).
    NtCopy { kib: u64 },
    /// `cores` cores of socket 0 (one thread each) streaming loads from local memory, GB/s.
    SocketLoad { cores: u64 },
    /// `cores` cores of socket 0, each running likwid `copy` (ordinary
    /// stores) over its own 8 MiB of local memory, explicit streams counted,
    /// GB/s. Timed after an untimed pass over other 8 MiB per core has
    /// filled the LLC with dirty lines, so the timed pass writes back as a
    /// long run does.
    SocketCopy { cores: u64 },
    /// As [`Bench::SocketCopy`], with likwid `update` (read and write back
    /// the same lines).
    SocketUpdate { cores: u64 },
}

/// How a [`Bench::PageOrder`] row clears a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageClear {
    /// One `rep stosb` per page.
    Stosb,
    /// Eight `movnti` per line, an `sfence` per page.
    Movnti,
    /// One `clzero` per line, an `sfence` per page.
    Clzero,
    /// Eight 8-byte `mov` stores per line (`clear_page_orig`): ordinary
    /// stores, read for ownership, no string boundary.
    Mov,
}

impl PageClear {
    pub fn name(self) -> &'static str {
        match self {
            PageClear::Stosb => "rep stosb",
            PageClear::Movnti => "movnti",
            PageClear::Clzero => "clzero",
            PageClear::Mov => "mov",
        }
    }
}

impl Bench {
    /// A clearing row's calls: their size (KiB), how each clears, and
    /// whether they go last page first. None for the other rows.
    fn clear_calls(self) -> Option<(u64, PageClear, bool)> {
        match self {
            Bench::StringChunks { chunk_kib } => Some((chunk_kib, PageClear::Stosb, false)),
            Bench::NtChunks { chunk_kib } => Some((chunk_kib, PageClear::Movnti, false)),
            Bench::ClzeroChunks { chunk_kib } => Some((chunk_kib, PageClear::Clzero, false)),
            Bench::PageOrder { kind, descending } => Some((4, kind, descending)),
            Bench::Scattered {
                kind,
                chunk_kib,
                descending,
            } => Some((chunk_kib, kind, descending)),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match *self {
            Bench::IdleLatency { remote: false } => "idle latency, local DRAM (ns)".into(),
            Bench::IdleLatency { remote: true } => "idle latency, remote DRAM (ns)".into(),
            Bench::Chase { kib } => format!("latency, random chase over {} (ns)", size(kib)),
            Bench::Load { kib, threads: 1 } => format!("1 core load, {} (GB/s)", size(kib)),
            Bench::Load { kib, threads } => {
                format!("1 core, {threads} SMT threads, load, {} (GB/s)", size(kib))
            }
            Bench::Copy { kib } => format!("1 core copy, {} (GB/s)", size(kib)),
            Bench::Update { kib } => format!("1 core update, {} (GB/s)", size(kib)),
            Bench::AddAssign { kib } => format!("1 core x += y, {} (GB/s)", size(kib)),
            Bench::Fill { kib } => format!("1 core fill (stores, RFO), {} (GB/s)", size(kib)),
            Bench::StringFill { kib } => format!("1 core rep stosb, {} (GB/s)", size(kib)),
            Bench::StringChunks { chunk_kib } => format!(
                "1 core rep stosb in {} calls over {} (GB/s)",
                size(chunk_kib),
                size(chunks_extent_kib(chunk_kib))
            ),
            Bench::NtChunks { chunk_kib } => format!(
                "1 core movnti in {} calls over {} (GB/s)",
                size(chunk_kib),
                size(chunks_extent_kib(chunk_kib))
            ),
            Bench::ClzeroChunks { chunk_kib } => format!(
                "1 core clzero in {} calls over {} (GB/s)",
                size(chunk_kib),
                size(chunks_extent_kib(chunk_kib))
            ),
            Bench::PageOrder { kind, descending } => format!(
                "1 core {} in 4 KiB calls over 128 MiB, {} page order (GB/s)",
                kind.name(),
                if descending {
                    "descending"
                } else {
                    "ascending"
                }
            ),
            Bench::Scattered {
                kind,
                chunk_kib,
                descending,
            } => format!(
                "1 core {} in {} calls over {}, 4 KiB pages on scattered frames{} (GB/s)",
                kind.name(),
                size(chunk_kib),
                size(chunks_extent_kib(chunk_kib)),
                if descending { ", last call first" } else { "" }
            ),
            Bench::NtFill { kib } => format!("1 core movnti fill, {} (GB/s)", size(kib)),
            Bench::NtCopy { kib } => format!("1 core copy, NT stores, {} (GB/s)", size(kib)),
            Bench::SocketLoad { cores } => format!("{cores} cores of a socket, load, DRAM (GB/s)"),
            Bench::SocketCopy { cores } => format!("{cores} cores of a socket, copy, DRAM (GB/s)"),
            Bench::SocketUpdate { cores } => {
                format!("{cores} cores of a socket, update, DRAM (GB/s)")
            }
        }
    }
}

/// The extent a chunk sweep row clears: 128 MiB (four times Milan's LLC,
/// 2.7 times Ice Lake-SP's), or one call of a larger chunk.
fn chunks_extent_kib(chunk_kib: u64) -> u64 {
    chunk_kib.max(128 * 1024)
}

fn size(kib: u64) -> String {
    if kib >= 1024 {
        format!("{} MiB", kib / 1024)
    } else {
        format!("{kib} KiB")
    }
}

/// A published measurement to compare with.
pub struct Reference {
    pub preset: &'static str,
    pub bench: Bench,
    pub published: f64,
    /// Largest |error| accepted, and why that much.
    pub tolerance: f64,
    pub source: &'static str,
}

const FDIO_HSW: &str = "Intel MLC 3.5 on 2 x E5-2699 v3 (2.3 GHz, no turbo, DDR4-2133 2 DPC, HT off): FD.io CSIT report, FDio/csit docs/report/introduction/test_environment_sut_calib_hsw.rst";
const KC_HSW: &str = "likwid-bench on E5-2695 v3 (Haswell-EP stand-in, 2.3 GHz): RRZE-HPC/kerncraft examples/machine-files/HaswellEP_E5-2695v3.yml";
const BDW_NT: &str = "perf bench mem memset, one thread, no turbo, 2 x E5-2630 v4 (Broadwell-EP, adjacent generation): A. Arora, '[PATCH 4/8] x86/asm: add clear_page_nt()', LKML 2020-10-14";
const INTEL_HSW_XPY: &str = "x[i] += y[i] (float, icc 16 -O3 -xHost, turbo off, best of 1000 repetitions, 12 bytes counted per element), one core of a Xeon E5-2680 v3 (Haswell-EP stand-in, 2.5 GHz): 'L1-, L2- and L3-bandwidth of E5-2680 v3 (i.e., Haswell)', Intel Community forum, Moderncode for Parallel Architectures, thread 1118044";
const ARORA_ICX: &str = "REP-STOSB over a 4 GB extent in calls of the chunk, 4 KiB pages, one thread, no turbo, Ice Lake-SP with a 48 MB LLC (part not named; the Xeon Platinum 8358 of the author's later runs has that LLC): A. Arora, '[PATCH v3 00/21] huge page clearing optimizations', LKML 2022-06-06 (MB/s)";
const ARORA_ICX_NT: &str = "MOVNTI over a 4 GB extent in calls of the chunk, an SFENCE after each, 4 KiB pages, one thread, no turbo, Ice Lake-SP with a 48 MB LLC (part not named): A. Arora, '[PATCH v3 00/21] huge page clearing optimizations', LKML 2022-06-06 (MB/s)";
const ARORA_MILAN_NT: &str = "MOVNTI over a 4 GB extent in calls of the chunk, an SFENCE after each, 4 KiB pages, one thread, boost off, Milan with a 32 MB LLC (part not named): A. Arora, '[PATCH v3 00/21] huge page clearing optimizations', LKML 2022-06-06 (MB/s)";
const ARORA_MILAN_CLZERO: &str = "CLZERO over a 4 GB extent in calls of the chunk, an SFENCE after each, 4 KiB pages, one thread, boost off, Milan with a 32 MB LLC (part not named): A. Arora, '[PATCH v3 00/21] huge page clearing optimizations', LKML 2022-06-06 (MB/s)";
const ARORA_MILAN: &str = "REP-STOSB over a 4 GB extent in calls of the chunk, 4 KiB pages, one thread, boost off, Milan with a 32 MB LLC (part not named; the author's later Milan runs are on the EPYC 7J13): A. Arora, '[PATCH v3 00/21] huge page clearing optimizations', LKML 2022-06-06 (MB/s)";
/// GB per GiB: some sources give GiB/s.
const GIB_GB: f64 = 1.073_741_824;
const TD_FILL: &str = "fill0, one thread, 98 MB, Haswell (chip model not stated, client or server unknown): Travis Downs, 'Hardware Store Elimination' (2020-05-13), travisdowns/zero-fill-bench results";
const VSC_ICX: &str = "Intel MLC on 2 x Xeon Platinum 8360Y (Ice Lake-SP stand-in, 36 cores): hpcleuven/VscDocumentation icelake_mlc.txt";
const KC_ICX: &str = "likwid-bench on Xeon Platinum 8360Y (Ice Lake-SP stand-in, 2.4 GHz, SNC2): RRZE-HPC/kerncraft examples/machine-files/IcelakeSP_Platinum-8360Y.yml (PR 141)";
const KC_ZEN2: &str = "likwid-bench on EPYC 7452 (Zen 2, family stand-in for Milan, 2.35 GHz, NPS4): RRZE-HPC/kerncraft examples/machine-files/Zen2_EPYC-7452.yml";
const SUSE_MILAN: &str = "STREAM Copy, one thread, 2 x EPYC 7713 (Milan): SUSE 'Optimizing Linux for AMD EPYC 7003 Series Processors' best-practices guide, section 5.4 (large-size copy taken to use NT stores: inferred)";
const FDIO_CLX: &str = "Intel MLC 3.7 on 2 x Xeon Gold 6252N (Cascade Lake-SP stand-in for the Gold 6238M, 24 cores, 2.3 GHz, DDR4-2933, HT on): FD.io CSIT report, FDio/csit docs/report/introduction/test_environment_sut_calib_clx.rst";
const KC_CLX: &str = "likwid-bench on Xeon Gold 6248 (Cascade Lake-SP stand-in for the Gold 6238M, 20 cores, 2.5 GHz, SNC on): RRZE-HPC/kerncraft examples/machine-files/CascadelakeSP_Gold-6248_SNC.yml";

/// Tolerances: same part, same tool: 15 % (the two nodes of one machine
/// differ by up to 7 %, and DIMM population differs); a stand-in part of the
/// same generation: 25 % (core count, clock and uncore differ); an adjacent
/// generation or unstated model: 40 %.
const SAME: f64 = 0.15;
const STAND_IN: f64 = 0.25;
const FAR: f64 = 0.40;

pub const REFERENCES: &[Reference] = &[
    // Haswell-EP
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::IdleLatency { remote: false },
        published: 99.0,
        tolerance: SAME,
        source: FDIO_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::IdleLatency { remote: true },
        published: 136.6,
        tolerance: SAME,
        source: FDIO_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::SocketLoad { cores: 18 },
        published: 58.15,
        tolerance: SAME,
        source: FDIO_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Load {
            kib: 21,
            threads: 1,
        },
        published: 134.6,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Load {
            kib: 169,
            threads: 1,
        },
        published: 57.9,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Load {
            kib: 23_654,
            threads: 1,
        },
        published: 23.1,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Load {
            kib: 128 * 1024,
            threads: 1,
        },
        published: 8.93,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Load {
            kib: 128 * 1024,
            threads: 2,
        },
        published: 11.19,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Copy { kib: 128 * 1024 },
        published: 8.35,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Update { kib: 128 * 1024 },
        published: 13.89,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    // likwid copy and update with the data in the L2 and in the L3, and on every core.
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Copy { kib: 169 },
        published: 36.3,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Update { kib: 169 },
        published: 45.3,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Copy { kib: 23_654 },
        published: 18.7,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Update { kib: 23_654 },
        published: 29.2,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::SocketCopy { cores: 14 },
        published: 35.6,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::SocketUpdate { cores: 14 },
        published: 46.7,
        tolerance: STAND_IN,
        source: KC_HSW,
    },
    // 54 and 32 GiB/s: what the post gives the kernel as topping out at in the L2 and in the L3.
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::AddAssign { kib: 128 },
        published: 54.0 * GIB_GB,
        tolerance: STAND_IN,
        source: INTEL_HSW_XPY,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::AddAssign { kib: 16 * 1024 },
        published: 32.0 * GIB_GB,
        tolerance: STAND_IN,
        source: INTEL_HSW_XPY,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::Fill { kib: 96 * 1024 },
        published: 10.3,
        tolerance: FAR,
        source: TD_FILL,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::StringFill { kib: 256 * 1024 },
        published: 5.42,
        tolerance: FAR,
        source: BDW_NT,
    },
    Reference {
        preset: "xeon-e5-2699v3-2s",
        bench: Bench::NtFill { kib: 256 * 1024 },
        published: 11.78,
        tolerance: FAR,
        source: BDW_NT,
    },
    // Ice Lake-SP
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::IdleLatency { remote: false },
        published: 89.1,
        tolerance: STAND_IN,
        source: VSC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::IdleLatency { remote: true },
        published: 142.8,
        tolerance: STAND_IN,
        source: VSC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::SocketLoad { cores: 32 },
        published: 175.8,
        tolerance: STAND_IN,
        source: VSC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Load {
            kib: 21,
            threads: 1,
        },
        published: 168.2,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Load {
            kib: 660,
            threads: 1,
        },
        published: 110.7,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Load {
            kib: 25_600,
            threads: 1,
        },
        published: 24.75,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Load {
            kib: 128 * 1024,
            threads: 1,
        },
        published: 15.37,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Copy { kib: 128 * 1024 },
        published: 14.51,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Update { kib: 128 * 1024 },
        published: 24.09,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Copy { kib: 660 },
        published: 63.5,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Update { kib: 660 },
        published: 81.6,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Copy { kib: 25_600 },
        published: 25.34,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::Update { kib: 25_600 },
        published: 46.83,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::SocketCopy { cores: 32 },
        published: 158.5,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::SocketUpdate { cores: 32 },
        published: 157.1,
        tolerance: STAND_IN,
        source: KC_ICX,
    },
    // Milan
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Load {
            kib: 330,
            threads: 1,
        },
        published: 74.64,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Load {
            kib: 10_312,
            threads: 1,
        },
        published: 54.10,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Load {
            kib: 128 * 1024,
            threads: 1,
        },
        published: 21.77,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Load {
            kib: 128 * 1024,
            threads: 2,
        },
        published: 25.18,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Copy { kib: 128 * 1024 },
        published: 17.89,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Update { kib: 128 * 1024 },
        published: 31.65,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Copy { kib: 330 },
        published: 74.7,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Update { kib: 330 },
        published: 125.8,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Copy { kib: 10_312 },
        published: 56.5,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::Update { kib: 10_312 },
        published: 104.1,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::SocketCopy { cores: 32 },
        published: 88.8,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::SocketUpdate { cores: 32 },
        published: 141.5,
        tolerance: FAR,
        source: KC_ZEN2,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::NtCopy { kib: 128 * 1024 },
        published: 39.5,
        tolerance: STAND_IN,
        source: SUSE_MILAN,
    },
    // Arora's user-space chunk sweeps (one core, rep stosb in calls of a
    // chunk): the chip family of the preset, its part not named, one
    // measurement without a spread: a stand-in's 25 %. The chip's rates in
    // Milan's 32 MiB, 128 MiB and 1 GiB rows gave string.nocache_threshold_kib
    // (a derivation from the chip's figures, not a fit of the model's), so
    // those rows check the model's rates, not the threshold.
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::StringChunks { chunk_kib: 4 },
        published: 9.444,
        tolerance: STAND_IN,
        source: ARORA_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::StringChunks { chunk_kib: 64 },
        published: 11.931,
        tolerance: STAND_IN,
        source: ARORA_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::StringChunks { chunk_kib: 2048 },
        published: 12.355,
        tolerance: STAND_IN,
        source: ARORA_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::StringChunks {
            chunk_kib: 32 * 1024,
        },
        published: 12.368,
        tolerance: STAND_IN,
        source: ARORA_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::StringChunks {
            chunk_kib: 128 * 1024,
        },
        published: 12.374,
        tolerance: STAND_IN,
        source: ARORA_ICX,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::StringChunks {
            chunk_kib: 1024 * 1024,
        },
        published: 12.372,
        tolerance: STAND_IN,
        source: ARORA_ICX,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::StringChunks { chunk_kib: 4 },
        published: 13.034,
        tolerance: STAND_IN,
        source: ARORA_MILAN,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::StringChunks { chunk_kib: 64 },
        published: 15.196,
        tolerance: STAND_IN,
        source: ARORA_MILAN,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::StringChunks { chunk_kib: 2048 },
        published: 14.821,
        tolerance: STAND_IN,
        source: ARORA_MILAN,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::StringChunks {
            chunk_kib: 32 * 1024,
        },
        published: 22.525,
        tolerance: STAND_IN,
        source: ARORA_MILAN,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::StringChunks {
            chunk_kib: 128 * 1024,
        },
        published: 29.311,
        tolerance: STAND_IN,
        source: ARORA_MILAN,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::StringChunks {
            chunk_kib: 1024 * 1024,
        },
        published: 35.807,
        tolerance: STAND_IN,
        source: ARORA_MILAN,
    },
    // The sweeps' MOVNTI and CLZERO columns, at the same chunks. Ice Lake-SP's
    // MOVNTI and Milan's fastest CLZERO gave memory.posted_write_ns (one
    // core's bandwidth of unread lines, by Little's law: a derivation from
    // the chip's figures), so those rows check that the model gives the
    // rates back through its buffers, issue and fences; Milan's MOVNTI was
    // not used and is an independent check.
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::NtChunks { chunk_kib: 4 },
        published: 24.510,
        tolerance: STAND_IN,
        source: ARORA_ICX_NT,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::NtChunks { chunk_kib: 64 },
        published: 24.508,
        tolerance: STAND_IN,
        source: ARORA_ICX_NT,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::NtChunks { chunk_kib: 2048 },
        published: 24.524,
        tolerance: STAND_IN,
        source: ARORA_ICX_NT,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::NtChunks {
            chunk_kib: 32 * 1024,
        },
        published: 24.523,
        tolerance: STAND_IN,
        source: ARORA_ICX_NT,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::NtChunks {
            chunk_kib: 128 * 1024,
        },
        published: 24.522,
        tolerance: STAND_IN,
        source: ARORA_ICX_NT,
    },
    Reference {
        preset: "xeon-8358-icx",
        bench: Bench::NtChunks {
            chunk_kib: 1024 * 1024,
        },
        published: 24.561,
        tolerance: STAND_IN,
        source: ARORA_ICX_NT,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::NtChunks { chunk_kib: 4 },
        published: 17.815,
        tolerance: STAND_IN,
        source: ARORA_MILAN_NT,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::NtChunks { chunk_kib: 64 },
        published: 18.549,
        tolerance: STAND_IN,
        source: ARORA_MILAN_NT,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::NtChunks { chunk_kib: 2048 },
        published: 18.581,
        tolerance: STAND_IN,
        source: ARORA_MILAN_NT,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::NtChunks {
            chunk_kib: 32 * 1024,
        },
        published: 18.560,
        tolerance: STAND_IN,
        source: ARORA_MILAN_NT,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::NtChunks {
            chunk_kib: 128 * 1024,
        },
        published: 18.581,
        tolerance: STAND_IN,
        source: ARORA_MILAN_NT,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::NtChunks {
            chunk_kib: 1024 * 1024,
        },
        published: 18.574,
        tolerance: STAND_IN,
        source: ARORA_MILAN_NT,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::ClzeroChunks { chunk_kib: 4 },
        published: 45.579,
        tolerance: STAND_IN,
        source: ARORA_MILAN_CLZERO,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::ClzeroChunks { chunk_kib: 64 },
        published: 46.038,
        tolerance: STAND_IN,
        source: ARORA_MILAN_CLZERO,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::ClzeroChunks { chunk_kib: 2048 },
        published: 39.064,
        tolerance: STAND_IN,
        source: ARORA_MILAN_CLZERO,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::ClzeroChunks {
            chunk_kib: 32 * 1024,
        },
        published: 45.969,
        tolerance: STAND_IN,
        source: ARORA_MILAN_CLZERO,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::ClzeroChunks {
            chunk_kib: 128 * 1024,
        },
        published: 38.924,
        tolerance: STAND_IN,
        source: ARORA_MILAN_CLZERO,
    },
    Reference {
        preset: "epyc-7j13-milan",
        bench: Bench::ClzeroChunks {
            chunk_kib: 1024 * 1024,
        },
        published: 45.981,
        tolerance: STAND_IN,
        source: ARORA_MILAN_CLZERO,
    },
    // Cascade Lake-SP (xeon-6238m-clx): every row is a stand-in part of the same generation.
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::IdleLatency { remote: false },
        published: 81.2,
        tolerance: STAND_IN,
        source: FDIO_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::IdleLatency { remote: true },
        published: 130.2,
        tolerance: STAND_IN,
        source: FDIO_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::SocketLoad { cores: 22 },
        published: 122.1,
        tolerance: STAND_IN,
        source: FDIO_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Load {
            kib: 660,
            threads: 1,
        },
        published: 111.02,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Load {
            kib: 9_240,
            threads: 1,
        },
        published: 23.93,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Load {
            kib: 128 * 1024,
            threads: 1,
        },
        published: 12.96,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Load {
            kib: 128 * 1024,
            threads: 2,
        },
        published: 14.62,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Copy { kib: 128 * 1024 },
        published: 14.56,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Update { kib: 128 * 1024 },
        published: 24.27,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Copy { kib: 660 },
        published: 68.9,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Update { kib: 660 },
        published: 91.9,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Copy { kib: 9_240 },
        published: 23.63,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::Update { kib: 9_240 },
        published: 47.44,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::SocketCopy { cores: 20 },
        published: 73.0,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
    Reference {
        preset: "xeon-6238m-clx",
        bench: Bench::SocketUpdate { cores: 20 },
        published: 107.6,
        tolerance: STAND_IN,
        source: KC_CLX,
    },
];

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub preset: String,
    pub bench: Bench,
    pub description: String,
    pub published: f64,
    pub model: f64,
    /// (model - published) / published.
    pub error: f64,
    pub tolerance: f64,
    pub within: bool,
    /// The preset parameter this row calibrates (see [`CALIBRATION`]); such
    /// a row is a fit, not an independent check.
    pub calibrates: Option<String>,
    pub source: String,
}

/// Rows used to calibrate an estimated preset parameter: for each, the
/// parameter. The value is either the one of a stated grid that minimises
/// the rms of ln(model / published) over the rows naming it, or derived from
/// their published rates by Little's law (buffers x 64 B / rate); the
/// preset's source says which. The other rows stay checks.
pub const CALIBRATION: &[(&str, Bench, &str)] = &[
    ("xeon-6238m-clx", DRAM_LOAD, "l2.superqueue"),
    ("xeon-6238m-clx", DRAM_LOAD_SMT, "l2.superqueue"),
    ("xeon-6238m-clx", DRAM_COPY, "l2.superqueue"),
    ("xeon-6238m-clx", DRAM_UPDATE, "l2.superqueue"),
    ("xeon-8358-icx", DRAM_LOAD, "l2.superqueue"),
    ("xeon-8358-icx", DRAM_COPY, "l2.superqueue"),
    ("xeon-8358-icx", DRAM_UPDATE, "l2.superqueue"),
    ("epyc-7j13-milan", DRAM_LOAD, "l2.superqueue"),
    ("epyc-7j13-milan", DRAM_LOAD_SMT, "l2.superqueue"),
    ("epyc-7j13-milan", DRAM_COPY, "l2.superqueue"),
    ("epyc-7j13-milan", DRAM_UPDATE, "l2.superqueue"),
    ("xeon-8358-icx", chunks(4), "string.startup_cycles"),
    ("xeon-8358-icx", chunks(2048), "string.no_rfo_grant"),
    ("xeon-8358-icx", chunks(32 * 1024), "string.no_rfo_grant"),
    ("xeon-8358-icx", chunks(128 * 1024), "string.no_rfo_grant"),
    ("xeon-8358-icx", chunks(1024 * 1024), "string.no_rfo_grant"),
    ("xeon-8358-icx", nt_chunks(4), "memory.posted_write_ns"),
    ("xeon-8358-icx", nt_chunks(64), "memory.posted_write_ns"),
    ("xeon-8358-icx", nt_chunks(2048), "memory.posted_write_ns"),
    (
        "xeon-8358-icx",
        nt_chunks(32 * 1024),
        "memory.posted_write_ns",
    ),
    (
        "xeon-8358-icx",
        nt_chunks(128 * 1024),
        "memory.posted_write_ns",
    ),
    (
        "xeon-8358-icx",
        nt_chunks(1024 * 1024),
        "memory.posted_write_ns",
    ),
    (
        "epyc-7j13-milan",
        Bench::ClzeroChunks { chunk_kib: 64 },
        "memory.posted_write_ns",
    ),
    (
        "epyc-7j13-milan",
        chunks(1024 * 1024),
        "string.bypass_hold_ns",
    ),
];

const fn chunks(chunk_kib: u64) -> Bench {
    Bench::StringChunks { chunk_kib }
}
const fn nt_chunks(chunk_kib: u64) -> Bench {
    Bench::NtChunks { chunk_kib }
}

/// The one-core rows at the DRAM size (128 MiB).
const DRAM_KIB: u64 = 128 * 1024;
const DRAM_LOAD: Bench = Bench::Load {
    kib: DRAM_KIB,
    threads: 1,
};
const DRAM_LOAD_SMT: Bench = Bench::Load {
    kib: DRAM_KIB,
    threads: 2,
};
const DRAM_COPY: Bench = Bench::Copy { kib: DRAM_KIB };
const DRAM_UPDATE: Bench = Bench::Update { kib: DRAM_KIB };

fn calibrates(preset: &str, bench: Bench) -> Option<String> {
    CALIBRATION
        .iter()
        .find(|(p, b, _)| *p == preset && *b == bench)
        .map(|(_, _, k)| k.to_string())
}

fn preset(name: &str) -> Preset {
    let text = embedded_machines()
        .iter()
        .find(|(n, _)| *n == name)
        .expect("reference names a built-in preset")
        .1;
    Preset::parse(text, name).expect("built-in presets parse")
}

/// Runs every reference of `only` (all presets if None).
pub fn run(only: Option<&str>) -> Vec<Row> {
    REFERENCES
        .iter()
        .filter(|r| only.is_none_or(|o| o == r.preset))
        .map(|r| row(&preset(r.preset), r, r.preset))
        .collect()
}

/// The references of built-in preset `refs` measured on the model of
/// `preset` (a user's copy of it), rows labelled `label`.
pub fn run_on(preset: &Preset, refs: &str, label: &str) -> Vec<Row> {
    REFERENCES
        .iter()
        .filter(|r| r.preset == refs)
        .map(|r| row(preset, r, label))
        .collect()
}

fn row(preset: &Preset, r: &Reference, label: &str) -> Row {
    let model = measure(preset, r.bench);
    let error = (model - r.published) / r.published;
    Row {
        preset: label.into(),
        bench: r.bench,
        description: r.bench.describe(),
        published: r.published,
        model,
        error,
        tolerance: r.tolerance,
        within: error.abs() <= r.tolerance,
        calibrates: calibrates(r.preset, r.bench),
        source: r.source.into(),
    }
}

/// The built-in presets with references, in their order.
fn reference_presets() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for r in REFERENCES {
        if !names.contains(&r.preset) {
            names.push(r.preset);
        }
    }
    names
}

/// `vmsim validate`: the rows of one preset (`machine`: a built-in name, or
/// a preset file copied from a built-in preset, which is measured against
/// the references of the preset its `name` gives) or of all, as JSON text
/// `{"rows": [...], "table": "..."}`.
pub fn run_json(machine: Option<&str>) -> Result<String, crate::error::Error> {
    let names = reference_presets();
    let rows = match machine {
        Some(m) if !names.contains(&m) && m.ends_with(".toml") => {
            let p = crate::config::load_machine("machine", m, None)?;
            if !names.contains(&p.name.as_str()) {
                return Err(crate::config::fields::cfg_err(
                    "machine",
                    format!(
                        "{m}: its preset is named {:?}, which has no microbenchmarks; a preset file is \
                         measured against the published figures of the built-in preset its `name` gives \
                         (copy one with vmsim machines --show NAME): {}",
                        p.name,
                        names.join(", ")
                    ),
                ));
            }
            let label = format!("{m} (against the published figures of {})", p.name);
            run_on(&p, &p.name, &label)
        }
        Some(m) if !names.contains(&m) => {
            return Err(crate::config::fields::cfg_err(
                "machine",
                format!(
                    "no microbenchmarks for {m:?}; presets with references: {}; or a preset file (.toml) \
                     copied from one of them",
                    names.join(", ")
                ),
            ));
        }
        _ => run(machine),
    };
    let table = format(&rows);
    serde_json::to_string(&serde_json::json!({ "rows": rows, "table": table }))
        .map_err(|e| crate::error::Error::Internal(e.to_string()))
}

/// The rows as one table per preset.
pub fn format(rows: &[Row]) -> String {
    let mut out = String::new();
    let mut last = "";
    for r in rows {
        if r.preset != last {
            if !last.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!("{}\n", r.preset));
            out.push_str(&format!(
                "  {:<46} {:>10} {:>10} {:>8} {:>6}  source\n",
                "microbenchmark", "published", "model", "error", "tol"
            ));
            last = &r.preset;
        }
        let source = match &r.calibrates {
            Some(k) => format!("[calibrates {k}] {}", r.source),
            None => r.source.clone(),
        };
        out.push_str(&format!(
            "  {:<46} {:>10.2} {:>10.2} {:>+7.1}% {:>5.0}%{} {}\n",
            r.description,
            r.published,
            r.model,
            100.0 * r.error,
            100.0 * r.tolerance,
            if r.within { " " } else { "!" },
            source
        ));
    }
    let outside = rows.iter().filter(|r| !r.within).count();
    let fits = rows.iter().filter(|r| r.calibrates.is_some()).count();
    out.push_str(&format!(
        "\n{} rows ({} of them calibration rows): {} within tolerance, {} outside (!).\n",
        rows.len(),
        fits,
        rows.len() - outside,
        outside
    ));
    if fits > 0 {
        out.push_str("[calibrates K]: the row is one of those the estimated parameter K was fitted to (a fit, not a check).\n");
    }
    out
}

/// Each NUMA node's memory in the benchmarks' machine: no benchmark's
/// buffer is larger.
pub const NODE_BYTES: u64 = 1 << 30;
/// The simulator's default quantum: the benchmarks interleave cores as its scheduler does.
const QUANTUM: u64 = crate::config::DEFAULT_QUANTUM_CYCLES;

fn machine(p: &Preset) -> Machine {
    Machine::new(
        &p.machine_params().expect("built-in presets convert"),
        NODE_BYTES,
        0,
    )
    .expect("built-in presets build")
}

fn gbs(m: &Machine, bytes: u64, cycles: u64) -> f64 {
    bytes as f64 / m.cycles_to_s(cycles.max(1)) / 1e9
}

/// First line of node `node`'s memory.
fn node_base(node: u64) -> u64 {
    node * (NODE_BYTES >> 6)
}

/// One step of xorshift64 (13, 7, 17): the fixed-seed shuffles below.
fn xorshift64(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// The order in which the `4k-scattered` backing faults `n` pages (`vmsim
/// hw store-sweep`), a permutation of `0..n`, the same every run: a
/// Fisher-Yates shuffle driven by xorshift64 from a fixed seed. A host
/// that hands out frames in fault order gives page `order[k]` the k-th
/// frame, so virtually adjacent pages get frames far apart.
pub fn scatter_order(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..n).rev() {
        order.swap(i, (xorshift64(&mut x) % (i as u64 + 1)) as usize);
    }
    order
}

/// The order of a pointer chase over `lines` lines: `next[i]` is the line
/// loaded after line `i`, all lines on one cycle (Sattolo's shuffle, fixed
/// seed). The host side (`vmsim hw microbench`) links its buffer the same way.
pub fn chase_order(lines: u64) -> Vec<u32> {
    let lines = lines.clamp(1, u32::MAX as u64) as usize;
    let mut perm: Vec<u32> = (0..lines as u32).collect();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..lines).rev() {
        perm.swap(i, (xorshift64(&mut x) % i as u64) as usize);
    }
    let mut next = vec![0u32; lines];
    for k in 0..lines {
        next[perm[k] as usize] = perm[(k + 1) % lines];
    }
    next
}

/// Dependent loads timed in a [`Bench::Chase`] on the model.
const CHASE_LOADS: u64 = 20_000;

/// As [`measure`] for any preset (a file as well as a built-in): an error,
/// not a panic, when the preset does not make a machine or the benchmark
/// does not fit it (a `kib` beyond one node's memory, more cores than it has).
pub fn measure_checked(p: &Preset, b: Bench) -> Result<f64, crate::error::Error> {
    let m = fitted_machine(p, b)?;
    Ok(measure_on(m, p, b))
}

/// Whether [`measure_checked`] would run `b` on `p`, without running it.
pub fn check(p: &Preset, b: Bench) -> Result<(), crate::error::Error> {
    fitted_machine(p, b).map(|_| ())
}

fn fitted_machine(p: &Preset, b: Bench) -> Result<Machine, crate::error::Error> {
    let params = p.machine_params()?;
    let m = Machine::new(&params, NODE_BYTES, 0)
        .map_err(|e| crate::config::fields::cfg_err("machine", e))?;
    let bad = |why: String| crate::config::fields::cfg_err("bench", why);
    let kib = match b {
        Bench::IdleLatency { remote } => {
            if remote && m.topo.nr_nodes() < 2 {
                return Err(bad("remote latency needs two NUMA nodes".into()));
            }
            0
        }
        Bench::SocketLoad { cores }
        | Bench::SocketCopy { cores }
        | Bench::SocketUpdate { cores } => {
            // The write kernels use twice the memory: a warming region and a timed one per core.
            let per_core_kib = if matches!(b, Bench::SocketLoad { .. }) {
                8
            } else {
                16
            } * 1024;
            if cores == 0 || cores as usize > m.cpus.len() {
                return Err(bad(format!(
                    "{cores} cores: the preset has {}",
                    m.cpus.len()
                )));
            }
            if cores * per_core_kib > NODE_BYTES >> 10 {
                return Err(bad(format!(
                    "{cores} cores x {} MiB: more than the benchmark's {} MiB node",
                    per_core_kib >> 10,
                    NODE_BYTES >> 20
                )));
            }
            0
        }
        Bench::Load { kib, threads } => {
            if threads == 0 || threads as usize > m.topo.siblings(0).len() {
                return Err(bad(format!("{threads} threads on one core")));
            }
            kib
        }
        Bench::Chase { kib }
        | Bench::Copy { kib }
        | Bench::Update { kib }
        | Bench::AddAssign { kib }
        | Bench::Fill { kib }
        | Bench::StringFill { kib }
        | Bench::NtFill { kib }
        | Bench::NtCopy { kib } => kib,
        Bench::StringChunks { .. }
        | Bench::NtChunks { .. }
        | Bench::ClzeroChunks { .. }
        | Bench::PageOrder { .. }
        | Bench::Scattered { .. } => {
            let (chunk_kib, how, _) = b.clear_calls().expect("a clearing row");
            if how == PageClear::Clzero && !params.clzero {
                return Err(bad(
                    "clzero: the preset's CPUs do not have it (string.clzero)".into(),
                ));
            }
            if chunk_kib == 0 || chunk_kib % 4 != 0 {
                return Err(bad(format!(
                    "a chunk of {chunk_kib} KiB: chunks are whole 4 KiB pages"
                )));
            }
            chunks_extent_kib(chunk_kib)
        }
    };
    if kib > NODE_BYTES >> 10 {
        return Err(bad(format!(
            "{kib} KiB is more than the {} MiB node the benchmarks run on",
            NODE_BYTES >> 20
        )));
    }
    Ok(m)
}

/// Measures one benchmark on a fresh machine of preset `p`.
pub fn measure(p: &Preset, b: Bench) -> f64 {
    measure_on(machine(p), p, b)
}

/// Issue cycles of a line's accesses on the preset's core, as the kernels
/// below issue them.
#[derive(Clone, Copy)]
struct Issue {
    load: u64,
    store: u64,
    movnti: u64,
    /// The kernels store a line in stores of the store path's width, each a
    /// store-queue entry.
    vector_stores: u64,
}

impl Issue {
    fn of(p: &Preset) -> Issue {
        Issue {
            load: (64 / p.cpu.load_bytes_per_cycle).max(1),
            store: (64 / p.cpu.store_bytes_per_cycle).max(1),
            movnti: crate::kernel::instr::movnti_line_issue(
                p.cpu.issue_width,
                p.cpu.movnti_line_cycles,
            ),
            vector_stores: (64 / p.cpu.store_bytes_per_cycle).max(1),
        }
    }
}

fn measure_on(mut m: Machine, p: &Preset, b: Bench) -> f64 {
    let issue = Issue::of(p);
    for cpu in 0..m.cpus.len() {
        m.set_line_stores(cpu, issue.vector_stores);
    }
    let m = &mut m;
    let (load_issue, store_issue) = (issue.load, issue.store);
    match b {
        Bench::IdleLatency { remote } => idle_latency(m, remote),
        Bench::Chase { kib } => chase(m, kib),
        Bench::Load { kib, threads } => load(m, p, kib, threads, load_issue),
        Bench::SocketLoad { cores } => socket_load(m, cores, load_issue),
        Bench::SocketCopy { cores } | Bench::SocketUpdate { cores } => {
            socket_write(m, cores, matches!(b, Bench::SocketCopy { .. }), &issue)
        }
        Bench::Copy { kib } | Bench::NtCopy { kib } => {
            let half = kib * 1024 / 64 / 2;
            let kind = if matches!(b, Bench::NtCopy { .. }) {
                AccessKind::NtStore
            } else {
                AccessKind::Store
            };
            one_core(m, p, kib, half, |m, i| {
                m.access(0, i, AccessKind::Load, true, 0);
                m.access(0, half + i, kind, true, store_issue.max(load_issue));
            }) * 2.0
        }
        Bench::Update { kib } => {
            let lines = kib * 1024 / 64;
            one_core(m, p, kib, lines, |m, i| {
                m.access(0, i, AccessKind::Load, true, load_issue);
                m.access(0, i, AccessKind::Store, true, store_issue);
            }) * 2.0
        }
        Bench::AddAssign { kib } => {
            let half = kib * 1024 / 64 / 2;
            one_core(m, p, kib, half, |m, i| {
                m.access(0, i, AccessKind::Load, true, load_issue);
                m.access(0, half + i, AccessKind::Load, true, load_issue);
                m.access(0, i, AccessKind::Store, true, store_issue);
            }) * 3.0
        }
        Bench::Fill { kib } => one_core(m, p, kib, kib * 1024 / 64, |m, i| {
            m.access(0, i, AccessKind::Store, true, store_issue);
        }),
        Bench::NtFill { kib } => one_core(m, p, kib, kib * 1024 / 64, |m, i| {
            m.access(0, i, AccessKind::NtStore, true, issue.movnti);
        }),
        Bench::StringChunks { .. }
        | Bench::NtChunks { .. }
        | Bench::ClzeroChunks { .. }
        | Bench::PageOrder { .. }
        | Bench::Scattered { .. } => clear_chunks(m, p, b, &issue),
        Bench::StringFill { kib } => string_fill(m, p, kib, store_issue),
    }
}

/// Dependent loads to random lines of node 0's (or node 1's) memory, ns each.
fn idle_latency(m: &mut Machine, remote: bool) -> f64 {
    let base = node_base(remote as u64);
    let span = (NODE_BYTES >> 6) / 2;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let n = 20_000u64;
    let t0 = m.cpus[0].clock;
    for _ in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        m.access(0, base + (x >> 33) % span, AccessKind::Load, false, 1);
    }
    m.cycles_to_s(m.cpus[0].clock - t0) / n as f64 * 1e9
}

/// A pointer chase over `kib` KiB after an untimed lap, ns per load.
fn chase(m: &mut Machine, kib: u64) -> f64 {
    let next = chase_order((kib * 1024 / 64).max(1));
    let mut line = 0u64;
    let mut step = |m: &mut Machine| {
        m.access(0, line, AccessKind::Load, false, 1);
        line = next[line as usize] as u64;
    };
    for _ in 0..next.len() {
        step(m);
    }
    let t0 = m.cpus[0].clock;
    for _ in 0..CHASE_LOADS {
        step(m);
    }
    m.cycles_to_s(m.cpus[0].clock - t0) / CHASE_LOADS as f64 * 1e9
}

/// likwid's `load` over `kib` KiB by `threads` SMT threads of one core, GB/s.
fn load(m: &mut Machine, p: &Preset, kib: u64, threads: u64, load_issue: u64) -> f64 {
    let lines = kib * 1024 / 64;
    let cpus: Vec<usize> = m
        .topo
        .siblings(0)
        .into_iter()
        .take(threads as usize)
        .collect();
    // Each thread streams its own share of the working set, as likwid splits it.
    let share = lines / threads;
    let passes = passes_for(p, kib);
    let mut go = |m: &mut Machine, k: usize, i: u64| {
        m.access(
            cpus[k],
            k as u64 * share + i % share,
            AccessKind::Load,
            true,
            load_issue,
        );
    };
    let warm = warm_passes(p, kib) * share;
    interleave(m, &cpus, warm, &mut go);
    let t0: Vec<u64> = cpus.iter().map(|&c| m.cpus[c].clock).collect();
    let n = share * passes;
    let mut go2 = |m: &mut Machine, k: usize, i: u64| go(m, k, warm + i);
    interleave(m, &cpus, n, &mut go2);
    let cyc = slowest(m, &cpus, &t0);
    gbs(m, n * threads * 64, cyc)
}

/// MLC's all-core read stream over `cores` cores of a socket, GB/s.
fn socket_load(m: &mut Machine, cores: u64, load_issue: u64) -> f64 {
    let cpus: Vec<usize> = (0..cores as usize).collect();
    let per = 8 * 1024 * 1024 / 64;
    let mut go = |m: &mut Machine, k: usize, i: u64| {
        m.access(
            cpus[k],
            k as u64 * per + i,
            AccessKind::Load,
            true,
            load_issue,
        );
    };
    // As MLC reports it: the bytes all the cores moved while every one
    // of them was still running, over that time (the cores start at 0).
    let (steps, cyc) = interleave(m, &cpus, per, &mut go);
    gbs(m, steps * 64, cyc)
}

/// likwid's `copy` (when `copy`) or `update` on `cores` cores of a socket,
/// a warming pass over one region and a timed one over another, GB/s.
fn socket_write(m: &mut Machine, cores: u64, copy: bool, issue: &Issue) -> f64 {
    let (load_issue, store_issue) = (issue.load, issue.store);
    let cpus: Vec<usize> = (0..cores as usize).collect();
    let per = 8 * 1024 * 1024 / 64;
    // Steps per pass: a copy step moves a line from the first half of
    // the core's region to the second; an update step rewrites one line.
    let steps = if copy { per / 2 } else { per };
    let pass = |m: &mut Machine, region: u64| {
        let mut go = |m: &mut Machine, k: usize, i: u64| {
            let base = (2 * k as u64 + region) * per;
            m.access(cpus[k], base + i, AccessKind::Load, true, load_issue);
            let dst = if copy { base + per / 2 + i } else { base + i };
            m.access(cpus[k], dst, AccessKind::Store, true, store_issue);
        };
        interleave(m, &cpus, steps, &mut go);
    };
    pass(m, 0);
    let t0: Vec<u64> = cpus.iter().map(|&c| m.cpus[c].clock).collect();
    pass(m, 1);
    let cyc = slowest(m, &cpus, &t0);
    // Two explicit streams of 64 B per step, as likwid counts them.
    gbs(m, cores * steps * 128, cyc)
}

/// A clearing row ([`Bench::clear_calls`]): its extent cleared in calls of
/// its chunk, after a warm pass beyond the extent when the node has room, GB/s.
fn clear_chunks(m: &mut Machine, p: &Preset, b: Bench, issue: &Issue) -> f64 {
    let (chunk_kib, how, descending) = b.clear_calls().expect("a clearing row");
    let extent = chunks_extent_kib(chunk_kib) * 1024 / 64;
    let chunk = (chunk_kib * 1024 / 64).min(extent);
    // The warm pass clears lines past the extent, so that none of the
    // timed calls' cached tails is still in a cache; a 1 GiB extent fills
    // the node and goes cold (the LLC is 3-5 % of it).
    let warm = 4 * p.llc.size_kib * 1024 / 64;
    let warmed = extent + warm <= NODE_BYTES / 64;
    // Each 4 KiB page's frame: its own, or for scattered frames the
    // rank at which `scatter_order` faults it, over the extent and
    // the warm pass together (the host hands out frames in fault order).
    let frames: Option<Vec<u64>> = matches!(b, Bench::Scattered { .. }).then(|| {
        let pages = (if warmed { extent + warm } else { extent }).div_ceil(64) as usize;
        let mut f = vec![0; pages];
        for (rank, page) in scatter_order(pages).into_iter().enumerate() {
            f[page] = rank as u64;
        }
        f
    });
    let frame = |line: u64| match &frames {
        Some(f) => f[(line / 64) as usize] * 64 + line % 64,
        None => line,
    };
    let call = ClearCall::new(p, how, issue);
    // One call per chunk of `lines`, the calls in ascending order or
    // last first, each call's lines ascending.
    let clear = |m: &mut Machine, lines: std::ops::Range<u64>| {
        let calls = (lines.end - lines.start).div_ceil(chunk);
        for c in 0..calls {
            let c = if descending { calls - 1 - c } else { c };
            let at = lines.start + c * chunk;
            let n = chunk.min(lines.end - at);
            call.run(m, at, n, &frame);
        }
    };
    if warmed {
        clear(m, extent..extent + warm);
    }
    let t0 = m.cpus[0].clock;
    clear(m, 0..extent);
    gbs(m, extent * 64, m.cpus[0].clock - t0)
}

/// How a clearing row's call clears its lines, with the issue cycles of
/// each way.
struct ClearCall {
    how: PageClear,
    store_issue: u64,
    movnti_issue: u64,
    mov_issue: u64,
    clzero_issue: u64,
    vector_stores: u64,
}

impl ClearCall {
    fn new(p: &Preset, how: PageClear, issue: &Issue) -> ClearCall {
        let params = p
            .machine_params()
            .expect("the bench's machine was built from it");
        ClearCall {
            how,
            store_issue: issue.store,
            movnti_issue: issue.movnti,
            mov_issue: instr::mov_clear_line_issue(
                p.cpu.issue_width,
                p.cpu.scalar_stores_per_cycle,
            ),
            clzero_issue: crate::kernel::instr::CLEAR_CLZERO_PER_LINE
                .div_ceil(params.issue_width)
                .max(1),
            vector_stores: issue.vector_stores,
        }
    }

    /// One call over `n` lines from `at`, each line at `frame(line)`: a
    /// `rep stosb` pays the start-up and bypasses the caches as the chip
    /// does for its length; `movnti` and `clzero` lines are unread and
    /// unallocated, and the `sfence` after a call waits as
    /// `string.sfence_drain_ns` says; a `mov` line is `clear_page_orig`'s
    /// eight ordinary 8-byte stores, each a store-queue entry.
    fn run(&self, m: &mut Machine, at: u64, n: u64, frame: &impl Fn(u64) -> u64) {
        match self.how {
            PageClear::Movnti => {
                for i in 0..n {
                    m.access(
                        0,
                        frame(at + i),
                        AccessKind::NtStore,
                        true,
                        self.movnti_issue,
                    );
                }
                m.sfence(0);
            }
            PageClear::Clzero => {
                m.set_clzero(0, true);
                for i in 0..n {
                    m.access(
                        0,
                        frame(at + i),
                        AccessKind::NtStore,
                        true,
                        self.clzero_issue,
                    );
                }
                m.set_clzero(0, false);
                m.sfence(0);
            }
            PageClear::Mov => {
                m.set_line_stores(0, instr::MOVQ_STORES_PER_LINE);
                for i in 0..n {
                    m.access(0, frame(at + i), AccessKind::Store, true, self.mov_issue);
                }
                m.set_line_stores(0, self.vector_stores);
            }
            PageClear::Stosb => {
                let bypass = m.string_bypass_lines(n);
                m.string_start(0);
                for i in 0..n {
                    let kind = if i < bypass {
                        AccessKind::NtStore
                    } else {
                        AccessKind::StringStore
                    };
                    m.access(0, frame(at + i), kind, true, self.store_issue);
                }
                m.string_end(0);
            }
        }
    }
}

/// `rep stosb` over `kib` KiB, one call per pass, GB/s.
fn string_fill(m: &mut Machine, p: &Preset, kib: u64, store_issue: u64) -> f64 {
    let lines = kib * 1024 / 64;
    let bypass = m.string_bypass_lines(lines);
    // One `rep stosb` per pass, each paying the start-up.
    let pass = |m: &mut Machine| {
        m.string_start(0);
        for i in 0..lines {
            let kind = if i < bypass {
                AccessKind::NtStore
            } else {
                AccessKind::StringStore
            };
            m.access(0, i, kind, true, store_issue);
        }
        m.string_end(0);
    };
    for _ in 0..warm_passes(p, kib) {
        pass(m);
    }
    let passes = passes_for(p, kib);
    let t0 = m.cpus[0].clock;
    for _ in 0..passes {
        pass(m);
    }
    gbs(m, passes * lines * 64, m.cpus[0].clock - t0)
}

/// Passes over a working set that fits a cache, so the cold first pass is a small part.
fn passes_for(p: &Preset, kib: u64) -> u64 {
    if kib <= p.llc.size_kib {
        4
    } else {
        1
    }
}

/// Untimed passes before timing: two when the set fits the LLC, none
/// otherwise. The first brings the set in, and its misses are still
/// outstanding when it ends (an ordinary store keeps its store-queue entry
/// until its line is owned); the second, paced by them, leaves the core in
/// the steady state that the timed passes measure. A real benchmark times
/// milliseconds, in which that drain is lost; four passes over 16 KiB are
/// two thousand cycles, of which it would be most.
fn warm_passes(p: &Preset, kib: u64) -> u64 {
    if kib <= p.llc.size_kib {
        2
    } else {
        0
    }
}

/// Runs `n` steps of `f` on CPU 0 (`f` gets the step, `0..n`) and returns
/// GB/s of 64-byte lines. A working set of `kib` that fits the LLC is
/// warmed by untimed passes ([`warm_passes`]) and timed over several, as [`Bench::Load`]
/// is; a larger one is timed over one cold pass.
fn one_core(
    m: &mut Machine,
    p: &Preset,
    kib: u64,
    n: u64,
    mut f: impl FnMut(&mut Machine, u64),
) -> f64 {
    for _ in 0..warm_passes(p, kib) {
        for i in 0..n {
            f(m, i);
        }
    }
    let passes = passes_for(p, kib);
    let t0 = m.cpus[0].clock;
    for _ in 0..passes {
        for i in 0..n {
            f(m, i);
        }
    }
    gbs(m, passes * n * 64, m.cpus[0].clock - t0)
}

/// The longest time any of `cpus` took since its clock read `t0` (likwid-bench
/// reports the slowest thread's time).
fn slowest(m: &Machine, cpus: &[usize], t0: &[u64]) -> u64 {
    cpus.iter()
        .zip(t0)
        .map(|(&c, &t)| m.cpus[c].clock - t)
        .max()
        .unwrap_or(0)
}

/// Runs `n` steps of `f` on each of `cpus`, a quantum at a time, lowest clock
/// first. Returns the steps all of them had made when the first finished, and
/// that CPU's clock then.
fn interleave(
    m: &mut Machine,
    cpus: &[usize],
    n: u64,
    f: &mut dyn FnMut(&mut Machine, usize, u64),
) -> (u64, u64) {
    let mut next = vec![0u64; cpus.len()];
    let mut first = None;
    loop {
        let Some(k) = (0..cpus.len())
            .filter(|&k| next[k] < n)
            .min_by_key(|&k| (m.cpus[cpus[k]].clock, k))
        else {
            return first.unwrap_or((0, 0));
        };
        let stop = m.cpus[cpus[k]].clock + QUANTUM;
        while m.cpus[cpus[k]].clock < stop && next[k] < n {
            f(m, k, next[k]);
            next[k] += 1;
        }
        if first.is_none() && next[k] == n {
            first = Some((next.iter().sum(), m.cpus[cpus[k]].clock));
        }
    }
}

/// Rows known to be outside their tolerance, with the missing mechanism. The
/// test below fails when one of them comes within tolerance (remove it here)
/// or when any other row leaves its tolerance.
pub const KNOWN_OUTSIDE: &[(&str, Bench, &str)] = &[
    ("epyc-7j13-milan", Bench::StringChunks { chunk_kib: 4 }, "cached rep stosb runs at 17.1 GB/s in the model in 4 KiB calls as in 64 KiB and 2 MiB calls (both within tolerance), where the chip loses 14% from 64 KiB to 4 KiB calls (15.20 to 13.03 GB/s): the model has no drain at a string boundary on AMD (a Zen 4 and a Zen 3 guest clear as fast in 4 KiB calls as in 64 KiB ones, docs/hw.md) and its 62-cycle start-up overlaps the lines still in flight, so what costs the chip 4 KiB calls is not modelled. The row clears physically contiguous frames; the sweep ran on 4 KiB pages, whose frames are not known: with the frames in a fixed random order the model gives 14.44 / 14.94 / 15.01 GB/s in 4 KiB / 64 KiB / 2 MiB calls (+10.8 / -1.7 / +1.3%), the cross-page stream no longer helping; a lower bound, as the model overstates what scattering costs on the Zen 3 guest (docs/store-path.md)"),
    ("xeon-e5-2699v3-2s", Bench::Load { kib: 23_654, threads: 1 }, "the LLC-to-L2 path is limited to the ~14 B/cycle Intel gives as Broadwell's sustained L3 bandwidth (Haswell has no figure of its own); likwid measures 10.0 B/cycle on the stand-in: the L3 hits' latency under a stream, longer than the idle one the model charges, is not modelled"),
    ("xeon-e5-2699v3-2s", Bench::Update { kib: 169 }, "the L2-to-L1 path carries fills and write-backs at the 25 B/cycle Intel gives as sustained, which x += y on an E5-2680 v3 nearly reaches (23 B/cycle); likwid's update on the stand-in moves 19.7 B/cycle through it"),
    ("xeon-8358-icx", Bench::Copy { kib: 660 }, "the L2-to-L1 path runs at Skylake-SP's documented 52 B/cycle (no Ice Lake-SP figure found); through it the stand-in's load moves 46, its copy 40 and its update 34 B/cycle of fills and write-backs"),
    ("xeon-8358-icx", Bench::Update { kib: 660 }, "as the L2 copy row: the L2-to-L1 path at Skylake-SP's 52 B/cycle, where the stand-in's update moves 34 B/cycle of fills and write-backs"),
    ("xeon-8358-icx", Bench::SocketCopy { cores: 32 }, "Ice Lake-SP turns a streaming store's read for ownership into an ownership grant without data when memory is heavily loaded (SpecI2M: Intel, Hot Chips 2020, via G. Hager, blogs.fau.de/hager, on write-allocate evasion on Ice Lake-SP), so its copy moves 2/3 of the model's DRAM traffic; not modelled"),
    ("xeon-8358-icx", Bench::Load { kib: 25_600, threads: 1 }, "the LLC-to-L2 path is limited to Skylake-SP's documented ~15 B/cycle (no Ice Lake-SP figure found); likwid measures 10.3 B/cycle on the stand-in"),
    ("epyc-7j13-milan", Bench::Load { kib: 10_312, threads: 1 }, "the L3-to-L2 path runs at Downs's 0.5 line per cycle for Zen 1-3 (32 B/cycle), a peak; likwid measures 23 B/cycle on the Zen 2 stand-in, whose L3 is half the size and a generation older; no Zen 3 figure was found"),
    ("xeon-6238m-clx", Bench::Update { kib: 9_240 }, "the LLC-to-L2 path is limited to 15 B/cycle with write-backs sharing it (the Haswell-EP finding); the stand-in's L3 update moves 19.0 B/cycle of reads and write-backs where its load moves 9.6, so on this mesh chip the load's limit is not the path's, and write-backs do not share it as modelled (the same gap, within tolerance, on Ice Lake-SP: -16.7%)"),
    ("xeon-6238m-clx", Bench::Load { kib: 9_240, threads: 1 }, "the LLC-to-L2 path is limited to Skylake-SP's documented ~15 B/cycle; likwid measures 9.6 B/cycle on the stand-in (23.9 GB/s at 2.5 GHz)"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_calibration_row_is_a_reference_whose_preset_says_it_is_calibrated() {
        for (p, b, key) in CALIBRATION {
            assert!(
                REFERENCES.iter().any(|r| r.preset == *p && r.bench == *b),
                "{p} {b:?}"
            );
            let (sec, leaf) = key.split_once('.').unwrap();
            let text = embedded_machines().iter().find(|(n, _)| n == p).unwrap().1;
            let t: toml::Table = toml::from_str(text).unwrap();
            let src = t[sec][leaf]["source"].as_str().unwrap();
            assert!(
                src.starts_with("calibrated against") || src.starts_with("derived from"),
                "{p} {key}: {src}"
            );
            assert!(!KNOWN_OUTSIDE.iter().any(|(q, c, _)| q == p && c == b));
        }
    }

    #[test]
    fn write_backs_share_the_fill_paths() {
        // x += y moves three lines per element over each path it runs on:
        // two fills and the write-back of x. In the L2 (L2-to-L1 path,
        // 25 B/cycle) and in the LLC (LLC-to-L2 path, 14 B/cycle) of the
        // E5-2699 v3 preset (2.3 GHz), the three together run at the path's
        // rate; were the write-backs free, at 1.5 times it.
        let p = preset("xeon-e5-2699v3-2s");
        let mut free = p.clone();
        free.l2.writebacks_share_sustained = false;
        free.llc.writebacks_share_sustained = false;
        for (kib, bytes_per_cycle) in [(128, 25.0), (16 * 1024, 14.0)] {
            let rate = bytes_per_cycle * 2.3;
            for (p, share) in [(&p, 1.0), (&free, 1.5)] {
                let gbs = measure(p, Bench::AddAssign { kib });
                assert!(
                    (gbs / (rate * share) - 1.0).abs() < 0.01,
                    "{kib} KiB: {gbs} GB/s against {} (x {share})",
                    rate * share
                );
            }
        }
    }

    #[test]
    fn the_table_ends_with_the_counts() {
        let row = |within, calibrates: Option<&str>| Row {
            preset: "p".into(),
            bench: Bench::IdleLatency { remote: false },
            description: "d".into(),
            published: 1.0,
            model: 1.0,
            error: 0.0,
            tolerance: 0.1,
            within,
            calibrates: calibrates.map(String::from),
            source: "s".into(),
        };
        let t = format(&[
            row(true, Some("l2.superqueue")),
            row(false, None),
            row(true, None),
        ]);
        assert!(
            t.contains("3 rows (1 of them calibration rows): 2 within tolerance, 1 outside (!)."),
            "{t}"
        );
        assert!(t.contains("[calibrates l2.superqueue] s"));
        assert!(!format(&[row(true, None)]).contains("[calibrates K]"));
    }

    #[test]
    fn every_reference_names_a_preset_and_a_source() {
        for r in REFERENCES {
            assert!(
                embedded_machines().iter().any(|(n, _)| *n == r.preset),
                "{}",
                r.preset
            );
            assert!(!r.source.is_empty() && r.published > 0.0 && r.tolerance > 0.0);
        }
    }

    #[test]
    fn a_dependent_load_chase_measures_the_presets_idle_latency() {
        let p = preset("xeon-e5-2699v3-2s");
        let ns = measure(&p, Bench::IdleLatency { remote: false });
        let want =
            p.ns_to_cycles(p.memory.local_latency_ns) as f64 / p.cpu.freq_mhz as f64 * 1000.0;
        // A handful of the 20 000 random lines repeat (cache hits): within 0.5 %.
        assert!((ns - want).abs() < 0.005 * want, "{ns} vs {want}");
    }

    #[test]
    fn a_chase_slows_as_its_buffer_leaves_each_cache_and_a_warm_fill_beats_a_cold_one() {
        let p = preset("xeon-e5-2699v3-2s");
        let ns = |kib| measure_checked(&p, Bench::Chase { kib }).unwrap();
        let (l1, l2, llc, dram) = (ns(16), ns(128), ns(8 * 1024), ns(256 * 1024));
        assert!(l1 < l2 && l2 < llc && llc < dram, "{l1} {l2} {llc} {dram}");
        let fill = |kib| measure_checked(&p, Bench::Fill { kib }).unwrap();
        assert!(fill(16) > 2.0 * fill(256 * 1024));
    }

    #[test]
    fn an_l1_resident_fill_runs_at_the_store_path_rate_on_every_preset() {
        // Warmed by two passes, four timed passes over 16 KiB are all L1
        // hits at 64 B per 64 / store_bytes_per_cycle cycles. With one warm
        // pass its store misses were still draining in the timed ones
        // (Milan 9% and Cascade Lake-SP 7% slow).
        for (name, _) in embedded_machines() {
            let p = preset(name);
            let cycles_per_line = (64 / p.cpu.store_bytes_per_cycle).max(1) as f64;
            let want = 64.0 / cycles_per_line * p.cpu.freq_mhz as f64 / 1e3;
            let got = measure_checked(&p, Bench::Fill { kib: 16 }).unwrap();
            assert!(
                (got / want - 1.0).abs() < 0.005,
                "{name}: {got} GB/s, {want}"
            );
        }
    }

    #[test]
    fn a_benchmark_that_does_not_fit_the_preset_is_an_error_naming_it() {
        let p = preset("xeon-e5-1650v3-1s");
        for b in [
            Bench::Chase { kib: 4 << 20 },
            Bench::StringChunks { chunk_kib: 6 },
            Bench::StringChunks { chunk_kib: 2 << 20 },
            Bench::NtChunks { chunk_kib: 6 },
            Bench::ClzeroChunks { chunk_kib: 4 },
            Bench::IdleLatency { remote: true },
            Bench::SocketLoad { cores: 1000 },
            Bench::Load {
                kib: 16,
                threads: 3,
            },
        ] {
            match measure_checked(&p, b) {
                Err(crate::error::Error::Config { key, .. }) => assert_eq!(key, "bench", "{b:?}"),
                other => panic!("{b:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn page_order_rows_follow_the_streamer_across_pages_only_where_the_preset_says() {
        // Ascending 4 KiB rep stosb calls are the 4 KiB chunk row itself.
        let milan = preset("epyc-7j13-milan");
        let asc = |p: &Preset, kind| {
            measure(
                p,
                Bench::PageOrder {
                    kind,
                    descending: false,
                },
            )
        };
        let desc = |p: &Preset, kind| {
            measure(
                p,
                Bench::PageOrder {
                    kind,
                    descending: true,
                },
            )
        };
        assert_eq!(
            asc(&milan, PageClear::Stosb),
            measure(&milan, Bench::StringChunks { chunk_kib: 4 })
        );
        // Milan's streamer goes on into the next page ascending, so a mov
        // clear (read for ownership) is faster ascending than descending,
        // where each page starts its stream afresh.
        let (a, d) = (asc(&milan, PageClear::Mov), desc(&milan, PageClear::Mov));
        assert!(a > 1.1 * d, "milan mov {a} vs {d}");
        // Unread lines (clzero) read nothing for a streamer to follow: the
        // order does not matter.
        let (a, d) = (
            asc(&milan, PageClear::Clzero),
            desc(&milan, PageClear::Clzero),
        );
        assert!((a - d).abs() < 0.01 * a, "milan clzero {a} vs {d}");
        // Intel's streamer stays in its page: each page starts afresh in
        // either order, so the two orders are within 2%.
        let icx = preset("xeon-8358-icx");
        let (a, d) = (asc(&icx, PageClear::Mov), desc(&icx, PageClear::Mov));
        assert!((a - d).abs() < 0.02 * a, "icx mov {a} vs {d}");
        // No clzero on Intel: refused by name.
        match measure_checked(
            &icx,
            Bench::PageOrder {
                kind: PageClear::Clzero,
                descending: true,
            },
        ) {
            Err(crate::error::Error::Config { key, .. }) => assert_eq!(key, "bench"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unread_lines_in_calls_run_at_the_posted_write_bound_or_the_issue_bound() {
        // Milan: clzero lines hold one of 24 miss buffers for posted_write_ns
        // (33.4 ns): 24 x 64 B / 33.4 ns = 45.99 GB/s, below clzero's issue
        // (one cycle per line at 2.45 GHz, 156.8 GB/s), whatever the call
        // size; movnti's eight stores per line bound it at 64 B / 8 cycles x
        // 2.45 GHz = 19.6 GB/s.
        let p = preset("epyc-7j13-milan");
        for chunk_kib in [4, 2048] {
            let cz = measure(&p, Bench::ClzeroChunks { chunk_kib });
            assert!((cz - 24.0 * 64.0 / 33.4).abs() < 0.2, "{chunk_kib}: {cz}");
            let nt = measure(&p, Bench::NtChunks { chunk_kib });
            assert!((nt - 19.6).abs() < 0.01, "{chunk_kib}: {nt}");
        }
        // Ice Lake-SP issues its eight movnti a line in 4 cycles (two store
        // ports), 41.6 GB/s at 2.6 GHz: the posted-write bound, 12 x 64 B /
        // 31.3 ns = 24.5 GB/s, is what holds it. At one store a cycle it
        // would be issue-bound at 20.8.
        let p = preset("xeon-8358-icx");
        assert_eq!(p.cpu.movnti_line_cycles, 4);
        let nt = measure(&p, Bench::NtChunks { chunk_kib: 64 });
        assert!((nt - 12.0 * 64.0 / 31.3).abs() < 0.3, "{nt}");
        let mut slow = p.clone();
        slow.cpu.movnti_line_cycles = 8;
        let nt = measure(&slow, Bench::NtChunks { chunk_kib: 64 });
        assert!((nt - 20.8).abs() < 0.01, "{nt}");
    }

    #[test]
    fn scattered_frames_take_the_cross_page_stream_from_milan_and_nothing_from_ice_lake() {
        // Milan's streamer goes on into the physically next 4 KiB page; with
        // the pages on scattered frames that page holds nothing of the
        // stream, so each page starts a stream of its own. Ice Lake-SP's
        // streamer stops at the page either way: the same timings.
        let scattered = Bench::Scattered {
            kind: PageClear::Stosb,
            chunk_kib: 4,
            descending: false,
        };
        let in_order = Bench::StringChunks { chunk_kib: 4 };
        let milan = preset("epyc-7j13-milan");
        let (a, b) = (measure(&milan, in_order), measure(&milan, scattered));
        assert!(b < 0.9 * a, "Milan: {a} in order, {b} scattered");
        let icx = preset("xeon-8358-icx");
        let (a, b) = (measure(&icx, in_order), measure(&icx, scattered));
        assert!(
            (b / a - 1.0).abs() < 0.005,
            "Ice Lake-SP: {a} in order, {b} scattered"
        );
    }

    #[test]
    fn scatter_order_is_a_fixed_permutation_with_few_neighbours_kept() {
        let n = 4096;
        let order = scatter_order(n);
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        assert_eq!(order, scatter_order(n));
        // Pages faulted one after the other are rarely neighbours, so the
        // frames they get in fault order are rarely the next page's.
        let neighbours = order
            .windows(2)
            .filter(|w| w[0].abs_diff(w[1]) == 1)
            .count();
        assert!(neighbours < n / 100, "{neighbours}");
    }

    #[test]
    fn microbenchmarks_stay_within_tolerance_except_the_known_gaps() {
        let rows = run(None);
        assert_eq!(rows.len(), REFERENCES.len());
        let mut wrong = Vec::new();
        for r in &rows {
            let known = KNOWN_OUTSIDE
                .iter()
                .any(|(p, b, _)| *p == r.preset && *b == r.bench);
            if known == r.within {
                wrong.push(format!(
                    "{} {}: {:+.1}% (tolerance {:.0}%, listed as known gap: {known})",
                    r.preset,
                    r.description,
                    100.0 * r.error,
                    100.0 * r.tolerance
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "update KNOWN_OUTSIDE or the model:\n{}\n\n{}",
            wrong.join("\n"),
            format(&rows)
        );
        for (p, b, _) in KNOWN_OUTSIDE {
            assert!(
                REFERENCES.iter().any(|r| r.preset == *p && r.bench == *b),
                "{p} {b:?} has no reference"
            );
        }
    }
}
