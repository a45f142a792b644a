//! The `clear` and `copy` commands: run each strategy over a batch of real
//! 2 MiB pages, in GB/s, and time touching the target sub-page right after
//! its page was cleared or copied (whether it is still cache-hot), with and
//! without a co-runner streaming through the shared cache.

use crate::clear::{clear_huge, ClearStrategy};
use crate::copy::{copy_huge, CopyStrategy};
use crate::opts::{median, stats, Opts};
use crate::sys::{self, Backing, Mapping, HPAGE, SUBPAGE};
use crate::{config_err, host, HwError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Clear,
    Copy,
}

const NR: usize = HPAGE / SUBPAGE;
const ACCEPTED: [&str; 6] = ["strategies", "pages", "reps", "target", "corunner", "huge"];

#[derive(Clone, Copy)]
enum Strat {
    Clear(ClearStrategy),
    Copy(CopyStrategy),
}

impl Strat {
    fn name(self) -> &'static str {
        match self {
            Strat::Clear(s) => s.name(),
            Strat::Copy(s) => s.name(),
        }
    }

    fn apply(self, dst: &mut [u8], src: &[u8], n: usize) {
        match self {
            Strat::Clear(s) => clear_huge(s, dst, n),
            Strat::Copy(s) => copy_huge(s, dst, src, n),
        }
    }
}

#[derive(Clone, Copy)]
enum Timer {
    /// TSC ticks per ns.
    Tsc(f64),
    Clock,
}

impl Timer {
    fn describe(self) -> String {
        match self {
            Timer::Tsc(g) => format!(
                "rdtsc after lfence .. rdtscp + lfence, TSC {g:.4} GHz measured against CLOCK_MONOTONIC over 50 ms"
            ),
            Timer::Clock => "clock_gettime(CLOCK_MONOTONIC) around the touch (coarse)".into(),
        }
    }
}

/// Sums one u64 per 64 B line: independent loads, as a program reading its fresh page would.
#[inline(never)]
fn touch(p: *const u8, len: usize) -> u64 {
    let mut s = 0u64;
    for off in (0..len).step_by(64) {
        // SAFETY: callers pass ranges inside a live mapping.
        s = s.wrapping_add(unsafe { std::ptr::read_volatile(p.add(off) as *const u64) });
    }
    s
}

fn timed_touch(p: *const u8, len: usize, timer: Timer) -> f64 {
    match timer {
        Timer::Tsc(ghz) => {
            let t0 = sys::rdtsc_start();
            std::hint::black_box(touch(p, len));
            let t1 = sys::rdtsc_end();
            (t1.saturating_sub(t0)) as f64 / ghz
        }
        Timer::Clock => {
            let t0 = Instant::now();
            std::hint::black_box(touch(p, len));
            t0.elapsed().as_nanos() as f64
        }
    }
}

fn parse_targets(opts: &Opts, pages: usize) -> Result<(Value, Vec<usize>), HwError> {
    let v = opts.get("target").cloned().unwrap_or(json!("first"));
    let fixed = |n: usize| Ok((v.clone(), vec![n; pages]));
    match &v {
        Value::String(s) if s == "first" => fixed(0),
        Value::String(s) if s == "middle" => fixed(NR / 2),
        Value::String(s) if s == "last" => fixed(NR - 1),
        Value::String(s) if s == "random" => {
            // Fixed seed: every strategy sees the same targets.
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            let t = (0..pages)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % NR as u64) as usize
                })
                .collect();
            Ok((v, t))
        }
        Value::Number(n) if n.as_u64().is_some_and(|k| k < NR as u64) => fixed(n.as_u64().unwrap() as usize),
        _ => Err(config_err(
            "target",
            format!("expected \"first\", \"middle\", \"last\", \"random\" or a sub-page index 0..{}, got {v}", NR - 1),
        )),
    }
}

/// Streams reads and writes through a buffer 4x the LLC on another CPU until told to stop.
struct CoRunner {
    stop: AtomicBool,
    bytes: AtomicU64,
}

impl CoRunner {
    fn run(&self, buf: &mut Mapping, cpu: usize) -> Result<(), HwError> {
        sys::pin_to_cpu(cpu)?;
        let p = buf.as_ptr() as *mut u64;
        let words = buf.len() / 8;
        'outer: loop {
            for chunk in (0..words).step_by(512) {
                for w in (chunk..(chunk + 512).min(words)).step_by(8) {
                    // SAFETY: w < words, inside the mapping this thread owns.
                    unsafe {
                        let q = p.add(w);
                        std::ptr::write_volatile(q, std::ptr::read_volatile(q).wrapping_add(1));
                    }
                }
                self.bytes.fetch_add(4096, Ordering::Relaxed);
                if self.stop.load(Ordering::Relaxed) {
                    break 'outer;
                }
            }
        }
        Ok(())
    }
}

struct Setup {
    kind: Kind,
    strats: Vec<Strat>,
    pages: usize,
    reps: usize,
    targets: Vec<usize>,
    timer: Timer,
}

