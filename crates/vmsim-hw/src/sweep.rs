//! The `store-sweep` command: one core clearing a buffer of physically
//! contiguous 4 KiB pages (hugetlb or THP, as the kernel's huge pages are)
//! in calls of a given size, per store kind, after the user-space chunk
//! sweep of Arora's clearing series (LKML 2022-06-06, see
//! docs/calibration-sources.md): `rep stosb`, `movnti` (with `sfence` after
//! each call, as a kernel clear would) and, where CPUID says the core has
//! it, `clzero` (also fenced per call), in calls of 4 KiB .. 1 GiB; 4 KiB
//! calls in ascending and in descending page order, with a `mov` loop per
//! 4 KiB page (ordinary stores, no string boundary) in both orders beside
//! them; and 4 KiB `rep stosb` calls over half the L2 (start-up only) beside
//! one call over the same bytes, to set against the DRAM-sized 4 KiB row
//! (start-up plus any drain). The clearing strategies of `vmsim hw clear`
//! (per 2 MiB page, target sub-page 0) run in the same rounds, so their
//! figures are taken under the same conditions as the sweep's. With a
//! `preset`, each chunk and page-order row also gets the model's figure for
//! the same calls (`vmsim_core::validate`'s chunk and page-order benches;
//! on the `4k-scattered` backing the same calls on frames in the order it
//! faults its pages, `Bench::Scattered`), computed after every host
//! measurement.
//!
//! Invariants: every case clears its whole span (the buffer, or half the
//! L2) once per round, and the rounds interleave the cases, so a slow spell
//! of a shared host falls on all of them rather than on one. A round's span
//! is timed in segments of [`SEGMENT`] bytes or one call, whichever is
//! larger (a few milliseconds each, short enough that most run between two
//! preemptions); a segment during which the measuring thread was switched
//! out ([`crate::reps::switches`]) is dropped, the others are the samples.
//! Each case reports the median of its samples and their spread. The
//! buffer is checked to read back zero after each case's first round. A
//! hugetlb pool is raised only for the run and restored (the guard of
//! `pf-test`). What the host cannot give (a pool it cannot reserve, a chunk
//! larger than the buffer, a CPU without `clzero`) is a skipped row with
//! its reason.

use crate::clear::{clear_huge, ClearStrategy};
use crate::opts::{round3, Opts};
use crate::prim::{clzero_clear, has_clzero, mov_clear, nt_clear, rep_stosb, sfence};
use crate::reps::{switches, Samples};
use crate::sys::{self, Backing, Mapping, HPAGE, SUBPAGE};
use crate::{config_err, host, HwError};
use serde_json::{json, Value};
use std::time::Instant;
use vmsim_core::validate::{check, measure_checked, scatter_order, Bench, PageClear};

const ACCEPTED: [&str; 9] = [
    "preset",
    "strategies",
    "size_mib",
    "backing",
    "chunks_kib",
    "kinds",
    "reps",
    "l2",
    "refill",
];
/// The strategies `vmsim hw validate` compares (its clearing rows).
const DEFAULT_STRATEGIES: [ClearStrategy; 5] = [
    ClearStrategy::SeqStosb,
    ClearStrategy::TargetLast,
    ClearStrategy::Multipage2023,
    ClearStrategy::Contiguous70,
    ClearStrategy::NontemporalFar,
];
const BACKINGS: [&str; 5] = ["hugetlb-2m", "hugetlb-1g", "thp", "4k", "4k-scattered"];
const KINDS: [&str; 4] = ["stosb", "movnti", "clzero", "mov"];
/// Arora's chunk sizes (KiB): 4K / 64K / 2M / 8M / 32M / 128M / 1G.
pub const CHUNKS_KIB: [u64; 7] = [4, 64, 2048, 8192, 32768, 131072, 1048576];
/// Bytes of a timed segment of a DRAM-sized case: twice a 32 MiB LLC, so a
/// segment streams to memory, and 2-6 ms at 10-30 GB/s.
pub const SEGMENT: usize = 64 << 20;
/// Bytes of stores per sample of the L2-resident cases: passes over the
/// half-L2 span are repeated until this much is written, so a sample lasts
/// milliseconds, not microseconds (timer cost under 0.01%).
const L2_BYTES_PER_SAMPLE: usize = 64 << 20;
/// Samples per round of an L2-resident case.
const L2_SAMPLES_PER_ROUND: usize = 4;

