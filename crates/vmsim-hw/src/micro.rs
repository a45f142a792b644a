//! The `microbench` command: the microbenchmarks of `vmsim validate`
//! (`vmsim_core::validate::Bench`) run for real on this host, and beside
//! each the model's figure for the same `Bench` on a machine preset (the
//! host's calibrated preset when `vmsim hw validate` calls it).
//!
//! Sizes follow the host's caches as sysfs reports them: half of L1d, of L2
//! and of the LLC for the cache rows, and max(4 x LLC, 64 MiB) for the DRAM
//! rows, in quick mode too (a smaller buffer would measure the cache); quick
//! mode makes fewer and shorter repetitions instead. Every host figure is
//! the median of its repetitions, each after an untimed warm-up (one during
//! which the thread was switched out is dropped and run again), on a thread
//! pinned to CPU 0 (the all-CPU row pins one thread per CPU); the model runs
//! only after every host measurement, so it never competes with them.
//!
//! Invariant: the host routine of a `Bench` does what the model's does: the
//! same bytes counted (a copy counts both halves, an update each line twice),
//! the same chase order ([`chase_order`]), the same instructions where the
//! model names them (`rep stosb`, `movnti`); ordinary loads and stores are
//! 32 B AVX2 (`vmovdqa`/`vpaddq`, in inline asm so the compiler cannot turn
//! a loop into a library call) or 8 B `mov` where AVX2 is missing.

use crate::opts::{median, round3, stats, Opts};
use crate::prim::{mov_clear, mov_copy, nt_clear, nt_copy, rep_stosb, sfence};
use crate::reps::{repeat, switches, Samples};
use crate::sys::{self, Backing, Mapping, HPAGE, SUBPAGE};
use crate::{config_err, host, HwError};
use serde_json::{json, Value};
use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};
use vmsim_core::validate::{chase_order, check, measure_checked, Bench};

const ACCEPTED: [&str; 3] = ["preset", "quick", "reps"];

/// How long to run: repetitions, bytes moved per timed repetition of a
/// bandwidth row (enough passes over a cache-sized buffer for a timer
/// reading of milliseconds), dependent loads per repetition of a chase.
#[derive(Clone, Copy, Debug)]
pub struct Effort {
    pub reps: usize,
    pub bytes_per_rep: usize,
    pub loads_per_rep: usize,
}

impl Effort {
    pub fn new(quick: bool, reps: usize) -> Effort {
        if quick {
            Effort {
                reps,
                bytes_per_rep: 16 << 20,
                loads_per_rep: 50_000,
            }
        } else {
            Effort {
                reps,
                bytes_per_rep: 64 << 20,
                loads_per_rep: 1_000_000,
            }
        }
    }
}

/// The largest buffer a row uses: the model's benchmark node holds no
/// more, and a row's host and model figures are of the same buffer.
pub const MAX_ROW_BYTES: u64 = vmsim_core::validate::NODE_BYTES;

/// What bounds the DRAM rows' buffer below 4 x the LLC, when something does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DramCap {
    /// The model's benchmark node ([`MAX_ROW_BYTES`]).
    Node,
    /// The host's available memory (three quarters of MemAvailable, less
    /// room for the rest of the command).
    HostMemory,
}

/// The host's sizes, in bytes.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub l1: u64,
    pub l2: u64,
    pub llc: u64,
    /// The DRAM rows' buffer: 4 x the LLC and at least 64 MiB
    /// ([`Sizes::dram_wanted`]), within [`MAX_ROW_BYTES`] and the host's
    /// memory.
    pub dram: u64,
    pub dram_wanted: u64,
    /// What made `dram` smaller than `dram_wanted` (None: nothing).
    pub dram_cap: Option<DramCap>,
}

impl Sizes {
    /// The sizes of host `h`.
    pub fn of(h: &host::HostFacts) -> Sizes {
        let llc = h.llc_bytes();
        let wanted = (4 * llc).max(64 << 20);
        let memory = h
            .mem_available_bytes
            .map(|a| (a / 4 * 3).saturating_sub(64 << 20) / HPAGE as u64 * HPAGE as u64);
        let (dram, dram_cap) = match memory {
            Some(m) if m < wanted.min(MAX_ROW_BYTES) => {
                (m.max(HPAGE as u64), Some(DramCap::HostMemory))
            }
            _ if wanted > MAX_ROW_BYTES => (MAX_ROW_BYTES, Some(DramCap::Node)),
            _ => (wanted, None),
        };
        Sizes {
            l1: h.cache_bytes(1),
            l2: h.cache_bytes(2),
            llc,
            dram,
            dram_wanted: wanted,
            dram_cap,
        }
    }

    /// What a row on the DRAM buffer says of its size when it was capped.
    pub fn dram_note(&self) -> Option<String> {
        let why = match self.dram_cap? {
            DramCap::Node => format!(
                "the model's benchmark node holds {} MiB",
                MAX_ROW_BYTES >> 20
            ),
            DramCap::HostMemory => {
                "three quarters of the host's available memory allows no more".to_string()
            }
        };
        Some(format!(
            "buffer capped at {} MiB, {:.1} x the LLC: 4 x the LLC would be {} MiB and {why}",
            self.dram >> 20,
            self.dram as f64 / self.llc as f64,
            self.dram_wanted >> 20
        ))
    }

    /// What row `b` says of its size, if anything (a capped DRAM buffer).
    pub fn note(&self, b: Bench) -> Option<String> {
        let kib = match b {
            Bench::Load { kib, .. }
            | Bench::Fill { kib }
            | Bench::Copy { kib }
            | Bench::Update { kib }
            | Bench::StringFill { kib }
            | Bench::NtFill { kib }
            | Bench::NtCopy { kib } => kib,
            _ => return None,
        };
        (kib * 1024 == self.dram)
            .then(|| self.dram_note())
            .flatten()
    }

    /// Whether row `b` works inside the core's own caches (its buffer no
    /// larger than the L2): what slows such a row on a shared host is
    /// another thread on the same physical core (a guest does not see the
    /// host's other hardware thread), busy for microseconds or for minutes
    /// and only ever slowing, so its host figure is the fastest of many
    /// short timings spread over the command ([`IN_CORE_ROUNDS`]): the
    /// core alone, as the model has it. Rows that reach the LLC or memory
    /// keep the median of long repetitions: their spread is partly the
    /// state they find (what the L3 still holds), not only disturbance.
    pub fn in_core(&self, b: Bench) -> bool {
        let kib = match b {
            Bench::Chase { kib }
            | Bench::Load { kib, threads: 1 }
            | Bench::Fill { kib }
            | Bench::Copy { kib }
            | Bench::AddAssign { kib }
            | Bench::StringFill { kib } => kib,
            _ => return false,
        };
        self.fits_core(kib * 1024)
    }

