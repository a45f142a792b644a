//! Every machine-preset parameter, declared once: its section and key, its
//! type (the struct field's), what values it accepts and in what unit, what
//! 0 means where 0 is special, and its doc. From each section's declaration
//! come the section's struct, its reader, the value's own checks (and those
//! of the ends of its plausible range), `docs/machines.md`'s table of
//! accepted values and the order of the preset `vmsim hw calibrate` writes. The
//! kernel's software costs are declared in `kernel_costs!`
//! (kernel/costs.rs) and enter the same list here. The `Preset` the
//! sections make up and the leaf reader (`P`, with the book of each
//! value's source and provenance) are here too, below the preset's parsing
//! (mod.rs) and its cross-value checks (bounds.rs), which use them.
//!
//! Invariant: the reader takes exactly the declared keys, each checked
//! against its declaration as it is read; checks between values (a cache's
//! sets, sustained bandwidth below peak, a one-socket preset's zeros) are
//! bounds.rs's, made once every value is read.

use super::super::fields::Fields;
use super::super::fields::{as_f64, as_u64, cfg_err, quote_list, show, show_f64};
use super::provenance::Provenance;
use crate::error::Error;
use crate::kernel::costs::{KernelCosts, Per};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;
use toml::Value;

/// What values a parameter accepts (besides 0 where `Param::zero` says
/// what 0 means).
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// An integer from `lo` to `hi`.
    Int {
        lo: u64,
        hi: u64,
    },
    /// A number from `lo` to `hi`.
    Real {
        lo: f64,
        hi: f64,
    },
    Flag,
    /// One of these names.
    Choice(&'static [&'static str]),
    /// One of these names, or a time in ns above 0 (at most the local DRAM
    /// latency: bounds.rs).
    NameOrNs(&'static [&'static str]),
    /// A structured value; the text says its shape.
    Table(&'static str),
}

pub const fn int(lo: u64, hi: u64) -> Kind {
    Kind::Int { lo, hi }
}

pub const fn real(lo: f64, hi: f64) -> Kind {
    Kind::Real { lo, hi }
}

/// One declared parameter.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub section: &'static str,
    pub name: &'static str,
    pub kind: Kind,
    /// The unit of a number ("" for a count, a flag or a name).
    pub unit: &'static str,
    /// What 0 means, where 0 is accepted outside `Kind`'s range or means
    /// something of its own.
    pub zero: Option<&'static str>,
    /// The key may be absent (bounds.rs says when it must be present).
    pub optional: bool,
    /// The declaration's doc comment, one line per `///` line.
    pub doc: &'static str,
}

impl Param {
    /// The dotted key, `section.name`.
    pub fn key(&self) -> String {
        format!("{}.{}", self.section, self.name)
    }

    fn unit_suffix(&self) -> String {
        if self.unit.is_empty() {
            String::new()
        } else {
            format!(" {}", self.unit)
        }
    }

    /// 0 is accepted although the range starts above it.
    fn zero_outside(&self) -> bool {
        self.zero.is_some()
            && match self.kind {
                Kind::Int { lo, .. } => lo > 0,
                Kind::Real { lo, .. } => lo > 0.0,
                _ => false,
            }
    }

    /// What the parameter accepts, as an error message ends.
    pub fn accepted(&self) -> String {
        let range = self.range_text();
        if self.zero_outside() {
            format!("{range}, or 0 ({})", self.zero.unwrap_or_default())
        } else {
            range
        }
    }

    /// What the parameter accepts, but 0 where 0 is outside its range.
    pub fn range_text(&self) -> String {
        match self.kind {
            Kind::Int { lo, hi } => format!("{lo}..={hi}{}", self.unit_suffix()),
            Kind::Real { lo, hi } => {
                format!("{}..={}{}", show_f64(lo), show_f64(hi), self.unit_suffix())
            }
            Kind::Flag => "true or false".into(),
            Kind::Choice(names) => quote_list(names),
            Kind::NameOrNs(names) => format!(
                "{}, or a time in ns above 0 and at most memory.local_latency_ns",
                quote_list(names)
            ),
            Kind::Table(shape) => shape.into(),
        }
    }