/// How one call clears its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// One `rep stosb` per call.
    Stosb,
    /// `movnti` 8 B stores, `sfence` at the end of the call.
    Movnti,
    /// `clzero` per 64 B line, `sfence` at the end of the call.
    Clzero,
    /// Eight 8 B `mov` stores per line (`clear_page_orig`): ordinary stores,
    /// no string boundary, set beside `rep stosb` in the same page order.
    Mov,
}

impl StoreKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Stosb => "stosb",
            Self::Movnti => "movnti",
            Self::Clzero => "clzero",
            Self::Mov => "mov",
        }
    }

    fn from_name(s: &str) -> Option<Self> {
        [Self::Stosb, Self::Movnti, Self::Clzero, Self::Mov]
            .into_iter()
            .find(|k| k.name() == s)
    }
}

/// One call of `kind` over `len` bytes at `dst`, fenced as the kernel would.
///
/// # Safety
/// `dst..dst+len` writable, `dst` 64-byte aligned, `len` a multiple of 64;
/// `clzero` only where [`has_clzero`].
#[inline(always)]
pub unsafe fn clear_call(kind: StoreKind, dst: *mut u8, len: usize) {
    match kind {
        StoreKind::Stosb => rep_stosb(dst, len),
        StoreKind::Movnti => {
            nt_clear(dst, len);
            sfence();
        }
        StoreKind::Clzero => {
            clzero_clear(dst, len);
            sfence();
        }
        StoreKind::Mov => mov_clear(dst, len),
    }
}

/// Clears `buf` in calls of `chunk` bytes, in ascending or descending order
/// of the calls (the last call may be shorter).
pub fn clear_in_chunks(kind: StoreKind, buf: &mut [u8], chunk: usize, descending: bool) {
    assert!(chunk >= 64 && chunk.is_multiple_of(64), "chunk {chunk}");
    assert!(buf.len().is_multiple_of(64) && (buf.as_ptr() as usize).is_multiple_of(64));
    if kind == StoreKind::Clzero {
        assert!(has_clzero(), "clzero on a CPU without it");
    }
    let n = buf.len().div_ceil(chunk);
    let base = buf.as_mut_ptr();
    for k in 0..n {
        let i = if descending { n - 1 - k } else { k };
        let off = i * chunk;
        let len = chunk.min(buf.len() - off);
        // SAFETY: off + len <= buf.len(); alignment and clzero checked above.
        unsafe { clear_call(kind, base.add(off), len) };
    }
}

/// One measured case: a store kind in calls of `chunk` bytes over the
/// first `span` bytes of the buffer, timed in `segment`-byte pieces, each
/// cleared `passes` times per sample.
#[derive(Clone, Debug)]
struct Case {
    name: String,
    kind: StoreKind,
    chunk: usize,
    span: usize,
    segment: usize,
    descending: bool,
    passes: usize,
    what: &'static str,
    /// A kernel clearing strategy run per 2 MiB page (target sub-page 0)
    /// instead of `kind` in `chunk` calls.
    strategy: Option<ClearStrategy>,
}

impl Case {
    /// Strategy `s` of `vmsim hw clear` over `span` bytes of 2 MiB pages,
    /// each cleared for a fault on its first sub-page, in segments of
    /// [`SEGMENT`] bytes.
    fn strategy(s: ClearStrategy, span: usize) -> Case {
        let span = span / HPAGE * HPAGE;
        Case {
            name: format!("{} per 2M", s.name()),
            kind: StoreKind::Stosb,
            chunk: HPAGE,
            span,
            segment: SEGMENT.min(span),
            descending: false,
            passes: 1,
            what: "a kernel clearing strategy (vmsim hw clear) per 2 MiB page, target sub-page 0",
            strategy: Some(s),
        }
    }

    /// A DRAM-sized case over `span` bytes: segments of as many whole calls
    /// as fit [`SEGMENT`], at least one (a segment that ended inside a call
    /// would time a shorter call there).
    fn dram(
        name: String,
        kind: StoreKind,
        chunk: usize,
        span: usize,
        descending: bool,
        what: &'static str,
    ) -> Case {
        let segment = ((SEGMENT / chunk).max(1) * chunk).min(span);
        Case {
            name,
            kind,
            chunk,
            span,
            segment,
            descending,
            passes: 1,
            what,
            strategy: None,
        }
    }

    /// Where each sample of a round starts (in the order of the calls).
    fn segments(&self) -> Vec<usize> {
        if self.passes > 1 {
            return vec![0; L2_SAMPLES_PER_ROUND];
        }
        let mut v: Vec<usize> = (0..self.span).step_by(self.segment).collect();
        if self.descending {
            v.reverse();
        }
        v
    }