    /// Whether a buffer of `bytes` stays in the core's own caches (no
    /// larger than a known L2): the rule of [`Sizes::in_core`], which
    /// `calibrate`'s chases and loads follow too.
    pub fn fits_core(&self, bytes: u64) -> bool {
        self.l2 > 0 && bytes <= self.l2
    }

    /// The effort for a buffer of `bytes`: [`Effort::in_core`] where it
    /// fits the core's caches, else `other`.
    pub fn effort_for(&self, bytes: u64, quick: bool, other: Effort) -> Effort {
        if self.fits_core(bytes) {
            Effort::in_core(quick)
        } else {
            other
        }
    }

    /// The rows: for each level with a known size, a chase at half of it and
    /// load, store fill and copy at half of it; at the DRAM size the idle
    /// latency, those kernels again, update, `rep stosb`, `movnti` fill, a
    /// non-temporal copy, and the all-CPU read over `cpus` CPUs; `x += y`
    /// at half the L2 and half the LLC.
    pub fn benches(&self, cpus: u64) -> Vec<Bench> {
        let mut out = Vec::new();
        let levels: Vec<u64> = [self.l1, self.l2, self.llc]
            .iter()
            .filter(|&&b| b >= 8 << 10)
            .map(|b| (b / 2).min(MAX_ROW_BYTES) / 1024)
            .collect();
        for &kib in &levels {
            out.push(Bench::Chase { kib });
        }
        out.push(Bench::IdleLatency { remote: false });
        let dram = self.dram / 1024;
        for kib in levels.iter().copied().chain([dram]) {
            out.push(Bench::Load { kib, threads: 1 });
        }
        for kib in levels.iter().copied().chain([dram]) {
            out.push(Bench::Fill { kib });
        }
        for kib in levels.iter().copied().chain([dram]) {
            out.push(Bench::Copy { kib });
        }
        out.push(Bench::Update { kib: dram });
        for &kib in levels.iter().skip(1) {
            out.push(Bench::AddAssign { kib });
        }
        if let Some(&l2) = levels.get(1) {
            out.push(Bench::StringFill { kib: l2 });
        }
        out.push(Bench::StringFill { kib: dram });
        out.push(Bench::NtFill { kib: dram });
        out.push(Bench::NtCopy { kib: dram });
        out.push(Bench::SocketLoad { cores: cpus });
        out
    }
}

/// The CPUs the all-CPU row uses: every online CPU of a one-socket host,
/// one socket's cores (CPUs 0..n) otherwise, as the model's row uses socket 0.
pub fn all_cpus(h: &host::HostFacts) -> u64 {
    let online = h.online_cpus.max(1);
    if h.sockets <= 1 {
        online
    } else {
        (h.cores_per_socket * h.threads_per_core).clamp(1, online)
    }
}

/// A row and, when it is skipped, why.
pub type PlannedRow = (Bench, Option<String>);

/// The rows of host `h` against `preset`: each row with None, or with why
/// the preset's benchmark machine cannot run it (a `bench` refusal: the
/// row is skipped, not measured). A refusal of the machine itself is an
/// error.
pub fn plan(
    h: &host::HostFacts,
    preset: Option<&vmsim_core::config::Preset>,
) -> Result<(Sizes, Vec<PlannedRow>), HwError> {
    let sizes = Sizes::of(h);
    let mut rows = Vec::new();
    for b in sizes.benches(all_cpus(h)) {
        let skip = match preset.map(|p| check(p, b)) {
            Some(Err(vmsim_core::api::Error::Config { key, message })) if key == "bench" => Some(
                format!("the preset's benchmark machine cannot run it: {message}"),
            ),
            Some(Err(e)) => return Err(preset_err(e)),
            _ => None,
        };
        rows.push((b, skip));
    }
    Ok((sizes, rows))
}

// ---------------------------------------------------------------------------
// The routines. Each takes a whole buffer (page-aligned, a multiple of 64 B).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    Load,
    Fill,
    Copy,
    Update,
    AddAssign,
    StringFill,
    NtFill,
    NtCopy,
}

impl Kernel {
    /// Bytes a pass over a `len`-byte buffer counts, as the model counts them.
    pub fn bytes(self, len: usize) -> usize {
        match self {
            Kernel::Update => 2 * len,
            // Two loads and a store per element of x, over half the buffer.
            Kernel::AddAssign => len / 2 * 3,
            _ => len,
        }
    }

    fn of(b: Bench) -> Option<(Kernel, u64)> {
        Some(match b {
            Bench::Load { kib, threads: 1 } => (Kernel::Load, kib),
            Bench::Fill { kib } => (Kernel::Fill, kib),
            Bench::Copy { kib } => (Kernel::Copy, kib),
            Bench::Update { kib } => (Kernel::Update, kib),
            Bench::AddAssign { kib } => (Kernel::AddAssign, kib),
            Bench::StringFill { kib } => (Kernel::StringFill, kib),
            Bench::NtFill { kib } => (Kernel::NtFill, kib),
            Bench::NtCopy { kib } => (Kernel::NtCopy, kib),
            _ => return None,
        })
    }

    pub fn method(self, avx2: bool) -> &'static str {
        match (self, avx2) {
            (Kernel::Load, true) => {
                "vpaddq ymm, [mem]: eight 32 B loads per four lines into four accumulators, the loop 64 B aligned"
            }
            (Kernel::Load, false) => "8 B volatile loads summed",
            (Kernel::Fill, true) => "vmovdqa [mem], ymm (zero): two 32 B stores per line",
            (Kernel::Fill, false) => "8 B mov stores (clear_page_orig's loop)",
            (Kernel::Copy, true) => "vmovdqa 32 B loads and stores, first half to second half",
            (Kernel::Copy, false) => "8 B mov loads and stores, first half to second half",
            (Kernel::Update, true) => "vmovdqa load, vpaddq, vmovdqa store back, 32 B",
            (Kernel::Update, false) => "8 B volatile load, add, store back",
            (Kernel::AddAssign, true) => {
                "x in the first half, y in the second: vmovdqa loads of both, vpaddq, vmovdqa store to x, 32 B"
            }
            (Kernel::AddAssign, false) => {
                "x in the first half, y in the second: 8 B volatile loads of both, add, store to x"
            }
            (Kernel::StringFill, _) => "one rep stosb over the buffer (zero)",
            (Kernel::NtFill, _) => "movnti 8 B per store, sfence after the pass",
            (Kernel::NtCopy, true) => "vmovdqa 32 B loads, vmovntdq 32 B stores, sfence",
            (Kernel::NtCopy, false) => "8 B loads, movnti stores, sfence",
        }
    }
}

