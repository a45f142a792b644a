//! Renders a calibration as a machine preset in the schema of machines/*.toml:
//! every leaf `{ value = ..., source = "...", class = "..." }`, the source
//! saying whether the value was measured here (class measured), read from
//! sysfs/cpuid (sourced), or is an unmeasured default (no class: the user's).
//!
//! It reads a calibration's [`Raw`] figures from `record` and the counts
//! they were measured with from `measure`, never from `calibrate`, which
//! calls it: the command sits above its renderer.
//!
//! Invariants: rendering is pure (the record, the name and the stamp alone
//! decide the text), and each section is written from one [`Basis`], so a
//! figure that two sections or the derived table read is worked out once.

use crate::host::{CacheLevel, HostFacts};
use crate::measure::{l1_timings, L1_BYTES, L1_PASSES, SFENCE_PAIRS, STOSB_CALLS};
use crate::opts::round3;
use crate::record::Raw;
use serde_json::{json, Map, Value};

pub(crate) const DEFAULT: &str = "not measured: default, see docs";

enum Val {
    I(i64),
    F(f64),
    B(bool),
    S(&'static str),
}

impl Val {
    fn toml(&self) -> String {
        match self {
            Val::I(i) => i.to_string(),
            Val::F(f) if f.is_finite() => format!("{:?}", round3(*f)),
            Val::F(_) => "0.0".into(),
            Val::B(b) => b.to_string(),
            Val::S(t) => qs(t),
        }
    }
}

fn qs(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

struct W {
    /// The preset's head: name, description.
    out: String,
    /// `cpu.model`.
    model: String,
    /// Dotted key -> its leaf line, emitted in the declarations' order by
    /// [`W::finish`].
    leaves: std::collections::BTreeMap<String, String>,
    stamp: String,
    host: String,
    /// The section being written.
    section: String,
    /// Measurements written as something else, each `{key, measured,
    /// written, reason}` (`derived.clamped`).
    clamped: Vec<Value>,
}

impl W {
    fn section(&mut self, name: &str) {
        self.section = name.to_string();
    }
    /// The preset: the head, then each declared section and its keys in
    /// the declarations' order (vmsim_core's config/preset/params.rs), so
    /// the keys written are the declared ones; a declared key not written
    /// here leaves the preset incomplete, which its parse reports.
    fn finish(mut self) -> (String, Vec<Value>) {
        let mut section = "";
        for p in vmsim_core::config::preset::params::all() {
            let Some(line) = self.leaves.remove(&p.key()) else {
                continue;
            };
            if p.section != section {
                section = p.section;
                self.out.push_str(&format!("\n[{section}]\n"));
                if section == "cpu" {
                    self.out.push_str(&format!("model = {}\n", qs(&self.model)));
                }
            }
            self.out.push_str(&line);
        }
        debug_assert!(
            self.leaves.is_empty(),
            "keys written but not declared: {:?}",
            self.leaves.keys().collect::<Vec<_>>()
        );
        (self.out, self.clamped)
    }
    /// Notes that `key` of this section, measured (or defaulted) as `found`,
    /// is written as `written` for `reason`, a bound of the preset; the
    /// key's source says the same.
    fn clamp(&mut self, key: &str, found: f64, written: Value, reason: &str) {
        self.clamped.push(json!({
            "key": format!("{}.{key}", self.section),
            "found": round3(found),
            "written": written,
            "reason": reason,
        }));
    }
    /// A value with its source and, where the calibration knows it, its
    /// class (docs/machines.md, "Provenance"); a default has none, so it
    /// reads as the user's own.
    fn leaf(&mut self, key: &str, v: Val, source: String, class: Option<&str>) {
        let class = class.map_or(String::new(), |c| format!(", class = {}", qs(c)));
        self.leaves.insert(
            format!("{}.{key}", self.section),
            format!(
                "{key} = {{ value = {}, source = {}{class} }}\n",
                v.toml(),
                qs(&source)
            ),
        );
    }
    /// A hold in ns by Little's law from one core's measured rate of unread
    /// lines (`gbps`), its source naming that rate (`rate`, after the
    /// fill buffers' share).
    fn measured_hold(&mut self, key: &str, gbps: f64, dram_ns: Option<f64>, rate: &str) {
        self.measured(
            key,
            Val::F(little_hold_ns(gbps, dram_ns)),
            &format!("fill_buffers ({FILL_BUFFERS}, a default) x 64 B / {rate}"),
        );
    }
    /// A cache level's size and ways: read from sysfs, or the default that
    /// `c` carries where sysfs reports no such level (`known` false).
    fn geometry(&mut self, c: &CacheLevel, known: bool, sysfs: &str) {
        if known {
            self.read(
                "size_kib",
                Val::I(c.size_kib as i64),
                &format!("{sysfs}/index*/size"),
            );
            self.read(
                "ways",
                Val::I(c.ways as i64),
                &format!("{sysfs}/index*/ways_of_associativity"),
            );
        } else {
            let note = format!(
                "sysfs reports no level-{} data cache with a size and ways on this host",
                c.level
            );
            self.default("size_kib", Val::I(c.size_kib as i64), &note);
            self.default("ways", Val::I(c.ways as i64), &note);
        }
    }
    fn measured(&mut self, key: &str, v: Val, method: &str) {
        let s = format!(
            "measured by vmsim hw calibrate on {} at {}: {method}",
            self.host, self.stamp
        );
        self.leaf(key, v, s, Some("measured"));
    }
    fn read(&mut self, key: &str, v: Val, from: &str) {
        let s = format!(
            "read by vmsim hw calibrate on {} at {} from {from} (not measured)",
            self.host, self.stamp
        );
        self.leaf(key, v, s, Some("sourced"));
    }
    fn default(&mut self, key: &str, v: Val, note: &str) {
        let s = if note.is_empty() {
            DEFAULT.to_string()
        } else {
            format!("{DEFAULT}; {note}")
        };
        self.leaf(key, v, s, None);
    }
    /// A measured value when there is one, else the default.
    fn either(&mut self, key: &str, got: Option<Val>, method: &str, fallback: Val, note: &str) {
        match got {
            Some(v) => self.measured(key, v, method),
            None => self.default(key, fallback, note),
        }
    }
}

fn in_window(chase: &[(usize, f64)], lo: u64, hi: u64) -> Vec<f64> {
    chase
        .iter()
        .filter(|(s, _)| (*s as u64) > lo && (*s as u64) <= hi)
        .map(|p| p.1)
        .collect()
}

/// Median chase latency (ns) over sweep sizes in (lo, hi].
fn plateau(chase: &[(usize, f64)], lo: u64, hi: u64) -> Option<f64> {
    let v = in_window(chase, lo, hi);
    (!v.is_empty()).then(|| crate::opts::median(&v))
}

/// Lowest chase latency in (lo, hi]: for the LLC, whose share available to
/// this core (other cores, other guests, way partitioning) can be smaller
/// than sysfs says, so larger sizes in the window already reach DRAM; and
/// for DRAM, where larger sizes add translation costs under a hypervisor.
fn plateau_floor(chase: &[(usize, f64)], lo: u64, hi: u64) -> Option<f64> {
    in_window(chase, lo, hi).into_iter().reduce(f64::min)
}

/// The smallest probed size (KiB) from which on every larger size's tail
/// touch is over 3x the hottest: a string store bypasses the cache from a
/// size on, so one slow probe below hot ones (a timer tick, a co-runner) is
/// noise, not a threshold.
fn bypass_kib(touch: &[(usize, f64)], hot: f64) -> Option<i64> {
    let cold_tail = touch.iter().rev().take_while(|p| p.1 > 3.0 * hot).count();
    (cold_tail > 0).then(|| (touch[touch.len() - cold_tail].0 >> 10) as i64)
}

/// The L2 misses one core keeps in flight to memory, by Little's law from a
/// single-thread read bandwidth (GB/s) and the idle DRAM latency (ns), within
/// the preset's accepted 1-1024 entries; `None` when either is missing.
/// Little's law: the hold (ns, to 0.1) that gives one core's measured
/// bandwidth `gbps` of unread full lines back through the fill buffers;
/// never above the read latency, which the preset's bound requires.
fn little_hold_ns(gbps: f64, dram_ns: Option<f64>) -> f64 {
    let hold = ((FILL_BUFFERS * 64) as f64 / gbps).min(dram_ns.unwrap_or(DEFAULT_LOCAL_NS));
    (hold * 10.0).round().max(1.0) / 10.0
}

/// `memory.sustained_bandwidth_gbs` of a host: the highest rate the node
/// was seen to move (GB/s) of every CPU's load at once (the node's share),
/// one core's read, one core's non-temporal stores and one core's `rep
/// stosb` (written bytes; a chip that reads for ownership moves twice
/// that), each a lower bound
/// for what it sustains; and which one it is. Writes count: the model's
/// DRAM calendar takes a written line as it takes a read one.
fn sustained_bandwidth(
    all_cpu_share: f64,
    read: f64,
    nt_store: f64,
    rep_stosb: f64,
) -> (f64, &'static str) {
    let mut best = (read, "one core's read");
    for (x, what) in [
        (all_cpu_share, "all-CPU load"),
        (nt_store, "one core's non-temporal stores"),
        (rep_stosb, "one core's rep stosb"),
    ] {
        if x > best.0 {
            best = (x, what);
        }
    }
    best
}

fn superqueue(read_gbps: f64, dram_ns: Option<f64>) -> Option<i64> {
    let lines = read_gbps * dram_ns? / 64.0;
    (lines.is_finite() && lines > 0.0).then(|| (lines.round() as i64).clamp(1, 1024))
}

/// The L2 streamer's distance that keeps `superqueue(read_gbps, dram_ns)`
/// lines in flight in one core's sequential stream: in the model such a
/// stream has the streamer's distance ahead of its L2 lookups plus the
/// demand misses and L1 prefetches in the fill buffers
/// (crates/vmsim-core/tests/prefetch.rs), so the distance is the lines in
/// flight less `fill_buffers`, within the 1-63 lines the preset accepts.
fn streamer_distance(read_gbps: f64, dram_ns: Option<f64>, fill_buffers: u64) -> Option<i64> {
    let lines = superqueue(read_gbps, dram_ns)?;
    Some((lines - fill_buffers as i64).clamp(1, 63))
}

/// Ascending over descending page order of a 4 KiB-call `mov` clear at or
/// above which the prefetcher continues streams into the next page: a chip
/// whose streamer stops at the page starts each page the same way in both
/// orders (a ratio near 1); this host's Zen 4 measured 3.5 (docs/hw.md).
const CROSS_RATIO: f64 = 1.25;

/// A bypass rate under this multiple of the cached rate is no bypass.
const BYPASS_GAIN: f64 = 1.3;

/// Which string stores skip the caches, as a call-size sweep shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bypass {
    /// Every call allocates.
    Off,
    /// Calls longer than the threshold bypass whole (`nocache_by = "call"`).
    Call { threshold_kib: i64 },
    /// A call's lines bypass while more than the tail remains (`"remaining"`).
    Remaining { tail_kib: i64 },
}

#[derive(Clone, Copy, Debug)]
struct BypassFit {
    rule: Bypass,
    cached_gbps: f64,
    bypass_gbps: f64,
    step_err: f64,
    ramp_err: f64,
}

/// Fits `rep stosb` rates by call size (bytes, GB/s) as a step and as a ramp
/// and keeps the better fit; `None` with fewer than three sizes. Both fit
/// time per byte with relative weights: the step two rates either side of a
/// call size (calls up to it cached), the ramp a call of `L` taking
/// `min(L, T) / Rc + max(L - T, 0) / Rb` (its last `T` bytes cached), `T` on
/// a 64 KiB grid, `Rc` and `Rb` by linear least squares.
fn bypass_rule(points: &[(usize, f64)]) -> Option<BypassFit> {
    let mut p: Vec<(f64, f64)> = points
        .iter()
        .filter(|(b, g)| *b > 0 && g.is_finite() && *g > 0.0)
        .map(|&(b, g)| (b as f64, 1.0 / g))
        .collect();
    if p.len() < 3 {
        return None;
    }
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Weighted mean of times per byte with weights 1 / t^2, and its error.
    let group = |g: &[(f64, f64)]| {
        let m = g.iter().map(|x| 1.0 / x.1).sum::<f64>()
            / g.iter().map(|x| 1.0 / (x.1 * x.1)).sum::<f64>();
        (m, g.iter().map(|x| ((x.1 - m) / x.1).powi(2)).sum::<f64>())
    };
    let (mut step_err, mut split, mut rc, mut rb) = (f64::INFINITY, p.len(), 0.0, 0.0);
    for k in 1..p.len() {
        let (ma, ea) = group(&p[..k]);
        let (mb, eb) = group(&p[k..]);
        if ea + eb < step_err && mb < ma {
            (step_err, split, rc, rb) = (ea + eb, k, 1.0 / ma, 1.0 / mb);
        }
    }
    let (m_all, e_all) = group(&p);
    if split == p.len() || rb < BYPASS_GAIN * rc {
        return Some(BypassFit {
            rule: Bypass::Off,
            cached_gbps: 1.0 / m_all,
            bypass_gbps: 1.0 / m_all,
            step_err: e_all,
            ramp_err: e_all,
        });
    }
    let largest = p.last().unwrap().0;
    let (mut ramp_err, mut tail, mut ramp_rates) = (f64::INFINITY, 0.0, (0.0, 0.0));
    let grid = 64.0 * 1024.0;
    let mut t = grid;
    while t < largest {
        let (mut sxx, mut sxy, mut syy, mut sxt, mut syt) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(l, tt) in &p {
            let (x, y, w) = (l.min(t) / l, (l - t).max(0.0) / l, 1.0 / (tt * tt));
            sxx += w * x * x;
            sxy += w * x * y;
            syy += w * y * y;
            sxt += w * x * tt;
            syt += w * y * tt;
        }
        let det = sxx * syy - sxy * sxy;
        if det.abs() > 1e-18 {
            let a = (sxt * syy - syt * sxy) / det;
            let b = (syt * sxx - sxt * sxy) / det;
            if a > 0.0 && b > 0.0 && b < a {
                let err: f64 = p
                    .iter()
                    .map(|&(l, tt)| {
                        ((tt - a * l.min(t) / l - b * (l - t).max(0.0) / l) / tt).powi(2)
                    })
                    .sum();
                if err < ramp_err {
                    (ramp_err, tail, ramp_rates) = (err, t, (1.0 / a, 1.0 / b));
                }
            }
        }
        t += grid;
    }
    let rule = if ramp_err < step_err {
        (rc, rb) = ramp_rates;
        Bypass::Remaining {
            tail_kib: (tail / 1024.0).round() as i64,
        }
    } else {
        Bypass::Call {
            threshold_kib: (p[split - 1].0 / 1024.0).round() as i64,
        }
    };
    Some(BypassFit {
        rule,
        cached_gbps: rc,
        bypass_gbps: rb,
        step_err,
        ramp_err,
    })
}

/// Why `string.bypass_hold_ns` is "posted" when no bypass rate was measured.
const BYPASS_HOLD_POSTED: &str = "no bypass rate measured (quick mode, or no bypass found): a bypassing line holds its buffer as any unread line does (memory.posted_write_ns)";

/// Why `writebacks_share_sustained` follows the vendor.
const WRITEBACKS_BY_VENDOR: &str = "chosen by vendor: on Intel the sustained L2 and L3 figures cover fills and write-backs together (a one-core x += y on a Haswell-EP, docs/calibration-sources.md 5.3); on a Zen 3 host x += y moved more bytes than a load through the L2 and the LLC (fills plus write-backs; docs/hw.md), so not on AMD";

/// How a fill path's rate is measured, with the short repetitions an
/// in-core figure took in this mode (the level and its size follow).
fn level_load(in_core_reps: usize) -> String {
    format!("one core's load bandwidth (the highest of its clean repetitions; inside the L2, of {in_core_reps} short ones) over a THP-backed buffer of")
}

/// `cpu.movnti_line_cycles` and its source: from one core's `movnti`
/// bandwidth (the kernel's loop, eight stores a line: [`crate::prim::nt_clear`])
/// where it runs below the widest non-temporal stores', so that the memory
/// path does not bound it; else eight 8 B stores at the core's measured
/// scalar store rate (`scalar`, stores a cycle).
fn movnti_line_cycles(movnti_gbps: f64, wide_gbps: f64, ghz: f64, scalar: i64) -> (i64, String) {
    let ports = vmsim_core::machine::params::scalar_store_line_cycles(scalar.max(1) as u64) as i64;
    let rule =
        format!("eight 8 B stores at the scalar store rate ({scalar} a cycle): {ports} cycles");
    if !(movnti_gbps > 0.0 && wide_gbps > 0.0) {
        return (ports, format!("{rule}; no movnti rate measured"));
    }
    if movnti_gbps >= 0.9 * wide_gbps {
        return (ports, format!("{rule}; one core's movnti bandwidth (raw.store_movnti_gbps, {movnti_gbps:.1} GB/s) is not below its widest non-temporal stores' ({wide_gbps:.1} GB/s): the memory path bounds it, not issue"));
    }
    let c = (64.0 * ghz / movnti_gbps).round().max(1.0) as i64;
    (c, format!("one core's movnti bandwidth (raw.store_movnti_gbps, {movnti_gbps:.1} GB/s, eight stores a line, a line an iteration as the kernel's loop) below its widest non-temporal stores' ({wide_gbps:.1} GB/s), so bound by issue: 64 B / {movnti_gbps:.1} GB/s x {ghz:.2} GHz (the scalar store rate's: {ports})"))
}

/// `cpu.scalar_stores_per_cycle` and its source: 8 B `mov` stores into the
/// L1 ([`crate::micro::fill_mov8`]) a measured core cycle, to the nearest
/// whole store (a core has whole store ports), at least one.
fn scalar_stores_per_cycle(
    scalar_bpns: f64,
    ghz: f64,
    timings: usize,
    spells: usize,
) -> (i64, String) {
    if !(scalar_bpns > 0.0 && ghz > 0.0) {
        return (
            1,
            "no scalar store rate measured: one a cycle, the fewest a core has".into(),
        );
    }
    let rate = scalar_bpns / 8.0 / ghz;
    let v = (rate.round() as i64).clamp(1, 8);
    (v, format!("8 B mov stores, 32 an iteration, over an L1-resident 16 KiB buffer: {rate:.2} stores a measured core cycle (raw.l1_scalar_store_bytes_per_ns / 8 B / {ghz:.2} GHz), the fastest of {timings} timings of {L1_PASSES} passes during which the thread was not switched out, in {spells} spells apart in the calibration; to the nearest whole store, at least one"))
}

/// How a measured L1 rate becomes the preset's width.
const PATH_WIDTH: &str = "rounded to the nearest power of two (in ratio): a data path is a power of two bytes wide, and the model issues a line in 64 / width whole cycles, so 35 B/cycle would read as 64";

/// The power of two nearest `bpc` in ratio (at least 1): 45 gives 32, 46 gives 64.
fn path_width(bpc: f64) -> i64 {
    if bpc.is_nan() || bpc < 1.0 {
        return 1;
    }
    let lo = 1i64 << (bpc.log2().floor() as u32);
    if bpc / lo as f64 <= std::f64::consts::SQRT_2 {
        lo
    } else {
        2 * lo
    }
}

/// A fill path's bytes per cycle from a load bandwidth in GB/s: `None` when
/// nothing was measured, else clamped to what the preset accepts (a line per
/// 1024 cycles to a line per cycle).
fn fill_path(gbps: f64, ghz: f64) -> Option<Val> {
    let bpc = gbps / ghz;
    (bpc.is_finite() && bpc > 0.0).then(|| Val::F(bpc.clamp(0.0625, 64.0)))
}

/// `memory.local_latency_ns` where no chase reached DRAM (not measured).
const DEFAULT_LOCAL_NS: f64 = 90.0;

/// The fill buffers a calibrated preset assumes (not measured).
const FILL_BUFFERS: u64 = 16;

/// The preset of a calibration: `r` measured on host `h`, stamped `stamp`
/// (UTC). Pure: the same record renders the same text.
pub(crate) fn render(name: &str, r: &Raw, h: &HostFacts, stamp: &str) -> (String, Value) {
    let b = Basis::of(r, h);
    let mut w = W {
        out: String::new(),
        model: String::new(),
        leaves: Default::default(),
        stamp: stamp.to_string(),
        host: h.hostname.clone(),
        section: String::new(),
        clamped: Vec::new(),
    };
    write_head(&mut w, &b, name);
    write_cpu(&mut w, &b);
    write_l1d(&mut w, &b);
    write_l2(&mut w, &b);
    write_llc(&mut w, &b);
    write_tlb(&mut w, &b);
    write_memory(&mut w, &b);
    write_string(&mut w, &b);
    write_prefetch(&mut w, &b);
    write_costs(&mut w, &b);
    let mut derived = derived(&b);
    let (out, clamped) = w.finish();
    derived.insert("clamped".into(), Value::Array(clamped));
    (out, Value::Object(derived))
}

/// The cache geometry in sysfs that the cache sections cite.
const SYSFS_CACHE: &str = "/sys/devices/system/cpu/cpu0/cache";

/// The defaults of `costs.exception_entry_exit_cycles` and
/// `costs.page_alloc_cycles`: a measured first touch less its clear is
/// taken apart with them, so the handler gets what is left and the parts
/// add up to the measured fault.
const EXCEPTION_CYCLES: f64 = 250.0;
const PAGE_ALLOC_CYCLES: f64 = 200.0;

/// What the sections of a host's preset are written from: the record, the
/// host's facts, and every figure that more than one section (or the
/// derived table beside the preset) reads, worked out once here so that
/// the preset and its derived table cannot disagree.
struct Basis<'a> {
    r: &'a Raw,
    h: &'a HostFacts,
    amd: bool,
    /// The measured core clock (GHz) every cycle count scales with.
    ghz: f64,
    /// The cache levels, each with whether sysfs reported it: a level it
    /// does not report (some guests show no L3) takes a default geometry,
    /// which its keys say.
    l1: CacheLevel,
    l1_known: bool,
    l2: CacheLevel,
    l2_known: bool,
    l3: CacheLevel,
    l3_known: bool,
    /// Why a level's latency is a default when no chase size fell on it.
    quick_note: &'static str,
    /// The chase's latency (ns) on each level's plateau, where a size fell on it.
    l1_ns: Option<f64>,
    l2_ns: Option<f64>,
    llc_ns: Option<f64>,
    dram_ns: Option<f64>,
    /// `dram_ns`, or the default where no chase reached DRAM.
    local_latency_ns: f64,
    /// How a fill path's rate was measured ([`level_load`]).
    level_load: String,
    /// How the chase's latencies were measured.
    chase_m: String,
    /// What 4 KiB pages add to a dependent load over THP, in cycles.
    walk: Option<i64>,
    /// The fastest read-back of the tail-touch probe (ns), and the
    /// threshold that probe gives: the preset's without a call-size sweep.
    hot: f64,
    bypass: Option<i64>,
    /// The call-size sweep's fit, where there was a sweep.
    fit: Option<BypassFit>,
    /// Under a hypervisor, whose second-level faults a first touch includes.
    guest: bool,
    /// The fault handlers' cycles from the first touches, and whether THP
    /// was seen in the THP one.
    handler: f64,
    thp_ok: bool,
    thp_handler: f64,
}