    fn calls_per_sample(&self) -> usize {
        self.segment.div_ceil(self.chunk) * self.passes
    }

    /// GB/s of one sample: the segment at `off`, `passes` times.
    fn run_segment(&self, buf: &mut [u8], off: usize) -> f64 {
        let end = (off + self.segment).min(self.span);
        let b = &mut buf[off..end];
        let t0 = Instant::now();
        for _ in 0..self.passes {
            match self.strategy {
                Some(s) => b
                    .chunks_exact_mut(HPAGE)
                    .for_each(|page| clear_huge(s, page, 0)),
                None => clear_in_chunks(self.kind, b, self.chunk, self.descending),
            }
        }
        (b.len() * self.passes) as f64 / t0.elapsed().as_secs_f64() / 1e9
    }
}

/// The `vmsim validate` benchmark that models case `c` on a preset: the
/// chunk rows (`Bench::StringChunks` and its `movnti` and `clzero` kin,
/// ascending calls) and the page-order rows (`Bench::PageOrder`, 4 KiB
/// calls); on the `4k-scattered` backing (`scattered`), the same calls on
/// frames in the order the backing faults them (`Bench::Scattered`). None
/// for the kernel strategies (`vmsim hw validate` compares those itself)
/// and the L2-resident cases.
fn model_bench(c: &Case, scattered: bool) -> Option<Bench> {
    if c.strategy.is_some() || c.passes > 1 {
        return None;
    }
    let chunk_kib = (c.chunk >> 10) as u64;
    let clear = match c.kind {
        StoreKind::Stosb => PageClear::Stosb,
        StoreKind::Movnti => PageClear::Movnti,
        StoreKind::Clzero => PageClear::Clzero,
        StoreKind::Mov => PageClear::Mov,
    };
    if scattered {
        return Some(Bench::Scattered {
            kind: clear,
            chunk_kib,
            descending: c.descending,
        });
    }
    Some(match (c.kind, c.descending) {
        (StoreKind::Stosb, false) => Bench::StringChunks { chunk_kib },
        (StoreKind::Movnti, false) => Bench::NtChunks { chunk_kib },
        (StoreKind::Clzero, false) => Bench::ClzeroChunks { chunk_kib },
        // A mov loop, and any kind last page first: 4 KiB calls.
        (_, descending) => Bench::PageOrder {
            kind: clear,
            descending,
        },
    })
}

fn chunk_label(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 30 && b.is_multiple_of(1 << 30) => format!("{}G", b >> 30),
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{}M", b >> 20),
        b => format!("{}K", b >> 10),
    }
}

/// Half of the L2 of CPU 0 (sysfs), rounded down to 4 KiB; 256 KiB if unknown.
fn l2_half() -> usize {
    let kib = host::cache(2).map_or(0, |c| c.size_kib) as usize;
    let half = if kib == 0 { 256 << 10 } else { (kib << 10) / 2 };
    (half / SUBPAGE).max(1) * SUBPAGE
}

struct Plan {
    cases: Vec<Case>,
    skipped: Vec<Value>,
}

