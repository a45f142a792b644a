//! The checks between a preset's values, made once every value has passed
//! its own declaration (params.rs): a cache's sets, a TLB's entries and
//! ways, bandwidth and latency orderings, a one-socket preset's zeros, the
//! broadcast-invalidation costs, `[numa]`'s shape, the LLC instances, and
//! the host-memory guard on the modeled caches.
//!
//! Invariant: a preset that passes [`check`] builds a machine whose every
//! size, count and latency fits the model's integer types and whose state
//! fits in host memory, so no preset value can abort, panic or wrap. The
//! declared ranges are generous (about ten times beyond any shipped or
//! announced part) and exist to refuse nonsense, not to judge a plausible
//! design.

use super::super::fields::{cfg_err, show_f64};
use super::params::{NameOrNs, Preset, MAX_HOPS};
use crate::error::Error;

/// All modeled cache instances together (L1d and L2 per CPU, LLC per instance).
/// The model keeps ~17 bytes per 64-byte line, so this is ~1.1 GB of host memory.
pub const MAX_MODELED_CACHE_BYTES: u64 = 4 << 30;

/// The declaration of `key`.
pub(super) fn declared(key: &str) -> super::params::Param {
    super::params::find(key).expect("a declared key")
}

/// A cache level's size is a whole number of sets of its ways of 64 B lines.
fn sets(prefix: &str, size_kib: u64, ways: u64) -> Result<(), Error> {
    if !(size_kib * 1024 / 64).is_multiple_of(ways) {
        return Err(cfg_err(
            format!("{prefix}.size_kib"),
            format!("{size_kib} KiB is not a whole number of sets of {ways} ways of 64 B lines"),
        ));
    }
    Ok(())
}

