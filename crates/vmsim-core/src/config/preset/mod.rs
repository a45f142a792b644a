//! Machine presets: the modeled hardware's parameters, each read from a
//! `{ value = …, source = "…" }` leaf. A preset without a source for a value
//! is rejected, so no number enters the model without provenance.

use super::fields::{as_f64, as_u64, cfg_err, Fields};
use crate::error::Error;
use crate::kernel::KernelCosts;
use crate::machine::cache::Replacement;
use crate::machine::ipi::IpiCosts;
use crate::machine::tlb::TlbConfig;
use crate::machine::topology::Topology;
use crate::machine::{
    CacheLevelParams, IdleState, InvlpgbCosts, MachineParams, NoRfoGrant, NocacheBy,
    PerfCacheEvents, PrefetchParams,
};
use serde::Serialize;
use std::collections::BTreeMap;
use toml::Value;

mod bounds;
mod provenance;

pub use provenance::{Provenance, CLASSES, RANGED};

#[derive(Clone, Debug, Serialize)]
pub struct CacheParams {
    pub size_kib: u64,
    pub ways: u64,
    pub latency_cycles: u64,
    pub replacement: String,
    /// L1: fill buffers; L2: superqueue entries; LLC: unused (0).
    pub outstanding: u64,
    /// L2 and LLC: bytes per cycle one core sustains reading from the level
    /// (0: no limit); L1: 0 (not a key).
    pub sustained_bytes_per_cycle: f64,
    /// L2 and LLC: the dirty victims of the level below leave over the same
    /// path and share `sustained_bytes_per_cycle`; L1: false (not a key).
    pub writebacks_share_sustained: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct Preset {
    pub name: String,
    pub description: String,
    pub model: String,
    pub freq_mhz: u64,
    pub sockets: u64,
    pub cores_per_socket: u64,
    pub threads_per_core: u64,
    pub issue_width: u64,
    pub store_bytes_per_cycle: u64,
    /// 8 B scalar (`mov`) stores one core issues a cycle.
    pub scalar_stores_per_cycle: u64,
    /// Cycles one core takes to issue a line's eight 8 B `movnti` stores.
    pub movnti_line_cycles: u64,
    /// Entries of one thread's store queue (store buffer): ordinary stores
    /// awaiting commit, freed in program order.
    pub store_queue_entries: u64,
    pub load_bytes_per_cycle: u64,
    pub l1d: CacheParams,
    pub l2: CacheParams,
    pub llc: CacheParams,
    pub llc_inclusive: bool,
    pub llc_instances_per_socket: u64,
    /// A dirty L2 victim holds a superqueue entry for the LLC latency.
    pub l2_writeback_holds_superqueue: bool,
    pub tlb: TlbParams,
    pub memory: MemoryParams,
    pub string: StringParams,
    pub prefetch: PrefetchPreset,
    /// What perf's generic `cache-references`/`cache-misses` count on the chip: "llc" or "l2".
    pub perf_cache_events: String,
    pub costs: Costs,
    /// `[numa]`: socket-link hops between NUMA nodes; `None` when the preset
    /// has none (every node of another socket is then one hop away).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa: Option<NumaParams>,
    /// `[idle]`: the CPU's idle states, shallowest first; empty when the
    /// preset has none (a woken CPU then exits idle at no cost).
    pub idle_states: Vec<IdleStatePreset>,
    /// Dotted key -> source text, for every parameter.
    pub sources: BTreeMap<String, String>,
    /// Dotted key -> class and plausible range, for every parameter.
    pub provenance: BTreeMap<String, Provenance>,
}

/// What the preset reader records of each value besides the value.
#[derive(Default)]
struct Book {
    sources: BTreeMap<String, String>,
    provenance: BTreeMap<String, Provenance>,
    /// The first class or range at fault: reported once every value has
    /// passed its own checks, which say more about a value out of bounds.
    provenance_err: Option<Error>,
}

/// One idle state (`struct cpuidle_state` of intel_idle's tables).
#[derive(Clone, Debug, Serialize)]
pub struct IdleStatePreset {
    pub name: String,
    /// Worst-case time to leave the state, in µs (`exit_latency`).
    pub exit_latency_us: u64,
    /// The shortest idle period for which the state is worth entering, in µs
    /// (`target_residency`).
    pub target_residency_us: u64,
}

/// `[idle].states`: an array of `{ name, exit_latency_us, target_residency_us }`,
/// shallowest first, both figures non-decreasing and at most 10 ms.
fn idle_states(key: &str, v: &Value) -> Result<Vec<IdleStatePreset>, Error> {
    let Value::Array(a) = v else {
        return Err(cfg_err(
            key,
            "expected an array of { name, exit_latency_us, target_residency_us }",
        ));
    };
    let mut out: Vec<IdleStatePreset> = Vec::new();
    for (i, e) in a.iter().enumerate() {
        let k = format!("{key}[{i}]");
        let Value::Table(t) = e else {
            return Err(cfg_err(
                k,
                "expected { name, exit_latency_us, target_residency_us }",
            ));
        };
        let mut f = Fields::new(&k, t.clone());
        f.declare(&["name", "exit_latency_us", "target_residency_us"])?;
        let name = f.string("name")?;
        let exit_latency_us = f.u64("exit_latency_us")?;
        let target_residency_us = f.u64("target_residency_us")?;
        f.finish()?;
        if exit_latency_us > 10_000 || target_residency_us > 10_000 {
            return Err(cfg_err(k, "latencies and residencies are at most 10000 µs"));
        }
        if let Some(p) = out.last() {
            if exit_latency_us < p.exit_latency_us || target_residency_us < p.target_residency_us {
                return Err(cfg_err(
                    k,
                    "states go from the shallowest to the deepest: exit latency and target residency must not decrease",
                ));
            }
        }
        out.push(IdleStatePreset {
            name,
            exit_latency_us,
            target_residency_us,
        });
    }
    Ok(out)
}

#[derive(Clone, Debug, Serialize)]
pub struct TlbParams {
    pub l1_4k: (u64, u64),
    pub l1_2m: (u64, u64),
    pub l1_1g: (u64, u64),
    pub stlb: (u64, u64),
    pub stlb_holds_2m: bool,
    /// The STLB also caches page-directory entries for walks (AMD); false:
    /// every upper-level entry a walk needs is taken as cached.
    pub stlb_holds_pde: bool,
    pub stlb_latency_cycles: u64,
    pub walk_cycles: u64,
    /// The CPU has INVLPGB/TLBSYNC (broadcast TLB invalidation).
    pub invlpgb: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct MemoryParams {
    pub nodes_per_socket: u64,
    pub channels_per_node: u64,
    pub dram_mts: u64,
    pub peak_bandwidth_gbs: f64,
    pub sustained_bandwidth_gbs: f64,
    pub local_latency_ns: f64,
    pub remote_latency_ns: f64,
    pub remote_cache_latency_ns: f64,
    pub interconnect_bandwidth_gbs: f64,
    /// How long a non-temporal line holds its write-combining buffer after leaving the core.
    pub posted_write_ns: f64,
}

/// `[numa]`: how far each NUMA node is from each other, in socket-link
/// (QPI/UPI) hops, and what a hop beyond the first costs.
#[derive(Clone, Debug, Serialize)]
pub struct NumaParams {
    /// Node by node: 0 from a node to itself and to the other nodes of its
    /// socket, 1 to `MAX_HOPS` to a node of another socket; symmetric.
    pub hops: Vec<Vec<u64>>,
    /// Added to `memory.remote_latency_ns`, `memory.remote_cache_latency_ns`
    /// and a remote posted write for each hop beyond the first.
    pub extra_hop_latency_ns: f64,
}

/// Most socket-link hops between two nodes `[numa] hops` accepts.
pub const MAX_HOPS: u64 = 8;

/// `[numa].hops`: a square array of arrays, one row per NUMA node, checked
/// against the topology (`sockets` x `nodes_per_socket` nodes).
fn numa_hops(
    key: &str,
    v: &Value,
    sockets: u64,
    nodes_per_socket: u64,
) -> Result<Vec<Vec<u64>>, Error> {
    let nodes = (sockets * nodes_per_socket) as usize;
    let shape = format!(
        "expected {nodes} rows of {nodes} hop counts, one per NUMA node (cpu.sockets x memory.nodes_per_socket)"
    );
    let Value::Array(rows) = v else {
        return Err(cfg_err(key, shape));
    };
    if rows.len() != nodes {
        return Err(cfg_err(key, format!("{} rows; {shape}", rows.len())));
    }
    let mut out = Vec::with_capacity(nodes);
    for (i, r) in rows.iter().enumerate() {
        let k = format!("{key}[{i}]");
        let Value::Array(r) = r else {
            return Err(cfg_err(k, shape));
        };
        if r.len() != nodes {
            return Err(cfg_err(k, format!("{} entries; {shape}", r.len())));
        }
        let row = r
            .iter()
            .enumerate()
            .map(|(j, x)| as_u64(&format!("{k}[{j}]"), x))
            .collect::<Result<Vec<u64>, Error>>()?;
        out.push(row);
    }
    let socket = |n: usize| n / nodes_per_socket as usize;
    for i in 0..nodes {
        for j in 0..nodes {
            let k = format!("{key}[{i}][{j}]");
            let h = out[i][j];
            if socket(i) == socket(j) {
                if h != 0 {
                    return Err(cfg_err(
                        k,
                        if i == j {
                            format!("{h}: a node is 0 hops from itself")
                        } else {
                            format!("{h}: nodes {i} and {j} share a socket, so are 0 hops apart (the model holds a socket's nodes at the local latency)")
                        },
                    ));
                }
            } else if !(1..=MAX_HOPS).contains(&h) {
                return Err(cfg_err(
                    k,
                    format!("{h} is out of range: nodes {i} and {j} are on different sockets, 1..={MAX_HOPS} hops apart"),
                ));
            }
            if out[j][i] != h {
                return Err(cfg_err(
                    k,
                    format!(
                        "{h}, but [{j}][{i}] is {}: hops must be symmetric",
                        out[j][i]
                    ),
                ));
            }
            if socket(i) == socket(j) && out[i] != out[j] {
                return Err(cfg_err(
                    format!("{key}[{j}]"),
                    format!(
                        "differs from row {i}: the nodes of one socket are as far from every node"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

#[derive(Clone, Debug, Serialize)]
pub struct StringParams {
    pub erms: bool,
    pub fsrm: bool,
    pub startup_cycles: u64,
    /// Whether a string instruction's stores wait until every line store of
    /// the previous one is granted (the drain at a string-instruction boundary).
    pub drain_at_boundary: bool,
    pub no_rfo_full_lines: bool,
    /// Where ownership without data is granted to a no-RFO full-line store that misses
    /// the LLC: "llc" (at LLC latency), "memory" (only once the home has ruled out
    /// copies in other sockets: the line's idle DRAM latency), or a number: the
    /// grant's time in ns for a local home, measured.
    pub no_rfo_grant: NameOrNs,
    /// How long a line a string store writes without allocating (above
    /// `nocache_threshold_kib`) holds its miss buffer: "posted" (as any
    /// unread line, `memory.posted_write_ns`), or a time in ns, measured.
    pub bypass_hold_ns: NameOrNs,
    /// How long a `clzero` line holds its miss buffer: "posted" (as any
    /// unread line, `memory.posted_write_ns`), or a time in ns, measured.
    pub clzero_hold_ns: NameOrNs,
    /// What an `sfence` waits for after the last earlier unread line
    /// (non-temporal, `clzero`, bypassing string store) of its thread left
    /// its buffer: "none" (nothing the model holds back), or a time in ns,
    /// measured.
    pub sfence_drain_ns: NameOrNs,
    pub nocache_threshold_kib: u64,
    /// How a string store longer than the threshold bypasses: "call" (all of
    /// it) or "remaining" (its lines while more than the threshold remains).
    pub nocache_by: String,
    /// The CPU has `clzero` (a clear plan may store with it).
    pub clzero: bool,
}

/// The hardware prefetchers (`[prefetch]`).
#[derive(Clone, Debug, Serialize)]
pub struct PrefetchPreset {
    /// Master switch: false turns every prefetcher off (as the BIOS or MSR 0x1a4 can).
    pub enabled: bool,
    pub l1_next_line: bool,
    pub l2_streamer: bool,
    pub l2_streams: u64,
    pub l2_distance_lines: u64,
    pub l2_degree: u64,
    /// The L2 streamer continues a stream into the physically next 4 KiB page.
    pub l2_cross_page: bool,
}

/// `[costs]`: the kernel's software costs (declared in kernel/costs.rs) and
/// the hardware's IPI and TLB-flush costs.
#[derive(Clone, Debug, Serialize)]
pub struct Costs {
    #[serde(flatten)]
    pub kernel: KernelCosts,
    pub ipi_send_cycles: u64,
    pub ipi_latency_ns: f64,
    pub ipi_handle_cycles: u64,
    pub tlb_flush_full_cycles: u64,
    pub invlpg_cycles: u64,
    /// Present when `tlb.invlpgb` is true.
    pub invlpgb_cycles: Option<u64>,
    pub tlbsync_latency_ns: Option<f64>,
}

impl CacheParams {
    fn level(&self, key: &str) -> Result<CacheLevelParams, Error> {
        let replacement: Replacement = self
            .replacement
            .parse()
            .map_err(|e: String| cfg_err(format!("{key}.replacement.value"), e))?;
        Ok(CacheLevelParams {
            bytes: self.size_kib * 1024,
            ways: self.ways,
            latency_cycles: self.latency_cycles,
            replacement,
            outstanding: self.outstanding,
            sustained_bytes_per_cycle: self.sustained_bytes_per_cycle,
            writebacks_share_sustained: self.writebacks_share_sustained,
        })
    }
}

pub const REPLACEMENTS: &[&str] = &crate::machine::cache::Replacement::NAMES;
pub const NO_RFO_GRANTS: &[&str] = &["llc", "memory"];
pub const NOCACHE_BY: &[&str] = &["call", "remaining"];
pub const PERF_CACHE_EVENTS: &[&str] = &["llc", "l2"];

/// A preset time that is either named (`string.no_rfo_grant`'s "llc" or
/// "memory", `string.bypass_hold_ns`'s "posted") or measured, in ns.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum NameOrNs {
    Named(String),
    Ns(f64),
}

struct P<'a> {
    f: Fields,
    book: &'a mut Book,
}

impl<'a> P<'a> {
    fn leaf(&mut self, name: &'static str) -> Result<(String, Value), Error> {
        let key = self.f.key(name);
        let mut leaf = self.f.sub(name).map_err(|e| match e {
            Error::Config { key, message } if message.starts_with("expected a table") => cfg_err(
                key,
                "expected { value = …, source = \"…\" }: every preset parameter names its source",
            ),
            e => e,
        })?;
        leaf.declare(&["value", "source", "class", "range", "range_reason"])?;
        let value = leaf.req("value")?;
        let source = leaf.string("source")?;
        if source.trim().is_empty() {
            return Err(cfg_err(
                leaf.key("source"),
                "must not be empty: every preset parameter names its source",
            ));
        }
        match Provenance::read(&mut leaf, &value) {
            Ok(p) => {
                self.book.provenance.insert(key.clone(), p);
            }
            Err(e) => {
                self.book.provenance_err.get_or_insert(e);
            }
        }
        leaf.finish()?;
        self.book.sources.insert(key.clone(), source);
        Ok((key, value))
    }
    fn u(&mut self, name: &'static str) -> Result<u64, Error> {
        let (k, v) = self.leaf(name)?;
        as_u64(&format!("{k}.value"), &v)
    }
    fn pos(&mut self, name: &'static str) -> Result<u64, Error> {
        let key = self.f.key(name);
        let v = self.u(name)?;
        if v == 0 {
            return Err(cfg_err(format!("{key}.value"), "must be at least 1"));
        }
        Ok(v)
    }
    fn fl(&mut self, name: &'static str) -> Result<f64, Error> {
        let (k, v) = self.leaf(name)?;
        let x = as_f64(&format!("{k}.value"), &v)?;
        if x < 0.0 {
            return Err(cfg_err(format!("{k}.value"), "must not be negative"));
        }
        Ok(x)
    }
    /// `sustained_bytes_per_cycle`: 0 (no limit), or at least one line per
    /// 1024 cycles and at most a line per cycle.
    fn sustained(&mut self) -> Result<f64, Error> {
        let name = "sustained_bytes_per_cycle";
        let key = self.f.key(name);
        let x = self.fl(name)?;
        if x != 0.0 && !(0.0625..=64.0).contains(&x) {
            return Err(cfg_err(
                format!("{key}.value"),
                format!("{x} is outside the accepted values: 0 (no limit), or 0.0625 to 64 bytes per cycle"),
            ));
        }
        Ok(x)
    }
    fn b(&mut self, name: &'static str) -> Result<bool, Error> {
        let (k, v) = self.leaf(name)?;
        match v {
            Value::Boolean(b) => Ok(b),
            o => Err(cfg_err(
                format!("{k}.value"),
                format!("expected true or false, got {}", super::fields::show(&o)),
            )),
        }
    }
    fn choice(&mut self, name: &'static str, choices: &[&str]) -> Result<String, Error> {
        let (k, v) = self.leaf(name)?;
        match v {
            Value::String(s) if choices.contains(&s.as_str()) => Ok(s),
            o => Err(cfg_err(
                format!("{k}.value"),
                format!(
                    "{} is not accepted; accepted: {}",
                    super::fields::show(&o),
                    super::fields::quote_list(choices)
                ),
            )),
        }
    }
    /// Leaf `name`: one of `names`, or a time in ns above 0 and at most the
    /// local DRAM latency (`what` says what the time is).
    fn name_or_ns(
        &mut self,
        name: &'static str,
        names: &[&str],
        what: &str,
        local_latency_ns: f64,
    ) -> Result<NameOrNs, Error> {
        let (k, v) = self.leaf(name)?;
        let accepted = || {
            format!(
                "accepted: {}, or {what} in ns (above 0, at most memory.local_latency_ns = {local_latency_ns})",
                super::fields::quote_list(names)
            )
        };
        match v {
            Value::String(s) if names.contains(&s.as_str()) => Ok(NameOrNs::Named(s)),
            Value::Float(_) | Value::Integer(_) => {
                let x = as_f64(&format!("{k}.value"), &v)?;
                if x > 0.0 && x <= local_latency_ns {
                    Ok(NameOrNs::Ns(x))
                } else {
                    Err(cfg_err(
                        format!("{k}.value"),
                        format!("{x} is not accepted; {}", accepted()),
                    ))
                }
            }
            o => Err(cfg_err(
                format!("{k}.value"),
                format!(
                    "{} is not accepted; {}",
                    super::fields::show(&o),
                    accepted()
                ),
            )),
        }
    }
    fn finish(self) -> Result<(), Error> {
        self.f.finish()
    }
}

fn cache<'a>(
    f: Fields,
    book: &'a mut Book,
    outstanding: Option<&'static str>,
) -> Result<(CacheParams, P<'a>), Error> {
    let mut p = P { f, book };
    let c = CacheParams {
        size_kib: p.pos("size_kib")?,
        ways: p.pos("ways")?,
        latency_cycles: p.pos("latency_cycles")?,
        replacement: p.choice("replacement", REPLACEMENTS)?,
        outstanding: match outstanding {
            Some(n) => p.pos(n)?,
            None => 0,
        },
        sustained_bytes_per_cycle: 0.0,
        writebacks_share_sustained: false,
    };
    bounds::check_cache(
        p.f.path(),
        c.size_kib,
        c.latency_cycles,
        outstanding.map(|n| (n, c.outstanding)),
    )?;
    if c.ways > crate::machine::cache::MAX_WAYS as u64 {
        return Err(cfg_err(
            format!("{}.value", p.f.key("ways")),
            format!(
                "at most {} ways are supported, got {}",
                crate::machine::cache::MAX_WAYS,
                c.ways
            ),
        ));
    }
    let key = p.f.key("size_kib");
    if !(c.size_kib * 1024 / 64).is_multiple_of(c.ways) {
        return Err(cfg_err(
            key,
            format!(
                "{} KiB is not a whole number of sets of {} ways of 64 B lines",
                c.size_kib, c.ways
            ),
        ));
    }
    Ok((c, p))
}

/// The run config key whose dotted keys set preset values.
pub const MACHINE_SET: &str = "machine_set";

/// Sets the preset value at `key` (`l2.superqueue`) to `v` in the preset's
/// table, as the run's own: class `user`, no range, a source saying what
/// it replaced.
fn set_value(table: &mut toml::Table, key: &str, v: &Value) -> Result<(), Error> {
    let shown = format!("{MACHINE_SET}.{key}");
    let name = table
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("the preset")
        .to_string();
    let not_found = || {
        cfg_err(
            super::fields::cut(&shown, 80),
            format!("not a value of the machine preset {name} (vmsim machines --show {name} lists its values, e.g. l2.superqueue)"),
        )
    };
    let mut t = &mut *table;
    let parts: Vec<&str> = key.split('.').collect();
    for part in &parts[..parts.len() - 1] {
        match t.get_mut(*part) {
            Some(Value::Table(sub)) if !sub.contains_key("value") => t = sub,
            _ => return Err(not_found()),
        }
    }
    let Some(Value::Table(leaf)) = t.get_mut(parts[parts.len() - 1]) else {
        return Err(not_found());
    };
    let Some(old) = leaf.get("value").cloned() else {
        return Err(cfg_err(
            super::fields::cut(&shown, 80),
            "is a section of the preset, not one value; set its values one by one",
        ));
    };
    let class = leaf
        .get("class")
        .and_then(Value::as_str)
        .unwrap_or("user")
        .to_string();
    let source = leaf
        .get("source")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    leaf.insert("value".into(), v.clone());
    leaf.insert(
        "source".into(),
        Value::String(format!(
            "set by the run ({shown} = {}); the preset's value {} ({class}): {source}",
            super::fields::show(v),
            super::fields::show(&old)
        )),
    );
    leaf.insert("class".into(), Value::String("user".into()));
    leaf.remove("range");
    leaf.remove("range_reason");
    Ok(())
}

impl Preset {
    pub fn parse(text: &str, origin: &str) -> Result<Preset, Error> {
        Self::parse_with(text, origin, &[])
    }

    /// The preset of `text` with some of its values set by a run (its
    /// `machine_set`): each `(dotted key, value)` replaces that value before
    /// the preset is read, so the field's own checks judge it, and the value
    /// becomes the run's (class `user`, its source naming what it replaced).
    pub fn parse_with(text: &str, origin: &str, sets: &[(String, Value)]) -> Result<Preset, Error> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| super::fields::toml_error(text, &e, origin))?;
        for (key, v) in sets {
            set_value(&mut table, key, v)?;
        }
        // A set value a field refuses is the run's key's fault, not the preset's.
        Self::read(table).map_err(|e| match e {
            Error::Config { key, message } => {
                match sets
                    .iter()
                    .find(|(k, _)| key == *k || key.starts_with(&format!("{k}.")))
                {
                    Some((k, _)) => cfg_err(
                        super::fields::cut(&format!("{MACHINE_SET}.{k}"), 80),
                        message,
                    ),
                    None => Error::Config { key, message },
                }
            }
            e => e,
        })
    }

    fn read(table: toml::Table) -> Result<Preset, Error> {
        let mut top = Fields::new("", table);
        let name = top.string("name")?;
        let description = top.string("description")?;
        let mut book = Book::default();

        let mut cpu = P {
            f: top.sub("cpu")?,
            book: &mut book,
        };
        let model = cpu.f.string("model")?;
        let freq_mhz = cpu.pos("freq_mhz")?;
        let sockets = cpu.pos("sockets")?;
        let cores_per_socket = cpu.pos("cores_per_socket")?;
        let threads_per_core = cpu.pos("threads_per_core")?;
        let issue_width = cpu.pos("issue_width")?;
        let store_bytes_per_cycle = cpu.pos("store_bytes_per_cycle")?;
        let scalar_stores_per_cycle = cpu.pos("scalar_stores_per_cycle")?;
        let movnti_line_cycles = cpu.pos("movnti_line_cycles")?;
        let store_queue_entries = cpu.pos("store_queue_entries")?;
        let load_bytes_per_cycle = cpu.pos("load_bytes_per_cycle")?;
        let perf_cache_events = cpu.choice("perf_cache_events", PERF_CACHE_EVENTS)?;
        cpu.finish()?;

        let (l1d, p) = cache(top.sub("l1d")?, &mut book, Some("fill_buffers"))?;
        p.finish()?;
        let (mut l2, mut p) = cache(top.sub("l2")?, &mut book, Some("superqueue"))?;
        let l2_writeback_holds_superqueue = p.b("writeback_holds_superqueue")?;
        l2.sustained_bytes_per_cycle = p.sustained()?;
        l2.writebacks_share_sustained = p.b("writebacks_share_sustained")?;
        p.finish()?;
        let (mut llc, mut p) = cache(top.sub("llc")?, &mut book, None)?;
        llc.sustained_bytes_per_cycle = p.sustained()?;
        llc.writebacks_share_sustained = p.b("writebacks_share_sustained")?;
        let llc_inclusive = p.b("inclusive")?;
        let llc_instances_per_socket = p.pos("instances_per_socket")?;
        p.finish()?;

        let mut t = P {
            f: top.sub("tlb")?,
            book: &mut book,
        };
        let tlb = TlbParams {
            l1_4k: (t.u("l1_4k_entries")?, t.u("l1_4k_ways")?),
            l1_2m: (t.u("l1_2m_entries")?, t.u("l1_2m_ways")?),
            l1_1g: (t.u("l1_1g_entries")?, t.u("l1_1g_ways")?),
            stlb: (t.u("stlb_entries")?, t.u("stlb_ways")?),
            stlb_holds_2m: t.b("stlb_holds_2m")?,
            stlb_holds_pde: t.b("stlb_holds_pde")?,
            stlb_latency_cycles: t.u("stlb_latency_cycles")?,
            walk_cycles: t.u("walk_cycles")?,
            invlpgb: t.b("invlpgb")?,
        };
        for (name, (entries, ways)) in [
            ("l1_4k", tlb.l1_4k),
            ("l1_2m", tlb.l1_2m),
            ("l1_1g", tlb.l1_1g),
            ("stlb", tlb.stlb),
        ] {
            // 0 entries (or 0 ways) means the structure is absent.
            if entries > 0 && ways > 0 && entries % ways != 0 {
                return Err(cfg_err(
                    format!("tlb.{name}_entries.value"),
                    format!("{entries} entries are not a whole number of sets of {ways} ways"),
                ));
            }
        }
        t.finish()?;

        let mut m = P {
            f: top.sub("memory")?,
            book: &mut book,
        };
        let memory = MemoryParams {
            nodes_per_socket: m.pos("nodes_per_socket")?,
            channels_per_node: m.pos("channels_per_node")?,
            dram_mts: m.pos("dram_mts")?,
            peak_bandwidth_gbs: m.fl("peak_bandwidth_gbs")?,
            sustained_bandwidth_gbs: m.fl("sustained_bandwidth_gbs")?,
            local_latency_ns: m.fl("local_latency_ns")?,
            remote_latency_ns: m.fl("remote_latency_ns")?,
            remote_cache_latency_ns: m.fl("remote_cache_latency_ns")?,
            interconnect_bandwidth_gbs: m.fl("interconnect_bandwidth_gbs")?,
            posted_write_ns: m.fl("posted_write_ns")?,
        };
        if memory.posted_write_ns > memory.local_latency_ns {
            return Err(cfg_err(
                format!("{}.value", m.f.key("posted_write_ns")),
                "must not exceed memory.local_latency_ns (a posted write is accepted before a read could return)",
            ));
        }
        let k = m.f.key("sustained_bandwidth_gbs");
        if memory.sustained_bandwidth_gbs <= 0.0 {
            return Err(cfg_err(format!("{k}.value"), "must be positive"));
        }
        m.finish()?;

        let mut s = P {
            f: top.sub("string")?,
            book: &mut book,
        };
        let string = StringParams {
            erms: s.b("erms")?,
            fsrm: s.b("fsrm")?,
            startup_cycles: s.u("startup_cycles")?,
            drain_at_boundary: s.b("drain_at_boundary")?,
            no_rfo_full_lines: s.b("no_rfo_full_lines")?,
            no_rfo_grant: s.name_or_ns(
                "no_rfo_grant",
                NO_RFO_GRANTS,
                "the grant's time for a local home",
                memory.local_latency_ns,
            )?,
            bypass_hold_ns: s.name_or_ns(
                "bypass_hold_ns",
                &["posted"],
                "how long a bypassing string store's line holds its buffer",
                memory.local_latency_ns,
            )?,
            nocache_threshold_kib: s.u("nocache_threshold_kib")?,
            nocache_by: s.choice("nocache_by", NOCACHE_BY)?,
            clzero: s.b("clzero")?,
            clzero_hold_ns: s.name_or_ns(
                "clzero_hold_ns",
                &["posted"],
                "how long a clzero line holds its buffer",
                memory.local_latency_ns,
            )?,
            sfence_drain_ns: s.name_or_ns(
                "sfence_drain_ns",
                &["none"],
                "what an sfence waits after the last unread line left its buffer",
                memory.local_latency_ns,
            )?,
        };
        s.finish()?;

        let mut pf = P {
            f: top.sub("prefetch")?,
            book: &mut book,
        };
        let prefetch = PrefetchPreset {
            enabled: pf.b("enabled")?,
            l1_next_line: pf.b("l1_next_line")?,
            l2_streamer: pf.b("l2_streamer")?,
            l2_streams: pf.u("l2_streams")?,
            l2_distance_lines: pf.u("l2_distance_lines")?,
            l2_degree: pf.u("l2_degree")?,
            l2_cross_page: pf.b("l2_cross_page")?,
        };
        for (name, v, max) in [
            ("l2_streams", prefetch.l2_streams, 256),
            ("l2_distance_lines", prefetch.l2_distance_lines, 63),
            ("l2_degree", prefetch.l2_degree, 64),
        ] {
            let key = pf.f.key(name);
            if prefetch.l2_streamer && !(1..=max).contains(&v) {
                return Err(cfg_err(
                    format!("{key}.value"),
                    format!("must be 1 to {max} when l2_streamer is true, got {v}"),
                ));
            }
        }
        pf.finish()?;

        let mut c = P {
            f: top.sub("costs")?,
            book: &mut book,
        };
        let costs = Costs {
            kernel: KernelCosts::read(|name| c.u(name))?,
            ipi_send_cycles: c.u("ipi_send_cycles")?,
            ipi_latency_ns: c.fl("ipi_latency_ns")?,
            ipi_handle_cycles: c.u("ipi_handle_cycles")?,
            tlb_flush_full_cycles: c.u("tlb_flush_full_cycles")?,
            invlpg_cycles: c.u("invlpg_cycles")?,
            invlpgb_cycles: None,
            tlbsync_latency_ns: None,
        };
        let mut costs = costs;
        // The broadcast-invalidation costs are required exactly when the CPU has it.
        for (key, present) in [
            ("invlpgb_cycles", c.f.has("invlpgb_cycles")),
            ("tlbsync_latency_ns", c.f.has("tlbsync_latency_ns")),
        ] {
            if present != tlb.invlpgb {
                return Err(cfg_err(
                    c.f.key(key),
                    if tlb.invlpgb {
                        "missing: required when tlb.invlpgb is true".to_string()
                    } else {
                        "given, but tlb.invlpgb is false (the CPU has no INVLPGB)".to_string()
                    },
                ));
            }
        }
        if tlb.invlpgb {
            costs.invlpgb_cycles = Some(c.u("invlpgb_cycles")?);
            costs.tlbsync_latency_ns = Some(c.fl("tlbsync_latency_ns")?);
        }
        c.finish()?;

        let numa = match top.sub_opt("numa")? {
            None => None,
            Some(f) => {
                let mut n = P { f, book: &mut book };
                let (k, v) = n.leaf("hops")?;
                let hops = numa_hops(&format!("{k}.value"), &v, sockets, memory.nodes_per_socket)?;
                let extra_hop_latency_ns = n.fl("extra_hop_latency_ns")?;
                n.finish()?;
                Some(NumaParams {
                    hops,
                    extra_hop_latency_ns,
                })
            }
        };
        let idle_states = match top.sub_opt("idle")? {
            None => Vec::new(),
            Some(f) => {
                let mut i = P { f, book: &mut book };
                let (k, v) = i.leaf("states")?;
                let states = idle_states(&format!("{k}.value"), &v)?;
                i.finish()?;
                states
            }
        };
        top.finish()?;

        let preset = Preset {
            name,
            description,
            model,
            freq_mhz,
            sockets,
            cores_per_socket,
            threads_per_core,
            issue_width,
            store_bytes_per_cycle,
            scalar_stores_per_cycle,
            movnti_line_cycles,
            store_queue_entries,
            load_bytes_per_cycle,
            l1d,
            l2,
            llc,
            llc_inclusive,
            llc_instances_per_socket,
            l2_writeback_holds_superqueue,
            tlb,
            memory,
            string,
            prefetch,
            perf_cache_events,
            costs,
            numa,
            idle_states,
            sources: book.sources,
            provenance: book.provenance,
        };
        let provenance_err = book.provenance_err;
        bounds::check(&preset)?;
        let cpus = sockets * cores_per_socket * threads_per_core;
        if cpus > crate::machine::topology::MAX_CPUS as u64 {
            return Err(cfg_err(
                "cpu",
                format!(
                    "{cpus} hardware threads; at most {} are supported",
                    crate::machine::topology::MAX_CPUS
                ),
            ));
        }
        if cores_per_socket % llc_instances_per_socket != 0
            || cores_per_socket / llc_instances_per_socket > 64
        {
            return Err(cfg_err(
                "llc.instances_per_socket.value",
                "must divide cpu.cores_per_socket into groups of at most 64 cores",
            ));
        }
        if let Some(e) = provenance_err {
            return Err(e);
        }
        Ok(preset)
    }

    pub fn nr_cpus(&self) -> usize {
        (self.sockets * self.cores_per_socket * self.threads_per_core) as usize
    }

    pub fn ns_to_cycles(&self, ns: f64) -> u64 {
        (ns * self.freq_mhz as f64 / 1000.0).round() as u64
    }

    /// The machine's parameters in the model's units: sizes in bytes, times in
    /// cycles at `cpu.freq_mhz`, bandwidths in bytes per cycle, policies typed.
    pub fn machine_params(&self) -> Result<MachineParams, Error> {
        let cyc = |ns: f64| self.ns_to_cycles(ns);
        let bpc = |gbs: f64| gbs * 1e9 / (self.freq_mhz as f64 * 1e6);
        let m = &self.memory;
        let s = &self.string;
        let no_rfo_grant = match &s.no_rfo_grant {
            NameOrNs::Ns(ns) => NoRfoGrant::Cycles(cyc(*ns)),
            NameOrNs::Named(n) if n == "llc" => NoRfoGrant::Llc,
            NameOrNs::Named(n) if n == "memory" => NoRfoGrant::Memory,
            NameOrNs::Named(o) => {
                return Err(cfg_err(
                    "string.no_rfo_grant.value",
                    format!(
                        "{o:?} is not accepted; accepted: {}",
                        super::fields::quote_list(NO_RFO_GRANTS)
                    ),
                ))
            }
        };
        // A time in cycles where measured; None: the key's one name (`off`).
        let ns_or = |v: &NameOrNs, key: &str, off: &str| match v {
            NameOrNs::Ns(ns) => Ok(Some(cyc(*ns))),
            NameOrNs::Named(n) if n == off => Ok(None),
            NameOrNs::Named(o) => Err(cfg_err(
                format!("string.{key}.value"),
                format!("{o:?} is not accepted; accepted: \"{off}\", or a time in ns"),
            )),
        };
        let string_bypass_hold_cycles = ns_or(&s.bypass_hold_ns, "bypass_hold_ns", "posted")?;
        let clzero_hold_cycles = ns_or(&s.clzero_hold_ns, "clzero_hold_ns", "posted")?;
        let sfence_drain_cycles = ns_or(&s.sfence_drain_ns, "sfence_drain_ns", "none")?;
        let nocache_by = match s.nocache_by.as_str() {
            "call" => NocacheBy::Call,
            "remaining" => NocacheBy::Remaining,
            o => {
                return Err(cfg_err(
                    "string.nocache_by.value",
                    format!(
                        "{o:?} is not accepted; accepted: {}",
                        super::fields::quote_list(NOCACHE_BY)
                    ),
                ))
            }
        };
        let tlb = &self.tlb;
        let t = |(entries, ways): (u64, u64)| (entries as u32, ways as u32);
        Ok(MachineParams {
            topo: Topology {
                sockets: self.sockets as usize,
                cores_per_socket: self.cores_per_socket as usize,
                threads_per_core: self.threads_per_core as usize,
                nodes_per_socket: m.nodes_per_socket as usize,
                llc_per_socket: self.llc_instances_per_socket as usize,
            },
            freq_mhz: self.freq_mhz,
            issue_width: self.issue_width,
            store_bytes_per_cycle: self.store_bytes_per_cycle,
            scalar_stores_per_cycle: self.scalar_stores_per_cycle,
            movnti_line_cycles: self.movnti_line_cycles,
            store_queue_entries: self.store_queue_entries,
            l1d: self.l1d.level("l1d")?,
            l2: self.l2.level("l2")?,
            llc: self.llc.level("llc")?,
            llc_inclusive: self.llc_inclusive,
            tlb: TlbConfig {
                l1_4k: t(tlb.l1_4k),
                l1_2m: t(tlb.l1_2m),
                l1_1g: t(tlb.l1_1g),
                stlb: t(tlb.stlb),
                stlb_holds_2m: tlb.stlb_holds_2m,
                stlb_holds_pde: tlb.stlb_holds_pde,
            },
            stlb_latency_cycles: tlb.stlb_latency_cycles,
            walk_cycles: tlb.walk_cycles,
            dram_local_cycles: cyc(m.local_latency_ns),
            dram_remote_cycles: cyc(m.remote_latency_ns),
            remote_cache_cycles: cyc(m.remote_cache_latency_ns),
            numa_hops: self
                .numa
                .as_ref()
                .map(|n| {
                    n.hops
                        .iter()
                        .map(|r| r.iter().map(|&h| h as u8).collect())
                        .collect()
                })
                .unwrap_or_default(),
            extra_hop_cycles: self
                .numa
                .as_ref()
                .map_or(0, |n| cyc(n.extra_hop_latency_ns)),
            posted_write_cycles: cyc(m.posted_write_ns),
            l2_writeback_holds_superqueue: self.l2_writeback_holds_superqueue,
            dram_bytes_per_cycle: bpc(m.sustained_bandwidth_gbs / m.nodes_per_socket as f64),
            link_bytes_per_cycle: bpc(m.interconnect_bandwidth_gbs.max(0.001)),
            string_startup_cycles: s.startup_cycles,
            string_drain: s.drain_at_boundary,
            no_rfo_full_lines: s.no_rfo_full_lines,
            no_rfo_grant,
            string_bypass_hold_cycles,
            clzero_hold_cycles,
            sfence_drain_cycles,
            nocache_threshold_bytes: s.nocache_threshold_kib * 1024,
            nocache_by,
            clzero: s.clzero,
            prefetch: self.prefetch_params(),
            perf_cache_events: if self.perf_cache_events == "l2" {
                PerfCacheEvents::L2
            } else {
                PerfCacheEvents::Llc
            },
            ipi: IpiCosts {
                send_cycles: self.costs.ipi_send_cycles,
                latency_cycles: cyc(self.costs.ipi_latency_ns),
                handle_cycles: self.costs.ipi_handle_cycles,
            },
            tlb_flush_full_cycles: self.costs.tlb_flush_full_cycles,
            invlpg_cycles: self.costs.invlpg_cycles,
            invlpgb: match (
                self.tlb.invlpgb,
                self.costs.invlpgb_cycles,
                self.costs.tlbsync_latency_ns,
            ) {
                (true, Some(invlpgb_cycles), Some(ns)) => Some(InvlpgbCosts {
                    invlpgb_cycles,
                    tlbsync_cycles: cyc(ns),
                }),
                _ => None,
            },
            idle_states: self
                .idle_states
                .iter()
                .map(|s| IdleState {
                    name: s.name.clone(),
                    exit_cycles: cyc(s.exit_latency_us as f64 * 1000.0),
                    target_residency_cycles: cyc(s.target_residency_us as f64 * 1000.0),
                })
                .collect(),
        })
    }

    /// The prefetchers as the model runs them: all off unless `prefetch.enabled`.
    pub fn prefetch_params(&self) -> PrefetchParams {
        let p = &self.prefetch;
        if !p.enabled {
            return PrefetchParams::off();
        }
        PrefetchParams {
            l1_next_line: p.l1_next_line,
            l2_streamer: p.l2_streamer,
            l2_streams: p.l2_streams as usize,
            l2_distance_lines: p.l2_distance_lines,
            l2_degree: p.l2_degree,
            l2_cross_page: p.l2_cross_page,
        }
    }

    /// The kernel's software costs (the hardware's IPI and TLB-flush costs go
    /// to [`Preset::machine_params`]).
    pub fn kernel_costs(&self) -> KernelCosts {
        self.costs.kernel.clone()
    }

    pub fn summary(&self) -> String {
        format!(
            "{}: {} socket(s) x {} cores x {} threads, {} MHz, L1d {} KiB/{}w, L2 {} KiB/{}w, LLC {} MiB/{}w per socket ({}), DRAM {} ch DDR-{} {:.1} GB/s sustained per node",
            self.model,
            self.sockets,
            self.cores_per_socket,
            self.threads_per_core,
            self.freq_mhz,
            self.l1d.size_kib,
            self.l1d.ways,
            self.l2.size_kib,
            self.l2.ways,
            self.llc.size_kib * self.llc_instances_per_socket / 1024,
            self.llc.ways,
            if self.llc_inclusive { "inclusive" } else { "non-inclusive" },
            self.memory.channels_per_node,
            self.memory.dram_mts,
            self.memory.sustained_bandwidth_gbs,
        )
    }
}