/// One pass of `k` over `buf`; returns something the caller must keep alive.
pub fn pass(k: Kernel, buf: &mut [u8], avx2: bool) -> u64 {
    let len = buf.len() / 128 * 128;
    let p = buf.as_mut_ptr();
    let half = len / 2;
    // SAFETY: every routine stays inside `buf[..len]`; the mapping is
    // page-aligned (32 B alignment for vmovdqa); `avx2` was detected.
    unsafe {
        match (k, avx2) {
            (_, _) if len == 0 => 0,
            (Kernel::Load, true) => load_avx2(p, len),
            (Kernel::Load, false) => load_u64(p, len),
            (Kernel::Fill, true) => {
                fill_avx2(p, len);
                0
            }
            (Kernel::Fill, false) => {
                mov_clear(p, len);
                0
            }
            (Kernel::Copy, true) => {
                copy_avx2(p.add(half), p, half, false);
                0
            }
            (Kernel::Copy, false) => {
                mov_copy(p.add(half), p, half);
                0
            }
            (Kernel::Update, true) => {
                update_avx2(p, len);
                0
            }
            (Kernel::Update, false) => {
                update_u64(p, len);
                0
            }
            (Kernel::AddAssign, true) => {
                add_assign_avx2(p, p.add(half), half);
                0
            }
            (Kernel::AddAssign, false) => {
                add_assign_u64(p, p.add(half), half);
                0
            }
            (Kernel::StringFill, _) => {
                rep_stosb(p, len);
                0
            }
            (Kernel::NtFill, _) => {
                nt_clear(p, len);
                sfence();
                0
            }
            (Kernel::NtCopy, true) => {
                copy_avx2(p.add(half), p, half, true);
                sfence();
                0
            }
            (Kernel::NtCopy, false) => {
                nt_copy(p.add(half), p, half);
                sfence();
                0
            }
        }
    }
}

#[target_feature(enable = "avx2")]
unsafe fn load_avx2(p: *const u8, len: usize) -> u64 {
    // Four lines an iteration into four accumulators, the loop aligned to
    // 64 B: on a Zen 3 core one line an iteration ran at 31 B/cycle where
    // its L1 gives 64, two lines at 53-58 and four at 58-63; the same loop
    // straddling a 64 B boundary ran at half (measured with a C copy of
    // it, the fastest of 2000 timings of 1 MiB over 16 KiB). `len` is a
    // multiple of 128 (`pass`): a two-line tail after the loop.
    let mut out = [0u64; 4];
    core::arch::asm!(
        "vpxor ymm0, ymm0, ymm0",
        "vpxor ymm1, ymm1, ymm1",
        "vpxor ymm2, ymm2, ymm2",
        "vpxor ymm3, ymm3, ymm3",
        "cmp {p}, {end4}",
        "jae 3f",
        ".p2align 6",
        "2:",
        "vpaddq ymm0, ymm0, [{p}]",
        "vpaddq ymm1, ymm1, [{p} + 32]",
        "vpaddq ymm2, ymm2, [{p} + 64]",
        "vpaddq ymm3, ymm3, [{p} + 96]",
        "vpaddq ymm0, ymm0, [{p} + 128]",
        "vpaddq ymm1, ymm1, [{p} + 160]",
        "vpaddq ymm2, ymm2, [{p} + 192]",
        "vpaddq ymm3, ymm3, [{p} + 224]",
        "add {p}, 256",
        "cmp {p}, {end4}",
        "jb 2b",
        "3:",
        "cmp {p}, {end}",
        "jae 4f",
        "vpaddq ymm0, ymm0, [{p}]",
        "vpaddq ymm1, ymm1, [{p} + 32]",
        "vpaddq ymm2, ymm2, [{p} + 64]",
        "vpaddq ymm3, ymm3, [{p} + 96]",
        "4:",
        "vpaddq ymm0, ymm0, ymm1",
        "vpaddq ymm2, ymm2, ymm3",
        "vpaddq ymm0, ymm0, ymm2",
        "vmovdqu [{out}], ymm0",
        "vzeroupper",
        p = inout(reg) p => _,
        end4 = in(reg) p.add(len / 256 * 256),
        end = in(reg) p.add(len),
        out = in(reg) out.as_mut_ptr(),
        out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
        options(nostack),
    );
    out.iter().fold(0, |a, &b| a.wrapping_add(b))
}

/// Zeroes `len` bytes (a non-zero multiple of 256) with 8 B `mov` stores, 32 to an
/// iteration, so that the loop's own instructions (three an iteration)
/// leave the store ports the bound: the rate `cpu.scalar_stores_per_cycle`
/// is read from.
///
/// # Safety
/// `p` is 8-byte aligned and valid for `len` bytes.
pub(crate) unsafe fn fill_mov8(p: *mut u8, len: usize) {
    core::arch::asm!(
        ".p2align 6",
        "2:",
        ".set off, 0",
        ".rept 32",
        "mov qword ptr [{p} + off], {z}",
        ".set off, off + 8",
        ".endr",
        "add {p}, 256",
        "cmp {p}, {end}",
        "jb 2b",
        p = inout(reg) p => _,
        end = in(reg) p.add(len),
        z = in(reg) 0u64,
        options(nostack),
    );
}

#[target_feature(enable = "avx2")]
pub(crate) unsafe fn fill_avx2(p: *mut u8, len: usize) {
    core::arch::asm!(
        "vpxor ymm0, ymm0, ymm0",
        ".p2align 6",
        "2:",
        "vmovdqa [{p}], ymm0",
        "vmovdqa [{p} + 32], ymm0",
        "add {p}, 64",
        "cmp {p}, {end}",
        "jb 2b",
        "vzeroupper",
        p = inout(reg) p => _,
        end = in(reg) p.add(len),
        out("ymm0") _,
        options(nostack),
    );
}