impl<'a> Basis<'a> {
    fn of(r: &'a Raw, h: &'a HostFacts) -> Basis<'a> {
        let ghz = r.core_ghz;
        let lvl = |l: u32, kib: u64, ways: u64| match h.cache(l) {
            Some(c) if c.size_kib > 0 && c.ways > 0 => (c.clone(), true),
            _ => (
                CacheLevel {
                    level: l,
                    kind: "Unified".into(),
                    size_kib: kib,
                    ways,
                    line: 64,
                    shared_cpu_list: String::new(),
                },
                false,
            ),
        };
        let ((l1, l1_known), (l2, l2_known), (l3, l3_known)) =
            (lvl(1, 32, 8), lvl(2, 1024, 16), lvl(3, 32 << 10, 16));
        let quick_note = if r.quick {
            "quick run: sweep too small for this level"
        } else {
            "no sweep size inside this plateau"
        };
        let l1_ns = plateau(&r.chase, 0, l1.size_kib * 1024 / 2);
        let l2_ns = plateau(&r.chase, 2 * l1.size_kib * 1024, l2.size_kib * 1024 / 2);
        let llc_ns = plateau_floor(&r.chase, l2.size_kib * 1024, l3.size_kib * 1024 / 2);
        // The lowest, not the median: memory's latency does not grow with the
        // buffer, but a guest's chase does past the reach of the host's
        // translations (second-level walks the guest's THP cannot spare it),
        // which the model's TLB does not charge.
        let dram_ns = plateau_floor(&r.chase, (8 * l3.size_kib * 1024).max(1) - 1, u64::MAX);
        let local_latency_ns = dram_ns.unwrap_or(DEFAULT_LOCAL_NS);
        // How many short repetitions an in-core figure took, in this mode.
        let in_core_reps = crate::micro::Effort::in_core(r.quick).reps;
        let level_load = level_load(in_core_reps);
        let chase_m = format!("random cyclic pointer chase (one dependent load per 64 B line, THP-backed buffer), each size the lowest of its clean repetitions (up to the L2's size, of {in_core_reps} short ones), median of the sweep sizes on this level's plateau (sizes from sysfs), ns x measured core clock");
        let hot = r
            .tail_touch
            .iter()
            .map(|p| p.1)
            .fold(f64::INFINITY, f64::min);
        let bypass = bypass_kib(&r.tail_touch, hot);
        let fit = bypass_rule(
            &r.stosb_calls
                .iter()
                .map(|(b, sm)| (*b, sm.median))
                .collect::<Vec<_>>(),
        );
        let walk = r
            .walk_extra
            .map(|(_, ns)| (ns.max(0.0) * ghz).round() as i64);
        let handler =
            ((r.fault4k_ns - r.clear4k_ns) * ghz - EXCEPTION_CYCLES - PAGE_ALLOC_CYCLES).max(0.0);
        let thp_ok = r
            .thp_kib
            .is_some_and(|k| k as usize * 1024 >= r.thp_bytes / 2);
        let thp_handler =
            ((r.thp_fault_ns - r.clear2m_ns) * ghz - EXCEPTION_CYCLES - PAGE_ALLOC_CYCLES).max(0.0);
        Basis {
            r,
            h,
            amd: h.amd(),
            ghz,
            l1,
            l1_known,
            l2,
            l2_known,
            l3,
            l3_known,
            quick_note,
            l1_ns,
            l2_ns,
            llc_ns,
            dram_ns,
            local_latency_ns,
            level_load,
            chase_m,
            walk,
            hot,
            bypass,
            fit,
            guest: h.has_flag("hypervisor"),
            handler,
            thp_ok,
            thp_handler,
        }
    }

    /// `ns` in measured core cycles.
    fn cyc(&self, ns: f64) -> Val {
        Val::I((ns * self.ghz).round() as i64)
    }

    /// A latency in cycles: at least one, which the preset requires.
    fn lat(&self, ns: f64) -> Val {
        Val::I(((ns * self.ghz).round() as i64).max(1))
    }
}

