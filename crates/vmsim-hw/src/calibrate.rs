//! The `calibrate` command: measure this host's caches, memory and kernel
//! costs, and write them as a machine preset (`host-<name>.toml`) in which
//! every value says where it came from.
//!
//! Invariant: a quantity measured in repetitions reports one of its kept
//! repetitions (see `reps`: the highest clock or bandwidth, the lowest
//! latency, the median tail-touch probe) and says in the output how many
//! were kept and dropped and how far they spread, so a calibration made on
//! a busy host can be told from a quiet one.
//!
//! What it measures is a [`Raw`] (owned by `record`) that `preset` renders;
//! neither of those reads this module, so the arrows run from the command
//! down to them.

use crate::measure::{self as m, l1_timings, SFENCE_PAIRS};
use crate::micro::{self, Effort};
use crate::opts::{round3, Opts};
use crate::record::Raw;
use crate::reps::{Samples, Summary};
use crate::sys::{self, Backing, HPAGE, SUBPAGE};
use crate::{config_err, host, preset, HwError};
use serde_json::{json, Map, Value};
use std::time::Duration;

const ACCEPTED: [&str; 4] = ["name", "out_dir", "quick", "record"];

fn sanitise(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let t = t.trim_matches('-').to_string();
    if t.is_empty() {
        "host".into()
    } else {
        t
    }
}

/// Clean repetitions of the clock measurement (quick mode: 5). Each is
/// about 0.6 ms, so nine cost about 6 ms on a quiet host.
const CLOCK_REPS: usize = 9;
/// Clean repetitions of each chase size (quick mode: 3).
const CHASE_REPS: usize = 7;
/// Paired repetitions of the 4 KiB-over-THP chase, and their time budget.
const WALK_PAIRS: usize = 21;
const WALK_BUDGET: Duration = Duration::from_millis(2000);
/// No repetition of the clock starts after this much time (quick: 100 ms).
const CLOCK_BUDGET: Duration = Duration::from_millis(500);
/// No repetition of one chase size starts after this much time, the
/// untimed lap not counted (quick: 100 ms); a repetition is about 2 ms.
const CHASE_BUDGET: Duration = Duration::from_millis(1000);
/// Above this spread (`max / min - 1`) of the clock's kept repetitions a
/// warning is printed. What disturbs a repetition without switching the
/// thread out is small (the timer's cost, under 0.01%; a timer interrupt, a
/// few us of a 0.6 ms repetition; a boost step of the core clock), and on
/// the loaded development host the kept repetitions agreed within 2.0-2.4%;
/// time lost to the hypervisor running another vCPU instead, which the
/// switch check cannot see, costs a slice of a millisecond or more and
/// halves a repetition. Beyond 5% the repetitions disagree by more than the
/// first kind explains, so the highest may be low too, and every cycle
/// count in the preset scales with it.
pub const CLOCK_SPREAD_WARN: f64 = 0.05;

/// What `raw.repetitions` and each chase entry's `reps` mean.
const REPS_METHOD: &str = "a repetition during which the measuring thread was switched out (getrusage RUSAGE_THREAD) is dropped and run again, up to 4 x the repetitions asked for, and none starts after the quantity's time budget; a chase or load inside the core's own caches (no larger than the L2) makes 1000 (quick: 100) short repetitions of 10 000 loads or 1 MiB, as microbench's in-core rows, because another thread on the same physical core, which slows them on a shared host, is often busy for microseconds only; n: repetitions kept, switched_out: dropped, all_switched_out: none was clean so all were kept; spread: max / min - 1 of the kept ones. The figure reported is the lowest of a latency (chase: noise only adds time), the highest of a clock or bandwidth, the median of the tail-touch probe, of the paired 4 KiB-over-THP differences (walk_extra_ns_4k_over_thp), of the paired fenced-less-unfenced 4 KiB calls (sfence_drain_ns) and of the page-order and call-size sweep (page_order_mov_4k_gbps, stosb_calls_gbps: store-sweep's 64 MiB samples, switched-out ones dropped, rounds interleaving the cases); syscall, fault, clear and context-switch costs are one timed run each, averaged over many operations";