fn measure_strategy(s: &Setup, st: Strat, dst: &mut Mapping, src: &Mapping) -> Value {
    let batch_bytes = (s.pages * HPAGE) as f64;
    let (mut gbps, mut t4, mut t64) = (vec![], vec![], vec![]);
    // Dirty the destination so the first batch cannot be short-cut and the check means something.
    dst.as_mut_slice().fill(0xA5);
    let mut verified = true;
    for rep in 0..s.reps {
        let d = dst.as_mut_slice();
        let src = src.as_slice();
        let t0 = Instant::now();
        for (i, page) in d.chunks_exact_mut(HPAGE).enumerate() {
            st.apply(page, src_page(src, i, s.kind), s.targets[i]);
        }
        let dt = t0.elapsed().as_secs_f64();
        gbps.push(batch_bytes / dt / 1e9);
        if rep == 0 {
            verified = match s.kind {
                Kind::Clear => d.iter().all(|&b| b == 0),
                Kind::Copy => d == &src[..d.len()],
            };
        }
        for (window, out) in [(SUBPAGE, &mut t4), (16 * SUBPAGE, &mut t64)] {
            let mut lat = Vec::with_capacity(s.pages);
            for (i, page) in d.chunks_exact_mut(HPAGE).enumerate() {
                let n = s.targets[i];
                st.apply(page, src_page(src, i, s.kind), n);
                let first = if window == SUBPAGE {
                    n
                } else {
                    n.saturating_sub(8).min(NR - 16)
                };
                lat.push(timed_touch(
                    page[first * SUBPAGE..].as_ptr(),
                    window,
                    s.timer,
                ));
            }
            out.push(median(&lat));
        }
    }
    json!({"strategy": st.name(), "gbps": stats(&gbps), "touch_4k_ns": stats(&t4),
           "touch_64k_ns": stats(&t64), "verified": verified})
}

fn src_page(src: &[u8], i: usize, kind: Kind) -> &[u8] {
    match kind {
        Kind::Clear => &[],
        Kind::Copy => &src[i * HPAGE..(i + 1) * HPAGE],
    }
}

fn run_mode(
    s: &Setup,
    corunner: bool,
    dst: &mut Mapping,
    src: &Mapping,
) -> Result<Vec<Value>, HwError> {
    if !corunner {
        return s
            .strats
            .iter()
            .map(|&st| {
                crate::ctl::check()?;
                crate::ctl::note(&format!(
                    "{} {} (no co-runner)",
                    kind_name(s.kind),
                    st.name()
                ));
                let mut r = measure_strategy(s, st, dst, src);
                r["corunner"] = json!(false);
                Ok(r)
            })
            .collect::<Result<_, HwError>>();
    }
    let skip = |why: String| {
        s.strats
            .iter()
            .map(|st| json!({"strategy": st.name(), "corunner": true, "skipped": why}))
            .collect()
    };
    if sys::online_cpus() < 2 {
        return Ok(skip("co-runner needs a second CPU".into()));
    }
    let co_bytes = 4 * host::llc_bytes() as usize;
    let mut co_buf = match Mapping::anon(co_bytes, Backing::Thp) {
        Ok(m) => m,
        Err(e) => return Ok(skip(format!("co-runner buffer: {e}"))),
    };
    sys::prefault(co_buf.as_mut_slice(), SUBPAGE, 1);
    let co = CoRunner {
        stop: AtomicBool::new(false),
        bytes: AtomicU64::new(0),
    };
    std::thread::scope(|scope| {
        let h = scope.spawn(|| co.run(&mut co_buf, 1));
        // Let the co-runner fill the LLC before the first measurement.
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut out = Vec::new();
        for &st in &s.strats {
            if let Err(e) = crate::ctl::check() {
                co.stop.store(true, Ordering::Relaxed);
                let _ = h.join();
                return Err(e);
            }
            crate::ctl::note(&format!(
                "{} {} (with co-runner)",
                kind_name(s.kind),
                st.name()
            ));
            let b0 = co.bytes.load(Ordering::Relaxed);
            let t0 = Instant::now();
            let mut r = measure_strategy(s, st, dst, src);
            let co_gbps =
                (co.bytes.load(Ordering::Relaxed) - b0) as f64 / t0.elapsed().as_secs_f64() / 1e9;
            r["corunner"] = json!(true);
            r["corunner_gbps"] = json!(crate::opts::round3(co_gbps));
            out.push(r);
        }
        co.stop.store(true, Ordering::Relaxed);
        match h.join() {
            Ok(Ok(())) => Ok(out),
            Ok(Err(e)) => Ok(skip(format!("co-runner failed: {e}"))),
            Err(_) => Err(HwError::Io("co-runner thread panicked".into())),
        }
    })
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Clear => "clear",
        Kind::Copy => "copy",
    }
}