    /// Whether `v` is a value of the parameter (its type and its range; not
    /// its relations to other values). The error is the message alone.
    pub fn accepts(&self, v: &Value) -> Result<(), String> {
        let refuse = |shown: String| {
            Err(format!(
                "{shown} is out of range; accepted: {}",
                self.accepted()
            ))
        };
        let not = |shown: String| {
            Err(format!(
                "{shown} is not accepted; accepted: {}",
                self.accepted()
            ))
        };
        match self.kind {
            Kind::Int { lo, hi } => {
                let x = as_u64("", v).map_err(|_| {
                    format!(
                        "expected a non-negative integer, got {}; accepted: {}",
                        show(v),
                        self.accepted()
                    )
                })?;
                if (lo..=hi).contains(&x) || (x == 0 && self.zero_outside()) {
                    Ok(())
                } else {
                    refuse(x.to_string())
                }
            }
            Kind::Real { lo, hi } => {
                let x = as_f64("", v).map_err(|_| {
                    format!(
                        "expected a number, got {}; accepted: {}",
                        show(v),
                        self.accepted()
                    )
                })?;
                if (x >= lo && x <= hi) || (x == 0.0 && self.zero_outside()) {
                    Ok(())
                } else {
                    refuse(show_f64(x))
                }
            }
            Kind::Flag => match v {
                Value::Boolean(_) => Ok(()),
                o => Err(format!("expected true or false, got {}", show(o))),
            },
            Kind::Choice(names) => match v {
                Value::String(s) if names.contains(&s.as_str()) => Ok(()),
                o => not(show(o)),
            },
            Kind::NameOrNs(names) => match v {
                Value::String(s) if names.contains(&s.as_str()) => Ok(()),
                Value::Integer(_) | Value::Float(_) => match as_f64("", v) {
                    Ok(x) if x > 0.0 => Ok(()),
                    _ => not(show(v)),
                },
                o => not(show(o)),
            },
            // Read and checked by the value's own reader.
            Kind::Table(_) => Ok(()),
        }
    }