/// Which repetition `raw.<key>` reports.
fn figure_of(key: &str) -> &'static str {
    if key.ends_with("_gbps") || key.starts_with("core_ghz") {
        "max"
    } else if key.contains("touch") || key == "sfence_drain_ns" {
        "median"
    } else {
        "min"
    }
}

/// The warnings a calibration's repetitions call for (none on a quiet host):
/// the clock's, and the chase sizes (`chase[i].0` bytes, repetitions
/// `chase_reps[i]`) none of whose repetitions was clean.
fn warnings(
    clock: Option<&Summary>,
    chase: &[(usize, f64)],
    chase_reps: &[Summary],
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(clock) = clock {
        if !clock.clean {
            out.push(format!(
                "every repetition of the core clock was switched out; {:.2} GHz may be low",
                clock.max
            ));
        } else if clock.spread > CLOCK_SPREAD_WARN || clock.spread.is_nan() {
            out.push(format!(
                "the core clock's repetitions range over {:.2}-{:.2} GHz (spread {:.0}% > {:.0}%): the host is busy and {:.2} GHz, which every cycle count in the preset scales with, may be low; calibrate on a quiet machine",
                clock.min,
                clock.max,
                clock.spread * 100.0,
                CLOCK_SPREAD_WARN * 100.0,
                clock.max
            ));
        }
    }
    let spoilt: Vec<String> = chase
        .iter()
        .zip(chase_reps)
        .filter(|(_, r)| !r.clean)
        .map(|((s, _), _)| format!("{} KiB", s >> 10))
        .collect();
    if !spoilt.is_empty() {
        out.push(format!(
            "every repetition of the pointer chase at {} was switched out; those latencies may be high",
            spoilt.join(", ")
        ));
    }
    out
}

/// The largest pointer chase of a full calibration: the smallest power of
/// two of at least 8 x the LLC (where `memory.local_latency_ns` is read)
/// and 512 MiB, within [`MAX_CHASE_BYTES`] and three quarters of the host's
/// available memory (`avail`).
fn chase_top(llc: u64, avail: Option<u64>) -> u64 {
    let want = (8 * llc).next_power_of_two().max(512 << 20);
    let mut top = want.min(MAX_CHASE_BYTES);
    if let Some(a) = avail {
        while top > (8 << 10) && top > a / 4 * 3 {
            top /= 2;
        }
    }
    top
}

/// No chase is larger: an untimed lap over 4 GiB at DRAM latency takes
/// about ten seconds.
const MAX_CHASE_BYTES: u64 = 4 << 30;

/// The buffer of the bandwidth, store and sweep measurements: 4 x the LLC
/// and at least 64 MiB, within [`MAX_BANDWIDTH_BYTES`] and half of the
/// host's available memory (`avail`), a whole number of 2 MiB pages.
fn bandwidth_bytes(llc: u64, avail: Option<u64>) -> u64 {
    let mut b = (4 * llc).clamp(64 << 20, MAX_BANDWIDTH_BYTES);
    if let Some(a) = avail {
        b = b.min(a / 2);
    }
    (b / HPAGE as u64).max(1) * HPAGE as u64
}

/// No bandwidth buffer is larger (4 x a 1 GiB LLC).
const MAX_BANDWIDTH_BYTES: u64 = 4 << 30;