fn plan(kinds: &[StoreKind], chunks: &[usize], buf_bytes: usize, l2: bool, clzero: bool) -> Plan {
    let mut cases = Vec::new();
    let mut skipped = Vec::new();
    for &kind in kinds {
        if kind == StoreKind::Clzero && !clzero {
            skipped.push(json!({"case": "clzero", "kind": "clzero",
                "skipped": "this CPU has no clzero (CPUID Fn8000_0008 EBX bit 0)"}));
            continue;
        }
        // A mov loop has no call boundary to speak of: only its page order
        // is measured (4 KiB "calls" ascending and descending).
        let kind_chunks: &[usize] = if kind == StoreKind::Mov {
            &[SUBPAGE]
        } else {
            chunks
        };
        if kind == StoreKind::Mov && !chunks.contains(&SUBPAGE) {
            continue;
        }
        for &chunk in kind_chunks {
            let name = format!("{} {}", kind.name(), chunk_label(chunk));
            if chunk > buf_bytes {
                skipped.push(
                    json!({"case": name, "kind": kind.name(), "chunk_bytes": chunk,
                    "skipped": format!("a {} call is larger than the {} buffer (size_mib)",
                                       chunk_label(chunk), chunk_label(buf_bytes))}),
                );
                continue;
            }
            cases.push(Case::dram(
                name,
                kind,
                chunk,
                buf_bytes,
                false,
                "ascending calls over the whole buffer",
            ));
        }
        if chunks.contains(&SUBPAGE) {
            cases.push(Case::dram(
                format!("{} 4K descending", kind.name()),
                kind,
                SUBPAGE,
                buf_bytes,
                true,
                "4 KiB calls over the whole buffer, last page first",
            ));
        }
    }
    if l2 && kinds.contains(&StoreKind::Stosb) {
        let half = l2_half().min(buf_bytes);
        let passes = (L2_BYTES_PER_SAMPLE / half).max(2);
        for (chunk, what) in [
            (
                SUBPAGE,
                "4 KiB calls over half the L2, repeated (start-up only: no DRAM traffic)",
            ),
            (
                half,
                "one call over half the L2, repeated (the same bytes, one start-up per pass)",
            ),
        ] {
            cases.push(Case {
                name: format!("stosb {} L2-resident", chunk_label(chunk)),
                kind: StoreKind::Stosb,
                chunk,
                span: half,
                segment: half,
                descending: false,
                passes,
                what,
                strategy: None,
            });
        }
    }
    Plan { cases, skipped }
}

/// Runs every case once per round, `reps` rounds, each round a case's
/// samples back to back; a sample during which the thread was switched out
/// is dropped (counted). Returns per case its samples and whether its first
/// round left the span zero.
fn measure(
    cases: &[Case],
    buf: &mut Mapping,
    reps: usize,
    refill: bool,
) -> Result<Vec<(Samples, bool)>, HwError> {
    let mut attempts: Vec<Vec<(f64, bool)>> = vec![Vec::new(); cases.len()];
    let mut verified = vec![None; cases.len()];
    for round in 0..reps {
        crate::ctl::note(&format!("store-sweep: round {} of {reps}", round + 1));
        for (i, c) in cases.iter().enumerate() {
            crate::ctl::check()?;
            let b = buf.as_mut_slice();
            if refill || verified[i].is_none() {
                // Junk in the bytes to be cleared, as a freed page holds;
                // always before the first round so the check means something.
                b[..c.span].fill(0xA5);
            }
            for off in c.segments() {
                let s0 = switches();
                let gbps = c.run_segment(b, off);
                attempts[i].push((gbps, switches() != s0));
            }
            if verified[i].is_none() {
                verified[i] = Some(b[..c.span].iter().all(|&x| x == 0));
            }
        }
    }
    Ok(attempts
        .into_iter()
        .zip(verified)
        .map(|(a, v)| (Samples::from_attempts(usize::MAX, a), v.unwrap_or(false)))
        .collect())
}

/// For `vmsim hw calibrate`: the samples (GB/s) of each `(kind, chunk,
/// descending)` case clearing its whole multiple of `chunk` bytes of `buf`
/// (at most `buf`'s length), the cases interleaved by rounds and timed in
/// segments as `store-sweep` times them ([`measure`]).
pub(crate) fn case_samples(
    specs: &[(StoreKind, usize, bool)],
    buf: &mut Mapping,
    reps: usize,
) -> Result<Vec<Samples>, HwError> {
    let len = buf.as_mut_slice().len();
    let cases: Vec<Case> = specs
        .iter()
        .map(|&(kind, chunk, descending)| {
            let span = (len / chunk).max(1) * chunk;
            Case::dram(
                format!("{} {}", kind.name(), chunk_label(chunk)),
                kind,
                chunk,
                span.min(len),
                descending,
                "calibration",
            )
        })
        .collect();
    Ok(measure(&cases, buf, reps, false)?
        .into_iter()
        .map(|(s, _)| s)
        .collect())
}

/// Faults `buf`'s 4 KiB pages in a fixed pseudo-random order (a
/// Fisher-Yates shuffle driven by xorshift64, seed fixed), so that on an
/// idle host, where the allocator hands out frames in the order pages
/// fault, virtually adjacent pages get frames far apart: the `4k-scattered`
/// backing, set against `4k`, whose pages fault in order and mostly get
/// consecutive frames.
fn prefault_scattered(buf: &mut [u8], value: u8) {
    for p in scatter_order(buf.len() / SUBPAGE) {
        // SAFETY: p < len / SUBPAGE.
        unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(p * SUBPAGE), value) };
    }
}

