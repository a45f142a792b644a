//! Physically meaningful ranges for every machine-preset number, and the
//! host-memory guard on the modeled caches.
//!
//! Invariant: a preset that passes [`check`] builds a machine whose every
//! size, count and latency fits the model's integer types and whose state
//! fits in host memory, so no preset value can abort, panic or wrap. The
//! ranges are generous (about ten times beyond any shipped or announced part)
//! and exist to refuse nonsense, not to judge a plausible design.

use super::super::fields::{cfg_err, show_f64};
use super::Preset;
use crate::error::Error;
use crate::kernel::costs::{KernelCosts, Per};

/// Largest modeled cache instance: 4 GiB (today's largest LLC slice is ~100 MiB).
pub const MAX_CACHE_KIB: u64 = 4 << 20;
/// All modeled cache instances together (L1d and L2 per CPU, LLC per instance).
/// The model keeps ~17 bytes per 64-byte line, so this is ~1.1 GB of host memory.
pub const MAX_MODELED_CACHE_BYTES: u64 = 4 << 30;

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

/// `range_f`, saying that 0 is accepted where the machine has one socket.
fn range_or_none(
    key: &str,
    v: f64,
    lo: f64,
    hi: f64,
    unit: &str,
    single: bool,
) -> Result<(), Error> {
    range_f(key, v, lo, hi, unit).map_err(|e| match e {
        Error::Config { key, message } if single => Error::Config {
            key,
            message: format!("{message}, or 0 (one socket: none)"),
        },
        e => e,
    })
}

fn range_u(key: &str, v: u64, lo: u64, hi: u64, unit: &str) -> Result<(), Error> {
    if (lo..=hi).contains(&v) {
        return Ok(());
    }
    Err(cfg_err(
        format!("{key}.value"),
        format!("{v} is out of range; accepted: {lo}..={hi}{unit}"),
    ))
}

fn range_f(key: &str, v: f64, lo: f64, hi: f64, unit: &str) -> Result<(), Error> {
    if v.is_finite() && v >= lo && v <= hi {
        return Ok(());
    }
    Err(cfg_err(
        format!("{key}.value"),
        format!(
            "{} is out of range; accepted: {lo}..={hi}{unit}",
            show_f64(v)
        ),
    ))
}

/// Checks one cache level's numbers (called before its geometry is derived).
pub fn check_cache(
    prefix: &str,
    size_kib: u64,
    latency_cycles: u64,
    outstanding: Option<(&str, u64)>,
) -> Result<(), Error> {
    range_u(
        &format!("{prefix}.size_kib"),
        size_kib,
        1,
        MAX_CACHE_KIB,
        " KiB",
    )?;
    range_u(
        &format!("{prefix}.latency_cycles"),
        latency_cycles,
        1,
        10_000,
        " cycles",
    )?;
    if let Some((name, n)) = outstanding {
        range_u(&format!("{prefix}.{name}"), n, 1, 1024, " entries")?;
    }
    Ok(())
}