fn measure_all(quick: bool, facts: &host::HostFacts) -> Result<Raw, HwError> {
    let llc = facts.llc_bytes() as usize;
    let say = |what: &str| -> Result<(), HwError> {
        crate::ctl::check()?;
        crate::ctl::note(&format!("calibrate: {what}"));
        Ok(())
    };
    let mut reps: Vec<(String, Summary)> = Vec::new();
    say("core clock")?;
    let (clock_reps, clock_budget) = if quick {
        (5, Duration::from_millis(100))
    } else {
        (CLOCK_REPS, CLOCK_BUDGET)
    };
    let clock = m::core_ghz(clock_reps, clock_budget)?.summary();
    let core_ghz = clock.best(false);
    reps.push(("core_ghz_add_chain".into(), clock));
    let tsc_ghz = sys::measure_tsc_ghz();
    let sizes: Vec<usize> = if quick {
        vec![8 << 10, 32 << 10, 256 << 10]
    } else {
        let top = chase_top(llc as u64, facts.mem_available_bytes);
        (13..=top.trailing_zeros()).map(|s| 1usize << s).collect() // 8 KiB .. the top
    };
    let effort = Effort {
        reps: if quick { 3 } else { CHASE_REPS },
        bytes_per_rep: 0,
        loads_per_rep: if quick { 50_000 } else { 1_000_000 },
    };
    let budget = Some(if quick {
        Duration::from_millis(100)
    } else {
        CHASE_BUDGET
    });
    // Inside the core's own caches, as `microbench` measures them: the
    // fastest of many short repetitions (`micro::Sizes::in_core`).
    let levels = micro::Sizes::of(facts);
    let chase_at = |s: usize, backing: Backing| -> Result<(f64, Summary), HwError> {
        let e = levels.effort_for(s as u64, quick, effort);
        let sm = micro::chase(s as u64, backing, e, budget)?.summary();
        Ok((sm.best(true), sm))
    };
    let mut chase = Vec::new();
    let mut chase_reps = Vec::new();
    for &s in &sizes {
        say(&format!("pointer chase {} KiB", s >> 10))?;
        let (ns, sm) = chase_at(s, Backing::Thp)?;
        chase.push((s, ns));
        chase_reps.push(sm);
    }
    let big = *sizes.last().unwrap();
    let (walk_extra, walk_extra_reps) = if quick {
        (None, None)
    } else {
        say(&format!("4 KiB pages against THP, {} KiB", big >> 10))?;
        // A pair is about 4 ms; 21 of them tighten the median of a
        // difference that the host's noise moves by +-100 ns either way.
        let pairs = Effort {
            reps: WALK_PAIRS,
            ..effort
        };
        let sm = micro::walk_extra(big as u64, pairs, Some(WALK_BUDGET))?.summary();
        (Some((big, sm.median)), Some(sm))
    };
    // DRAM bandwidth wants a buffer well beyond the LLC in every mode: a
    // smaller one measures the cache. Quick mode makes fewer passes instead.
    let bw_bytes = bandwidth_bytes(llc as u64, facts.mem_available_bytes) as usize;
    crate::ctl::guard_memory("calibrate", bw_bytes as u64)?;
    let passes = if quick { 1 } else { 4 };
    say("bandwidths")?;
    let (sfence_drain_ns, sfence_drain_how) = if quick {
        (None, String::new())
    } else {
        let (s, how) = m::sfence_drain_ns(bw_bytes, SFENCE_PAIRS)?;
        let s = s.summary();
        reps.push(("sfence_drain_ns".into(), s));
        (Some(s.median.max(0.0)), how.to_string())
    };
    let mut best_rate = |key: &'static str, s: &Samples| {
        let sm = s.summary();
        reps.push((key.to_string(), sm));
        sm.best(false)
    };
    let store_gbps = best_rate("store_rep_stosb_gbps", &m::stosb_gbps(bw_bytes, passes)?);
    let (movnti, nt, nt_how) = m::nt_gbps(bw_bytes, passes)?;
    let movnti_gbps = best_rate("store_movnti_gbps", &movnti);
    let nt_gbps = best_rate("store_nontemporal_gbps", &nt);
    let clzero_gbps = match m::clzero_gbps(bw_bytes, passes)? {
        Some(s) => best_rate("store_clzero_gbps", &s),
        None => 0.0,
    };
    let read_gbps = best_rate("read_gbps", &m::read_gbps(bw_bytes, passes)?);
    // The fill paths: the rate one core sustains reading a level it misses
    // the level above in, as the vendors' "sustained bandwidth" figures are.
    let avx2 = std::is_x86_feature_detected!("avx2");
    let level_effort = micro::Effort::new(quick, if quick { 3 } else { CHASE_REPS });
    let mut level_load = |key: &'static str, bytes: u64| -> Result<f64, HwError> {
        if bytes == 0 {
            return Ok(0.0);
        }
        say(&format!("load bandwidth over {} KiB", bytes >> 10))?;
        let e = levels.effort_for(bytes, quick, level_effort);
        let s = micro::bandwidth(micro::Kernel::Load, bytes, e, avx2)?;
        Ok(best_rate(key, &s))
    };
    let l2_load_gbps = level_load("l2_load_gbps", levels.l2 / 2)?;
    let llc_load_gbps = level_load("llc_load_gbps", levels.llc / 2)?;
    // What memory sustains: every CPU of socket 0 reading its own share of
    // the DRAM-sized buffer at once (the `microbench` all-CPU row's routine).
    let all_cpus = micro::all_cpus(facts);
    let all_cpu_load_gbps = if all_cpus > 1 {
        say(&format!("load bandwidth of {all_cpus} CPUs at once"))?;
        let s = micro::all_cpu_load(all_cpus as usize, bw_bytes as u64, level_effort, avx2)?;
        best_rate("all_cpu_load_gbps", &s)
    } else {
        0.0
    };
    let mut l1_spells = vec![m::l1_rates(l1_timings(quick))?];
    say("system call, faults, context switch")?;
    let syscall_ns = m::syscall_ns(if quick { 20_000 } else { 1_000_000 });
    let f4k = if quick { 4 << 20 } else { 64 << 20 };
    let (fault4k_ns, free4k_ns, _) = m::fault_ns(f4k, Backing::Small, SUBPAGE)?;
    let clear4k_ns = m::clear_ns(if quick { 4 << 20 } else { bw_bytes }, SUBPAGE)?;
    let thp_bytes = if quick { 8 << 20 } else { 512 << 20 };
    let (thp_fault_ns, _, thp_kib) = m::fault_ns(thp_bytes, Backing::Thp, HPAGE)?;
    let clear2m_ns = m::clear_ns(if quick { 8 << 20 } else { bw_bytes }, HPAGE)?;
    let ctxsw_ns = m::context_switch_ns(if quick { 2_000 } else { 50_000 }).ok();
    l1_spells.push(m::l1_rates(l1_timings(quick))?);
    say("string-store cache allocation probe")?;
    let probe: Vec<usize> = if quick {
        vec![64 << 10, 1 << 20]
    } else {
        (14..=26).step_by(1).map(|s| 1usize << s).collect() // 16 KiB .. 64 MiB
    };
    // The median: this probe classifies sizes as hot or cold, it is no latency.
    let touch_reps = if quick { 3 } else { 7 };
    let mut tail_touch = Vec::new();
    let mut tail_touch_reps = Vec::new();
    for s in probe {
        let sm = m::stosb_tail_touch_ns(s, touch_reps, tsc_ghz)?.summary();
        tail_touch.push((s, sm.median));
        tail_touch_reps.push(sm);
    }
    let cold = m::stosb_tail_touch_ns(0, touch_reps, tsc_ghz)?.summary();
    reps.push(("cold_4k_touch_ns".into(), cold));
    let cold_touch_ns = cold.median;
    let (page_order_mov, stosb_calls) = if quick {
        (None, Vec::new())
    } else {
        say("page order and string-store call sizes")?;
        store_sweep(bw_bytes, llc)?
    };
    let store_queue = if quick {
        Vec::new()
    } else {
        say("store queue")?;
        (0..STORE_QUEUE_PROBES)
            .map(|_| crate::storeq::probe(bw_bytes, STORE_QUEUE_ROUNDS))
            .collect::<Result<Vec<_>, _>>()?
    };
    l1_spells.push(m::l1_rates(l1_timings(quick))?);
    let l1 = l1_spells[1..]
        .iter()
        .fold(l1_spells[0].clone(), |best, s| best.fastest(s));
    Ok(Raw {
        quick,
        core_ghz,
        tsc_ghz,
        chase,
        chase_reps,
        walk_extra,
        walk_extra_reps,
        bw_bytes,
        store_gbps,
        nt_gbps,
        movnti_gbps,
        clzero_gbps,
        sfence_drain_ns,
        sfence_drain_how,
        nt_how: nt_how.to_string(),
        read_gbps,
        l2_load_gbps,
        llc_load_gbps,
        all_cpu_load_gbps,
        all_cpus,
        l1,
        l1_spells,
        syscall_ns,
        fault4k_ns,
        free4k_ns,
        clear4k_ns,
        thp_fault_ns,
        thp_kib,
        thp_bytes,
        clear2m_ns,
        ctxsw_ns,
        tail_touch,
        tail_touch_reps,
        cold_touch_ns,
        page_order_mov,
        stosb_calls,
        store_queue,
        reps,
    })
}