/// Of `buf`'s 4 KiB pages after the first, how many sit in the frame after
/// the previous page's, and how many pages there are; None where
/// `/proc/self/pagemap` gives no frame numbers (without root they read 0).
fn frames_in_order(buf: &[u8]) -> Option<(usize, usize)> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open("/proc/self/pagemap").ok()?;
    let n = buf.len() / SUBPAGE;
    let first = buf.as_ptr() as usize / SUBPAGE;
    let mut raw = vec![0u8; n * 8];
    f.read_exact_at(&mut raw, first as u64 * 8).ok()?;
    let pfn = |i: usize| {
        let e = u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
        (e >> 63 == 1).then_some(e & ((1 << 55) - 1))
    };
    if (0..n).all(|i| pfn(i).unwrap_or(0) == 0) {
        return None;
    }
    let next = (1..n)
        .filter(|&i| matches!((pfn(i - 1), pfn(i)), (Some(a), Some(b)) if b == a + 1))
        .count();
    Some((next, n))
}

fn backing_of(name: &str) -> (Backing, Option<u64>) {
    match name {
        "hugetlb-2m" => (Backing::Hugetlb(21), Some(2048)),
        "hugetlb-1g" => (Backing::Hugetlb(30), Some(1 << 20)),
        "thp" => (Backing::Thp, None),
        _ => (Backing::Small, None),
    }
}