/// Checks every number of a parsed preset against its physical range.
pub fn check(p: &Preset) -> Result<(), Error> {
    range_u("cpu.freq_mhz", p.freq_mhz, 100, 20_000, " MHz")?;
    range_u("cpu.sockets", p.sockets, 1, 64, "")?;
    range_u("cpu.cores_per_socket", p.cores_per_socket, 1, 1024, "")?;
    range_u("cpu.threads_per_core", p.threads_per_core, 1, 8, "")?;
    range_u("cpu.issue_width", p.issue_width, 1, 64, " per cycle")?;
    range_u(
        "cpu.store_bytes_per_cycle",
        p.store_bytes_per_cycle,
        1,
        1024,
        " bytes",
    )?;
    range_u(
        "cpu.scalar_stores_per_cycle",
        p.scalar_stores_per_cycle,
        1,
        8,
        " per cycle",
    )?;
    range_u(
        "cpu.movnti_line_cycles",
        p.movnti_line_cycles,
        1,
        1024,
        " cycles",
    )?;
    range_u(
        "cpu.store_queue_entries",
        p.store_queue_entries,
        1,
        1024,
        " entries",
    )?;
    range_u(
        "cpu.load_bytes_per_cycle",
        p.load_bytes_per_cycle,
        1,
        1024,
        " bytes",
    )?;
    range_u(
        "llc.instances_per_socket",
        p.llc_instances_per_socket,
        1,
        1024,
        "",
    )?;

    let t = &p.tlb;
    for (name, (entries, ways)) in [
        ("l1_4k", t.l1_4k),
        ("l1_2m", t.l1_2m),
        ("l1_1g", t.l1_1g),
        ("stlb", t.stlb),
    ] {
        range_u(
            &format!("tlb.{name}_entries"),
            entries,
            0,
            1 << 20,
            " entries",
        )?;
        range_u(&format!("tlb.{name}_ways"), ways, 0, 1 << 20, " ways")?;
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
    }
    range_u(
        "tlb.stlb_latency_cycles",
        t.stlb_latency_cycles,
        0,
        10_000,
        " cycles",
    )?;
    range_u("tlb.walk_cycles", t.walk_cycles, 0, 100_000, " cycles")?;

    let m = &p.memory;
    range_u("memory.nodes_per_socket", m.nodes_per_socket, 1, 64, "")?;
    range_u("memory.channels_per_node", m.channels_per_node, 1, 64, "")?;
    range_u("memory.dram_mts", m.dram_mts, 100, 100_000, " MT/s")?;
    range_f(
        "memory.peak_bandwidth_gbs",
        m.peak_bandwidth_gbs,
        MIN_BANDWIDTH_GBS,
        100_000.0,
        " GB/s",
    )?;
    range_f(
        "memory.sustained_bandwidth_gbs",
        m.sustained_bandwidth_gbs,
        MIN_BANDWIDTH_GBS,
        100_000.0,
        " GB/s",
    )?;
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
    range_f(
        "memory.local_latency_ns",
        m.local_latency_ns,
        1.0,
        10_000.0,
        " ns",
    )?;
    // One socket has no remote memory and no link: 0 there means "none".
    let single = p.sockets == 1;
    for (key, v) in [
        ("memory.remote_latency_ns", m.remote_latency_ns),
        ("memory.remote_cache_latency_ns", m.remote_cache_latency_ns),
    ] {
        if !(single && v == 0.0) {
            range_or_none(key, v, 1.0, 10_000.0, " ns", single)?;
        }
    }
    if let Some(n) = &p.numa {
        range_f(
            "numa.extra_hop_latency_ns",
            n.extra_hop_latency_ns,
            0.0,
            10_000.0,
            " ns",
        )?;
    }
    if !(single && m.interconnect_bandwidth_gbs == 0.0) {
        range_or_none(
            "memory.interconnect_bandwidth_gbs",
            m.interconnect_bandwidth_gbs,
            MIN_BANDWIDTH_GBS,
            100_000.0,
            " GB/s",
            single,
        )?;
    }
    range_f(
        "memory.posted_write_ns",
        m.posted_write_ns,
        0.0,
        10_000.0,
        " ns",
    )?;

    range_u(
        "string.startup_cycles",
        p.string.startup_cycles,
        0,
        100_000,
        " cycles",
    )?;
    range_u(
        "string.nocache_threshold_kib",
        p.string.nocache_threshold_kib,
        0,
        1 << 30,
        " KiB",
    )?;

    let c = &p.costs;
    // 0 charges nothing for the step (a calibration can measure that).
    for &(name, per) in KernelCosts::ALL {
        let v = c.kernel.get(name).expect("a declared cost");
        let max = match per {
            Per::Call => MAX_CALL_CYCLES,
            Per::Page => MAX_PAGE_CYCLES,
        };
        range_u(&format!("costs.{name}"), v, 0, max, " cycles")?;
    }
    for (name, v, max) in [
        ("ipi_send_cycles", c.ipi_send_cycles, MAX_CALL_CYCLES),
        ("ipi_handle_cycles", c.ipi_handle_cycles, MAX_CALL_CYCLES),
        (
            "tlb_flush_full_cycles",
            c.tlb_flush_full_cycles,
            MAX_CALL_CYCLES,
        ),
        ("invlpg_cycles", c.invlpg_cycles, MAX_PAGE_CYCLES),
    ] {
        range_u(&format!("costs.{name}"), v, 0, max, " cycles")?;
    }
    range_f(
        "costs.ipi_latency_ns",
        c.ipi_latency_ns,
        MIN_IPI_NS,
        MAX_IPI_NS,
        " ns",
    )?;
    if let Some(v) = c.invlpgb_cycles {
        range_u("costs.invlpgb_cycles", v, 0, MAX_PAGE_CYCLES, " cycles")?;
    }
    if let Some(v) = c.tlbsync_latency_ns {
        range_f("costs.tlbsync_latency_ns", v, 1.0, MAX_IPI_NS, " ns")?;
    }

    // The streamer's numbers, whether it is on or not (an off streamer's
    // were taken unread).
    for (name, v, hi) in [
        ("l2_streams", p.prefetch.l2_streams, 256),
        ("l2_distance_lines", p.prefetch.l2_distance_lines, 63),
        ("l2_degree", p.prefetch.l2_degree, 64),
    ] {
        range_u(&format!("prefetch.{name}"), v, 1, hi, "")?;
    }

    // Host-memory guard: L1d and L2 per hardware thread, the LLC per instance.
    let cpus = p.sockets * p.cores_per_socket * p.threads_per_core;
    let llcs = p.sockets * p.llc_instances_per_socket;
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