/// The preset text and the derived figures of `record`, as `calibrate`
/// writes them, stamped `stamp`.
pub fn render(record: &crate::record::Record, name: &str, stamp: &str) -> (String, Value) {
    preset::render(name, &record.raw, &record.facts, stamp)
}

/// The page-order pair (ascending, descending) and the rate of each call size.
type SweepFigures = (Option<(Summary, Summary)>, Vec<(usize, Summary)>);

/// Store-queue probes, each on a fresh buffer: a probe that runs while
/// another thread shares the physical core finds its share (a Zen 3 guest
/// gave 64 and 32 in turn), so the preset takes the largest of several.
const STORE_QUEUE_PROBES: usize = 3;
/// Rounds of each probe; each time is the median of its rounds.
const STORE_QUEUE_ROUNDS: usize = 5;

/// Rounds of the page-order and call-size sweep: each round clears the
/// buffer once per case (`store-sweep`'s interleaving), in 64 MiB samples.
const SWEEP_REPS: usize = 15;

/// The `rep stosb` call sizes of the bypass sweep, as eighths of the LLC:
/// 1/16 of it to 4 times it, denser around the LLC's size.
const CALL_EIGHTHS: [f64; 14] = [
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 16.0, 24.0, 32.0,
];

/// What `store-sweep` measures, on a THP-backed buffer of `bytes` (its
/// 4 KiB pages physically contiguous within each 2 MiB): a `mov` clear in
/// 4 KiB calls in ascending and in descending page order, and `rep stosb`
/// in calls of [`CALL_EIGHTHS`] of the LLC (`llc` bytes; 4 KiB multiples
/// no larger than the buffer), all interleaved by rounds. The medians of
/// the kept samples classify the prefetcher's page crossing and the
/// string-store bypass (preset.rs).
fn store_sweep(bytes: usize, llc: usize) -> Result<SweepFigures, HwError> {
    use crate::sweep::{case_samples, StoreKind};
    let mut buf = sys::Mapping::anon(bytes, Backing::Thp)?;
    sys::prefault(buf.as_mut_slice(), SUBPAGE, 0xA5);
    let llc = if llc == 0 { 32 << 20 } else { llc };
    let mut sizes: Vec<usize> = CALL_EIGHTHS
        .iter()
        .map(|e| ((llc as f64 * e / 8.0) as usize / SUBPAGE).max(1) * SUBPAGE)
        .filter(|&c| c <= bytes)
        .collect();
    sizes.dedup();
    let mut specs = vec![
        (StoreKind::Mov, SUBPAGE, false),
        (StoreKind::Mov, SUBPAGE, true),
    ];
    specs.extend(sizes.iter().map(|&c| (StoreKind::Stosb, c, false)));
    let s = case_samples(&specs, &mut buf, SWEEP_REPS)?;
    let order = Some((s[0].summary(), s[1].summary()));
    let calls = sizes
        .into_iter()
        .zip(s[2..].iter().map(|x| x.summary()))
        .collect();
    Ok((order, calls))
}