    /// The doc comment as one paragraph.
    pub fn doc_text(&self) -> String {
        self.doc.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// A preset value's type: how it is read from its leaf once the leaf's
/// value has passed its declaration's check.
pub(super) trait Leaf: Sized {
    const OPTIONAL: bool = false;
    fn read(p: &mut P, d: &'static Param) -> Result<Self, Error>;
}

impl Leaf for u64 {
    fn read(p: &mut P, d: &'static Param) -> Result<u64, Error> {
        let (k, v) = p.leaf(d)?;
        as_u64(&format!("{k}.value"), &v)
    }
}

impl Leaf for f64 {
    fn read(p: &mut P, d: &'static Param) -> Result<f64, Error> {
        let (k, v) = p.leaf(d)?;
        as_f64(&format!("{k}.value"), &v)
    }
}

impl Leaf for bool {
    fn read(p: &mut P, d: &'static Param) -> Result<bool, Error> {
        let (_, v) = p.leaf(d)?;
        Ok(v.as_bool().unwrap_or_default())
    }
}

/// A choice among names.
impl Leaf for String {
    fn read(p: &mut P, d: &'static Param) -> Result<String, Error> {
        let (_, v) = p.leaf(d)?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }
}

impl Leaf for NameOrNs {
    fn read(p: &mut P, d: &'static Param) -> Result<NameOrNs, Error> {
        let (k, v) = p.leaf(d)?;
        match v {
            Value::String(s) => Ok(NameOrNs::Named(s)),
            v => Ok(NameOrNs::Ns(as_f64(&format!("{k}.value"), &v)?)),
        }
    }
}

/// `[numa].hops`: rows of hop counts (their shape and meaning are
/// bounds.rs's, which knows the topology).
impl Leaf for Vec<Vec<u64>> {
    fn read(p: &mut P, d: &'static Param) -> Result<Vec<Vec<u64>>, Error> {
        let (k, v) = p.leaf(d)?;
        let k = format!("{k}.value");
        let rows = || {
            cfg_err(
                &k,
                "expected an array of rows of hop counts, one row per NUMA node",
            )
        };
        let Value::Array(a) = v else {
            return Err(rows());
        };
        a.iter()
            .enumerate()
            .map(|(i, r)| {
                let Value::Array(r) = r else {
                    return Err(cfg_err(
                        format!("{k}[{i}]"),
                        "expected an array of hop counts",
                    ));
                };
                r.iter()
                    .enumerate()
                    .map(|(j, x)| as_u64(&format!("{k}[{i}][{j}]"), x))
                    .collect()
            })
            .collect()
    }
}

impl Leaf for Vec<IdleStatePreset> {
    fn read(p: &mut P, d: &'static Param) -> Result<Vec<IdleStatePreset>, Error> {
        let (k, v) = p.leaf(d)?;
        idle_states(&format!("{k}.value"), &v)
    }
}

impl<T: Leaf> Leaf for Option<T> {
    const OPTIONAL: bool = true;
    fn read(p: &mut P, d: &'static Param) -> Result<Option<T>, Error> {
        if p.has(d.name) {
            T::read(p, d).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// Declares one preset section: its struct (one field per parameter, in
/// the preset's order), `PARAMS` and `read`.
macro_rules! section {
    (
        $(#[doc = $sdoc:literal])*
        $name:ident = $section:literal {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty = $kind:expr, $unit:literal $(, zero = $zero:expr)? ;
            )*
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Clone, Debug, Serialize)]
        pub struct $name {
            $($(#[doc = $doc])* pub $field: $ty,)*
        }

        impl $name {
            pub const SECTION: &'static str = $section;
            pub const PARAMS: &'static [Param] = &[$(Param {
                section: $section,
                name: stringify!($field),
                kind: $kind,
                unit: $unit,
                zero: section!(@zero $($zero)?),
                optional: <$ty as Leaf>::OPTIONAL,
                doc: concat!($($doc, "\n",)* ""),
            }),*];

            /// The section's values, each checked against its declaration,
            /// in declaration order; the caller finishes the table.
            pub(super) fn read(p: &mut P) -> Result<Self, Error> {
                let mut decls = Self::PARAMS.iter();
                Ok($name {
                    $($field: <$ty as Leaf>::read(p, decls.next().expect("one declaration per field"))?,)*
                })
            }
        }
    };
    (@zero) => { None };
    (@zero $z:expr) => { Some($z) };
}

/// Largest modeled cache instance: 4 GiB (today's largest LLC slice is ~100 MiB).
pub const MAX_CACHE_KIB: u64 = 4 << 20;
/// Smallest bandwidth (memory, interconnect): 0.1 GB/s, below any DRAM
/// channel or socket link ever built; smaller values once rounded to nothing.
pub const MIN_BANDWIDTH_GBS: f64 = 0.1;
/// A kernel path taken once per call (a fault, a system call, an IPI, a
/// context switch, a tick): at most 10^7 cycles (a few ms).
pub const MAX_CALL_CYCLES: u64 = 10_000_000;
/// A step taken per page or per PTE (allocation, mapping, rmap, migration):
/// at most 10^5 cycles (tens of µs, far above any measured).
pub const MAX_PAGE_CYCLES: u64 = 100_000;
/// An IPI's delivery: 10 ns (below a cycle-accurate cache-to-cache hop) to
/// 100 µs (a de-scheduled virtual CPU); smaller values rounded to 0 cycles.
pub const MIN_IPI_NS: f64 = 10.0;
pub const MAX_IPI_NS: f64 = 100_000.0;
/// Most socket-link hops between two nodes `[numa] hops` accepts.
pub const MAX_HOPS: u64 = 8;

const WAYS: Kind = int(1, crate::machine::cache::MAX_WAYS as u64);
const SIZE_KIB: Kind = int(1, MAX_CACHE_KIB);
const LATENCY: Kind = int(1, 10_000);
const ENTRIES: Kind = int(1, 1024);
const REPLACEMENT: Kind = Kind::Choice(&crate::machine::cache::Replacement::NAMES);
const BANDWIDTH: Kind = real(MIN_BANDWIDTH_GBS, 100_000.0);
const SUSTAINED: Kind = real(0.0625, 64.0);
const TLB: Kind = int(0, 1 << 20);
const TLB_NONE: &str = "with 0 of the other too: no such TLB";

section! {
    /// `[cpu]`: the cores (`model`, the chip's name, is read beside them).
    Cpu = "cpu" {
        /// Core clock the model runs at.
        freq_mhz: u64 = int(100, 20_000), "MHz";
        /// Sockets (packages) of the machine.
        sockets: u64 = int(1, 64), "";
        /// Cores of one socket.
        cores_per_socket: u64 = int(1, 1024), "";
        /// Hardware threads per core (SMT).
        threads_per_core: u64 = int(1, 8), "";
        /// Instructions one core issues a cycle.
        issue_width: u64 = int(1, 64), "per cycle";
        /// Bytes one core stores a cycle with vector stores.
        store_bytes_per_cycle: u64 = int(1, 1024), "bytes";
        /// 8 B scalar (`mov`) stores one core issues a cycle.
        scalar_stores_per_cycle: u64 = int(1, 8), "per cycle";
        /// Cycles one core takes to issue a line's eight 8 B `movnti` stores.
        movnti_line_cycles: u64 = int(1, 1024), "cycles";
        /// Entries of one thread's store queue (store buffer): ordinary
        /// stores awaiting commit, freed in program order.
        store_queue_entries: u64 = ENTRIES, "entries";
        /// Bytes one core loads a cycle.
        load_bytes_per_cycle: u64 = int(1, 1024), "bytes";
        /// What perf's generic `cache-references`/`cache-misses` count on
        /// the chip: the LLC's or the L2's accesses and misses.
        perf_cache_events: String = Kind::Choice(&["llc", "l2"]), "";
    }
}

section! {
    /// `[l1d]`: one hardware thread's L1 data cache.
    L1d = "l1d" {
        /// Capacity: a whole number of sets of `ways` 64 B lines.
        size_kib: u64 = SIZE_KIB, "KiB";
        /// Associativity.
        ways: u64 = WAYS, "";
        /// Load-to-use latency of a hit.
        latency_cycles: u64 = LATENCY, "cycles";
        /// Replacement policy (machine/cache's `Replacement`).
        replacement: String = REPLACEMENT, "";
        /// Line fill buffers: the core's outstanding L1 misses.
        fill_buffers: u64 = ENTRIES, "entries";
    }
}

section! {
    /// `[l2]`: one core's L2.
    L2 = "l2" {
        /// Capacity: a whole number of sets of `ways` 64 B lines.
        size_kib: u64 = SIZE_KIB, "KiB";
        /// Associativity.
        ways: u64 = WAYS, "";
        /// Load-to-use latency of a hit.
        latency_cycles: u64 = LATENCY, "cycles";
        /// Replacement policy.
        replacement: String = REPLACEMENT, "";
        /// Superqueue entries: the core's outstanding L2 misses.
        superqueue: u64 = ENTRIES, "entries";
        /// A dirty L2 victim holds a superqueue entry for the LLC latency.
        writeback_holds_superqueue: bool = Kind::Flag, "";
        /// Bytes a cycle one core sustains reading from the L2.
        sustained_bytes_per_cycle: f64 = SUSTAINED, "bytes per cycle", zero = "no limit on that fill path";
        /// The L1's dirty victims leave over the same path and share
        /// `sustained_bytes_per_cycle`.
        writebacks_share_sustained: bool = Kind::Flag, "";
    }
}

section! {
    /// `[llc]`: one LLC instance (`instances_per_socket` of them a socket).
    Llc = "llc" {
        /// One instance's capacity; all modeled caches together at most 4 GiB.
        size_kib: u64 = SIZE_KIB, "KiB";
        /// Associativity.
        ways: u64 = WAYS, "";
        /// Load-to-use latency of a hit.
        latency_cycles: u64 = LATENCY, "cycles";
        /// Bytes a cycle one core sustains reading from the LLC.
        sustained_bytes_per_cycle: f64 = SUSTAINED, "bytes per cycle", zero = "no limit on that fill path";
        /// The L2's dirty victims leave over the same path and share
        /// `sustained_bytes_per_cycle`.
        writebacks_share_sustained: bool = Kind::Flag, "";
        /// Replacement policy.
        replacement: String = REPLACEMENT, "";
        /// The LLC holds every line of the caches above it.
        inclusive: bool = Kind::Flag, "";
        /// LLC instances a socket: they divide `cpu.cores_per_socket` into
        /// groups of at most 64 cores.
        instances_per_socket: u64 = int(1, 1024), "";
    }
}

section! {
    /// `[tlb]`: one hardware thread's TLBs.
    Tlb = "tlb" {
        /// The L1 data TLB for 4 KiB pages.
        l1_4k_entries: u64 = TLB, "entries", zero = TLB_NONE;
        /// Its associativity.
        l1_4k_ways: u64 = TLB, "ways", zero = TLB_NONE;
        /// The L1 data TLB for 2 MiB pages.
        l1_2m_entries: u64 = TLB, "entries", zero = TLB_NONE;
        /// Its associativity.
        l1_2m_ways: u64 = TLB, "ways", zero = TLB_NONE;
        /// The L1 data TLB for 1 GiB pages.
        l1_1g_entries: u64 = TLB, "entries", zero = TLB_NONE;
        /// Its associativity.
        l1_1g_ways: u64 = TLB, "ways", zero = TLB_NONE;
        /// The second-level (shared) TLB.
        stlb_entries: u64 = TLB, "entries", zero = TLB_NONE;
        /// Its associativity.
        stlb_ways: u64 = TLB, "ways", zero = TLB_NONE;
        /// The STLB also holds 2 MiB translations.
        stlb_holds_2m: bool = Kind::Flag, "";
        /// The STLB also caches page-directory entries for walks (AMD's L2
        /// TLB); false: every upper-level entry a walk needs is taken as
        /// cached (Intel's paging-structure caches, of unpublished size).
        stlb_holds_pde: bool = Kind::Flag, "";
        /// Added to an STLB hit.
        stlb_latency_cycles: u64 = int(0, 10_000), "cycles", zero = "nothing added to a hit";
        /// Added to a page walk beyond its memory accesses.
        walk_cycles: u64 = int(0, 100_000), "cycles", zero = "nothing added to a walk";
        /// The CPU has INVLPGB/TLBSYNC (broadcast TLB invalidation).
        invlpgb: bool = Kind::Flag, "";
    }
}

section! {
    /// `[memory]`: DRAM and the socket links.
    Memory = "memory" {
        /// NUMA nodes of one socket (sub-NUMA clustering, NPS).
        nodes_per_socket: u64 = int(1, 64), "";
        /// DRAM channels of one node.
        channels_per_node: u64 = int(1, 64), "";
        /// DRAM transfer rate.
        dram_mts: u64 = int(100, 100_000), "MT/s";
        /// One socket's theoretical DRAM bandwidth; not below
        /// `sustained_bandwidth_gbs`.
        peak_bandwidth_gbs: f64 = BANDWIDTH, "GB/s";
        /// One socket's sustained DRAM bandwidth, shared by its nodes.
        sustained_bandwidth_gbs: f64 = BANDWIDTH, "GB/s";
        /// Idle latency of a read from the local node.
        local_latency_ns: f64 = real(1.0, 10_000.0), "ns";
        /// Idle latency of a read from another socket's node; 0 only on a
        /// one-socket preset.
        remote_latency_ns: f64 = real(1.0, 10_000.0), "ns", zero = "one socket: no remote memory";
        /// A read served by another socket's cache; 0 only on a one-socket preset.
        remote_cache_latency_ns: f64 = real(1.0, 10_000.0), "ns", zero = "one socket: no remote memory";
        /// One direction of the socket link; 0 only on a one-socket preset.
        interconnect_bandwidth_gbs: f64 = BANDWIDTH, "GB/s", zero = "one socket: no link";
        /// How long a non-temporal line holds its write-combining buffer
        /// after leaving the core; at most `local_latency_ns`.
        posted_write_ns: f64 = real(0.0, 10_000.0), "ns", zero = "a write is posted at once";
    }
}

section! {
    /// `[string]`: the string instructions (`rep stosb`, `rep movsb`) and
    /// the stores that bypass the caches.
    StringParams = "string" {
        /// Enhanced `rep movsb`/`stosb` (CPUID).
        erms: bool = Kind::Flag, "";
        /// Fast short `rep mov` (CPUID).
        fsrm: bool = Kind::Flag, "";
        /// Cycles before a string instruction's first store.
        startup_cycles: u64 = int(0, 100_000), "cycles", zero = "no start-up cost";
        /// A string instruction's stores wait until every line store of the
        /// previous one is granted (the drain at a string-instruction boundary).
        drain_at_boundary: bool = Kind::Flag, "";
        /// A string store that writes whole lines takes ownership without
        /// reading them (no RFO).
        no_rfo_full_lines: bool = Kind::Flag, "";
        /// Where ownership without data is granted to a no-RFO full-line
        /// store that misses the LLC: "llc" (at the LLC latency), "memory"
        /// (after the idle DRAM latency of the line's home), or the grant's
        /// time in ns for a local home, measured (a remote home adds the
        /// remote-local difference); unused when `no_rfo_full_lines` is false.
        no_rfo_grant: NameOrNs = Kind::NameOrNs(&["llc", "memory"]), "";
        /// String stores longer than this bypass the caches.
        nocache_threshold_kib: u64 = int(0, 1 << 30), "KiB", zero = "string stores never bypass the caches";
        /// How a string store longer than the threshold bypasses: "call"
        /// (all of it, a step in the call's length) or "remaining" (its
        /// lines while more than the threshold remains to be stored).
        nocache_by: String = Kind::Choice(&["call", "remaining"]), "";
        /// How long a line a string store writes without allocating holds
        /// its miss buffer: "posted" (as any unread line,
        /// `memory.posted_write_ns`), or a time in ns, measured.
        bypass_hold_ns: NameOrNs = Kind::NameOrNs(&["posted"]), "";
        /// The CPU has `clzero` (AMD), so a clear plan may store with it.
        clzero: bool = Kind::Flag, "";
        /// How long a `clzero` line holds its miss buffer: "posted" (as any
        /// unread line), or a time in ns, measured.
        clzero_hold_ns: NameOrNs = Kind::NameOrNs(&["posted"]), "";
        /// What an `sfence` waits for after the last earlier unread line
        /// (non-temporal, `clzero`, bypassing string store) of its thread
        /// left its buffer: "none", or a time in ns, measured.
        sfence_drain_ns: NameOrNs = Kind::NameOrNs(&["none"]), "";
    }
}

section! {
    /// `[prefetch]`: the hardware prefetchers.
    Prefetch = "prefetch" {
        /// Master switch: false turns every prefetcher off (as the BIOS or
        /// MSR 0x1a4 can).
        enabled: bool = Kind::Flag, "";
        /// The L1's next-line prefetcher.
        l1_next_line: bool = Kind::Flag, "";
        /// The L2's stream prefetcher.
        l2_streamer: bool = Kind::Flag, "";
        /// Streams the L2 streamer tracks (checked whether it is on or not).
        l2_streams: u64 = int(1, 256), "";
        /// How far ahead of the demand stream it runs.
        l2_distance_lines: u64 = int(1, 63), "lines";
        /// Prefetches issued per L2 lookup.
        l2_degree: u64 = int(1, 64), "";
        /// The L2 streamer continues a stream into the physically next 4 KiB page.
        l2_cross_page: bool = Kind::Flag, "";
    }
}

section! {
    /// `[costs]`' hardware costs (the kernel's software costs beside them
    /// are `kernel_costs!`').
    HwCosts = "costs" {
        /// Sending one IPI.
        ipi_send_cycles: u64 = int(0, MAX_CALL_CYCLES), "cycles", zero = "the step costs nothing";
        /// From send to the target's handler.
        ipi_latency_ns: f64 = real(MIN_IPI_NS, MAX_IPI_NS), "ns";
        /// The target's IPI handler, flush excluded.
        ipi_handle_cycles: u64 = int(0, MAX_CALL_CYCLES), "cycles", zero = "the step costs nothing";
        /// A full TLB flush (CR3 write).
        tlb_flush_full_cycles: u64 = int(0, MAX_CALL_CYCLES), "cycles", zero = "the step costs nothing";
        /// One `invlpg`.
        invlpg_cycles: u64 = int(0, MAX_PAGE_CYCLES), "cycles", zero = "the step costs nothing";
        /// One `invlpgb`; present exactly when `tlb.invlpgb` is true.
        invlpgb_cycles: Option<u64> = int(0, MAX_PAGE_CYCLES), "cycles", zero = "the step costs nothing";
        /// A `tlbsync`'s wait; present exactly when `tlb.invlpgb` is true.
        tlbsync_latency_ns: Option<f64> = real(1.0, MAX_IPI_NS), "ns";
    }
}

section! {
    /// `[numa]` (optional): how far each NUMA node is from each other.
    Numa = "numa" {
        /// Socket-link (QPI/UPI) hops, node by node: 0 from a node to itself
        /// and to the other nodes of its socket, 1 to `MAX_HOPS` to a node of
        /// another socket; symmetric. Without `[numa]` every node of another
        /// socket is one hop away.
        hops: Vec<Vec<u64>> = Kind::Table("one row of one entry per NUMA node (cpu.sockets x memory.nodes_per_socket): 0 from a node to itself and to the nodes of its own socket (whose rows must be equal), 1..=8 to a node of another socket, symmetric"), "hops";
        /// Added to `memory.remote_latency_ns`, `memory.remote_cache_latency_ns`
        /// and a remote posted write for each hop beyond the first.
        extra_hop_latency_ns: f64 = real(0.0, 10_000.0), "ns", zero = "a hop beyond the first costs nothing";
    }
}

section! {
    /// `[idle]` (optional): the CPU's idle states, shallowest first.
    Idle = "idle" {
        /// `struct cpuidle_state`s of intel_idle's tables; without `[idle]`
        /// a woken CPU leaves idle at no cost.
        states: Vec<IdleStatePreset> = Kind::Table("an array of { name, exit_latency_us, target_residency_us }, shallowest first, both non-decreasing, each 0..=10000 µs"), "";
    }
}

/// The declaration of kernel cost `name` (a key of `KernelCosts::ALL`).
pub(super) fn kernel_param(name: &str) -> &'static Param {
    static PARAMS: OnceLock<Vec<Param>> = OnceLock::new();
    PARAMS
        .get_or_init(|| kernel_cost_params().collect())
        .iter()
        .find(|p| p.name == name)
        .expect("a declared kernel cost")
}

/// The kernel's software costs as parameters of `[costs]`.
fn kernel_cost_params() -> impl Iterator<Item = Param> {
    KernelCosts::ALL.iter().map(|&(name, per, doc)| Param {
        section: "costs",
        name,
        kind: match per {
            Per::Call => int(0, MAX_CALL_CYCLES),
            Per::Page => int(0, MAX_PAGE_CYCLES),
        },
        unit: "cycles",
        zero: Some("the step costs nothing"),
        optional: false,
        doc,
    })
}

/// Every preset parameter, in the order of a preset file.
pub fn all() -> Vec<Param> {
    let mut out: Vec<Param> = [
        Cpu::PARAMS,
        L1d::PARAMS,
        L2::PARAMS,
        Llc::PARAMS,
        Tlb::PARAMS,
        Memory::PARAMS,
        StringParams::PARAMS,
        Prefetch::PARAMS,
    ]
    .concat();
    out.extend(kernel_cost_params());
    out.extend_from_slice(HwCosts::PARAMS);
    out.extend_from_slice(Numa::PARAMS);
    out.extend_from_slice(Idle::PARAMS);
    out
}

/// The declaration of dotted key `key`.
pub fn find(key: &str) -> Option<Param> {
    all().into_iter().find(|p| p.key() == key)
}

/// docs/machines.md's table of every parameter: key, what it accepts, what
/// 0 means, and its doc.
pub fn doc_table() -> String {
    let mut s =
        String::from("| key | accepted | 0 means | what it is |\n| --- | --- | --- | --- |\n");
    for p in all() {
        let accepted = if p.zero_outside() {
            p.range_text() + ", or 0"
        } else {
            p.accepted()
        };
        let mut doc = p.doc_text();
        if p.optional {
            doc = format!("(optional) {doc}");
        }
        s += &format!(
            "| `{}` | {} | {} | {} |\n",
            p.key(),
            accepted.replace('|', "\\|"),
            p.zero.unwrap_or("—"),
            doc.replace('|', "\\|")
        );
    }
    s
}

// ---------------------------------------------------------------------------
// The preset and its reader: what the declarations above are read into.

/// A machine preset: each section's values as declared in params.rs.
#[derive(Clone, Debug, Serialize)]
pub struct Preset {
    pub name: String,
    pub description: String,
    /// `cpu.model`: the chip's name.
    pub model: String,
    pub cpu: Cpu,
    pub l1d: L1d,
    pub l2: L2,
    pub llc: Llc,
    pub tlb: Tlb,
    pub memory: Memory,
    pub string: StringParams,
    pub prefetch: Prefetch,
    pub costs: Costs,
    /// `[numa]`; `None` when the preset has none (every node of another
    /// socket is then one hop away).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa: Option<Numa>,
    /// `[idle]`'s states, shallowest first; empty when the preset has none
    /// (a woken CPU then exits idle at no cost).
    pub idle_states: Vec<IdleStatePreset>,
    /// Dotted key -> source text, for every parameter.
    pub sources: BTreeMap<String, String>,
    /// Dotted key -> class and plausible range, for every parameter.
    pub provenance: BTreeMap<String, Provenance>,
}

/// `[costs]`: the kernel's software costs (kernel/costs.rs) and the
/// hardware's IPI and TLB-flush costs (params.rs).
#[derive(Clone, Debug, Serialize)]
pub struct Costs {
    #[serde(flatten)]
    pub kernel: KernelCosts,
    #[serde(flatten)]
    pub hw: HwCosts,
}

/// What the preset reader records of each value besides the value.
#[derive(Default)]
pub(super) struct Book {
    pub(super) sources: BTreeMap<String, String>,
    pub(super) provenance: BTreeMap<String, Provenance>,
    /// The first class or range at fault: reported once every value has
    /// passed its own checks, which say more about a value out of bounds.
    pub(super) provenance_err: Option<Error>,
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
pub(super) fn idle_states(key: &str, v: &Value) -> Result<Vec<IdleStatePreset>, Error> {
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

/// A preset time that is either named (`string.no_rfo_grant`'s "llc" or
/// "memory", `string.bypass_hold_ns`'s "posted") or measured, in ns.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum NameOrNs {
    Named(String),
    Ns(f64),
}

/// A section's reader: its fields and the book its values' sources and
/// provenance go to.
pub(super) struct P<'a> {
    pub(super) f: Fields,
    pub(super) book: &'a mut Book,
}

impl<'a> P<'a> {
    /// The leaf of parameter `d`: its value, checked against the
    /// declaration, with its source and provenance booked (a range end the
    /// parameter does not accept is a provenance fault, reported once every
    /// value has passed its own checks).
    pub(super) fn leaf(&mut self, d: &'static Param) -> Result<(String, Value), Error> {
        let name = d.name;
        let key = self.f.key(name);
        let mut leaf = self.f.sub(name).map_err(|e| match e {
            Error::Config { key, message } if message.starts_with("expected a table") => cfg_err(
                key,
                "expected { value = …, source = \"…\" }: every preset parameter names its source",
            ),
            e => e,
        })?;
        leaf.declare(&[
            "value",
            "source",
            "class",
            "range",
            "range_reason",
            "range_with",
        ])?;
        let value = leaf.req("value")?;
        let source = leaf.string("source")?;
        if source.trim().is_empty() {
            return Err(cfg_err(
                leaf.key("source"),
                "must not be empty: every preset parameter names its source",
            ));
        }
        d.accepts(&value)
            .map_err(|m| cfg_err(format!("{key}.value"), m))?;
        match Provenance::read(&mut leaf, &value) {
            Ok(p) => {
                if let Some(e) = p.range.iter().flatten().find_map(|end| {
                    d.accepts(end).err().map(|m| {
                        cfg_err(
                            format!("{key}.range"),
                            format!("the end {}: {m}", super::super::fields::show(end)),
                        )
                    })
                }) {
                    self.book.provenance_err.get_or_insert(e);
                }
                if let Some(e) = check_with(&key, &p) {
                    self.book.provenance_err.get_or_insert(e);
                }
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
    pub(super) fn has(&self, name: &str) -> bool {
        self.f.has(name)
    }
    pub(super) fn finish(self) -> Result<(), Error> {
        self.f.finish()
    }
}

/// `range_with` of `key`'s provenance `p`: each value a declared key other
/// than `key`, each of its values one that key accepts.
fn check_with(key: &str, p: &Provenance) -> Option<Error> {
    for (k, vs) in p.range_with.iter().flatten() {
        let at = format!("{key}.range_with.{k}");
        if k == key {
            return Some(cfg_err(at, "is the value itself"));
        }
        let Some(d) = find(k) else {
            return Some(cfg_err(
                super::super::fields::cut(&at, 80),
                "not a preset value (docs/machines.md lists them)",
            ));
        };
        if let Some(m) = vs.iter().find_map(|v| d.accepts(v).err()) {
            return Some(cfg_err(at, m));
        }
    }
    None
}