#[target_feature(enable = "avx2")]
unsafe fn update_avx2(p: *mut u8, len: usize) {
    core::arch::asm!(
        "vpcmpeqd ymm2, ymm2, ymm2",
        ".p2align 6",
        "2:",
        "vpaddq ymm0, ymm2, [{p}]",
        "vpaddq ymm1, ymm2, [{p} + 32]",
        "vmovdqa [{p}], ymm0",
        "vmovdqa [{p} + 32], ymm1",
        "add {p}, 64",
        "cmp {p}, {end}",
        "jb 2b",
        "vzeroupper",
        p = inout(reg) p => _,
        end = in(reg) p.add(len),
        out("ymm0") _, out("ymm1") _, out("ymm2") _,
        options(nostack),
    );
}

/// `x[i] += y[i]` over `len` bytes of each, 32 B lanes of u64.
#[target_feature(enable = "avx2")]
unsafe fn add_assign_avx2(x: *mut u8, y: *const u8, len: usize) {
    core::arch::asm!(
        ".p2align 6",
        "2:",
        "vmovdqa ymm0, [{x}]",
        "vmovdqa ymm1, [{x} + 32]",
        "vpaddq ymm0, ymm0, [{y}]",
        "vpaddq ymm1, ymm1, [{y} + 32]",
        "vmovdqa [{x}], ymm0",
        "vmovdqa [{x} + 32], ymm1",
        "add {x}, 64",
        "add {y}, 64",
        "cmp {x}, {end}",
        "jb 2b",
        "vzeroupper",
        x = inout(reg) x => _,
        y = inout(reg) y => _,
        end = in(reg) x.add(len),
        out("ymm0") _, out("ymm1") _,
        options(nostack),
    );
}

/// The copy loop with store instruction `$st` (`vmovdqa` or `vmovntdq`).
macro_rules! copy_loop_avx2 {
    ($st:literal, $d:expr, $s:expr, $len:expr) => {
        core::arch::asm!(
            ".p2align 6",
            "2:",
            "vmovdqa ymm0, [{s}]",
            "vmovdqa ymm1, [{s} + 32]",
            concat!($st, " [{d}], ymm0"),
            concat!($st, " [{d} + 32], ymm1"),
            "add {s}, 64",
            "add {d}, 64",
            "cmp {s}, {end}",
            "jb 2b",
            "vzeroupper",
            s = inout(reg) $s => _,
            d = inout(reg) $d => _,
            end = in(reg) $s.add($len),
            out("ymm0") _, out("ymm1") _,
            options(nostack),
        )
    };
}

/// `len` bytes from `s` to `d`, 32 B loads, 32 B ordinary or non-temporal stores.
#[target_feature(enable = "avx2")]
unsafe fn copy_avx2(d: *mut u8, s: *const u8, len: usize, nt: bool) {
    if nt {
        copy_loop_avx2!("vmovntdq", d, s, len);
    } else {
        copy_loop_avx2!("vmovdqa", d, s, len);
    }
}

unsafe fn load_u64(p: *const u8, len: usize) -> u64 {
    let q = p as *const u64;
    let mut acc = [0u64; 4];
    for i in (0..len / 8).step_by(4) {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = a.wrapping_add(std::ptr::read_volatile(q.add(i + k)));
        }
    }
    acc.iter().fold(0, |a, &b| a.wrapping_add(b))
}

unsafe fn add_assign_u64(x: *mut u8, y: *const u8, len: usize) {
    let (x, y) = (x as *mut u64, y as *const u64);
    for i in 0..len / 8 {
        let w = x.add(i);
        let v = std::ptr::read_volatile(w).wrapping_add(std::ptr::read_volatile(y.add(i)));
        std::ptr::write_volatile(w, v);
    }
}

unsafe fn update_u64(p: *mut u8, len: usize) {
    let q = p as *mut u64;
    for i in 0..len / 8 {
        let w = q.add(i);
        std::ptr::write_volatile(w, std::ptr::read_volatile(w).wrapping_add(1));
    }
}

/// A pre-faulted THP-backed buffer of `bytes` (rounded down to 128 B, at least 128 B).
fn buffer(bytes: u64) -> Result<Mapping, HwError> {
    buffer_on(bytes, Backing::Thp)
}

/// Clean timings of a row inside the core's own caches (quick mode: 100).
pub const IN_CORE_REPS: usize = 1000;

impl Effort {
    /// The effort of a row inside the core's own caches ([`Sizes::in_core`]):
    /// many timings of about 10-50 us (1 MiB moved, or 10 000 dependent
    /// loads), of which the row reads the fastest.
    pub fn in_core(quick: bool) -> Effort {
        Effort {
            reps: if quick { 100 } else { IN_CORE_REPS },
            bytes_per_rep: 1 << 20,
            loads_per_rep: 10_000,
        }
    }
}

/// As [`buffer`], on pages of `backing`.
fn buffer_on(bytes: u64, backing: Backing) -> Result<Mapping, HwError> {
    let len = ((bytes as usize) / 128 * 128).max(128);
    let mut m = Mapping::anon(len, backing)?;
    // A non-zero pattern so that a load never reads the shared zero page.
    sys::prefault(m.as_mut_slice(), SUBPAGE, 1);
    Ok(m)
}

/// GB/s of each repetition of `k` over a `bytes` buffer: an untimed pass
/// first, then per repetition as many passes as make `e.bytes_per_rep`.
pub fn bandwidth(k: Kernel, bytes: u64, e: Effort, avx2: bool) -> Result<Samples, HwError> {
    let mut m = buffer(bytes)?;
    let buf = &mut m.as_mut_slice()[..(bytes as usize / 128 * 128).max(128)];
    let per_pass = k.bytes(buf.len() / 128 * 128);
    let passes = e.bytes_per_rep.div_ceil(per_pass).max(1);
    black_box(pass(k, buf, avx2));
    repeat(e.reps, None, || {
        let t0 = Instant::now();
        for _ in 0..passes {
            black_box(pass(k, buf, avx2));
        }
        (passes * per_pass) as f64 / t0.elapsed().as_secs_f64() / 1e9
    })
}

/// A random cyclic pointer chase through the lines of a buffer, in
/// [`chase_order`], warmed by one untimed lap (at most four times
/// `loads_per_rep` loads); each [`Chaser::rep`] is about 2 ms of dependent
/// loads (at least 1000, at most `loads_per_rep`): long ones, at DRAM
/// latency, would nearly all be spoilt by a context switch on a shared host.
struct Chaser {
    _m: Mapping,
    p: usize,
    loads: usize,
}