pub fn run(opts_json: &str) -> Result<Value, HwError> {
    let opts = Opts::parse(opts_json, &ACCEPTED)?;
    let from = opts.string("record")?;
    let record = from
        .as_deref()
        .map(|path| crate::record::Record::load("record", path))
        .transpose()?;
    if record.is_some() && opts.bool("quick")?.is_some() {
        return Err(config_err(
            "quick",
            "a preset rendered from a record takes the record's mode; drop quick or record",
        ));
    }
    let quick = opts.bool("quick")?.unwrap_or(false);
    let name = sanitise(&opts.string("name")?.unwrap_or_else(|| match &record {
        Some(r) => r.facts.hostname.clone(),
        None => host::hostname(),
    }));
    let out_dir = std::path::PathBuf::from(opts.string("out_dir")?.unwrap_or_else(|| ".".into()));
    if !out_dir.is_dir() {
        return Err(config_err(
            "out_dir",
            format!("'{}' is not a directory", out_dir.display()),
        ));
    }
    let (record, pin_note) = match record {
        Some(r) => (
            r,
            Some("no measurement: the preset is rendered from a record".into()),
        ),
        None => {
            let facts = host::HostFacts::detect();
            // Measure on a pinned thread so the caller's own affinity is left alone.
            let f = facts.clone();
            let (raw, pin) = std::thread::spawn(move || {
                let pin = sys::pin_to_cpu(0).err().map(|e| e.to_string());
                measure_all(quick, &f).map(|r| (r, pin))
            })
            .join()
            .map_err(|_| HwError::Io("calibration thread panicked".into()))??;
            (crate::record::Record::new(facts, raw), pin)
        }
    };
    let raw = &record.raw;
    let (text, derived) = preset::render(&name, raw, &record.facts, &sys::utc_now());
    let path = out_dir.join(format!("host-{name}.toml"));
    std::fs::write(&path, &text)
        .map_err(|e| HwError::Io(format!("writing {}: {e}", path.display())))?;
    let record_path = out_dir.join(format!("host-{name}.record.json"));
    let record_json =
        serde_json::to_value(&record).map_err(|e| HwError::Io(format!("the record: {e}")))?;
    if from.is_none() {
        let pretty = serde_json::to_string_pretty(&record_json)
            .map_err(|e| HwError::Io(format!("the record: {e}")))?;
        std::fs::write(&record_path, pretty)
            .map_err(|e| HwError::Io(format!("writing {}: {e}", record_path.display())))?;
    }
    // The preset must be one the model takes: a refusal here is a fault of
    // the calibration, named with the key and the record to report.
    vmsim_core::config::Preset::parse(&text, &path.display().to_string()).map_err(|e| {
        HwError::Io(format!(
            "the calibrated preset {} is refused by the model ({e}); the measurements are in {}",
            path.display(),
            if from.is_none() {
                record_path.display().to_string()
            } else {
                from.clone().unwrap_or_default()
            }
        ))
    })?;
    let clock = raw.reps.iter().find(|(k, _)| k == "core_ghz_add_chain");
    let warnings = warnings(clock.map(|c| &c.1), &raw.chase, &raw.chase_reps);
    for w in &warnings {
        crate::ctl::warn(&format!("calibrate: {w}"));
    }
    let kv = |v: &[(usize, f64)], r: &[Summary], key: &str| -> Vec<Value> {
        v.iter()
            .zip(r)
            .map(|(&(s, ns), r)| json!({"bytes": s, key: round3(ns), "reps": r.json()}))
            .collect()
    };
    let mut repetitions = Map::new();
    for (key, r) in &raw.reps {
        let mut v = r.json();
        v["figure"] = json!(figure_of(key));
        repetitions.insert(key.clone(), v);
    }
    let mut out = json!({
        "host": host::info(),
        "command": "calibrate",
        "options": {"name": name, "out_dir": out_dir.display().to_string(), "quick": raw.quick},
        "preset_path": path.display().to_string(),
        "pinning": pin_note.unwrap_or_else(|| "measuring thread pinned to CPU 0".into()),
        "raw": {
            "core_ghz_add_chain": round3(raw.core_ghz),
            "tsc_ghz": round3(raw.tsc_ghz),
            "chase_ns_thp": kv(&raw.chase, &raw.chase_reps, "ns"),
            "walk_extra_ns_4k_over_thp": raw.walk_extra.zip(raw.walk_extra_reps).map(|((s, ns), r)| {
                json!({"bytes": s, "ns": round3(ns), "reps": r.json()})
            }),
            "bandwidth_buffer_bytes": raw.bw_bytes,
            "store_rep_stosb_gbps": round3(raw.store_gbps),
            "store_nontemporal_gbps": round3(raw.nt_gbps),
            "store_nontemporal_method": raw.nt_how,
            "store_movnti_gbps": round3(raw.movnti_gbps),
            "store_clzero_gbps": round3(raw.clzero_gbps),
            "read_gbps": round3(raw.read_gbps),
            "l2_load_gbps": round3(raw.l2_load_gbps),
            "llc_load_gbps": round3(raw.llc_load_gbps),
            "all_cpu_load_gbps": round3(raw.all_cpu_load_gbps),
            "all_cpu_load_cpus": raw.all_cpus,
            "level_load_method": micro::Kernel::Load.method(std::is_x86_feature_detected!("avx2")),
            "l1_store_bytes_per_ns": round3(raw.l1.store_bpns),
            "l1_load_bytes_per_ns": round3(raw.l1.load_bpns),
            "l1_load_method": raw.l1.load_how,
            "syscall_getppid_ns": round3(raw.syscall_ns),
            "fault_4k_ns": round3(raw.fault4k_ns),
            "munmap_per_4k_page_ns": round3(raw.free4k_ns),
            "clear_4k_rep_stosb_ns": round3(raw.clear4k_ns),
            "fault_thp_ns": round3(raw.thp_fault_ns),
            "fault_thp_anon_huge_kib": raw.thp_kib,
            "clear_2m_target_last_ns": round3(raw.clear2m_ns),
            "context_switch_ns": raw.ctxsw_ns.map(round3),
            "stosb_tail_touch_ns": kv(&raw.tail_touch, &raw.tail_touch_reps, "ns"),
            "cold_4k_touch_ns": round3(raw.cold_touch_ns),
            "page_order_mov_4k_gbps": raw.page_order_mov.map(|(a, d)| json!({
                "ascending": round3(a.median), "descending": round3(d.median),
                "ascending_reps": a.json(), "descending_reps": d.json()})),
            "stosb_calls_gbps": raw.stosb_calls.iter().map(|(b, sm)| json!({
                "bytes": b, "gbps": round3(sm.median), "reps": sm.json()})).collect::<Vec<_>>(),
            "repetitions": repetitions,
        },
        "repetitions_method": REPS_METHOD,
        "warnings": warnings,
        "derived": derived,
    });
    // Beside the other stores' figures (kept out of the one json! above,
    // which is at the macro's recursion limit).
    out["raw"]["store_queue"] = json!(raw
        .store_queue
        .iter()
        .map(|p| json!({
            "entries": p.entries,
            "ns_per_iteration": p.ns.iter().map(|&(n, t)| json!([n, round3(t)])).collect::<Vec<_>>(),
        }))
        .collect::<Vec<_>>());
    out["options"]["record"] = json!(from);
    out["record_path"] = json!(from.is_none().then(|| record_path.display().to_string()));
    out["record"] = record_json;
    out["clamped"] = out["derived"]["clamped"].clone();
    out["raw"]["sfence_drain_ns"] = json!(raw.sfence_drain_ns.map(round3));
    out["raw"]["sfence_drain_method"] = json!(raw.sfence_drain_ns.map(|_| &raw.sfence_drain_how));
    out["raw"]["l1_store_method"] = json!(raw.l1.store_how);
    out["raw"]["l1_scalar_store_bytes_per_ns"] = json!(round3(raw.l1.scalar_store_bpns));
    out["raw"]["l1_spells"] = raw
        .l1_spells
        .iter()
        .map(|s| {
            json!({
                "store_bytes_per_ns": round3(s.store_bpns),
                "scalar_store_bytes_per_ns": round3(s.scalar_store_bpns),
                "load_bytes_per_ns": round3(s.load_bpns),
                "stosb_l1_call_ns": s.stosb_call_ns.iter().map(|&(_, ns)| round3(ns)).collect::<Vec<_>>(),
            })
        })
        .collect();
    out["raw"]["stosb_l1_call_ns"] = raw
        .l1
        .stosb_call_ns
        .iter()
        .map(|&(b, ns)| json!({"bytes": b, "ns": round3(ns)}))
        .collect();
    let startup = raw.l1.stosb_startup();
    out["raw"]["stosb_startup_ns"] = json!(startup.map(|(ns, _)| round3(ns)));
    out["raw"]["stosb_l1_bytes_per_ns"] = json!(startup.map(|(_, r)| round3(r)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(attempts: &[(f64, bool)]) -> Summary {
        Samples::from_attempts(9, attempts.iter().copied()).summary()
    }

    #[test]
    fn a_clock_spread_beyond_five_percent_is_warned_about() {
        // 3.2 / 3.1 - 1 = 3.2%: quiet enough; the switched-out 1.9 is dropped.
        let quiet = summary(&[(3.1, false), (3.2, false), (1.9, true)]);
        assert_eq!(quiet.best(false), 3.2);
        assert!(warnings(Some(&quiet), &[], &[]).is_empty());
        // 3.2 / 2.5 - 1 = 28%.
        let busy = summary(&[(3.2, false), (2.5, false), (3.0, false)]);
        let w = warnings(Some(&busy), &[], &[]);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("2.50-3.20 GHz (spread 28% > 5%)"), "{}", w[0]);
        let spoilt = summary(&[(2.0, true), (2.4, true)]);
        assert!(warnings(Some(&spoilt), &[], &[])[0].contains("every repetition of the core clock"));
    }

    #[test]
    fn chase_sizes_without_a_clean_repetition_are_named() {
        let ok = summary(&[(1.0, false)]);
        let bad = summary(&[(90.0, true), (80.0, true)]);
        let w = warnings(None, &[(8 << 10, 1.0), (1 << 20, 80.0)], &[ok, bad]);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("at 1024 KiB was switched out"), "{}", w[0]);
        assert_eq!((bad.best(true), bad.n, bad.switched), (80.0, 2, 2));
    }

    #[test]
    fn the_chase_reaches_eight_llcs_and_the_bandwidth_buffer_four_within_memory() {
        let (mib, gib) = (1u64 << 20, 1u64 << 30);
        // A 32 MiB LLC: 8 x is 256 MiB, below the 512 MiB floor.
        assert_eq!(chase_top(32 * mib, Some(20 * gib)), 512 * mib);
        // A 480 MiB LLC: 3840 MiB, the next power of two 4 GiB.
        assert_eq!(chase_top(480 * mib, Some(20 * gib)), 4 * gib);
        // A 1 GiB LLC: 8 GiB wanted, 4 GiB at most.
        assert_eq!(chase_top(gib, None), 4 * gib);
        // Within three quarters of the available memory.
        assert_eq!(chase_top(480 * mib, Some(3 * gib)), 2 * gib);
        assert_eq!(bandwidth_bytes(32 * mib, Some(20 * gib)), 128 * mib);
        assert_eq!(bandwidth_bytes(8 * mib, None), 64 * mib);
        assert_eq!(bandwidth_bytes(480 * mib, Some(20 * gib)), 1920 * mib);
        assert_eq!(bandwidth_bytes(2 * gib, None), 4 * gib);
        // Half the available memory, in whole 2 MiB pages.
        assert_eq!(bandwidth_bytes(480 * mib, Some(gib + 3 * mib)), 512 * mib);
    }

    #[test]
    fn each_repeated_quantity_says_which_repetition_it_reports() {
        assert_eq!(figure_of("core_ghz_add_chain"), "max");
        assert_eq!(figure_of("read_gbps"), "max");
        assert_eq!(figure_of("cold_4k_touch_ns"), "median");
        assert_eq!(figure_of("chase_ns_thp"), "min");
    }
}