pub fn run(opts_json: &str) -> Result<Value, HwError> {
    let opts = Opts::parse(opts_json, &ACCEPTED)?;
    let size_mib = opts.u64("size_mib", 1024, 1, 1 << 20)?;
    let reps = opts.u64("reps", 11, 1, 1000)? as usize;
    let l2 = opts.bool("l2")?.unwrap_or(true);
    let refill = opts.bool("refill")?.unwrap_or(false);
    let backing_name = opts
        .string("backing")?
        .unwrap_or_else(|| "hugetlb-2m".into());
    if !BACKINGS.contains(&backing_name.as_str()) {
        return Err(config_err(
            "backing",
            format!(
                "unknown value '{backing_name}'; accepted: {}",
                BACKINGS.join(", ")
            ),
        ));
    }
    let kinds: Vec<StoreKind> = opts
        .names("kinds", &KINDS)?
        .unwrap_or(KINDS.iter().map(|s| s.to_string()).collect())
        .iter()
        .map(|n| StoreKind::from_name(n).expect("checked against KINDS"))
        .collect();
    let chunks: Vec<usize> = match opts.get("chunks_kib") {
        None => CHUNKS_KIB.iter().map(|&k| (k as usize) << 10).collect(),
        Some(Value::Array(a)) if !a.is_empty() => a
            .iter()
            .map(|x| match x.as_u64() {
                Some(k) if k >= 4 && k % 4 == 0 && k <= 1 << 24 => Ok((k as usize) << 10),
                _ => Err(config_err(
                    "chunks_kib",
                    format!("expected multiples of 4 KiB in 4..=16777216, got {x}"),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(v) => {
            return Err(config_err(
                "chunks_kib",
                format!("expected a non-empty list of sizes in KiB, got {v}"),
            ))
        }
    };
    let strategies: Vec<ClearStrategy> = match opts.get("strategies") {
        Some(Value::Array(a)) if a.is_empty() => vec![],
        _ => opts
            .names("strategies", &ClearStrategy::ALL.map(|s| s.name()))?
            .map_or(DEFAULT_STRATEGIES.to_vec(), |v| {
                v.iter()
                    .map(|n| ClearStrategy::from_name(n).expect("checked"))
                    .collect()
            }),
    };
    let preset = match opts.string("preset")? {
        None => None,
        Some(path) => Some((
            vmsim_core::config::load_machine("preset", &path, None)
                .map_err(crate::micro::preset_err)?,
            path,
        )),
    };
    let (backing, pool_kib) = backing_of(&backing_name);
    let page = pool_kib.map_or(SUBPAGE, |k| (k as usize) << 10);
    let bytes = ((size_mib as usize) << 20).div_ceil(page) * page;
    let clzero = has_clzero();
    let options = json!({"size_mib": size_mib, "backing": backing_name, "reps": reps, "l2": l2,
        "preset": preset.as_ref().map(|(_, path)| path),
        "refill": refill, "kinds": kinds.iter().map(|k| k.name()).collect::<Vec<_>>(),
        "chunks_kib": chunks.iter().map(|c| c >> 10).collect::<Vec<_>>(), "buffer_bytes": bytes,
        "strategies": strategies.iter().map(|s| s.name()).collect::<Vec<_>>()});
    let method = json!({
        "gbps": format!("bytes cleared / wall time (Instant) of one sample: a segment of {} MiB of the buffer or one call, whichever is larger (L2-resident cases: {} MiB of passes over half the L2); memory pre-faulted and written before the first round", SEGMENT >> 20, L2_BYTES_PER_SAMPLE >> 20),
        "rounds": "each round clears every case's whole span once, cases in the order listed, so load on a shared host spreads over all of them; a sample during which the measuring thread was switched out (getrusage RUSAGE_THREAD) is dropped (switched_out counts them; if none is clean all are kept and all_switched_out says so); the median of the kept samples and their spread (max/min - 1)",
        "calls": "stosb: one rep stosb per call; movnti: 8 B movnti stores then sfence per call; clzero: one clzero per 64 B line then sfence per call (CPUID Fn8000_0008 EBX bit 0)",
        "contents": if refill {"every round clears bytes just filled with 0xA5 (the fill is not timed)"} else {"rounds clear bytes the previous round zeroed (as Arora's user-space loop); the first round of each case clears 0xA5"},
        "pinning": "measuring thread pinned to CPU 0",
    });
    let skipped_all = |why: String| {
        Ok(
            json!({"host": host::info(), "command": "store-sweep", "options": options,
                  "method": method, "skipped": why, "results": [],
                  "table": format!("store-sweep skipped: {why}\n")}),
        )
    };
    let _guard = match pool_kib {
        Some(kib) => match crate::pftest::reserve(kib, (bytes / page) as u64) {
            Ok(g) => Some(g),
            Err(why) => {
                // Without root the pool cannot grow, but THP needs none.
                let hint = if sys::is_root() {
                    ""
                } else {
                    " (backing=thp needs no pool)"
                };
                return skipped_all(format!(
                    "{backing_name} buffer of {} MiB: {why}{hint}",
                    bytes >> 20
                ));
            }
        },
        None => {
            crate::ctl::guard_memory("size_mib", bytes as u64 + (2 << 20))?;
            None
        }
    };
    let mut buf = match Mapping::anon(bytes, backing) {
        Ok(m) => m,
        Err(e) => return skipped_all(e.to_string()),
    };
    let scattered = backing_name == "4k-scattered";
    if scattered {
        prefault_scattered(buf.as_mut_slice(), 0xA5);
    } else {
        sys::prefault(buf.as_mut_slice(), SUBPAGE, 0xA5);
    }
    let frames = frames_in_order(buf.as_slice());
    let thp_kib = (backing == Backing::Thp)
        .then(|| buf.anon_huge_kib())
        .flatten();
    let Plan { mut cases, skipped } = plan(&kinds, &chunks, bytes, l2, clzero);
    if bytes >= HPAGE {
        cases.extend(strategies.iter().map(|&s| Case::strategy(s, bytes)));
    }
    if let Some((p, _)) = &preset {
        // Refused before the measuring, not after.
        for b in cases.iter().filter_map(|c| model_bench(c, scattered)) {
            check(p, b).map_err(crate::micro::preset_err)?;
        }
    }

    let (samples, pin) = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let pin = sys::pin_to_cpu(0).err().map(|e| e.to_string());
                measure(&cases, &mut buf, reps, refill).map(|s| (s, pin))
            })
            .join()
            .map_err(|_| HwError::Io("measurement thread panicked".into()))?
    })?;

    let mut results: Vec<Value> = cases
        .iter()
        .zip(&samples)
        .map(|(c, (s, verified))| {
            let m = s.summary();
            let calls = c.calls_per_sample() as f64;
            let sample_ns = (c.segment * c.passes) as f64 / m.median;
            json!({
                "case": c.name, "kind": c.strategy.map_or(c.kind.name(), |_| "strategy"),
                "strategy": c.strategy.map(|s| s.name()), "chunk_bytes": c.chunk,
                "order": if c.descending {"descending"} else {"ascending"},
                "span_bytes": c.span, "sample_bytes": c.segment, "passes_per_sample": c.passes,
                "calls_per_sample": c.calls_per_sample(), "what": c.what,
                "gbps": m.json(), "ns_per_call": round3(sample_ns / calls),
                "verified": verified,
            })
        })
        .collect();
    // The model's figures, after every host measurement (it would compete
    // with them for the host's CPUs).
    if let Some((p, _)) = &preset {
        for (r, c) in results.iter_mut().zip(&cases) {
            let Some(b) = model_bench(c, scattered) else {
                continue;
            };
            crate::ctl::check()?;
            crate::ctl::note(&format!("store-sweep model: {}", c.name));
            let model = measure_checked(p, b).map_err(crate::micro::preset_err)?;
            let host = r["gbps"]["median"].as_f64().unwrap_or(f64::NAN);
            r["model_bench"] = json!(b);
            r["model_gbps"] = json!(round3(model));
            r["error"] = json!(round3((model - host) / host * 100.0) / 100.0);
        }
    }
    results.extend(skipped);
    let mut method = method;
    if let Some((_, path)) = &preset {
        method["model"] = json!(format!("vmsim_core::validate::measure on the preset {path}: `vmsim validate`'s chunk rows (one core clearing 128 MiB, or one larger call, in ascending calls of the chunk) and page-order rows (4 KiB calls over 128 MiB, either order){}, started after every host measurement; error = (model - host) / host", if scattered { ", with the pages on frames in the order this backing faults them (Bench::Scattered)" } else { "" }));
    }
    if let Some(p) = pin {
        method["pinning"] = json!(p);
    }
    let table = format_table(&backing_name, bytes, &results);
    Ok(json!({
        "host": host::info(),
        "command": "store-sweep",
        "options": options,
        "method": method,
        "clzero": clzero,
        "frames_in_order": frames.map(|(next, n)| json!({"pages": n, "next_frame": next,
                "fraction": round3(next as f64 / (n.max(2) - 1) as f64),
                "what": "of the buffer's 4 KiB pages after the first, how many have the frame after the previous page's (/proc/self/pagemap; root only)"})),
        "thp": (backing == Backing::Thp).then(|| json!({"anon_huge_kib": thp_kib,
                "observed": thp_kib.is_some_and(|k| k > 0)})),
        "results": results,
        "table": table,
    }))
}