impl Chaser {
    fn new(bytes: u64, backing: Backing, e: Effort) -> Result<Chaser, HwError> {
        let mut m = buffer_on(bytes, backing)?;
        let lines = (bytes / 64).max(1);
        let next = chase_order(lines);
        let base = m.as_mut_slice().as_mut_ptr();
        for (from, &to) in next.iter().enumerate() {
            // SAFETY: both line indices < lines, so inside the mapping.
            unsafe { *(base.add(from * 64) as *mut usize) = base.add(to as usize * 64) as usize };
        }
        drop(next);
        let p = Chaser::walk(base as usize, (lines as usize).min(4 * e.loads_per_rep));
        let t0 = Instant::now();
        let p = Chaser::walk(p, 1000);
        let est = (t0.elapsed().as_nanos() as f64 / 1000.0).max(0.1);
        let loads = ((2e6 / est) as usize).clamp(1000, e.loads_per_rep.max(1000));
        Ok(Chaser { _m: m, p, loads })
    }

    fn walk(mut p: usize, n: usize) -> usize {
        for _ in 0..n {
            // SAFETY: every link points at a line inside the mapping.
            p = unsafe { std::ptr::read_volatile(p as *const usize) };
        }
        p
    }

    /// ns per dependent load of one repetition.
    fn rep(&mut self) -> f64 {
        let t0 = Instant::now();
        self.p = black_box(Chaser::walk(self.p, self.loads));
        t0.elapsed().as_nanos() as f64 / self.loads as f64
    }
}

/// ns per dependent load of each repetition of a chase through the lines of
/// a `bytes` buffer on pages of `backing` ([`Chaser`]); repetitions stop
/// early once `budget` has passed (see [`repeat`]). `calibrate` runs this
/// too, so its latencies and this command's come from one routine.
pub fn chase(
    bytes: u64,
    backing: Backing,
    e: Effort,
    budget: Option<Duration>,
) -> Result<Samples, HwError> {
    let mut c = Chaser::new(bytes, backing, e)?;
    repeat(e.reps, budget, || c.rep())
}

/// The extra ns per dependent load that 4 KiB pages cost over THP on a
/// `bytes` buffer: each repetition chases a THP-backed buffer, then one on
/// 4 KiB pages, right after each other, and records the difference, so a
/// drift of the host's memory latency between two separate measurements
/// does not enter it (a repetition is dropped if either half was switched
/// out). Read the median: noise moves a difference either way.
pub fn walk_extra(bytes: u64, e: Effort, budget: Option<Duration>) -> Result<Samples, HwError> {
    let mut thp = Chaser::new(bytes, Backing::Thp, e)?;
    let mut small = Chaser::new(bytes, Backing::Small, e)?;
    repeat(e.reps, budget, || {
        let a = thp.rep();
        small.rep() - a
    })
}

/// GB/s of each repetition of `cpus` threads, one pinned to each of CPUs
/// 0..cpus, each loading its own `bytes / cpus` buffer (untimed pass first;
/// all start together at a barrier); a repetition's time is its slowest
/// thread's. 4 x `reps` repetitions run; the first `reps` in which no thread
/// was switched out are kept (every one if none was clean).
pub fn all_cpu_load(cpus: usize, bytes: u64, e: Effort, avx2: bool) -> Result<Samples, HwError> {
    let cpus = cpus.max(1);
    let share = (bytes / cpus as u64 / 128 * 128).max(128);
    let mut bufs = (0..cpus)
        .map(|_| buffer(share))
        .collect::<Result<Vec<_>, _>>()?;
    let passes = e.bytes_per_rep.div_ceil(share as usize * cpus).max(1);
    let start = Barrier::new(cpus);
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = bufs
            .iter_mut()
            .enumerate()
            .map(|(cpu, m)| {
                let start = &start;
                s.spawn(move || -> Result<Vec<(f64, bool)>, HwError> {
                    let pinned = sys::pin_to_cpu(cpu);
                    let buf = m.as_mut_slice();
                    black_box(pass(Kernel::Load, buf, avx2));
                    let mut secs = Vec::with_capacity(4 * e.reps);
                    for _ in 0..4 * e.reps {
                        start.wait();
                        let s0 = switches();
                        let t0 = Instant::now();
                        for _ in 0..passes {
                            black_box(pass(Kernel::Load, buf, avx2));
                        }
                        secs.push((t0.elapsed().as_secs_f64(), switches() != s0));
                    }
                    pinned.map(|_| secs)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(HwError::Io("load thread panicked".into())))
            })
            .collect::<Vec<_>>()
    });
    let per_thread = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    let total = (passes as u64 * share * cpus as u64) as f64;
    let attempts = (0..4 * e.reps).map(|r| {
        let slowest = per_thread.iter().map(|t| t[r].0).fold(0.0, f64::max);
        (total / slowest / 1e9, per_thread.iter().any(|t| t[r].1))
    });
    Ok(Samples::from_attempts(e.reps, attempts))
}

/// Rounds over which a row inside the core's own caches spreads its
/// repetitions (quick mode: 2), between the other rows: another thread on
/// the host's core can keep it at half its rate for hundreds of
/// milliseconds (a Zen 3 guest's 16 KiB copy read 85-95 GB/s for 200 ms,
/// then 185), so the fastest timing needs chances minutes apart.
pub const IN_CORE_ROUNDS: usize = 5;

/// One measurement of the host loop: a row measured whole, or one round
/// of a row inside the core's caches with its share of the repetitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Long(usize),
    InCore(usize, usize),
}

/// The order of the host's measurements: a round of every in-core row,
/// then a share of the other rows, and so on, ending with a round, so that
/// each in-core row's repetitions are spread over the whole command.
fn schedule(list: &[Bench], sizes: &Sizes, quick: bool) -> Vec<Step> {
    let rounds = if quick { 2 } else { IN_CORE_ROUNDS };
    let per_round = Effort::in_core(quick).reps.div_ceil(rounds);
    let (inner, long): (Vec<usize>, Vec<usize>) =
        (0..list.len()).partition(|&i| sizes.in_core(list[i]));
    let mut out = Vec::new();
    let gaps = rounds - 1;
    // Every long row once, in the gaps between the rounds.
    for r in 0..rounds {
        out.extend(inner.iter().map(|&i| Step::InCore(i, per_round)));
        if r < gaps {
            let (a, b) = (long.len() * r / gaps, long.len() * (r + 1) / gaps);
            out.extend(long[a..b].iter().map(|&i| Step::Long(i)));
        }
    }
    out
}