/// Checks the relations between the values of a parsed preset.
pub fn check(p: &Preset) -> Result<(), Error> {
    sets("l1d", p.l1d.size_kib, p.l1d.ways)?;
    sets("l2", p.l2.size_kib, p.l2.ways)?;
    sets("llc", p.llc.size_kib, p.llc.ways)?;

    let t = &p.tlb;
    for (name, entries, ways) in [
        ("l1_4k", t.l1_4k_entries, t.l1_4k_ways),
        ("l1_2m", t.l1_2m_entries, t.l1_2m_ways),
        ("l1_1g", t.l1_1g_entries, t.l1_1g_ways),
        ("stlb", t.stlb_entries, t.stlb_ways),
    ] {
        if ways > entries {
            return Err(cfg_err(
                format!("tlb.{name}_ways.value"),
                format!("{ways} ways exceed the {entries} entries"),
            ));
        }
        // A TLB is absent with 0 entries and 0 ways: one without the other
        // left the other number unused.
        if (entries == 0) != (ways == 0) {
            let (zero, other) = if ways == 0 {
                ("ways", format!("{entries} entries"))
            } else {
                ("entries", format!("{ways} ways"))
            };
            return Err(cfg_err(
                format!("tlb.{name}_{zero}.value"),
                format!("0 {zero} with {other}; accepted: 0 entries and 0 ways (no such TLB), or at least 1 of each"),
            ));
        }
        if entries > 0 && entries % ways != 0 {
            return Err(cfg_err(
                format!("tlb.{name}_entries.value"),
                format!("{entries} entries are not a whole number of sets of {ways} ways"),
            ));
        }
    }

    let m = &p.memory;
    if m.sustained_bandwidth_gbs > m.peak_bandwidth_gbs {
        return Err(cfg_err(
            "memory.sustained_bandwidth_gbs.value",
            format!(
                "{} GB/s exceed memory.peak_bandwidth_gbs ({} GB/s): no memory sustains more than its peak",
                show_f64(m.sustained_bandwidth_gbs),
                show_f64(m.peak_bandwidth_gbs)
            ),
        ));
    }
    if m.posted_write_ns > m.local_latency_ns {
        return Err(cfg_err(
            "memory.posted_write_ns.value",
            "must not exceed memory.local_latency_ns (a posted write is accepted before a read could return)",
        ));
    }
    // One socket has no remote memory and no link: 0 there means "none".
    if p.cpu.sockets > 1 {
        for (key, v) in [
            ("remote_latency_ns", m.remote_latency_ns),
            ("remote_cache_latency_ns", m.remote_cache_latency_ns),
            ("interconnect_bandwidth_gbs", m.interconnect_bandwidth_gbs),
        ] {
            if v == 0.0 {
                return Err(cfg_err(
                    format!("memory.{key}.value"),
                    format!(
                        "0 on a preset of {} sockets; accepted: {} (0 only on a one-socket preset)",
                        p.cpu.sockets,
                        declared(&format!("memory.{key}")).range_text()
                    ),
                ));
            }
        }
    }

    let s = &p.string;
    for (name, v) in [
        ("no_rfo_grant", &s.no_rfo_grant),
        ("bypass_hold_ns", &s.bypass_hold_ns),
        ("clzero_hold_ns", &s.clzero_hold_ns),
        ("sfence_drain_ns", &s.sfence_drain_ns),
    ] {
        if let NameOrNs::Ns(x) = v {
            if *x > m.local_latency_ns {
                return Err(cfg_err(
                    format!("string.{name}.value"),
                    format!(
                        "{} ns is not accepted (memory.local_latency_ns is {}); accepted: {}",
                        show_f64(*x),
                        show_f64(m.local_latency_ns),
                        declared(&format!("string.{name}")).accepted()
                    ),
                ));
            }
        }
    }

    // The broadcast-invalidation costs are required exactly when the CPU has it.
    let c = &p.costs.hw;
    for (key, present) in [
        ("invlpgb_cycles", c.invlpgb_cycles.is_some()),
        ("tlbsync_latency_ns", c.tlbsync_latency_ns.is_some()),
    ] {
        if present != t.invlpgb {
            return Err(cfg_err(
                format!("costs.{key}"),
                if t.invlpgb {
                    "missing: required when tlb.invlpgb is true"
                } else {
                    "given, but tlb.invlpgb is false (the CPU has no INVLPGB)"
                },
            ));
        }
    }

    if let Some(n) = &p.numa {
        numa_hops(
            "numa.hops.value",
            &n.hops,
            p.cpu.sockets,
            m.nodes_per_socket,
        )?;
    }

    let cpus = p.cpu.sockets * p.cpu.cores_per_socket * p.cpu.threads_per_core;
    if cpus > crate::machine::topology::MAX_CPUS as u64 {
        return Err(cfg_err(
            "cpu",
            format!(
                "{cpus} hardware threads; at most {} are supported",
                crate::machine::topology::MAX_CPUS
            ),
        ));
    }
    let llc_per_socket = p.llc.instances_per_socket;
    if !p.cpu.cores_per_socket.is_multiple_of(llc_per_socket)
        || p.cpu.cores_per_socket / llc_per_socket > 64
    {
        return Err(cfg_err(
            "llc.instances_per_socket.value",
            "must divide cpu.cores_per_socket into groups of at most 64 cores",
        ));
    }

    // Host-memory guard: L1d and L2 per hardware thread, the LLC per instance.
    let llcs = p.cpu.sockets * llc_per_socket;
    let modeled = (cpus * (p.l1d.size_kib + p.l2.size_kib))
        .saturating_add(llcs.saturating_mul(p.llc.size_kib))
        * 1024;
    if modeled > MAX_MODELED_CACHE_BYTES {
        return Err(cfg_err(
            "llc.size_kib.value",
            format!(
                "the modeled caches come to {} MiB in all ({cpus} CPUs x (L1d + L2) + {llcs} LLC instance(s)); at most {} MiB is supported",
                modeled >> 20,
                MAX_MODELED_CACHE_BYTES >> 20
            ),
        ));
    }
    Ok(())
}

/// `[numa].hops`: a square array, one row per NUMA node, checked against
/// the topology (`sockets` x `nodes_per_socket` nodes).
fn numa_hops(
    key: &str,
    hops: &[Vec<u64>],
    sockets: u64,
    nodes_per_socket: u64,
) -> Result<(), Error> {
    let nodes = (sockets * nodes_per_socket) as usize;
    let shape = format!(
        "expected {nodes} rows of {nodes} hop counts, one per NUMA node (cpu.sockets x memory.nodes_per_socket)"
    );
    if hops.len() != nodes {
        return Err(cfg_err(key, format!("{} rows; {shape}", hops.len())));
    }
    for (i, r) in hops.iter().enumerate() {
        if r.len() != nodes {
            return Err(cfg_err(
                format!("{key}[{i}]"),
                format!("{} entries; {shape}", r.len()),
            ));
        }
    }
    let socket = |n: usize| n / nodes_per_socket as usize;
    for i in 0..nodes {
        for j in 0..nodes {
            let k = format!("{key}[{i}][{j}]");
            let h = hops[i][j];
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
            if hops[j][i] != h {
                return Err(cfg_err(
                    k,
                    format!(
                        "{h}, but [{j}][{i}] is {}: hops must be symmetric",
                        hops[j][i]
                    ),
                ));
            }
            if socket(i) == socket(j) && hops[i] != hops[j] {
                return Err(cfg_err(
                    format!("{key}[{j}]"),
                    format!(
                        "differs from row {i}: the nodes of one socket are as far from every node"
                    ),
                ));
            }
        }
    }
    Ok(())
}