/// One line per case: GB/s median, the kept range, kept/dropped, ns per
/// call, and where a preset was given the model's GB/s and its error.
pub fn format_table(backing: &str, bytes: usize, results: &[Value]) -> String {
    let modelled = results.iter().any(|r| r.get("model_gbps").is_some());
    let mut out = format!(
        "store-sweep: one core clearing a {} {backing} buffer (GB/s: median of kept samples)\n  {:<26} {:>8} {:>17} {:>7} {:>8} {:>11}{}\n",
        chunk_label(bytes),
        "case",
        "GB/s",
        "range",
        "spread",
        "kept/drop",
        "ns/call",
        if modelled {
            format!(" {:>8} {:>8}", "model", "error")
        } else {
            String::new()
        }
    );
    for r in results {
        let name = r["case"].as_str().unwrap_or("");
        if let Some(why) = r["skipped"].as_str() {
            out.push_str(&format!("  {name:<26} skipped: {why}\n"));
            continue;
        }
        let g = &r["gbps"];
        let f = |k: &str| g[k].as_f64().unwrap_or(f64::NAN);
        let model = if modelled {
            match (r["model_gbps"].as_f64(), r["error"].as_f64()) {
                (Some(m), Some(e)) => format!(" {m:>8.2} {:>+7.1}%", 100.0 * e),
                _ => format!(" {:>8} {:>8}", "-", "-"),
            }
        } else {
            String::new()
        };
        out.push_str(&format!(
            "  {:<26} {:>8.2} {:>17} {:>6.1}% {:>4}/{:<3} {:>11.1}{}{}\n",
            name,
            f("median"),
            format!("{:.2}-{:.2}", f("min"), f("max")),
            100.0 * f("spread"),
            g["n"],
            g["switched_out"],
            r["ns_per_call"].as_f64().unwrap_or(f64::NAN),
            model,
            if r["verified"] == true {
                ""
            } else {
                "  NOT ZERO"
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_clears_zero_everything_in_both_orders() {
        let mut kinds = vec![StoreKind::Stosb, StoreKind::Movnti];
        if has_clzero() {
            kinds.push(StoreKind::Clzero);
        }
        let mut m = Mapping::anon(5 * SUBPAGE + 128, Backing::Small).unwrap();
        let len = m.len();
        for kind in kinds {
            for chunk in [64, SUBPAGE, 3 * SUBPAGE, 1 << 20] {
                for desc in [false, true] {
                    m.as_mut_slice().fill(0xA5);
                    clear_in_chunks(kind, &mut m.as_mut_slice()[..len], chunk, desc);
                    assert!(
                        m.as_slice().iter().all(|&b| b == 0),
                        "{kind:?} {chunk} {desc}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_scattered_backing_faults_every_page_once_out_of_order() {
        // The order itself is tested with `scatter_order` (vmsim_core::validate).
        let mut m = Mapping::anon(64 * SUBPAGE, Backing::Small).unwrap();
        prefault_scattered(m.as_mut_slice(), 0x5A);
        assert!((0..64).all(|p| m.as_slice()[p * SUBPAGE] == 0x5A));
        // Where pagemap gives frames (root), the count covers the buffer.
        if let Some((next, pages)) = frames_in_order(m.as_slice()) {
            assert_eq!(pages, 64);
            assert!(next < 64);
        }
    }

    #[test]
    fn a_segment_holds_whole_calls() {
        let mib = 1 << 20;
        let seg = |chunk: usize| {
            Case::dram(String::new(), StoreKind::Stosb, chunk, 120 * mib, false, "").segment
        };
        // 40 MiB calls: one per segment, not a 40 and a 24 MiB call.
        assert_eq!(seg(40 * mib), 40 * mib);
        assert_eq!(seg(12 * mib), 60 * mib);
        assert_eq!(seg(4096), SEGMENT);
        assert_eq!(seg(96 * mib), 96 * mib);
    }

    #[test]
    fn plan_skips_what_the_host_cannot_do() {
        let p = plan(
            &[StoreKind::Stosb, StoreKind::Clzero],
            &[SUBPAGE, 2 << 20, 1 << 30],
            4 << 20,
            true,
            false,
        );
        let names: Vec<&str> = p.cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(&names[..3], ["stosb 4K", "stosb 2M", "stosb 4K descending"]);
        assert!(names[3].starts_with("stosb 4K L2-resident"));
        assert_eq!(p.cases.len(), 5);
        let why: Vec<&str> = p
            .skipped
            .iter()
            .map(|s| s["case"].as_str().unwrap())
            .collect();
        assert_eq!(why, ["stosb 1G", "clzero"]);
        assert_eq!(chunk_label(1 << 30), "1G");
        assert_eq!(chunk_label(64 << 10), "64K");
        // 4 MiB spans are one segment each; descending segments run last first.
        assert_eq!(p.cases[2].calls_per_sample(), 1024);
        assert_eq!(p.cases[2].segments(), vec![0]);
        let c = Case::dram("x".into(), StoreKind::Stosb, SUBPAGE, 3 * SEGMENT, true, "");
        assert_eq!(c.segments(), vec![2 * SEGMENT, SEGMENT, 0]);
        let big = Case::dram(
            "y".into(),
            StoreKind::Stosb,
            2 * SEGMENT,
            4 * SEGMENT,
            false,
            "",
        );
        assert_eq!((big.segment, big.calls_per_sample()), (2 * SEGMENT, 1));
        assert_eq!(p.cases[3].segments().len(), L2_SAMPLES_PER_ROUND);
    }

    #[test]
    fn a_scattered_backing_gets_a_scattered_twin() {
        let p = plan(
            &[StoreKind::Stosb, StoreKind::Mov],
            &[SUBPAGE, 64 << 10],
            4 << 20,
            true,
            false,
        );
        let twins: Vec<Option<Bench>> = p.cases.iter().map(|c| model_bench(c, false)).collect();
        assert_eq!(twins[0], Some(Bench::StringChunks { chunk_kib: 4 }));
        assert_eq!(
            twins[2],
            Some(Bench::PageOrder {
                kind: PageClear::Stosb,
                descending: true
            })
        );
        let scattered: Vec<Option<Bench>> = p.cases.iter().map(|c| model_bench(c, true)).collect();
        assert_eq!(
            scattered[..3],
            [
                Some(Bench::Scattered {
                    kind: PageClear::Stosb,
                    chunk_kib: 4,
                    descending: false
                }),
                Some(Bench::Scattered {
                    kind: PageClear::Stosb,
                    chunk_kib: 64,
                    descending: false
                }),
                Some(Bench::Scattered {
                    kind: PageClear::Stosb,
                    chunk_kib: 4,
                    descending: true
                }),
            ]
        );
        // The L2-resident cases have no twin on either backing.
        for (c, (a, b)) in p.cases.iter().zip(twins.iter().zip(&scattered)) {
            if c.passes > 1 {
                assert_eq!((a, b), (&None, &None), "{}", c.name);
            }
        }
    }
}