/// The host's samples of one row (ns or GB/s, as the row's unit).
pub fn host_samples(b: Bench, sizes: &Sizes, e: Effort, avx2: bool) -> Result<Samples, HwError> {
    match b {
        Bench::Chase { kib } => chase(kib * 1024, Backing::Thp, e, None),
        Bench::IdleLatency { remote: false } => chase(sizes.dram, Backing::Thp, e, None),
        Bench::SocketLoad { cores } => all_cpu_load(cores as usize, sizes.dram, e, avx2),
        other => match Kernel::of(other) {
            Some((k, kib)) => bandwidth(k, kib * 1024, e, avx2),
            None => Err(HwError::Unsupported(format!(
                "no host routine for {}",
                other.describe()
            ))),
        },
    }
}

fn describe_host(b: Bench, sizes: &Sizes, avx2: bool) -> String {
    match b {
        Bench::Chase { .. } => {
            "dependent 8 B loads around one random cycle of the buffer's lines (the model's order)"
                .into()
        }
        Bench::IdleLatency { .. } => format!(
            "the chase over {} MiB (the model's row chases random lines of a cold 512 MiB)",
            sizes.dram >> 20
        ),
        Bench::SocketLoad { cores } => format!(
            "{cores} threads pinned to CPUs 0..{cores}, each loading its own {} MiB ({})",
            (sizes.dram / cores.max(1)) >> 20,
            Kernel::Load.method(avx2)
        ),
        other => Kernel::of(other).map_or(String::new(), |(k, _)| k.method(avx2).to_string()),
    }
}

/// A row's name in the table: the model's description, with the all-CPU
/// row saying that it counts CPUs of this host.
fn row_name(b: Bench) -> String {
    match b {
        Bench::SocketLoad { cores } => format!("{cores} CPUs, load, DRAM (GB/s)"),
        other => other.describe(),
    }
}

/// A preset that does not load or does not fit a row: an error naming `preset`.
pub(crate) fn preset_err(e: vmsim_core::api::Error) -> HwError {
    match e {
        vmsim_core::api::Error::Config { key, message } if key == "preset" => {
            config_err("preset", message)
        }
        vmsim_core::api::Error::Config { key, message } => {
            config_err("preset", format!("{key}: {message}"))
        }
        other => config_err("preset", other.to_string()),
    }
}

pub fn run(opts_json: &str) -> Result<Value, HwError> {
    let opts = Opts::parse(opts_json, &ACCEPTED)?;
    let quick = opts.bool("quick")?.unwrap_or(false);
    let reps = opts.u64("reps", if quick { 3 } else { 11 }, 1, 1000)? as usize;
    let preset = match opts.string("preset")? {
        None => None,
        Some(path) => {
            let p = vmsim_core::config::load_machine("preset", &path, None).map_err(preset_err)?;
            Some((path, p))
        }
    };
    let facts = host::HostFacts::detect();
    let cpus = all_cpus(&facts);
    // Refused before minutes of measuring, not after.
    let (sizes, planned) = plan(&facts, preset.as_ref().map(|(_, p)| p))?;
    let benches: Vec<Bench> = planned
        .iter()
        .filter(|(_, skip)| skip.is_none())
        .map(|(b, _)| *b)
        .collect();
    let effort = Effort::new(quick, reps);
    let avx2 = std::is_x86_feature_detected!("avx2");
    crate::ctl::guard_memory("microbench", sizes.dram + SUBPAGE as u64 * 2)?;

    // Host first, on a pinned thread so the caller's own affinity is left alone.
    let list = benches.clone();
    let measured = std::thread::spawn(move || {
        let pin = sys::pin_to_cpu(0).err().map(|e| e.to_string());
        let mut out: Vec<Option<Samples>> = vec![None; list.len()];
        for step in schedule(&list, &sizes, quick) {
            let (i, e) = match step {
                Step::Long(i) => (i, effort),
                Step::InCore(i, reps) => (
                    i,
                    Effort {
                        reps,
                        ..Effort::in_core(quick)
                    },
                ),
            };
            crate::ctl::check()?;
            crate::ctl::note(&format!("microbench: {}", row_name(list[i])));
            let s = host_samples(list[i], &sizes, e, avx2)?;
            out[i] = Some(match out[i].take() {
                Some(prev) => prev.merge(s),
                None => s,
            });
        }
        let out: Vec<Samples> = out
            .into_iter()
            .map(|s| s.expect("every row measured"))
            .collect();
        Ok::<_, HwError>((out, pin))
    })
    .join()
    .map_err(|_| HwError::Io("measurement thread panicked".into()))??;
    let (samples, pin_note) = measured;

    let mut rows = Vec::with_capacity(planned.len());
    let mut measured = benches.iter().zip(&samples);
    for (b, skip) in &planned {
        if let Some(why) = skip {
            rows.push(json!({
                "bench": b,
                "description": row_name(*b),
                "skipped": why,
                "host": null,
                "model": null,
                "error": null,
                "size_note": sizes.note(*b),
            }));
            continue;
        }
        let (&b, sm) = measured.next().expect("a sample for every measured row");
        let xs = &sm.xs;
        let fastest = sizes.in_core(b);
        let host = if fastest {
            sm.summary().best(matches!(b, Bench::Chase { .. }))
        } else {
            median(xs)
        };
        let model = match &preset {
            Some((_, p)) => {
                crate::ctl::check()?;
                crate::ctl::note(&format!("microbench model: {}", row_name(b)));
                Some(measure_checked(p, b).map_err(preset_err)?)
            }
            None => None,
        };
        let error = model.map(|m| (m - host) / host);
        rows.push(json!({
            "bench": b,
            "description": row_name(b),
            "host": round3(host),
            "host_stats": stats(xs),
            "host_reps_switched_out": sm.switched,
            "host_clean": sm.clean,
            "host_figure": if fastest { "fastest" } else { "median" },
            "model": model.map(round3),
            "error": error.map(|x| round3(x * 100.0) / 100.0),
            "host_method": describe_host(b, &sizes, avx2),
            "size_note": sizes.note(b),
        }));
    }
    let table = format_table(preset.as_ref().map(|(path, _)| path.as_str()), &rows);
    Ok(json!({
        "host": host::info(),
        "command": "microbench",
        "options": {"preset": preset.as_ref().map(|(p, _)| p), "quick": quick, "reps": reps},
        "sizes": {"l1_bytes": sizes.l1, "l2_bytes": sizes.l2, "llc_bytes": sizes.llc,
                  "dram_bytes": sizes.dram, "dram_wanted_bytes": sizes.dram_wanted,
                  "dram_note": sizes.dram_note(), "all_cpus": cpus},
        "method": {
            "host": "THP-backed buffers, pre-faulted; one untimed pass (or lap) first; per repetition enough passes for the stated bytes, timed with Instant; a repetition during which the measuring thread was switched out (getrusage RUSAGE_THREAD) is dropped and run again, up to 4 x reps attempts (host_reps_switched_out counts them); the median of the kept repetitions, except for rows inside the core's own caches (host_figure \"fastest\"): the fastest of in_core_reps timings of in_core_bytes_per_rep (or in_core_loads_per_rep loads), because what slows them on a shared host is another thread on the same physical core, busy for microseconds or minutes and only ever slowing; those timings run in rounds spread between the other rows",
            "in_core_reps": Effort::in_core(quick).reps,
            "in_core_bytes_per_rep": Effort::in_core(quick).bytes_per_rep,
            "in_core_loads_per_rep": Effort::in_core(quick).loads_per_rep,
            "bytes_per_rep": effort.bytes_per_rep,
            "loads_per_rep": effort.loads_per_rep,
            "pinning": pin_note.unwrap_or_else(|| "measuring thread pinned to CPU 0".into()),
            "model": "vmsim_core::validate::measure on the preset: the same Bench as `vmsim validate` runs, started after every host measurement",
            "error": "(model - host) / host",
        },
        "rows": rows,
        "table": table,
    }))
}