pub fn run(kind: Kind, opts_json: &str) -> Result<Value, HwError> {
    let opts = Opts::parse(opts_json, &ACCEPTED)?;
    let (names, defaults): (Vec<&str>, Vec<&str>) = match kind {
        // Registered user plans are accepted by name; the default is the built-ins.
        Kind::Clear => (
            ClearStrategy::all_names(),
            ClearStrategy::ALL.iter().map(|s| s.name()).collect(),
        ),
        Kind::Copy => (
            CopyStrategy::all_names(),
            CopyStrategy::ALL.iter().map(|s| s.name()).collect(),
        ),
    };
    let chosen = opts
        .names("strategies", &names)?
        .unwrap_or(defaults.iter().map(|s| s.to_string()).collect());
    let strats: Vec<Strat> = chosen
        .iter()
        .map(|n| match kind {
            Kind::Clear => Strat::Clear(ClearStrategy::from_name(n).unwrap()),
            Kind::Copy => Strat::Copy(CopyStrategy::from_name(n).unwrap()),
        })
        .collect();
    let pages = opts.u64("pages", 256, 1, 1 << 16)? as usize;
    let reps = opts.u64("reps", 5, 1, 1000)? as usize;
    let (target_v, targets) = parse_targets(&opts, pages)?;
    for s in &strats {
        if let Strat::Clear(c) = *s {
            crate::clear::check_user(c, NR, &targets)
                .map_err(|e| config_err("strategies", format!("policy {:?}: {e}", c.name())))?;
        }
    }
    let modes = match opts.bool("corunner")? {
        None => vec![false, true],
        Some(b) => vec![b],
    };
    let huge = opts.string("huge")?.unwrap_or_else(|| "thp".into());
    let backing = match huge.as_str() {
        "thp" => Backing::Thp,
        "none" => Backing::Small,
        "hugetlb" => Backing::Hugetlb(21),
        _ => {
            return Err(config_err(
                "huge",
                format!("expected \"thp\", \"hugetlb\" or \"none\", got \"{huge}\""),
            ))
        }
    };
    let timer = if host::has_flag("rdtscp") && host::has_flag("constant_tsc") {
        Timer::Tsc(sys::measure_tsc_ghz())
    } else {
        Timer::Clock
    };
    let setup = Setup {
        kind,
        strats,
        pages,
        reps,
        targets,
        timer,
    };

    let bytes = pages * HPAGE;
    let co_bytes = if modes.contains(&true) {
        4 * host::llc_bytes()
    } else {
        0
    };
    let src_bytes = if kind == Kind::Copy { bytes } else { 0 };
    crate::ctl::guard_memory("pages", (bytes + src_bytes) as u64 + co_bytes)?;
    // hugetlb: the destination's (and a copy's source's) 2 MiB pages come
    // from the pool, raised for the run and restored when the guard drops.
    let _pool = match backing {
        Backing::Hugetlb(_) => {
            let need = (bytes + src_bytes.max(HPAGE)) / HPAGE;
            Some(crate::pftest::reserve(2048, need as u64).map_err(|why| {
                config_err(
                    "huge",
                    format!("hugetlb pages for {} MiB: {why}", bytes >> 20),
                )
            })?)
        }
        _ => None,
    };
    let mut dst = Mapping::anon(bytes, backing)?;
    sys::prefault(dst.as_mut_slice(), SUBPAGE, 0xA5);
    let mut src = Mapping::anon(if kind == Kind::Copy { bytes } else { SUBPAGE }, backing)?;
    for (i, w) in src.as_mut_slice().chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&(i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
    }
    let thp_kib = dst.anon_huge_kib();

    let results = std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<(Vec<Value>, Option<String>), HwError> {
                let pin_note = sys::pin_to_cpu(0).err().map(|e| e.to_string());
                let mut all = Vec::new();
                for &m in &modes {
                    all.extend(run_mode(&setup, m, &mut dst, &src)?);
                }
                Ok((all, pin_note))
            })
            .join()
            .map_err(|_| HwError::Io("measurement thread panicked".into()))?
    })?;

    Ok(json!({
        "host": host::info(),
        "command": kind_name(kind),
        "options": {
            "strategies": chosen, "pages": pages, "reps": reps, "target": target_v,
            "corunner": modes, "huge": huge, "bytes_per_rep": bytes,
        },
        "method": {
            "gbps": "wall time (Instant) around one batch of pages; memory pre-faulted",
            "touch": "after each page's clear/copy, one u64 load per 64 B line (independent, summed) over the 4 KiB target sub-page (one pass) or the 64 KiB around it (another pass); per-rep median over pages, then statistics over reps",
            "timer": timer.describe(),
            "corunner": format!("thread on CPU 1 reading+writing every line of a {} MiB buffer (4x LLC); measuring thread on CPU 0", (4 * host::llc_bytes()) >> 20),
            "pinning": results.1.unwrap_or_else(|| "measuring thread pinned to CPU 0".into()),
        },
        "thp": {"anon_huge_kib_in_vmas": thp_kib, "buffer_kib": bytes / 1024,
                "observed": thp_kib.is_some_and(|k| k > 0),
                "note": "AnonHugePages from /proc/self/smaps summed over the VMAs overlapping the destination buffer; the kernel may merge adjacent buffers into one VMA"},
        "results": results.0,
    }))
}