/// The preset's name and description.
fn write_head(w: &mut W, b: &Basis, name: &str) {
    let (r, hostname, model) = (b.r, &b.h.hostname, &b.h.cpu_model);
    w.out
        .push_str(&format!("name = {}\n", qs(&format!("host-{name}"))));
    let desc = format!(
        "Host {hostname} ({model}), calibrated by vmsim hw calibrate at {}{}. Measured values say so in their source; the rest come from sysfs/cpuid or are defaults marked '{DEFAULT}'.",
        w.stamp,
        if r.quick { " in quick mode (tiny sizes: test run, not a real calibration)" } else { "" }
    );
    w.out.push_str(&format!("description = {}\n", qs(&desc)));
}

fn write_cpu(w: &mut W, b: &Basis) {
    let Basis { r, h, amd, ghz, .. } = *b;
    let (sockets, cores, threads) = (h.sockets, h.cores_per_socket, h.threads_per_core);
    w.section("cpu");
    w.model = h.cpu_model.clone();
    w.measured(
        "freq_mhz",
        Val::I((ghz * 1000.0).round() as i64),
        "chains of 2^21 dependent 64-bit adds (1 cycle each) timed with CLOCK_MONOTONIC, the highest of the clean repetitions (ones during which the thread was switched out dropped)",
    );
    w.read(
        "sockets",
        Val::I(sockets as i64),
        "/sys/devices/system/cpu/cpu*/topology",
    );
    w.read(
        "cores_per_socket",
        Val::I(cores as i64),
        "/sys/devices/system/cpu/cpu*/topology",
    );
    w.read(
        "threads_per_core",
        Val::I(threads as i64),
        "/sys/devices/system/cpu/cpu*/topology",
    );
    w.default("issue_width", Val::I(4), "conservative");
    let spells = r.l1_spells.len();
    let store_bpc = path_width(r.l1.store_bpns / ghz);
    w.measured(
        "store_bytes_per_cycle",
        Val::I(store_bpc),
        &format!("{} over an L1-resident 16 KiB buffer, bytes / measured core cycles ({:.1}), the fastest of {} timings of {} passes during which the thread was not switched out, in {spells} spells apart in the calibration; {PATH_WIDTH}", r.l1.store_how, r.l1.store_bpns / ghz, l1_timings(r.quick), L1_PASSES),
    );
    let (scalar, scalar_how) =
        scalar_stores_per_cycle(r.l1.scalar_store_bpns, ghz, l1_timings(r.quick), spells);
    w.measured("scalar_stores_per_cycle", Val::I(scalar), &scalar_how);
    let (movnti_cycles, movnti_how) = movnti_line_cycles(r.movnti_gbps, r.nt_gbps, ghz, scalar);
    w.measured("movnti_line_cycles", Val::I(movnti_cycles), &movnti_how);
    let sq: Vec<u64> = r.store_queue.iter().filter_map(|p| p.entries).collect();
    w.either(
        "store_queue_entries",
        sq.iter().max().map(|&e| Val::I(e as i64)),
        &format!("two chains of dependent loads through the {} MiB buffer with n stores to one L1 line after each load (n = 16-128): the n at which an iteration goes from one memory latency to two, the midpoint of the two plateaus (H. Wong's method); the largest of {} probes ({}), as a probe run while another thread shares the physical core finds that thread's share (AMD partitions the store queue between two active threads)", r.bw_bytes >> 20, r.store_queue.len(), sq.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")),
        Val::I(64),
        if r.quick {
            "quick mode does not probe it; 64 is Zen 3's and Zen 4's (AMD's disclosures)"
        } else {
            "no probe found a step of 1.4x; 64 is Zen 3's and Zen 4's (AMD's disclosures)"
        },
    );
    w.measured("load_bytes_per_cycle", Val::I(path_width(r.l1.load_bpns / ghz)),
        &format!("{} over an L1-resident 16 KiB buffer, bytes / measured core cycles ({:.1}), the fastest of {} timings of {} passes during which the thread was not switched out, in {spells} spells apart in the calibration (a lower bound if the core has wider loads); {PATH_WIDTH}", r.l1.load_how, r.l1.load_bpns / ghz, l1_timings(r.quick), L1_PASSES));
    w.default(
        "perf_cache_events",
        Val::S(if amd { "l2" } else { "llc" }),
        "chosen by vendor: Linux maps perf's cache-references/cache-misses to the L2 on AMD Zen, to the LLC on Intel",
    );
}

fn write_l1d(w: &mut W, b: &Basis) {
    w.section("l1d");
    w.geometry(&b.l1, b.l1_known, SYSFS_CACHE);
    w.either(
        "latency_cycles",
        b.l1_ns.map(|ns| b.lat(ns)),
        &b.chase_m,
        Val::I(4),
        b.quick_note,
    );
    w.default("replacement", Val::S("tree-plru"), "");
    w.default("fill_buffers", Val::I(FILL_BUFFERS as i64), "");
}

fn write_l2(w: &mut W, b: &Basis) {
    let Basis {
        r,
        amd,
        ghz,
        dram_ns,
        ..
    } = *b;
    let level_load = &b.level_load;
    w.section("l2");
    w.geometry(&b.l2, b.l2_known, SYSFS_CACHE);
    w.either(
        "latency_cycles",
        b.l2_ns.map(|ns| b.lat(ns)),
        &b.chase_m,
        Val::I(14),
        b.quick_note,
    );
    w.default("replacement", Val::S("tree-plru"), "");
    w.either(
        "superqueue",
        superqueue(r.read_gbps, dram_ns).map(Val::I),
        &format!(
            "Little's law on this host's single-thread DRAM read: {:.2} GB/s x {:.1} ns (the chase's DRAM latency) / 64 B, the lines one core keeps in flight to memory (the built-in Cascade Lake-SP and Ice Lake-SP presets are calibrated to the same quantity, docs/calibration-sources.md 5.7)",
            r.read_gbps,
            dram_ns.unwrap_or(0.0)
        ),
        Val::I(32),
        "no DRAM latency or read bandwidth measured",
    );
    w.default(
        "writeback_holds_superqueue",
        Val::B(true),
        "as the built-in presets (an estimate there too)",
    );
    w.either(
        "sustained_bytes_per_cycle",
        fill_path(r.l2_load_gbps, ghz),
        &format!("{level_load} half of the L2 ({} KiB)", b.l2.size_kib / 2),
        Val::I(0),
        "the L2's size is unknown: no limit on the L2-to-L1 fill path",
    );
    w.default(
        "writebacks_share_sustained",
        Val::B(!amd),
        WRITEBACKS_BY_VENDOR,
    );
}

fn write_llc(w: &mut W, b: &Basis) {
    let Basis { r, h, amd, ghz, .. } = *b;
    let level_load = &b.level_load;
    w.section("llc");
    w.geometry(&b.l3, b.l3_known, SYSFS_CACHE);
    w.either("latency_cycles", b.llc_ns.map(|ns| b.lat(ns)),
        "random cyclic pointer chase (THP-backed), lowest latency among sweep sizes above L2 up to LLC/2 (sizes from sysfs; the LLC share this core gets may be smaller), ns x measured core clock",
        Val::I(50), b.quick_note);
    w.either(
        "sustained_bytes_per_cycle",
        fill_path(r.llc_load_gbps, ghz),
        &format!(
            "{level_load} half of the LLC ({} KiB; the share of it this core gets may be smaller)",
            b.l3.size_kib / 2
        ),
        Val::I(0),
        "the LLC's size is unknown: no limit on the LLC-to-L2 fill path",
    );
    w.default(
        "writebacks_share_sustained",
        Val::B(!amd),
        WRITEBACKS_BY_VENDOR,
    );
    w.default("replacement", Val::S("srrip"), "");
    w.default(
        "inclusive",
        Val::B(!amd),
        "AMD L3s are victim caches (non-inclusive), older Intel LLCs inclusive; chosen by vendor",
    );
    w.read(
        "instances_per_socket",
        Val::I((h.llc_instances.max(1) / h.sockets.max(1)).max(1) as i64),
        "/sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list",
    );
}

fn write_tlb(w: &mut W, b: &Basis) {
    let Basis { h, amd, .. } = *b;
    let amd_tlb = h.amd_tlb;
    w.section("tlb");
    let cpuid = if h.has_flag("hypervisor") {
        "cpuid 0x80000005/0x80000006/0x80000019 (data TLB) as the hypervisor presents it"
    } else {
        "cpuid 0x80000005/0x80000006/0x80000019 (data TLB)"
    };
    let tlb_keys = [("l1_4k", 0, 64, 8), ("l1_2m", 1, 32, 4), ("l1_1g", 2, 4, 4)];
    for (k, i, de, dw) in tlb_keys {
        match amd_tlb {
            Some(t) if t[i].0 > 0 && (1..=t[i].0).contains(&t[i].1) => {
                w.read(&format!("{k}_entries"), Val::I(t[i].0 as i64), cpuid);
                w.read(&format!("{k}_ways"), Val::I(t[i].1 as i64), cpuid);
            }
            _ => {
                w.default(&format!("{k}_entries"), Val::I(de), "");
                w.default(&format!("{k}_ways"), Val::I(dw), "");
            }
        }
    }
    match amd_tlb {
        Some(t) if t[3].0 > 0 && (1..=t[3].0).contains(&t[3].1) => {
            w.read("stlb_entries", Val::I(t[3].0 as i64), cpuid);
            w.read("stlb_ways", Val::I(t[3].1 as i64), cpuid);
            w.read("stlb_holds_2m", Val::B(t[4].0 > 0), cpuid);
        }
        _ => {
            w.default("stlb_entries", Val::I(1536), "");
            w.default("stlb_ways", Val::I(12), "");
            w.default("stlb_holds_2m", Val::B(true), "");
        }
    }
    w.default(
        "stlb_holds_pde",
        Val::B(amd),
        "chosen by vendor: AMD's L2 TLB holds page-directory entries for walks (Software Optimization Guide, Family 17h Model 30h), Intel keeps upper-level entries in paging-structure caches of unpublished size (taken as always hit); not measured on this host",
    );
    w.default("stlb_latency_cycles", Val::I(7), "");
    w.either("walk_cycles", b.walk.map(Val::I),
        "what 4 KiB pages add to a dependent load over THP on the largest sweep buffer (TLB miss + walk as a pointer chase sees it): the median over repetitions that each chase a THP-backed buffer and then one on 4 KiB pages and take the difference, x measured core clock",
        Val::I(30), b.quick_note);
    let invlpgb = h.has_flag("invlpgb");
    w.read("invlpgb", Val::B(invlpgb), "/proc/cpuinfo flags");
}

fn write_memory(w: &mut W, b: &Basis) {
    let Basis {
        r,
        h,
        dram_ns,
        local_latency_ns,
        ..
    } = *b;
    let sockets = h.sockets;
    w.section("memory");
    let nodes = h.numa_nodes;
    w.read(
        "nodes_per_socket",
        Val::I((nodes / sockets.max(1)).max(1) as i64),
        "/sys/devices/system/node",
    );
    w.default(
        "channels_per_node",
        Val::I(8),
        "not visible from inside the host",
    );
    w.default("dram_mts", Val::I(4800), "not visible from inside the host");
    write_memory_bandwidth(w, b);
    let no_dram_note = if r.quick {
        b.quick_note.to_string()
    } else {
        format!(
            "no chase size reached 8x the LLC ({} MiB; the largest chased was {} MiB): the chase never left the cache",
            8 * b.l3.size_kib / 1024,
            r.chase.last().map_or(0, |c| c.0 >> 20)
        )
    };
    w.either(
        "local_latency_ns",
        dram_ns.map(Val::F),
        "random pointer chase over buffers >= 8x LLC, THP-backed, each size the lowest of its clean repetitions, the lowest of the sizes (under a hypervisor the chase slows as the buffer outgrows the reach of the host's translations: memory's own latency is the lowest)",
        Val::F(DEFAULT_LOCAL_NS),
        &no_dram_note,
    );
    let remote_note = if nodes == 1 {
        "single NUMA node on this host: no remote memory to measure"
    } else {
        ""
    };
    w.default("remote_latency_ns", Val::F(140.0), remote_note);
    w.default("remote_cache_latency_ns", Val::F(120.0), remote_note);
    w.default("interconnect_bandwidth_gbs", Val::F(64.0), remote_note);
    if r.nt_gbps > 0.0 {
        w.measured_hold(
            "posted_write_ns",
            r.nt_gbps,
            dram_ns,
            &format!(
                "one core's non-temporal store bandwidth over {} MiB (raw.store_nontemporal_gbps, {:.1} GB/s), as the Milan and Ice Lake-SP presets derive it from CLZERO and MOVNTI",
                r.bw_bytes >> 20,
                r.nt_gbps
            ),
        );
    } else {
        w.default(
            "posted_write_ns",
            Val::F((local_latency_ns - 28.0).max(1.0)),
            "local latency less 28 ns (tRCD + tCL of a typical DDR4 DIMM): no non-temporal bandwidth was measured",
        );
    }
}

/// `memory.sustained_bandwidth_gbs`, and the peak it may raise.
fn write_memory_bandwidth(w: &mut W, b: &Basis) {
    let r = b.r;
    let (sockets, nodes) = (b.h.sockets, b.h.numa_nodes);
    // What the node was seen to move, each a lower bound for what it
    // sustains: every CPU of the socket loading at once (its share per
    // node), one core's read, and one core's non-temporal stores (writes the
    // model's DRAM calendar counts as it counts reads). The highest.
    let node_share = r.all_cpu_load_gbps / (nodes / sockets.max(1)).max(1) as f64;
    let (sustained, why) = sustained_bandwidth(node_share, r.read_gbps, r.nt_gbps, r.store_gbps);
    // The preset takes no sustained rate above the peak: a node seen to move
    // more than the defaults' peak has a peak of at least that.
    let peak_default = 307.2;
    let sustained = (sustained * 1000.0).round() / 1000.0;
    if sustained > peak_default {
        let peak = (sustained * 10.0).ceil() / 10.0;
        let why = format!("the node was seen to move {sustained:.1} GB/s (memory.sustained_bandwidth_gbs), more than the defaults' 307.2 GB/s (8 channels x 4800 MT/s x 8 B), and the preset takes no sustained rate above the peak");
        w.clamp("peak_bandwidth_gbs", peak_default, json!(peak), &why);
        w.default(
            "peak_bandwidth_gbs",
            Val::F(peak),
            &format!("raised to the sustained rate: {why}"),
        );
    } else {
        w.default(
            "peak_bandwidth_gbs",
            Val::F(peak_default),
            "8 channels x 4800 MT/s x 8 B, from the defaults above",
        );
    }
    let seen = format!(
        "{} CPUs of socket 0 loading at once {:.2} GB/s (each its own share of {} MiB, 32 B loads where AVX2 exists, the slowest thread's time, the highest of the clean repetitions: raw.all_cpu_load_gbps{}), one core's read {:.2} GB/s (raw.read_gbps), one core's non-temporal stores {:.2} GB/s (raw.store_nontemporal_gbps, {}), one core's rep stosb {:.2} GB/s (raw.store_rep_stosb_gbps, bytes written)",
        r.all_cpus,
        node_share,
        r.bw_bytes >> 20,
        if nodes > sockets.max(1) { ", divided by the socket's NUMA nodes" } else { "" },
        r.read_gbps,
        r.nt_gbps,
        r.nt_how,
        r.store_gbps,
    );
    w.measured(
        "sustained_bandwidth_gbs",
        Val::F(sustained),
        &format!(
            "the highest of what the node was seen to move over {} MiB (the bandwidth buffer: 4x LLC, at least 64 MiB, within what memory allows) in this calibration, each a lower bound for what it sustains: {seen}; this is the {why}. A lower bound for the node where more CPUs would move more",
            r.bw_bytes >> 20
        ),
    );
}

fn write_string(w: &mut W, b: &Basis) {
    let Basis { r, h, amd, ghz, .. } = *b;
    let spells = r.l1_spells.len();
    let nodes = h.numa_nodes;
    w.section("string");
    w.read("erms", Val::B(h.has_flag("erms")), "/proc/cpuinfo flags");
    w.read("fsrm", Val::B(h.has_flag("fsrm")), "/proc/cpuinfo flags");
    match r.l1.stosb_startup() {
        Some((ns, rate)) => w.measured(
            "startup_cycles",
            Val::I((ns * ghz).round() as i64),
            &format!(
                "rep stosb calls of {} and {} bytes into an L1-resident buffer's first page, each the fastest of {} timings of {} KiB of calls in {spells} spells apart in the calibration ({:.1} and {:.1} ns a call): the shorter call's time less its bytes at the rate between the two ({:.1} B/cycle), in measured core cycles",
                STOSB_CALLS[0],
                STOSB_CALLS[1],
                l1_timings(r.quick),
                (L1_PASSES * L1_BYTES) >> 10,
                r.l1.stosb_call_ns[0].1,
                r.l1.stosb_call_ns[1].1,
                rate / ghz
            ),
        ),
        None => w.default(
            "startup_cycles",
            Val::I(35),
            "the longer rep stosb call timed no slower than the shorter (a disturbed timing)",
        ),
    }
    w.default(
        "drain_at_boundary",
        Val::B(!amd),
        "chosen by vendor: on Intel a string instruction's stores wait for the previous one's to complete (Intel SDM Vol. 3A 8.2.4.1); on a Zen 4 host 4 KiB rep stosb calls cleared DRAM as fast as 64 KiB to 28 MiB calls (vmsim hw store-sweep, docs/hw.md), so not on AMD",
    );
    w.default(
        "no_rfo_full_lines",
        Val::B(h.has_flag("erms") && !amd),
        if amd {
            "chosen by vendor: on AMD a rep stosb line below the bypass is read for ownership (EPYC 7J13 perf stat: about one L1 miss per line written, Arora, LKML 2025-06-16), and on a Zen 4 host its descending page order costs what a mov loop's does (vmsim hw store-sweep, docs/hw.md): the prefetcher follows it as it follows reads"
        } else {
            "assumed with ERMS, as Intel's optimisation manual describes fast strings (an ownership request without a read for each whole line)"
        },
    );
    w.default(
        "no_rfo_grant",
        Val::S(if nodes > 1 { "memory" } else { "llc" }),
        if nodes > 1 {
            "assumed: with more than one NUMA node, ownership of a line in no local cache waits for the home (memory directory or snoop of the other socket), a memory-class round trip"
        } else {
            "assumed: single NUMA node, the LLC's snoop filter grants ownership"
        },
    );
    write_string_bypass(w, b);
    write_string_clzero_sfence(w, b);
}

/// `string.nocache_*` and `bypass_hold_ns`: from the call-size sweep's fit
/// where there was a sweep, else from the tail-touch probe.
fn write_string_bypass(w: &mut W, b: &Basis) {
    let Basis {
        r,
        dram_ns,
        hot,
        bypass,
        fit,
        ..
    } = *b;
    let sweep_text = |f: &BypassFit| {
        format!(
            "rep stosb clearing a THP-backed {} MiB buffer in calls of {} (store-sweep's interleaved rounds, the median of each), GB/s {}; fitted by least squares (relative, on time per byte) as a step at a call size (calls above it bypass whole: string.nocache_by = \"call\") and as a ramp (lines bypass while more than a cached tail T remains: \"remaining\"), the better fit chosen: step error {:.4}, ramp error {:.4}; cached rate {:.1} GB/s, bypass rate {:.1} GB/s; no bypass when the bypass rate is under {BYPASS_GAIN} x the cached rate",
            r.bw_bytes >> 20,
            r.stosb_calls.iter().map(|(b, _)| format!("{} KiB", b >> 10)).collect::<Vec<_>>().join(", "),
            r.stosb_calls.iter().map(|(_, sm)| format!("{:.1}", sm.median)).collect::<Vec<_>>().join(" / "),
            f.step_err,
            f.ramp_err,
            f.cached_gbps,
            f.bypass_gbps
        )
    };
    if let Some(f) = &fit {
        let t = sweep_text(f);
        let (kib, by) = match f.rule {
            Bypass::Off => (0, "call"),
            Bypass::Call { threshold_kib } => (threshold_kib, "call"),
            Bypass::Remaining { tail_kib } => (tail_kib, "remaining"),
        };
        w.measured("nocache_threshold_kib", Val::I(kib), &t);
        let why = match f.rule {
            Bypass::Off => "no bypass measured (the key has no effect at threshold 0)",
            Bypass::Call { .. } => {
                "the step fitted better than the ramp (see nocache_threshold_kib)"
            }
            Bypass::Remaining { .. } => {
                "the ramp fitted better than the step (see nocache_threshold_kib)"
            }
        };
        w.measured("nocache_by", Val::S(by), why);
        if f.rule == Bypass::Off || f.bypass_gbps <= 0.0 {
            w.default("bypass_hold_ns", Val::S("posted"), BYPASS_HOLD_POSTED);
        } else {
            w.measured_hold(
                "bypass_hold_ns",
                f.bypass_gbps,
                dram_ns,
                &format!(
                    "the bypass rate fitted to the call-size sweep ({:.1} GB/s, see nocache_threshold_kib), as the Milan preset derives it from Arora's 1 GiB rep stosb",
                    f.bypass_gbps
                ),
            );
        }
    } else {
        let largest = r.tail_touch.last().map(|p| (p.0 >> 10) as i64).unwrap_or(0);
        // The probe only tells something if a small string store leaves data clearly hotter than DRAM.
        let probe_works = hot < 0.5 * r.cold_touch_ns;
        match (r.quick, bypass) {
            (true, _) => w.default("nocache_threshold_kib", Val::I(0), b.quick_note),
            (false, _) if !probe_works => w.default("nocache_threshold_kib", Val::I(0), &format!(
                "probe inconclusive on this host: reading back 4 KiB right after a small rep stosb ({hot:.0} ns) was not clearly faster than a cold read ({:.0} ns)",
                r.cold_touch_ns)),
            (false, Some(k)) => w.measured("nocache_threshold_kib", Val::I(k),
                "smallest rep stosb (power of two, 16 KiB..64 MiB, into clflushed memory) from which on, at every larger size too, reading back its last 4 KiB is >3x slower than after the fastest: the string store did not leave its lines in cache"),
            (false, None) => w.measured("nocache_threshold_kib", Val::I(0),
                &format!("0 = no bypass seen: after rep stosb of up to {largest} KiB into clflushed memory its last 4 KiB still read back cache-hot")),
        }

        w.default(
            "nocache_by",
            Val::S("call"),
            "the probe above sees a whole call bypass (its last 4 KiB read back cold); a bypass of all but a call's tail would read back hot. On a Zen 4 host rep stosb calls of 4-28 MiB cleared at 28.6-29.1 GB/s and of 32 MiB and more at 60-78 GB/s, a step (vmsim hw store-sweep, docs/hw.md)",
        );
        w.default("bypass_hold_ns", Val::S("posted"), BYPASS_HOLD_POSTED);
    }
}

fn write_string_clzero_sfence(w: &mut W, b: &Basis) {
    let Basis {
        r,
        h,
        dram_ns,
        local_latency_ns,
        ..
    } = *b;
    w.read(
        "clzero",
        Val::B(h.has_flag("clzero")),
        "/proc/cpuinfo flags",
    );
    if r.clzero_gbps > 0.0 {
        w.measured_hold(
            "clzero_hold_ns",
            r.clzero_gbps,
            dram_ns,
            &format!(
                "one core's clzero bandwidth over {} MiB (raw.store_clzero_gbps, {:.1} GB/s), as memory.posted_write_ns is from the non-temporal stores' ({:.1} GB/s)",
                r.bw_bytes >> 20,
                r.clzero_gbps,
                r.nt_gbps
            ),
        );
    } else {
        w.default(
            "clzero_hold_ns",
            Val::S("posted"),
            "no clzero rate measured (no clzero on this CPU): a clzero line would hold its buffer as any unread line does (memory.posted_write_ns)",
        );
    }
    match r.sfence_drain_ns {
        Some(ns) if ns >= 0.5 => {
            // The key takes at most the local latency (a fence waits for an
            // acknowledgement, not for more than a round trip), the measured
            // one or, where none was measured, the preset's default.
            let cap = local_latency_ns;
            let written = (ns.min(cap) * 10.0).round() / 10.0;
            let capped = if ns > cap {
                let why = format!(
                    "the preset accepts at most memory.local_latency_ns ({cap:.1} ns, {}): a fence waits for an acknowledgement, not for more than a round trip",
                    if dram_ns.is_some() { "measured" } else { "a default: no DRAM latency was measured" }
                );
                w.clamp("sfence_drain_ns", ns, json!(written), &why);
                format!("; written as {written:.1} ns: {why}")
            } else {
                String::new()
            };
            w.measured(
                "sfence_drain_ns",
                Val::F(written),
                &format!(
                    "the buffer of {} MiB cleared in 4 KiB calls of {} non-temporal stores with an sfence after each call and with one at the end only, back to back, {} pairs (switched-out ones run again): the fenced pass took {ns:.1} ns more per call (raw.sfence_drain_ns, the median of the pairs{capped}). With every buffer free after a fence, a call's lines leave their buffers as the unfenced stream's do, so the fence's own wait after the last of them is that difference",
                    r.bw_bytes >> 20,
                    r.sfence_drain_how,
                    SFENCE_PAIRS,
                ),
            );
        }
        Some(ns) => w.measured(
            "sfence_drain_ns",
            Val::S("none"),
            &format!(
                "the buffer of {} MiB cleared in 4 KiB calls of {} non-temporal stores ran {ns:.1} ns per call slower with an sfence after each call than with one at the end (raw.sfence_drain_ns): no measurable wait, so the fence waits for nothing the model holds back",
                r.bw_bytes >> 20,
                r.sfence_drain_how
            ),
        ),
        None => w.default(
            "sfence_drain_ns",
            Val::S("none"),
            "not measured (quick mode): the fence waits for nothing the model holds back",
        ),
    }
}

fn write_prefetch(w: &mut W, b: &Basis) {
    let Basis {
        r, amd, dram_ns, ..
    } = *b;
    w.section("prefetch");
    w.default("enabled", Val::B(true), "hardware prefetchers assumed on");
    w.default("l1_next_line", Val::B(true), "");
    w.default("l2_streamer", Val::B(true), "");
    w.default(
        "l2_streams",
        Val::I(32),
        "Intel Optimization Reference Manual's streamer",
    );
    w.either(
        "l2_distance_lines",
        streamer_distance(r.read_gbps, dram_ns, FILL_BUFFERS).map(Val::I),
        &format!(
            "the lines one core keeps in flight by Little's law (l2.superqueue: {:.2} GB/s single-thread DRAM read x {:.1} ns DRAM latency / 64 B) less the {FILL_BUFFERS} fill buffers (a default), within 1-63: a sequential stream keeps the streamer's distance plus its fill buffers in flight in the model, so its one-core DRAM rate is the host's. Which of the chip's own queues (L1 or L2 prefetcher, miss buffers) hold those lines is not measured",
            r.read_gbps,
            dram_ns.unwrap_or(0.0)
        ),
        Val::I(20),
        "Intel Optimization Reference Manual's streamer; no DRAM latency or read bandwidth measured",
    );
    w.default(
        "l2_degree",
        Val::I(2),
        "Intel Optimization Reference Manual's streamer",
    );
    match r.page_order_mov {
        Some((asc, desc)) if asc.median > 0.0 && desc.median > 0.0 => w.measured(
            "l2_cross_page",
            Val::B(asc.median >= CROSS_RATIO * desc.median),
            &format!(
                "a mov clear (ordinary stores, read for ownership) of a THP-backed {} MiB buffer in 4 KiB calls ran {:.1} GB/s in ascending and {:.1} GB/s in descending page order (store-sweep's interleaved rounds, the medians), a ratio of {:.2}, while the stores within each page ascend in both: at {CROSS_RATIO} or more the prefetcher goes on into the next page in its direction (a Zen 4 host: 3.5, docs/hw.md), under it each page starts its own stream, as Intel's manual says of its streamer",
                r.bw_bytes >> 20,
                asc.median,
                desc.median,
                asc.median / desc.median
            ),
        ),
        _ => w.default(
        "l2_cross_page",
        Val::B(amd),
        "chosen by vendor: Intel's L2 streamer stays in the 4 KiB page (Intel Optimization Reference Manual); on a Zen 4 host clearing contiguous 4 KiB pages one at a time ran 2.2-2.4x slower descending than ascending (vmsim hw store-sweep, docs/hw.md): the stream continues into the physically next page",
        ),
    }
}

fn write_costs(w: &mut W, b: &Basis) {
    let Basis {
        r,
        h,
        guest,
        handler,
        thp_ok,
        thp_handler,
        ..
    } = *b;
    w.section("costs");
    w.default(
        "exception_entry_exit_cycles",
        Val::I(EXCEPTION_CYCLES as i64),
        "",
    );
    w.measured(
        "syscall_entry_exit_cycles",
        b.cyc(r.syscall_ns),
        "getppid() loop, ns per call x measured core clock",
    );
    // In a virtual machine a first touch also takes the hypervisor's fault
    // (EPT/NPT) for memory the host has not backed yet: that is no part of the
    // guest kernel's fault handler, so the handler costs are left at their
    // defaults there and the first-touch times are only reported (derived).
    let vm_note = "running under a hypervisor: first-touch times include the host's second-level fault, so they are reported under derived.first_touch_* and not used as the guest's handler cost";
    if guest {
        w.default("page_fault_handler_cycles", Val::I(1000), vm_note);
    } else {
        w.measured("page_fault_handler_cycles", Val::I(handler.round() as i64), &format!(
        "first touch of 4 KiB anonymous pages ({:.0} ns each) minus a 4 KiB rep stosb clear of cold memory ({:.0} ns), in cycles, minus the exception entry/exit and page_alloc defaults of this file so the parts add up to the measured fault",
        r.fault4k_ns, r.clear4k_ns));
    }
    if guest {
        w.default("thp_fault_handler_cycles", Val::I(3000), vm_note);
    } else if thp_ok {
        w.measured("thp_fault_handler_cycles", Val::I(thp_handler.round() as i64), &format!(
            "first touch per 2 MiB of a MADV_HUGEPAGE region ({:.0} ns each, THP seen in smaps) minus a 2 MiB clear in process_huge_page order with rep stosb ({:.0} ns), in cycles, minus the exception entry/exit and page_alloc defaults",
            r.thp_fault_ns, r.clear2m_ns));
    } else {
        w.default(
            "thp_fault_handler_cycles",
            Val::I(3000),
            "no THP observed in /proc/self/smaps during calibration",
        );
    }
    w.default("page_alloc_cycles", Val::I(PAGE_ALLOC_CYCLES as i64), "");
    w.measured("page_free_cycles", b.cyc(r.free4k_ns), "munmap of faulted 4 KiB anonymous pages divided by the page count (includes zap and TLB flush)");
    w.default("ipi_send_cycles", Val::I(300), "");
    w.default("ipi_latency_ns", Val::F(1000.0), "");
    w.default("ipi_handle_cycles", Val::I(500), "");
    w.default("tlb_flush_full_cycles", Val::I(500), "");
    w.default("invlpg_cycles", Val::I(150), "");
    w.either("context_switch_cycles", r.ctxsw_ns.map(|ns| b.cyc(ns)),
        "two threads on one CPU bouncing a byte over pipes, per switch (includes one read and one write system call)", Val::I(3000), "ping-pong failed");
    w.default("page_cache_add_cycles", Val::I(400), "");
    w.default("map_pages_per_pte_cycles", Val::I(60), "");
    w.default("shrink_folio_cycles", Val::I(400), "");
    w.default("rmap_pte_cycles", Val::I(150), "");
    w.default("migrate_folio_cycles", Val::I(1500), "");
    w.default("change_pte_cycles", Val::I(40), "");
    w.default("task_numa_work_cycles", Val::I(2000), "");
    w.default("tick_handler_cycles", Val::I(1000), "");
    w.default("try_to_wake_up_cycles", Val::I(1000), "");
    if h.has_flag("invlpgb") {
        w.default("invlpgb_cycles", Val::I(260), "");
        w.default("tlbsync_latency_ns", Val::F(190.0), "");
    }
}

/// The figures behind the preset that it does not hold (latencies in ns,
/// the fault handlers as measured, the bypass probe and fit), reported
/// beside it as `derived`; the clamped values are added once it is written.
fn derived(b: &Basis) -> Map<String, Value> {
    let Basis {
        r,
        h,
        ghz,
        l1_ns,
        l2_ns,
        llc_ns,
        dram_ns,
        walk,
        bypass,
        fit,
        guest,
        handler,
        thp_ok,
        thp_handler,
        ..
    } = *b;
    let amd_tlb = h.amd_tlb;
    let mut derived = Map::new();
    for (k, v) in [
        ("l1", l1_ns),
        ("l2", l2_ns),
        ("llc", llc_ns),
        ("dram", dram_ns),
    ] {
        derived.insert(format!("{k}_latency_ns"), json!(v.map(round3)));
        derived.insert(
            format!("{k}_latency_cycles"),
            json!(v.map(|ns| round3(ns * ghz))),
        );
    }
    derived.insert("walk_cycles".into(), json!(walk));
    derived.insert("nocache_threshold_kib_probe".into(), json!(bypass));
    derived.insert(
        "nocache_threshold_kib".into(),
        json!(fit.map_or(bypass, |f| match f.rule {
            Bypass::Off => Some(0),
            Bypass::Call { threshold_kib } => Some(threshold_kib),
            Bypass::Remaining { tail_kib } => Some(tail_kib),
        })),
    );
    derived.insert(
        "nocache_fit".into(),
        json!(fit.map(
            |f| json!({"rule": format!("{:?}", f.rule), "cached_gbps": round3(f.cached_gbps),
            "bypass_gbps": round3(f.bypass_gbps), "step_err": f.step_err, "ramp_err": f.ramp_err})
        )),
    );
    derived.insert("page_fault_handler_cycles".into(), json!(round3(handler)));
    derived.insert("first_touch_4k_ns".into(), json!(round3(r.fault4k_ns)));
    derived.insert("first_touch_thp_ns".into(), json!(round3(r.thp_fault_ns)));
    derived.insert("clear_4k_ns".into(), json!(round3(r.clear4k_ns)));
    derived.insert("clear_2m_ns".into(), json!(round3(r.clear2m_ns)));
    derived.insert("under_hypervisor".into(), json!(guest));
    derived.insert(
        "thp_fault_handler_cycles".into(),
        json!(thp_ok.then(|| round3(thp_handler))),
    );
    derived.insert("amd_tlb_cpuid".into(), json!(amd_tlb.map(|t| t.to_vec())));
    derived
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_l1_rate_becomes_the_nearest_power_of_two_in_ratio() {
        for (bpc, want) in [
            (0.3, 1),
            (1.0, 1),
            (22.6, 16),
            (22.7, 32),
            (26.5, 32),
            (35.0, 32),
            (45.2, 32),
            (45.3, 64),
            (60.0, 64),
            (f64::NAN, 1),
        ] {
            assert_eq!(path_width(bpc), want, "{bpc}");
        }
    }

    #[test]
    fn movnti_issue_comes_from_its_rate_only_where_wider_stores_move_more() {
        // A Zen 3 guest: 18.1 GB/s of movnti against 40.8 of vmovntdq at
        // 3.10 GHz -> 64 x 3.10 / 18.1 = 11.0 cycles a line.
        let (c, why) = movnti_line_cycles(18.1, 40.8, 3.10, 2);
        assert_eq!(c, 11);
        assert!(why.contains("bound by issue"), "{why}");
        // Bound by the memory path (both rates alike): the scalar store rate's.
        let (c, why) = movnti_line_cycles(20.0, 21.0, 3.0, 1);
        assert_eq!(c, 8);
        assert!(why.contains("memory path"), "{why}");
        assert_eq!(movnti_line_cycles(20.0, 21.0, 3.0, 2).0, 4);
        assert_eq!(movnti_line_cycles(20.0, 21.0, 3.0, 3).0, 3);
        // Nothing measured.
        assert_eq!(movnti_line_cycles(0.0, 0.0, 3.0, 1).0, 8);
    }

    #[test]
    fn scalar_stores_a_cycle_round_the_measured_rate() {
        // The Zen 3 guest: 50.2 B/ns at 3.07 GHz, 2.04 stores a cycle.
        let (v, why) = scalar_stores_per_cycle(50.2, 3.07, 2000, 3);
        assert_eq!(v, 2);
        assert!(why.contains("2.04 stores"), "{why}");
        // A one-port core measured a little slow still has its port.
        assert_eq!(scalar_stores_per_cycle(0.6 * 8.0 * 3.0, 3.0, 10, 3).0, 1);
        assert_eq!(scalar_stores_per_cycle(0.2 * 8.0 * 3.0, 3.0, 10, 3).0, 1);
        // Nothing measured: one.
        assert_eq!(scalar_stores_per_cycle(0.0, 3.0, 10, 3).0, 1);
        assert_eq!(scalar_stores_per_cycle(f64::NAN, 3.0, 10, 3).0, 1);
    }

    #[test]
    fn sustained_bandwidth_is_the_highest_rate_seen_and_says_which() {
        // (all-CPU share, read, non-temporal, rep stosb) -> the highest, named.
        for (rates, want) in [
            // A 2-vCPU guest: one core's stores moved more than both CPUs' loads.
            (
                (32.1, 23.8, 55.0, 42.1),
                (55.0, "one core's non-temporal stores"),
            ),
            ((40.5, 20.5, 49.8, 75.5), (75.5, "one core's rep stosb")),
            ((60.0, 30.0, 55.0, 42.0), (60.0, "all-CPU load")),
            // One CPU (no all-CPU figure) and no store measurement.
            ((0.0, 28.0, 0.0, 0.0), (28.0, "one core's read")),
        ] {
            let (a, r, n, s) = rates;
            assert_eq!(sustained_bandwidth(a, r, n, s), want, "{rates:?}");
        }
    }

    #[test]
    fn a_bypass_threshold_needs_every_larger_size_cold() {
        let k = |kib: usize| kib << 10;
        // The probe of a busy host: one slow median at 32 KiB, hot above it.
        let noisy = [(k(16), 80.0), (k(32), 180.0), (k(64), 50.0), (k(128), 49.9)];
        assert_eq!(bypass_kib(&noisy, 49.9), None);
        // A chip that stops allocating from 1 MiB on, with a slow probe below.
        let chip = [
            (k(256), 200.0),
            (k(512), 50.0),
            (k(1024), 300.0),
            (k(2048), 310.0),
        ];
        assert_eq!(bypass_kib(&chip, 50.0), Some(1024));
        assert_eq!(bypass_kib(&[], 50.0), None);
    }

    #[test]
    fn a_plateau_floor_is_the_lowest_in_its_window_and_a_plateau_the_median() {
        // A Zen 3 guest's THP chase (ns): the LLC share ends near 2 MiB and
        // the DRAM sizes slow as they outgrow the host's translations.
        let mib = |m: usize| m << 20;
        let chase = [
            (mib(1), 17.6),
            (mib(2), 24.4),
            (mib(4), 140.6),
            (mib(128), 190.2),
            (mib(256), 196.7),
            (mib(512), 309.7),
        ];
        let llc = 32u64 << 20;
        assert_eq!(plateau_floor(&chase, 8 * llc - 1, u64::MAX), Some(196.7));
        let median = plateau(&chase, 8 * llc - 1, u64::MAX).unwrap();
        assert!((median - 253.2).abs() < 1e-9, "{median}");
        assert_eq!(plateau_floor(&chase, 512 << 10, llc / 2), Some(17.6));
        assert_eq!(plateau_floor(&chase, mib(512) as u64, u64::MAX), None);
    }

    #[test]
    fn the_superqueue_is_the_lines_in_flight_by_littles_law() {
        // 19.2 GB/s at 152 ns: 45.6 lines.
        assert_eq!(superqueue(19.2, Some(152.0)), Some(46));
        assert_eq!(superqueue(0.01, Some(1.0)), Some(1));
        assert_eq!(superqueue(1e6, Some(1e3)), Some(1024));
        assert_eq!(superqueue(19.2, None), None);
        assert_eq!(superqueue(0.0, Some(152.0)), None);
    }

    #[test]
    fn the_streamer_distance_is_the_lines_in_flight_less_the_fill_buffers() {
        // 30.25 GB/s at 175.1 ns: 82.8 -> 83 lines; 83 - 16 = 67, beyond one page.
        assert_eq!(streamer_distance(30.25, Some(175.1), 16), Some(63));
        // 19.2 GB/s at 152 ns: 46 lines, 30 of them the streamer's.
        assert_eq!(streamer_distance(19.2, Some(152.0), 16), Some(30));
        assert_eq!(streamer_distance(1.0, Some(100.0), 16), Some(1));
        assert_eq!(streamer_distance(19.2, None, 16), None);
    }

    #[test]
    fn a_call_size_sweep_tells_a_step_from_a_ramp_and_from_no_bypass() {
        let mib = |m: f64| (m * 1048576.0) as usize;
        // This host's Zen 4 (docs/hw.md): 28-29 GB/s up to 28 MiB, 76-78 from 32 MiB.
        let step: Vec<(usize, f64)> = [2.0, 4.0, 8.0, 12.0, 16.0, 20.0, 24.0, 28.0]
            .iter()
            .map(|&m| (mib(m), 28.6 + m / 100.0))
            .chain(
                [32.0, 40.0, 48.0, 64.0, 96.0, 128.0]
                    .iter()
                    .map(|&m| (mib(m), 77.0 - m / 200.0)),
            )
            .collect();
        let f = bypass_rule(&step).unwrap();
        assert_eq!(
            f.rule,
            Bypass::Call {
                threshold_kib: 28 * 1024
            }
        );
        assert!(
            (f.cached_gbps - 28.7).abs() < 0.2 && (f.bypass_gbps - 76.7).abs() < 0.5,
            "{f:?}"
        );
        // A ramp with a 16 MiB cached tail at 14.5 GB/s and 40 GB/s beyond it.
        let ramp: Vec<(usize, f64)> = [2.0, 4.0, 8.0, 16.0, 24.0, 32.0, 64.0, 128.0, 256.0]
            .iter()
            .map(|&m| {
                (
                    mib(m),
                    m / (m.min(16.0) / 14.5 + (m - 16.0).max(0.0) / 40.0),
                )
            })
            .collect();
        let f = bypass_rule(&ramp).unwrap();
        assert_eq!(
            f.rule,
            Bypass::Remaining {
                tail_kib: 16 * 1024
            }
        );
        assert!(
            (f.cached_gbps - 14.5).abs() < 1e-6 && (f.bypass_gbps - 40.0).abs() < 1e-6,
            "{f:?}"
        );
        // Arora's Milan sweep from 2 MiB calls (LKML 2022-06-06): a ramp. Its
        // tail fits at 13.1 MiB with both rates free; docs/store-path.md's
        // 14-19.5 MiB takes the rates from other figures (not from this fit).
        let milan = [
            (mib(2.0), 14.821),
            (mib(8.0), 13.964),
            (mib(32.0), 22.525),
            (mib(128.0), 29.311),
            (mib(1024.0), 35.807),
        ];
        match bypass_rule(&milan).unwrap().rule {
            Bypass::Remaining { tail_kib } => assert_eq!(tail_kib, 13376),
            other => panic!("{other:?}"),
        }
        // Arora's Ice Lake-SP sweep: flat, no bypass.
        let icx = [
            (mib(2.0), 12.355),
            (mib(8.0), 12.369),
            (mib(32.0), 12.368),
            (mib(128.0), 12.374),
            (mib(1024.0), 12.372),
        ];
        assert_eq!(bypass_rule(&icx).unwrap().rule, Bypass::Off);
        assert!(bypass_rule(&icx[..2]).is_none());
    }

    #[test]
    fn a_fill_path_is_the_load_rate_in_bytes_per_cycle_within_the_accepted_range() {
        let v = |g: f64, ghz: f64| match fill_path(g, ghz) {
            Some(Val::F(x)) => Some(x),
            _ => None,
        };
        assert_eq!(v(96.0, 3.0), Some(32.0));
        assert_eq!(v(1000.0, 3.0), Some(64.0));
        assert_eq!(v(0.01, 3.0), Some(0.0625));
        assert_eq!(v(0.0, 3.0), None);
        assert_eq!(v(f64::NAN, 3.0), None);
    }
}