/// The rows as one table: host | model | error.
pub fn format_table(preset: Option<&str>, rows: &[Value]) -> String {
    let mut out = format!(
        "host: measured | model ({}) | error\n  {:<46} {:>10} {:>10} {:>8}\n",
        preset.map_or("no preset given".to_string(), |p| format!(
            "calibrated host preset {p}"
        )),
        "microbenchmark",
        "measured",
        "model",
        "error"
    );
    for r in rows {
        let num = |k: &str| r[k].as_f64();
        if let Some(why) = r["skipped"].as_str() {
            out.push_str(&format!(
                "  {:<46} {:>10} {:>10} {:>8}\n    skipped: {why}\n",
                r["description"].as_str().unwrap_or(""),
                "-",
                "-",
                "-"
            ));
            continue;
        }
        let model = num("model").map_or("-".into(), |m| format!("{m:.2}"));
        let error = num("error").map_or("-".into(), |e| format!("{:+.1}%", 100.0 * e));
        let spoilt = r["host_clean"] == Value::Bool(false);
        let fastest = r["host_figure"] == "fastest";
        out.push_str(&format!(
            "  {:<46} {:>9.2}{} {:>10} {:>8}\n",
            r["description"].as_str().unwrap_or(""),
            num("host").unwrap_or(f64::NAN),
            match (spoilt, fastest) {
                (true, _) => "*",
                (false, true) => "+",
                (false, false) => " ",
            },
            model,
            error
        ));
    }
    let mut notes: Vec<&str> = rows
        .iter()
        .filter_map(|r| r["size_note"].as_str())
        .collect();
    notes.dedup();
    for n in notes {
        out.push_str(&format!("  the DRAM rows' {n}\n"));
    }
    if rows.iter().any(|r| r["host_clean"] == Value::Bool(false)) {
        out.push_str("  * every repetition was switched out: a low bandwidth or a high latency\n");
    }
    if rows.iter().any(|r| r["host_figure"] == "fastest") {
        out.push_str("  + inside the core's caches: the fastest of many short timings (the others: the median)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scalar_store_loop_zeroes_its_bytes_and_no_more() {
        let mut buf = vec![0xa5u64; 3 * 32 + 2];
        // SAFETY: words 1 .. 1 + 96 are in the vector, 8-byte aligned, 768 B.
        unsafe { fill_mov8(buf.as_mut_ptr().add(1) as *mut u8, 3 * 256) };
        assert_eq!(buf[0], 0xa5);
        assert!(buf[1..97].iter().all(|&w| w == 0));
        assert_eq!(buf[97], 0xa5);
    }

    #[test]
    fn in_core_rows_are_measured_in_rounds_between_the_others() {
        let sizes = Sizes {
            l1: 32 << 10,
            l2: 512 << 10,
            llc: 32 << 20,
            dram: 128 << 20,
            dram_wanted: 128 << 20,
            dram_cap: None,
        };
        let list = sizes.benches(2);
        let steps = schedule(&list, &sizes, false);
        for (i, &b) in list.iter().enumerate() {
            let mine: Vec<Step> = steps
                .iter()
                .copied()
                .filter(|s| matches!(s, Step::Long(j) | Step::InCore(j, _) if *j == i))
                .collect();
            if sizes.in_core(b) {
                assert_eq!(
                    mine,
                    vec![Step::InCore(i, IN_CORE_REPS / IN_CORE_ROUNDS); IN_CORE_ROUNDS],
                    "{b:?}"
                );
            } else {
                assert_eq!(mine, vec![Step::Long(i)], "{b:?}");
            }
        }
        // The first and the last step are rounds of in-core rows, and a
        // long row lies between every two rounds.
        assert!(
            matches!(steps[0], Step::InCore(..))
                && matches!(steps[steps.len() - 1], Step::InCore(..))
        );
        let long_at: Vec<usize> = steps
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Step::Long(_)))
            .map(|(k, _)| k)
            .collect();
        let first_inner = steps
            .iter()
            .position(|s| matches!(s, Step::InCore(j, _) if *j == 0))
            .unwrap();
        let rounds_at: Vec<usize> = steps
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == steps[first_inner])
            .map(|(k, _)| k)
            .collect();
        for w in rounds_at.windows(2) {
            assert!(
                long_at.iter().any(|&k| w[0] < k && k < w[1]),
                "{rounds_at:?} {long_at:?}"
            );
        }
        // With no L2 size known no row is in-core, and each is measured once.
        let none = Sizes { l2: 0, ..sizes };
        let once: Vec<Step> = (0..list.len()).map(Step::Long).collect();
        assert_eq!(schedule(&list, &none, false), once);
        // Which rows are in-core: up to half the L2.
        assert!(sizes.in_core(Bench::Chase { kib: 256 }) && sizes.in_core(Bench::Copy { kib: 16 }));
        assert!(
            !sizes.in_core(Bench::Load {
                kib: 16 << 10,
                threads: 1
            }) && !sizes.in_core(Bench::IdleLatency { remote: false })
        );
    }

    fn tiny() -> Effort {
        Effort {
            reps: 2,
            bytes_per_rep: 64 << 10,
            loads_per_rep: 1000,
        }
    }

    #[test]
    fn every_routine_does_what_it_says_on_a_tiny_buffer() {
        for avx2 in [false, std::is_x86_feature_detected!("avx2")] {
            let mut m = buffer(8 << 10).unwrap();
            let b = m.as_mut_slice();
            b.fill(3);
            let words = b.len() as u64 / 8;
            assert_eq!(
                pass(Kernel::Load, b, avx2),
                words.wrapping_mul(0x0303_0303_0303_0303)
            );
            pass(Kernel::Update, b, avx2);
            let want = if avx2 {
                // vpcmpeqd gives all ones: adding it subtracts 1 from each u64.
                0x0303_0303_0303_0302u64
            } else {
                0x0303_0303_0303_0304
            };
            assert!(b
                .chunks_exact(8)
                .all(|w| u64::from_ne_bytes(w.try_into().unwrap()) == want));
            for k in [Kernel::Fill, Kernel::StringFill, Kernel::NtFill] {
                b.fill(7);
                pass(k, b, avx2);
                assert!(b.iter().all(|&x| x == 0), "{k:?}");
            }
            let half = b.len() / 2;
            for (i, w) in b.chunks_exact_mut(8).enumerate() {
                let v = if i < half / 8 { i as u64 } else { 5 };
                w.copy_from_slice(&v.to_ne_bytes());
            }
            pass(Kernel::AddAssign, b, avx2);
            assert!(b.chunks_exact(8).enumerate().all(|(i, w)| {
                let want = if i < half / 8 { i as u64 + 5 } else { 5 };
                u64::from_ne_bytes(w.try_into().unwrap()) == want
            }));
            for k in [Kernel::Copy, Kernel::NtCopy] {
                for (i, x) in b.iter_mut().enumerate() {
                    *x = if i < half { i as u8 } else { 0xEE };
                }
                pass(k, b, avx2);
                assert_eq!(b[..half], b[half..], "{k:?}");
            }
        }
    }

    #[test]
    fn the_load_loop_sums_every_word_with_and_without_its_tail() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let mut m = buffer(8 << 10).unwrap();
        let b = m.as_mut_slice();
        for (i, w) in b.chunks_exact_mut(8).enumerate() {
            w.copy_from_slice(&(i as u64 * 7 + 1).to_ne_bytes());
        }
        // 128 B is the tail alone, 256 the loop alone, 384 both.
        for len in [128, 256, 384, 1024, 8 << 10] {
            let want = (0..len as u64 / 8).map(|i| i * 7 + 1).sum::<u64>();
            assert_eq!(pass(Kernel::Load, &mut b[..len], true), want, "{len}");
        }
    }

    #[test]
    fn the_chase_visits_every_line_once_per_lap() {
        let next = chase_order(1000);
        let (mut at, mut seen) = (0usize, vec![false; 1000]);
        for _ in 0..1000 {
            assert!(!seen[at]);
            seen[at] = true;
            at = next[at] as usize;
        }
        assert_eq!(at, 0);
        let ns = chase(64 << 10, Backing::Thp, tiny(), None).unwrap().xs;
        assert!(!ns.is_empty() && ns.len() <= 8);
        assert!(ns.iter().all(|&x| x > 0.0 && x.is_finite()));
        // The paired walk measurement: one finite difference per repetition
        // (either sign: at 64 KiB both buffers are cache-resident).
        let d = walk_extra(64 << 10, tiny(), None).unwrap().xs;
        assert!(!d.is_empty() && d.len() <= 8);
        assert!(d.iter().all(|x| x.is_finite() && x.abs() < 1000.0), "{d:?}");
    }

    #[test]
    fn bandwidth_rows_give_one_positive_figure_per_repetition() {
        let avx2 = std::is_x86_feature_detected!("avx2");
        for k in [
            Kernel::Load,
            Kernel::Copy,
            Kernel::Update,
            Kernel::AddAssign,
            Kernel::NtFill,
        ] {
            let g = bandwidth(k, 16 << 10, tiny(), avx2).unwrap();
            // Two clean repetitions, or up to eight attempts if switches spoilt them.
            assert!(!g.xs.is_empty() && g.xs.len() + g.switched <= 8, "{g:?}");
            assert!(g.xs.iter().all(|&x| x > 0.0 && x.is_finite()), "{k:?}");
        }
        let g = all_cpu_load(2, 64 << 10, tiny(), avx2).unwrap();
        assert!(!g.xs.is_empty() && g.xs.len() <= 8 && g.xs.iter().all(|&x| x > 0.0));
    }

    #[test]
    fn rows_cover_every_level_and_the_dram_rows_are_four_llcs() {
        let s = Sizes {
            l1: 32 << 10,
            l2: 1 << 20,
            llc: 32 << 20,
            dram: 128 << 20,
            dram_wanted: 128 << 20,
            dram_cap: None,
        };
        let b = s.benches(2);
        assert!(b.contains(&Bench::Chase { kib: 16 }));
        assert!(b.contains(&Bench::Chase { kib: 512 }));
        assert!(b.contains(&Bench::Chase { kib: 16 << 10 }));
        assert!(b.contains(&Bench::Load {
            kib: 128 << 10,
            threads: 1
        }));
        assert!(b.contains(&Bench::StringFill { kib: 512 }));
        assert!(b.contains(&Bench::AddAssign { kib: 512 }));
        assert!(b.contains(&Bench::AddAssign { kib: 16 << 10 }));
        assert!(b.contains(&Bench::SocketLoad { cores: 2 }));
        for x in &b {
            assert!(
                matches!(
                    x,
                    Bench::Chase { .. } | Bench::IdleLatency { .. } | Bench::SocketLoad { .. }
                ) || Kernel::of(*x).is_some(),
                "{x:?} has no host routine"
            );
        }
    }

    #[test]
    fn bad_options_name_the_option() {
        for (opts, key) in [
            (r#"{"reps": 0}"#, "reps"),
            (r#"{"quick": "yes"}"#, "quick"),
            (r#"{"preset": "/nonexistent/host.toml"}"#, "preset"),
            (r#"{"bogus": 1}"#, "bogus"),
        ] {
            match run(opts) {
                Err(HwError::Config { key: k, .. }) => assert_eq!(k, key, "{opts}"),
                other => panic!("{opts}: {other:?}"),
            }
        }
    }
}
